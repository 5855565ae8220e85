package links

import (
	"bytes"
	"testing"

	"golang.org/x/net/html"

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
	for b.Loop() {
		for i, p := range pages {
			x.Extract(urls[i], "", p.body)
		}
	}
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
