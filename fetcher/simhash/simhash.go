// Package simhash computes 64-bit SimHash fingerprints (Charikar, STOC
// 2002) of the visible text of HTML pages and finds near-duplicates among
// them: two pages are near-duplicates when their fingerprints differ in at
// most K = 3 of 64 bits, the setting Manku, Jain and Das Sarma found right
// for 8 billion web pages ("Detecting near-duplicates for web crawling",
// WWW 2007). Index holds fingerprints in bounded memory, with a per-host
// cap, and finds a stored one within K bits with their block tables.
//
// A fingerprint is computed over the page's visible text: the text of
// <script>, <style>, <noscript>, <template> and <title> is left out, and
// so is the text of links (<a>…</a>), which is mostly navigation — the
// boilerplate in which a printer-friendly view, a mirror or a session-id
// copy of a page differs from it. Words are runs of ASCII letters and
// digits and of non-ASCII bytes (so "·" or "»" is a word), lower-cased in
// ASCII; a word that holds a digit counts as the word "#", and a run of
// them as one, so that dates, times, counters and session ids do not tell
// copies apart. The text is UTF-8 whatever the page's encoding (the link
// extractor decodes the page before its Tokenizer reads it), so one text
// has one fingerprint in any encoding. Entities are decoded by the
// Tokenizer. Every
// run of Shingle consecutive words within a block (a paragraph, list item,
// table cell, heading…) is hashed to 64 bits, and bit i of the fingerprint
// is set when more than half of the shingles have bit i set: the sign of
// Charikar's sum of ±1, every shingle weighing one. As no shingle spans
// two blocks, a block that one copy of a page has and another lacks, such
// as a footer or a navigation bar, changes only the shingles inside it.
//
// The fetcher already runs an html.Tokenizer over each page to extract its
// links; Hasher.Token lets that loop feed the hasher, so the page is
// tokenised once. Of and Hasher.Page tokenise a page themselves.
package simhash

import (
	"bytes"
	"encoding/binary"
	"math/bits"

	"golang.org/x/net/html"
)

// Shingle is the number of consecutive words hashed together: 3. Shorter
// shingles are not specific enough (pages on one topic share most word
// pairs, and all pages most single words), longer ones make each edited
// word change more shingles: a word inserted, deleted or replaced in the
// middle of a block changes up to 2·Shingle-1 shingles, at an end of a
// block up to Shingle; and k shingles added to n flip about 64·√(k/n)/π
// bits (Charikar: a bit differs with probability θ/π, θ the angle between
// the pages' shingle vectors), 4 in 1,000 about 1.3.
const Shingle = 3

// Hasher.word combines exactly two earlier words with the new one.
var _ = [1]struct{}{}[Shingle-3]

// MinShingles is the number of shingles a page needs for a fingerprint:
// 24, a short paragraph (26 words in one block). Pages with less text —
// redirect stubs, error pages, link lists — have no fingerprint: theirs
// would be near-duplicates of each other by chance or by template, and a
// word changed in them would flip many bits.
const MinShingles = 24

// MaxShingles is the most shingles a page's fingerprint is made of: its
// first 1,000 (about 1,000 words of visible text outside links), the text
// after them is not read. Hashing costs about 17 ns a word, so a page of
// 3,000 words would cost 50 µs, a sixth of what the crawler spends on a
// page in all; 1,000 shingles are some 17 µs, and near-duplicates (the
// same text with other navigation, dates and footers) share their start.
// Two pages whose first thousand words agree and whose rest differs are
// taken for near-duplicates.
const MaxShingles = 1000

// K is the largest number of differing bits at which two fingerprints are
// near-duplicates: 3, as Manku et al.
const K = 3

// Distance returns the number of bits in which a and b differ.
func Distance(a, b uint64) int { return bits.OnesCount64(a ^ b) }

// numberWord is the hash of every word that holds an ASCII digit.
const numberWord = 0x6a09e667f3bcc908

// wordByte maps a byte to itself lower-cased if it belongs to words, to 0
// if it separates them.
var wordByte = func() (t [256]byte) {
	for c := range 256 {
		switch {
		case c >= 'A' && c <= 'Z':
			t[c] = byte(c) + 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c >= 0x80:
			t[c] = byte(c)
		}
	}
	return t
}()

const (
	lanesMask = 0x0101010101010101
	laneMax   = 255 // shingles the byte lanes can count before a flush
)

