package synth

import (
	"bytes"
	"strconv"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
)

// filler is a block of prose in one charset, cut at spaces for page bodies.
type filler struct{ text []byte }

var fillerWords = []string{
	"crawl", "frontier", "politeness", "round", "host", "page", "link", "anchor", "robots",
	"sitemap", "index", "score", "cash", "history", "region", "site", "federation", "partition",
	"the", "of", "and", "a", "to", "in", "is", "for", "on", "with", "as", "by", "at", "from",
	"web", "graph", "seed", "fetch", "parse", "update", "queue", "budget", "depth", "redirect",
}

// accented words per charset, so that decoding with the wrong charset shows.
var charsetWords = [charsetCount][]string{
	UTF8:        {"café", "naïve", "Zürich", "smörgåsbord", "façade", "jalapeño", "Straße", "東京", "Αθήνα", "€uro"},
	Latin1:      {"café", "naïve", "Zürich", "smörgåsbord", "façade", "jalapeño", "Straße", "déjà", "Øresund"},
	Windows1252: {"café", "naïve", "“quoted”", "€uro", "smörgåsbord", "Straße", "…ellipsis", "‘single’"},
	ShiftJIS:    {"東京", "大阪", "検索", "クローラ", "ページ", "リンク", "日本語", "京都"},
}

func encoderFor(c Charset) *encoding.Encoder {
	switch c {
	case Latin1:
		return charmap.ISO8859_1.NewEncoder()
	case Windows1252:
		return charmap.Windows1252.NewEncoder()
	case ShiftJIS:
		return japanese.ShiftJIS.NewEncoder()
	}
	return nil
}

const fillerSize = 64 << 10

func makeFiller(c Charset) filler {
	r := newRNG(hash3(0, tagFill, uint64(c), 0))
	var b bytes.Buffer
	for b.Len() < fillerSize {
		if r.chance(0.06) {
			ws := charsetWords[c]
			b.WriteString(ws[r.intn(len(ws))])
		} else {
			b.WriteString(fillerWords[r.intn(len(fillerWords))])
		}
		if r.chance(0.08) {
			b.WriteString(". ")
		} else {
			b.WriteByte(' ')
		}
	}
	text := b.Bytes()
	if e := encoderFor(c); e != nil {
		enc, err := e.Bytes(text)
		if err != nil {
			panic("synth: filler not encodable in " + c.String() + ": " + err.Error())
		}
		text = enc
	}
	return filler{text: text}
}

// appendChunk appends about n bytes of the filler, starting and ending at spaces.
func (f *filler) appendChunk(dst []byte, r *rng, n int) []byte {
	if n <= 0 {
		return dst
	}
	n = min(n, len(f.text)/2)
	start := r.intn(len(f.text) - n)
	if i := bytes.IndexByte(f.text[start:], ' '); i >= 0 {
		start += i + 1
	}
	end := min(start+n, len(f.text))
	if i := bytes.LastIndexByte(f.text[start:end], ' '); i > 0 {
		end = start + i
	}
	return append(dst, f.text[start:end]...)
}

// renderPage appends the HTML of page n of host h (or of /private/N.html)
// at version v, which began at last (version 0: the static page).
func (w *Web) renderPage(dst []byte, h, n int, private bool, scratch []Link, v int, last time.Time) ([]byte, []Link) {
	links := w.pageLinks(scratch[:0], h, n, private)
	k := len(links) - nearDupTail(links)
	return w.renderDoc(dst, h, n, private, copyNone, h, nil, links[:k], links[k:], v, last), links
}

