package links

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// corpus returns 300 HTML pages spread evenly over a realistic web.
func corpus(b *testing.B) []truthPage {
	w, err := synth.New(synth.Options{Hosts: 50, Pages: 20, Seed: 7, Profile: synth.Realistic, Port: 8080})
	if err != nil {
		b.Fatal(err)
	}
	all := htmlPages(b, w)
	const n = 300
	out := make([]truthPage, 0, n)
	for i := range n {
		out = append(out, all[i*len(all)/n])
	}
	return out
}

// benchCorpus is the corpus with each page's URL normalised by n, and its
// size in bytes.
func benchCorpus(b *testing.B) (n *urlnorm.Normalizer, pages []truthPage, urls []string, size int64) {
	n = urlnorm.New(urlnorm.Options{})
	pages = corpus(b)
	urls = make([]string, len(pages))
	for i, p := range pages {
		var err error
		if urls[i], err = n.NormalizeString(p.rec.URL); err != nil {
			b.Fatal(err)
		}
		size += int64(len(p.body))
	}
	return n, pages, urls, size
}

// BenchmarkExtract extracts the links of a corpus of realistic websim pages
// with the default scope; one op is the whole corpus. ns/link is per link
// kept, ns/href per <a>/<area> href read.
func BenchmarkExtract(b *testing.B) {
	n, pages, urls, size := benchCorpus(b)
	x := NewExtractor(n, &urlnorm.Scope{}, 0)
	links, hrefs := 0, 0
	for i, p := range pages {
		pg := x.Extract(urls[i], "", p.body)
		links += len(pg.Links)
		hrefs += len(pg.Links) + pg.BadLinks + pg.NoFollowLinks + pg.OutOfScope + pg.Duplicates
	}
	b.SetBytes(size)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		for i, p := range pages {
			x.Extract(urls[i], "", p.body)
		}
	}
	cpu.report(b, len(pages))
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns/float64(links), "ns/link")
	b.ReportMetric(ns/float64(hrefs), "ns/href")
	b.ReportMetric(ns/float64(len(pages)), "ns/page")
	b.ReportMetric(float64(links)/float64(len(pages)), "links/page")
	b.ReportMetric(float64(hrefs)/float64(len(pages)), "hrefs/page")
}

// BenchmarkExtractRequisites is BenchmarkExtract with requisites on
// (SetRequisites): the cost of reading embeds on the same corpus.
func BenchmarkExtractRequisites(b *testing.B) {
	n, pages, urls, size := benchCorpus(b)
	x := NewExtractor(n, &urlnorm.Scope{SkipExts: []string{}}, 0)
	x.SetRequisites(true)
	embeds := 0
	for i, p := range pages {
		embeds += len(x.Extract(urls[i], "", p.body).Embeds)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for i, p := range pages {
			x.Extract(urls[i], "", p.body)
		}
	}
	b.ReportMetric(float64(embeds)/float64(len(pages)), "embeds/page")
}

// BenchmarkTokenizeOnly runs the bare html.Tokenizer over the same corpus
// as BenchmarkExtract: the floor Extract's cost sits on.
func BenchmarkTokenizeOnly(b *testing.B) {
	pages := corpus(b)
	var size int64
	for _, p := range pages {
		size += int64(len(p.body))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	var rd bytes.Reader
	for b.Loop() {
		for _, p := range pages {
			rd.Reset(p.body)
			z := html.NewTokenizer(&rd)
			for z.Next() != html.ErrorToken {
			}
		}
	}
}

// BenchmarkExtractUTF8 is BenchmarkExtract over the corpus's UTF-8 pages
// only, the fast path: with the charset in the Content-Type (as websim
// serves them) and with only the page's <meta charset> to go by.
// cpu-ns/page is the thread's CPU time, less noisy than ns/page on a
// shared machine.
func BenchmarkExtractUTF8(b *testing.B) {
	n, all, allURLs, _ := benchCorpus(b)
	var pages []truthPage
	var urls []string
	var size int64
	for i, p := range all {
		if strings.Contains(p.rec.ContentType, "charset=utf-8") {
			pages, urls = append(pages, p), append(urls, allURLs[i])
			size += int64(len(p.body))
		}
	}
	for _, c := range []struct{ name, contentType string }{{"header", "text/html; charset=utf-8"}, {"meta", ""}} {
		b.Run(c.name, func(b *testing.B) {
			x := NewExtractor(n, &urlnorm.Scope{}, 0)
			b.SetBytes(size)
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				for i, p := range pages {
					x.Extract(urls[i], c.contentType, p.body)
				}
			}
			cpu.report(b, len(pages))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(pages)), "ns/page")
		})
	}
}