// Hasher computes fingerprints. Feed a page with Token (from an existing
// tokeniser loop) or Text, Break and Block, or all at once with Page; Sum
// returns the fingerprint. Text, Token and Sum do not allocate, Page only
// its Tokenizer. The zero Hasher is ready; reuse one per fetch worker (it
// is not safe for concurrent use).
type Hasher struct {
	// lanes[k] counts, in byte j, the shingles with bit 8j+k set since
	// the last flush; counts holds the flushed totals per bit.
	lanes   [8]uint64
	counts  [64]uint32
	pending int // shingles in lanes
	n       int // shingles in all

	prev   [Shingle - 1]uint64 // hashes of the last words, oldest first
	words  int                 // words so far in the block, up to Shingle-1
	acc    uint64              // bytes of the current word's last chunk
	accLen int                 // bytes in acc
	wh     uint64              // the hash of the current word's full chunks
	wlen   int                 // bytes in the current word
	digit  bool                // the current word holds a digit
	number bool                // the last word held a digit

	skip   int  // open elements whose text is not visible
	anchor bool // inside <a>…</a>

	rd bytes.Reader
}

// Reset starts a new page.
func (h *Hasher) Reset() {
	*h = Hasher{rd: h.rd}
}

// Text feeds visible text. A word may continue over several calls; Break
// ends it.
func (h *Hasher) Text(b []byte) {
	if h.n >= MaxShingles {
		return
	}
	i := 0
	if h.wlen > 0 { // the word the last call ended in goes on
		for i < len(b) && wordByte[b[i]] != 0 {
			i++
		}
		h.partial(b[:i])
		if i == len(b) {
			return
		}
		h.Break()
	}
	// The fast path: 8 bytes at a time, a word shorter than 8 bytes from
	// one load.
	for i+8 <= len(b) {
		c := binary.LittleEndian.Uint64(b[i:])
		m := wordBytes(c)
		if m&0x80 == 0 { // a separator at i
			if m == 0 {
				i += 8
			} else {
				i += bits.TrailingZeros64(m) >> 3
			}
			continue
		}
		end := ^m & highs
		if end == 0 { // a word of 8 bytes or more
			j := scan(b, i+8, true)
			if j == len(b) {
				h.partial(b[i:])
				return
			}
			h.word(wordHash(b, i, j))
			i = j
			continue
		}
		k := bits.TrailingZeros64(end) >> 3
		last, digit := lowerChunk(c & (1<<(8*k) - 1))
		w := uint64(numberWord)
		if !digit {
			w = finishWord(0, last, k)
		}
		h.word(w)
		// Byte k is a separator: skip to the next word byte of c, if any.
		if rest := m &^ (1<<(8*k+8) - 1); rest != 0 {
			i += bits.TrailingZeros64(rest) >> 3
		} else {
			i += 8
		}
	}
	for i < len(b) {
		i = scan(b, i, false)
		start := i
		i = scan(b, i, true)
		switch {
		case start == i:
			return
		case i == len(b): // the word may go on in the next call
			h.partial(b[start:])
			return
		}
		h.word(wordHash(b, start, i))
	}
}

// Break ends the current word, as a tag or a space does.
func (h *Hasher) Break() {
	if h.wlen > 0 {
		w := uint64(numberWord)
		if !h.digit {
			w = finishWord(h.wh, h.acc, h.wlen)
		}
		h.word(w)
		h.acc, h.accLen, h.wh, h.wlen, h.digit = 0, 0, 0, 0, false
	}
}

// Block ends the current block of text, as the end of a paragraph does:
// no shingle spans two blocks, so that a block added or removed (a
// navigation bar, a footer) changes only the shingles inside it.
func (h *Hasher) Block() {
	h.Break()
	h.words, h.number = 0, false
}

// A word's hash folds its lower-cased bytes in 8-byte chunks, little
// endian, the last one padded with zeros: wh = (wh ^ chunk)·k, wh ^= wh>>29
// for each full chunk, then finishWord. partial and wordHash compute the
// same, byte by byte and 8 bytes at a time.
const (
	wordMul = 0x9e3779b97f4a7c15
	ascii7  = 0x7f7f7f7f7f7f7f7f
	highs   = 0x8080808080808080
)

// fold adds a full chunk to a word's hash.
func fold(wh, chunk uint64) uint64 {
	wh = (wh ^ chunk) * wordMul
	return wh ^ wh>>29
}