// renderDoc appends page n of host h, or a copy of it that host at serves:
// navigation links nav (copies only), the text with the links body, and at
// its end the links to its copies (pages only), a copy's footer.
func (w *Web) renderDoc(dst []byte, h, n int, private bool, ck copyKind, at int, nav, body, copies []Link, v int, last time.Time) []byte {
	host := &w.hosts[h]
	r := newRNG(hash3(w.opt.Seed, tagFill, uint64(h), uint64(n)*2+b2u(private)))
	broken := host.Role == RoleBroken
	dst = append(dst, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\""...)
	dst = append(dst, host.Charset.String()...)
	dst = append(dst, "\"><title>"...)
	dst = append(dst, host.Name...)
	if private {
		dst = append(dst, " private"...)
	}
	dst = append(dst, " page "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	switch ck {
	case copyPrint:
		dst = append(dst, " (printer-friendly)"...)
	case copyMirror:
		dst = append(dst, " (mirror)"...)
	}
	dst = append(dst, "</title>"...)
	if host.Base && ck != copyMirror {
		dst = append(dst, "<base href=\""...)
		dst = append(dst, w.Origin(h)...)
		dst = append(dst, "/p/\">"...)
	}
	dst = append(dst, "</head>\n<body>"...)
	dir := w.pageDir(h, n, private)
	if ck != copyNone {
		dir = w.copyDir(at, h, n)
		dst = append(dst, "<p class=\"nav\">"...)
		for i, l := range nav {
			if i > 0 {
				dst = append(dst, " | "...)
			}
			dst = append(dst, "<a href=\""...)
			dst = w.href(dst, l, dir)
			dst = append(dst, "\">"...)
			switch {
			case ck == copyPrint:
				dst = append(dst, "back to the page"...)
			case i == 0:
				dst = append(dst, "mirror home"...)
			default:
				dst = append(dst, "original page"...)
			}
			dst = append(dst, "</a>"...)
		}
		dst = append(dst, "</p>\n"...)
	}
	dst = append(dst, "<h1 id=\"top\">Page "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, "</h1>\n"...)
	if v > 0 {
		origin := ""
		if ck == copyMirror {
			origin = w.Origin(h)
		}
		dst = w.renderUpdate(dst, h, n, v, last, origin)
	}
	if broken {
		dst = append(dst, "<div><table><tr><td><p>unclosed <b>bold <i>italic </span></em>\xff\xfe\x00 stray bytes\n<!-- <a href=\"/nf/0.html\">commented out</a> -->\n"...)
	}
	size := int(float64(w.opt.PageBytes) * (0.5 + r.float()))
	per := max(0, size-300-58*len(body))/(len(body)+1) + 8 // links cost ~58 bytes; chunks lose ~8 to word boundaries
	fill := &w.fillers[host.Charset]
	for i, l := range body {
		if i%4 == 0 {
			if i > 0 && !broken {
				dst = append(dst, "</p>\n"...)
			}
			dst = append(dst, "<p>"...)
		}
		dst = fill.appendChunk(dst, &r, per)
		if broken && i%3 == 1 {
			dst = append(dst, " <a href="...)
			dst = w.href(dst, l, dir)
			if l.nofollow {
				dst = append(dst, " rel=nofollow"...)
			}
			dst = append(dst, '>')
		} else {
			dst = append(dst, " <a href=\""...)
			dst = w.href(dst, l, dir)
			dst = append(dst, '"')
			if l.nofollow {
				dst = append(dst, " rel=\"nofollow\""...)
			}
			dst = append(dst, '>')
		}
		dst = append(dst, l.kind.String()...)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(l.n), 10)
		dst = append(dst, "</a> "...)
	}
	dst = fill.appendChunk(dst, &r, per)
	if broken {
		return append(dst, "\n<p>the end <div"...)
	}
	if len(copies) > 0 {
		dst = append(dst, "</p>\n<p class=\"tools\">"...)
		for i, l := range copies {
			if i > 0 {
				dst = append(dst, " | "...)
			}
			dst = append(dst, "<a href=\""...)
			dst = w.href(dst, l, dir)
			if l.alt {
				dst = append(dst, "\">mirror</a>"...)
			} else {
				dst = append(dst, "\">printer-friendly version</a>"...)
			}
		}
	}
	switch ck {
	case copyPrint:
		dst = append(dst, "</p>\n<p class=\"printed\">Printed "...)
		dst = w.copyDate(at, h, n).AppendFormat(dst, time.DateOnly)
		dst = append(dst, ", session "...)
		dst = append(dst, w.sessionID(h, 100+n)...)
	case copyMirror:
		dst = append(dst, "</p>\n<p class=\"mirrored\">Mirrored on "...)
		dst = w.copyDate(at, h, n).AppendFormat(dst, time.DateOnly)
	}
	return append(dst, "</p>\n</body></html>\n"...)
}