// cpuClock measures a benchmark's thread CPU time (threadCPU).
type cpuClock struct{ start int64 }

// startCPU locks the benchmark's goroutine to its thread (until it ends)
// and starts the clock.
func startCPU() cpuClock {
	runtime.LockOSThread()
	return cpuClock{threadCPU()}
}

// report reports the CPU time per op and item as cpu-ns/page.
func (c cpuClock) report(b *testing.B, items int) {
	if c.start == 0 && threadCPU() == 0 {
		return
	}
	ns := float64(threadCPU()-c.start) / float64(b.N) / float64(items)
	b.ReportMetric(ns, "cpu-ns/page")
}

// legacyPage returns a page of about size bytes once encoded: paragraphs
// of words, each with a link to a path and a query of words, in UTF-8.
func legacyPage(words []string, size int) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><title>" + words[0] + "</title></head>\n<body>\n")
	for i := 0; b.Len() < size; i++ {
		b.WriteString("<p>")
		for j := range 40 {
			b.WriteString(words[(i*7+j*3)%len(words)])
			b.WriteByte(' ')
		}
		w := words[i%len(words)]
		fmt.Fprintf(&b, `<a href="/%s/%d.html?q=%s">%s</a></p>`+"\n", w, i, words[(i+1)%len(words)], w)
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// BenchmarkExtractLegacy gives the cost of decoding a page that is not
// UTF-8: windows-1251 and Shift_JIS pages of about 19 KB, websim's larger
// pages, extracted as they are served ("decoded") and, for comparison,
// the same page in UTF-8; "decode" is the decoding alone. One op is one
// page; µs/page is per page.
func BenchmarkExtractLegacy(b *testing.B) {
	ru := strings.Fields("новости статья город время работа человек жизнь день рука глаз страна место слово дом вопрос сторона")
	ja := strings.Fields("資料 東京 検索 日本語 情報 会社 時間 世界 問題 場合 大阪 京都 地域 関係 全国 ページ リンク")
	for _, c := range []struct {
		name  string
		words []string
		enc   encoding.Encoding
	}{{"windows-1251", ru, charmap.Windows1251}, {"Shift_JIS", ja, japanese.ShiftJIS}} {
		page := legacyPage(c.words, 19<<10)
		// legacyPage's size counts UTF-8 bytes; the encoded page is some
		// 19 KB for Shift_JIS (3 bytes a kanji become 2) and less for
		// windows-1251 (2 bytes a letter become 1): grow it to ~19 KB.
		for enc, _ := c.enc.NewEncoder().Bytes([]byte(page)); len(enc) < 19<<10; enc, _ = c.enc.NewEncoder().Bytes([]byte(page)) {
			page = legacyPage(c.words, len(page)*(19<<10)/len(enc)+64)
		}
		encoded, err := c.enc.NewEncoder().Bytes([]byte(page))
		if err != nil {
			b.Fatal(err)
		}
		x := NewExtractor(urlnorm.New(urlnorm.Options{}), &urlnorm.Scope{}, 0)
		const url = "http://h1.ru.test/p/1.html"
		for _, v := range []struct {
			name, ct string
			body     []byte
			decode   bool
		}{
			{"utf-8", "text/html; charset=utf-8", []byte(page), false},
			{"decoded", "text/html; charset=" + c.name, encoded, false},
			{"decode", "text/html; charset=" + c.name, encoded, true},
		} {
			b.Run(c.name+"/"+v.name, func(b *testing.B) {
				if p := x.Extract(url, v.ct, v.body); p.Encoding != strings.TrimPrefix(v.ct, "text/html; charset=") && p.Encoding != "UTF-8" || len(p.Links) == 0 {
					b.Fatalf("encoding %s, %d links", p.Encoding, len(p.Links))
				}
				b.SetBytes(int64(len(v.body)))
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					if v.decode {
						x.decode(v.ct, v.body)
					} else {
						x.Extract(url, v.ct, v.body)
					}
				}
				cpu.report(b, 1)
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
				b.ReportMetric(float64(len(v.body)), "bytes/page")
			})
		}
	}
}