// finishWord returns the hash of a word of n bytes from the hash of its
// full chunks and its last, partial chunk.
func finishWord(wh, last uint64, n int) uint64 {
	return (wh ^ last ^ uint64(n)<<56) * wordMul
}

// partial adds the bytes b, all word bytes, to the current word.
func (h *Hasher) partial(b []byte) {
	for _, c := range b {
		v := wordByte[c]
		h.digit = h.digit || v-'0' < 10
		h.acc |= uint64(v) << (8 * h.accLen)
		h.wlen++
		if h.accLen++; h.accLen == 8 {
			h.wh = fold(h.wh, h.acc)
			h.acc, h.accLen = 0, 0
		}
	}
}

// scan returns the index of the first byte at or after i that is not a
// word byte (inWord) or is one (!inWord), or len(b): 8 bytes at a time.
func scan(b []byte, i int, inWord bool) int {
	for ; i+8 <= len(b); i += 8 {
		m := wordBytes(binary.LittleEndian.Uint64(b[i:]))
		if inWord {
			m ^= highs
		}
		if m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && (wordByte[b[i]] != 0) == inWord {
		i++
	}
	return i
}

// wordBytes returns the high bit of each of 8 bytes set if it is a word
// byte: an ASCII letter or digit, or a non-ASCII byte.
func wordBytes(c uint64) uint64 {
	ascii := ^c & highs
	x := c & ascii7
	l := x | 0x2020202020202020
	letter := (l + 0x1f1f1f1f1f1f1f1f) &^ (l + 0x0505050505050505) // 'a' ≤ b|0x20 ≤ 'z'
	digit := (x + 0x5050505050505050) &^ (x + 0x4646464646464646)  // '0' ≤ b ≤ '9'
	return ^ascii&highs | (letter|digit)&ascii
}

// lowerChunk lower-cases the ASCII letters of 8 bytes and reports whether
// any is an ASCII digit.
func lowerChunk(c uint64) (uint64, bool) {
	ascii := ^c & highs
	x := c & ascii7
	upper := (x + 0x3f3f3f3f3f3f3f3f) &^ (x + 0x2525252525252525) & ascii // 'A' ≤ b ≤ 'Z'
	digit := (x + 0x5050505050505050) &^ (x + 0x4646464646464646) & ascii // '0' ≤ b ≤ '9'
	return c | upper>>2, digit != 0
}

// wordHash returns the hash of the word b[start:end].
func wordHash(b []byte, start, end int) uint64 {
	var (
		wh    uint64
		digit bool
	)
	p := start
	for ; end-p >= 8; p += 8 {
		c, d := lowerChunk(binary.LittleEndian.Uint64(b[p:]))
		digit = digit || d
		wh = fold(wh, c)
	}
	var last uint64
	if n := end - p; n > 0 {
		if p+8 <= len(b) {
			last = binary.LittleEndian.Uint64(b[p:]) & (1<<(8*n) - 1)
		} else {
			for i := end - 1; i >= p; i-- {
				last = last<<8 | uint64(b[i])
			}
		}
		var d bool
		last, d = lowerChunk(last)
		digit = digit || d
	}
	if digit {
		return numberWord
	}
	return finishWord(wh, last, end-start)
}

// word adds a word: with the Shingle-1 before it, a shingle. A run of
// words with digits is one word.
func (h *Hasher) word(w uint64) {
	if w == numberWord {
		if h.number {
			return
		}
		h.number = true
	} else {
		h.number = false
	}
	if h.words < Shingle-1 {
		h.prev[h.words] = w
		h.words++
		return
	}
	if h.n >= MaxShingles {
		return
	}
	s := mix(bits.RotateLeft64(h.prev[0], 43) ^ bits.RotateLeft64(h.prev[1], 21) ^ w)
	h.prev[0], h.prev[1] = h.prev[1], w
	for k := range h.lanes {
		h.lanes[k] += s >> k & lanesMask
	}
	h.n++
	if h.pending++; h.pending == laneMax {
		h.flush()
	}
}

// flush moves the lane counts into counts.
func (h *Hasher) flush() {
	for k, l := range h.lanes {
		for j := range 8 {
			h.counts[8*j+k] += uint32(l >> (8 * j) & 0xff)
		}
		h.lanes[k] = 0
	}
	h.pending = 0
}

// Sum returns the fingerprint of the text fed since Reset, and false if it
// had fewer than MinShingles shingles. It does not change the Hasher's
// state: more text may follow.
func (h *Hasher) Sum() (uint64, bool) {
	c := *h
	c.Break()
	if c.n < MinShingles {
		return 0, false
	}
	c.flush()
	var fp uint64
	for i, n := range c.counts {
		if 2*int(n) > c.n {
			fp |= 1 << i
		}
	}
	return fp, true
}

// Shingles returns the number of shingles fed since Reset.
func (h *Hasher) Shingles() int {
	n := h.n
	if h.wlen > 0 && h.words == Shingle-1 {
		n++ // the word in progress completes one
	}
	return n
}

// mix is the splitmix64 finaliser.
func mix(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}

// Token feeds the token the Tokenizer z has just read (tt, what z.Next
// returned) — call it for every token of a page, before anything else reads
// the token. It reads only z.Raw of tags, and z.Text of text that counts:
// after it, z.Text returns nil, while z.Raw, z.TagName and z.TagAttr are as
// before. It works whether or not the loop calls z.NextIsNotRawText for
// <noscript>. Every tag ends a word, and block-level tags (<p>, <div>,
// <li>, <td>, <h1>, <br> and the like) end a block.
func (h *Hasher) Token(z *html.Tokenizer, tt html.TokenType) {
	var tag int
	switch tt {
	case html.TextToken:
		if h.skip == 0 && !h.anchor && h.n < MaxShingles {
			h.Text(z.Text())
		}
		return
	case html.StartTagToken, html.SelfClosingTagToken:
		switch tag = tagOf(z.Raw(), 1); tag {
		case tagSkip:
			h.skip++
		case tagA:
			h.anchor = true
		}
	case html.EndTagToken:
		switch tag = tagOf(z.Raw(), 2); tag {
		case tagSkip:
			if h.skip > 0 {
				h.skip--
			}
		case tagA:
			h.anchor = false
		}
	}
	if tag == tagBlock {
		h.Block()
	} else {
		h.Break()
	}
}

// Page resets h and feeds it the HTML page body, tokenised with
// golang.org/x/net/html; it returns Sum.
func (h *Hasher) Page(body []byte) (uint64, bool) {
	h.Reset()
	h.rd.Reset(body)
	z := html.NewTokenizer(&h.rd)
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		h.Token(z, tt)
	}
	h.rd.Reset(nil)
	return h.Sum()
}