// updateBytes is about the size of the prose of an update paragraph.
const updateBytes = 200

// renderUpdate appends the paragraph that version v ≥ 1 of page n adds:
// when it changed, a link to its news page and prose drawn for the version.
// origin, if not empty, is written before the news link's path (copies
// on a mirror host).
func (w *Web) renderUpdate(dst []byte, h, n, v int, last time.Time, origin string) []byte {
	dst = append(dst, "<p id=\"update\">Update "...)
	dst = strconv.AppendInt(dst, int64(v), 10)
	dst = append(dst, ", "...)
	dst = last.UTC().AppendFormat(dst, time.RFC3339)
	dst = append(dst, ": <a href=\""...)
	dst = append(dst, origin...)
	dst = append(dst, NewsPath(n, v)...)
	dst = append(dst, "\">news "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(v), 10)
	dst = append(dst, "</a> "...)
	r := newRNG(hash3(w.opt.Seed^mix64(uint64(v)), tagUpdate, uint64(h), uint64(n)))
	dst = w.fillers[w.hosts[h].Charset].appendChunk(dst, &r, updateBytes)
	return append(dst, "</p>\n"...)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// renderLeaf appends a small page without links.
func renderLeaf(dst []byte, title string) []byte {
	dst = append(dst, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"...)
	dst = append(dst, title...)
	dst = append(dst, "</title></head><body><p>"...)
	dst = append(dst, title...)
	return append(dst, "</p></body></html>\n"...)
}

// renderLinkList appends a page whose body is the given absolute links.
func renderLinkList(dst []byte, title string, hrefs func(func(string))) []byte {
	dst = append(dst, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"...)
	dst = append(dst, title...)
	dst = append(dst, "</title></head><body><ul>\n"...)
	hrefs(func(u string) {
		dst = append(dst, "<li><a href=\""...)
		dst = append(dst, u...)
		dst = append(dst, "\">"...)
		dst = append(dst, u...)
		dst = append(dst, "</a></li>\n"...)
	})
	return append(dst, "</ul></body></html>\n"...)
}

// binary appends n deterministic pseudo-random bytes.
func binary(dst []byte, key uint64, n int) []byte {
	r := newRNG(key)
	for len(dst)%8 != 0 && n > 0 {
		dst = append(dst, byte(r.next()))
		n--
	}
	for ; n >= 8; n -= 8 {
		v := r.next()
		dst = append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
	}
	for ; n > 0; n-- {
		dst = append(dst, byte(r.next()))
	}
	return dst
}

// renderPDF appends a small file that starts like a PDF.
func (w *Web) renderPDF(dst []byte, h, n int) []byte {
	dst = append(dst, "%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"...)
	dst = binary(dst, hash3(w.opt.Seed, tagLeaf, uint64(h), uint64(n)), 2000+n%1000)
	return append(dst, "\n%%EOF\n"...)
}

// renderPNG appends a small file that starts like a PNG.
func (w *Web) renderPNG(dst []byte, h, n int) []byte {
	dst = append(dst, "\x89PNG\r\n\x1a\n"...)
	return binary(dst, hash3(w.opt.Seed, tagLeaf+1, uint64(h), uint64(n)), 800+n%500)
}