// Of returns the fingerprint of the HTML page body, and false if its
// visible text is too short (MinShingles). Use a Hasher's Page to save its
// allocation when fingerprinting many pages.
func Of(body []byte) (uint64, bool) {
	var h Hasher
	return h.Page(body)
}

// Tags Token tells apart.
const (
	tagOther = iota
	tagSkip  // <script>, <style>, <noscript>, <template>, <title>
	tagA
	tagBlock // block-level elements, <br> and <hr>
)

// blockTags are the block-level tags, by length.
var blockTags = [...][]string{
	1:  {"p"},
	2:  {"br", "dd", "dl", "dt", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol", "td", "th", "tr", "ul"},
	3:  {"div", "nav", "pre"},
	4:  {"body", "form", "main"},
	5:  {"aside", "table", "tbody", "tfoot", "thead"},
	6:  {"dialog", "figure", "footer", "header", "legend", "option"},
	7:  {"address", "article", "caption", "details", "section", "summary"},
	8:  {"fieldset"},
	10: {"blockquote", "figcaption"},
}

// tagOf classifies the tag whose raw bytes are raw ("<name ...>" with
// from = 1, "</name>" with from = 2) without allocating.
func tagOf(raw []byte, from int) int {
	if len(raw) <= from {
		return tagOther
	}
	end := from
	for end < len(raw) {
		c := raw[end]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '/' || c == '>' {
			break
		}
		end++
	}
	name := raw[from:end]
	switch len(name) {
	case 1:
		if name[0] == 'a' || name[0] == 'A' {
			return tagA
		}
	case 5:
		if equalFold(name, "style") || equalFold(name, "title") {
			return tagSkip
		}
	case 6:
		if equalFold(name, "script") {
			return tagSkip
		}
	case 8:
		if equalFold(name, "noscript") || equalFold(name, "template") {
			return tagSkip
		}
	}
	if len(name) < len(blockTags) {
		for _, b := range blockTags[len(name)] {
			if equalFold(name, b) {
				return tagBlock
			}
		}
	}
	return tagOther
}

// equalFold reports whether b equals the lower-case ASCII lower, ignoring case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
