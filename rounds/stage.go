package rounds

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
)

// partPlan is a part's share of a round: its hosts (with the time each may
// start, when it moved from another node) and their generated URLs.
type partPlan struct {
	Hosts   []partHost
	Entries []genEntry
}

type partHost struct {
	Name      string
	NotBefore time.Time
}

const (
	recPart = 'P'
	// recPartPrev is a part with refetch entries: after each entry's
	// depth, whether it has a Prev, and if so its fields. A part without
	// one is written as recPart, as before refetch existed.
	recPartPrev = 'Q'
	recStage    = 'S'
)

func (p *partPlan) encode() []byte {
	idx := make(map[string]int, len(p.Hosts))
	tag := byte(recPart)
	for i := range p.Entries {
		if p.Entries[i].Prev != (fetcher.Prev{}) {
			tag = recPartPrev
			break
		}
	}
	dst := []byte{tag}
	dst = binary.AppendUvarint(dst, uint64(len(p.Hosts)))
	for i, h := range p.Hosts {
		idx[h.Name] = i
		dst = appendString(dst, h.Name)
		nb := h.NotBefore
		if !nb.IsZero() {
			nb = nb.Add(time.Millisecond - 1) // to the ms, rounded up: never earlier than asked
		}
		dst = appendTime(dst, nb)
	}
	dst = binary.AppendUvarint(dst, uint64(len(p.Entries)))
	for _, e := range p.Entries {
		dst = appendString(dst, e.URL)
		dst = binary.AppendUvarint(dst, uint64(idx[e.Host]))
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(e.Cash))
		dst = binary.AppendUvarint(dst, uint64(e.Depth))
		if tag == recPartPrev {
			dst = appendPrev(dst, &e.Prev)
		}
	}
	return dst
}

// appendPrev encodes a refetch's Prev: a presence byte, then its fields.
func appendPrev(dst []byte, pv *fetcher.Prev) []byte {
	if *pv == (fetcher.Prev{}) {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = appendTime(dst, pv.FetchedAt)
	dst = binary.BigEndian.AppendUint64(dst, pv.ContentFP)
	dst = appendString(dst, pv.ETag)
	return appendString(dst, pv.LastModified)
}

// prev decodes what appendPrev encodes.
func (r *reader) prev() fetcher.Prev {
	var pv fetcher.Prev
	if r.byte1() == 0 {
		return pv
	}
	pv.FetchedAt = r.time()
	pv.ContentFP = r.u64()
	pv.ETag, pv.LastModified = r.str(), r.str()
	return pv
}

func decodePart(b []byte) (partPlan, error) {
	r := reader{b: b}
	var p partPlan
	tag := r.byte1()
	if tag != recPart && tag != recPartPrev {
		return p, fmt.Errorf("%w: not a part", errRecord)
	}
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		return p, fmt.Errorf("%w: part of %d hosts", errRecord, n)
	}
	p.Hosts = make([]partHost, 0, n)
	for range n {
		p.Hosts = append(p.Hosts, partHost{Name: r.str(), NotBefore: r.time()})
	}
	m := r.uvarint()
	if m > uint64(len(r.b)) {
		return p, fmt.Errorf("%w: part of %d URLs", errRecord, m)
	}
	p.Entries = make([]genEntry, 0, m)
	for range m {
		e := genEntry{URL: r.str()}
		h := r.uvarint()
		e.Cash, e.Depth = r.f64(), uint32(r.uvarint())
		if tag == recPartPrev {
			e.Prev = r.prev()
		}
		if h >= uint64(len(p.Hosts)) {
			r.fail()
			break
		}
		e.Host = p.Hosts[h].Name
		p.Entries = append(p.Entries, e)
	}
	if r.err != nil || len(r.b) != 0 {
		return p, fmt.Errorf("%w: part", errRecord)
	}
	return p, nil
}

func appendTime(dst []byte, t time.Time) []byte {
	var ms int64
	if !t.IsZero() {
		ms = t.UnixMilli()
	}
	return binary.AppendVarint(dst, ms)
}

func (r *reader) time() time.Time {
	ms := r.varint()
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// stageBatch is the map side of the update for some results of one part,
// as a node stages it in the crawl database: the fetch results to record,
// the URLs to requeue, redirect chain lengths, the outlink credits combined
// by URL, the cash that went to the virtual page, the outlinks of the
// heaviest pages (for revisits) and the counters of the round's
// statistics. The leader's revisits of a round are staged the same way.
type stageBatch struct {
	Ops      []store.FetchResult
	Requeues []string
	Hops     []redirectHop
	Credits  []target
	Virtual  float64
	Links    []linkOffer
	Revisits []plannedRevisit
	Stats    stageStats
	// LastMods are the sitemap URLs with a <lastmod>, when the crawl
	// refetches: the update makes a fetched one due at once if its
	// lastmod is newer than the copy (sitemapDue).
	LastMods []lastModHint
	// NearDups are the fetched pages that are near-duplicates of others
	// (fetcher.Result.NearDupOf), recorded by the update (store.Batch.NearDup).
	NearDups []nearDupHint
	// Directives are the fetched pages' noindex and rel=canonical
	// (fetcher.Result.NoIndex, Canonical), and the refetched pages' that
	// name none (to clear what their last fetch recorded), recorded by
	// the update (store.Batch.SetDirectives).
	Directives []directivesHint
}

// nearDupHint is a near-duplicate page and the page it duplicates.
type nearDupHint struct {
	URL, Of string
}

// directivesHint is a page's directives from its fetch (zero: none).
type directivesHint struct {
	URL string
	D   store.Directives
}

// lastModHint is a sitemap's <lastmod> of a URL, in Unix milliseconds.
type lastModHint struct {
	URL     string
	LastMod int64
}

// linkOffer is a fetched page's outlinks, for the leader's link store.
type linkOffer struct {
	URL    string
	Depth  uint32
	Weight float64
	Links  []string
}

// stageStats are a batch's share of its round's statistics.
type stageStats struct {
	Fetched, Retries, Robots, Sitemaps, Bytes, Links, Wait int64
	Class                                                  [6]int64
	Status                                                 [16]int64
	Troubled                                               map[string]*HostFate
	// Refetches counts the final results of refetch jobs (a Prev), of
	// which NotModified were answered 304, Unchanged 2xx with the same
	// fingerprint, and Changed the rest. (Left out of the update file's
	// trailer when 0, which is then what it was before refetch existed.)
	Refetches, NotModified, Unchanged, Changed int64 `json:",omitempty"`
	// SitemapDue counts the pages the update made due at once for a
	// sitemap <lastmod> newer than their copy (set by the update, not
	// staged).
	SitemapDue int64 `json:",omitempty"`
	// NearDups counts the fetched pages found near-duplicates of others
	// (set by the update from the batches' near-duplicates).
	NearDups int64 `json:",omitempty"`
	// NoIndex and Canonical count the fetched pages that said noindex and
	// that named another canonical URL (set by the update from the
	// batches' directives).
	NoIndex, Canonical int64 `json:",omitempty"`
	// TrapRepetition and TrapCalendar count the links (of pages, redirects
	// and sitemaps) that the trap rules refused (fetcher.Result.Traps).
	TrapRepetition, TrapCalendar int64 `json:",omitempty"`
}

// refetched reports whether s counts any refetch.
func (s *stageStats) refetched() bool {
	return s.Refetches != 0 || s.NotModified != 0 || s.Unchanged != 0 || s.Changed != 0
}

func (s *stageStats) add(o *stageStats) {
	s.Fetched += o.Fetched
	s.Retries += o.Retries
	s.Robots += o.Robots
	s.Sitemaps += o.Sitemaps
	s.SitemapDue += o.SitemapDue
	s.NearDups += o.NearDups
	s.NoIndex += o.NoIndex
	s.Canonical += o.Canonical
	s.TrapRepetition += o.TrapRepetition
	s.TrapCalendar += o.TrapCalendar
	s.Bytes += o.Bytes
	s.Links += o.Links
	s.Wait += o.Wait
	s.Refetches += o.Refetches
	s.NotModified += o.NotModified
	s.Unchanged += o.Unchanged
	s.Changed += o.Changed
	for i := range s.Class {
		s.Class[i] += o.Class[i]
	}
	for i := range s.Status {
		s.Status[i] += o.Status[i]
	}
	for h, f := range o.Troubled {
		if s.Troubled == nil {
			s.Troubled = map[string]*HostFate{}
		}
		g := s.Troubled[h]
		if g == nil {
			if len(s.Troubled) >= maxTroubled {
				continue
			}
			g = &HostFate{ByStatus: map[string]int64{}}
			s.Troubled[h] = g
		}
		for k, v := range f.ByStatus {
			g.ByStatus[k] += v
		}
		g.Retries += f.Retries
		g.Truncated += f.Truncated
		if f.LastError != "" {
			g.LastError = f.LastError
		}
	}
}

// fill writes the counters into a round's statistics.
func (s *stageStats) fill(st *RoundStats) {
	st.Fetched, st.Retries, st.Robots, st.Sitemaps = s.Fetched, s.Retries, s.Robots, s.Sitemaps
	st.Bytes, st.Links, st.WaitSecs = s.Bytes, s.Links, time.Duration(s.Wait).Seconds()
	st.Refetches, st.NotModified, st.Unchanged, st.Changed = s.Refetches, s.NotModified, s.Unchanged, s.Changed
	st.SitemapDue = s.SitemapDue
	st.NearDups = s.NearDups
	st.NoIndex, st.Canonical = s.NoIndex, s.Canonical
	st.Traps = TrapStats{Repetition: s.TrapRepetition, Calendar: s.TrapCalendar}
	st.ByClass = map[string]int64{}
	for i, n := range s.Class {
		if n > 0 {
			st.ByClass[classNames[i]] = n
		}
	}
	st.ByStatus = map[string]int64{}
	for i, n := range s.Status {
		if n > 0 {
			st.ByStatus[store.Status(i).String()] = n
		}
	}
	st.Troubled = s.Troubled
}

// Staged batch encodings: version 1, and version 2, which has refetch
// data: each fetch result ends with a presence byte and, if it carries a
// refetch schedule's part, its change and validators; and after the
// counters by status come the refetch counters (Refetches, NotModified,
// Unchanged, Changed, uvarints) and the sitemap lastmods (a count, then
// each URL and its Unix ms). A batch without refetch data (no op with a
// schedule, the refetch counters 0, no lastmod) is written in version 1,
// byte for byte as before refetch existed. Version 3 is version 2 and
// then the near-duplicates (a count, then each URL and its original's);
// it is written only for a batch that has near-duplicates. Version 4 is
// version 3 (its near-duplicates' count possibly 0) and then the pages'
// directives (a count, then each URL, a flags byte of dirNoIndex and
// dirCanonical, 0 for none, and the canonical URL if dirCanonical) and
// the trap counters (TrapRepetition, TrapCalendar, uvarints); it is
// written only for a batch that has directives or trap counts.
const (
	stageVersion  = 1
	stageVersion2 = 2
	stageVersion3 = 3
	stageVersion4 = 4
)

// Flags of a staged page's directives.
const (
	dirNoIndex   = 1 << 0
	dirCanonical = 1 << 1
	knownDirs    = dirNoIndex | dirCanonical
)

// Flags of a staged fetch result.
const (
	opRetry = 1 << 0
)

func (s *stageBatch) encode() []byte {
	version := byte(stageVersion)
	if s.Stats.refetched() || len(s.LastMods) > 0 {
		version = stageVersion2
	}
	for i := range s.Ops {
		if s.Ops[i].Schedule != nil {
			version = stageVersion2
			break
		}
	}
	if len(s.NearDups) > 0 {
		version = stageVersion3
	}
	if len(s.Directives) > 0 || s.Stats.TrapRepetition != 0 || s.Stats.TrapCalendar != 0 {
		version = stageVersion4
	}
	dst := []byte{recStage, version}
	dst = binary.AppendUvarint(dst, uint64(len(s.Ops)))
	for _, op := range s.Ops {
		dst = appendString(dst, op.URL)
		dst = append(dst, byte(op.Status))
		var f byte
		if op.Retry {
			f |= opRetry
		}
		dst = append(dst, f)
		dst = binary.AppendUvarint(dst, uint64(op.HTTPStatus))
		dst = appendTime(dst, op.At)
		dst = binary.BigEndian.AppendUint64(dst, op.ContentFP)
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(op.Spend))
		if version >= stageVersion2 {
			if sc := op.Schedule; sc == nil {
				dst = append(dst, 0)
			} else {
				dst = append(dst, 1, byte(sc.Change))
				dst = appendString(dst, sc.ETag)
				dst = appendString(dst, sc.LastModified)
			}
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.Requeues)))
	for _, u := range s.Requeues {
		dst = appendString(dst, u)
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.Hops)))
	for _, h := range s.Hops {
		dst = appendString(dst, h.target)
		dst = binary.AppendUvarint(dst, uint64(h.hops))
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.Credits)))
	for _, t := range s.Credits {
		dst = appendString(dst, t.url)
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(t.cash))
		dst = binary.AppendUvarint(dst, uint64(t.depth))
	}
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(s.Virtual))
	dst = binary.AppendUvarint(dst, uint64(len(s.Links)))
	for _, l := range s.Links {
		dst = appendString(dst, l.URL)
		dst = binary.AppendUvarint(dst, uint64(l.Depth))
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(l.Weight))
		packed := appendLinks(nil, origin(l.URL), l.Links)
		dst = binary.AppendUvarint(dst, uint64(len(l.Links)))
		dst = appendString(dst, string(packed))
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.Revisits)))
	for _, r := range s.Revisits {
		dst = appendString(dst, r.url)
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(r.spend))
	}
	st := &s.Stats
	for _, v := range []int64{st.Fetched, st.Retries, st.Robots, st.Sitemaps, st.Bytes, st.Links, st.Wait} {
		dst = binary.AppendUvarint(dst, uint64(max(v, 0)))
	}
	for _, v := range st.Class {
		dst = binary.AppendUvarint(dst, uint64(max(v, 0)))
	}
	for _, v := range st.Status {
		dst = binary.AppendUvarint(dst, uint64(max(v, 0)))
	}
	if version >= stageVersion2 {
		for _, v := range []int64{st.Refetches, st.NotModified, st.Unchanged, st.Changed} {
			dst = binary.AppendUvarint(dst, uint64(max(v, 0)))
		}
		dst = binary.AppendUvarint(dst, uint64(len(s.LastMods)))
		for _, h := range s.LastMods {
			dst = appendString(dst, h.URL)
			dst = binary.AppendVarint(dst, h.LastMod)
		}
	}
	if version >= stageVersion3 {
		dst = binary.AppendUvarint(dst, uint64(len(s.NearDups)))
		for _, n := range s.NearDups {
			dst = appendString(dst, n.URL)
			dst = appendString(dst, n.Of)
		}
	}
	if version >= stageVersion4 {
		dst = binary.AppendUvarint(dst, uint64(len(s.Directives)))
		for _, d := range s.Directives {
			dst = appendString(dst, d.URL)
			var f byte
			if d.D.NoIndex {
				f |= dirNoIndex
			}
			if d.D.Canonical != "" {
				f |= dirCanonical
			}
			dst = append(dst, f)
			if f&dirCanonical != 0 {
				dst = appendString(dst, d.D.Canonical)
			}
		}
		dst = binary.AppendUvarint(dst, uint64(max(st.TrapRepetition, 0)))
		dst = binary.AppendUvarint(dst, uint64(max(st.TrapCalendar, 0)))
	}
	var troubled []byte
	if len(st.Troubled) > 0 {
		troubled, _ = json.Marshal(st.Troubled)
	}
	return appendString(dst, string(troubled))
}

// validCash reports whether c is a cash amount a record may carry.
func validCash(c float64) bool { return c >= 0 && !math.IsInf(c, 0) && !math.IsNaN(c) }

func decodeStage(b []byte, round uint64) (stageBatch, error) {
	r := reader{b: b}
	var s stageBatch
	if r.byte1() != recStage {
		return s, fmt.Errorf("%w: not a staged batch", errRecord)
	}
	version := r.byte1()
	if version < stageVersion || version > stageVersion4 {
		return s, fmt.Errorf("%w: staged batch version %d", errRecord, version)
	}
	count := func(what string) uint64 {
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			r.fail()
			return 0
		}
		return n
	}
	n := count("ops")
	s.Ops = make([]store.FetchResult, 0, n)
	for range n {
		op := store.FetchResult{URL: r.str(), Status: store.Status(r.byte1()), Round: round}
		op.Retry = r.byte1()&opRetry != 0
		op.HTTPStatus = uint16(min(r.uvarint(), math.MaxUint16))
		op.At = r.time()
		op.ContentFP = r.u64()
		op.Spend = r.f64()
		if !validCash(op.Spend) {
			r.fail()
		}
		if version >= stageVersion2 && r.byte1() == 1 {
			sc := &store.Schedule{Change: store.Change(r.byte1())}
			sc.ETag, sc.LastModified = r.str(), r.str()
			if sc.Change > store.ChangeUnchanged || op.Retry {
				r.fail()
			}
			op.Schedule = sc
		}
		s.Ops = append(s.Ops, op)
	}
	n = count("requeues")
	for range n {
		s.Requeues = append(s.Requeues, r.str())
	}
	n = count("hops")
	for range n {
		s.Hops = append(s.Hops, redirectHop{target: r.str(), hops: int(min(r.uvarint(), math.MaxInt32))})
	}
	n = count("credits")
	s.Credits = make([]target, 0, n)
	for range n {
		t := target{url: r.str()}
		t.cash, t.depth = r.f64(), uint32(r.uvarint())
		if !validCash(t.cash) {
			r.fail()
		}
		s.Credits = append(s.Credits, t)
	}
	s.Virtual = r.f64()
	if !validCash(s.Virtual) {
		r.fail()
	}
	n = count("links")
	for range n {
		l := linkOffer{URL: r.str(), Depth: uint32(r.uvarint()), Weight: r.f64()}
		k := r.uvarint()
		packed := r.str()
		if r.err != nil || k > uint64(len(packed)) {
			r.fail()
			break
		}
		e := linkEntry{url: l.URL, n: int(k), links: []byte(packed)}
		l.Links = e.decodeLinks()
		if len(l.Links) != int(k) {
			r.fail()
			break
		}
		s.Links = append(s.Links, l)
	}
	n = count("revisits")
	for range n {
		rv := plannedRevisit{url: r.str(), spend: r.f64()}
		if !validCash(rv.spend) {
			r.fail()
		}
		s.Revisits = append(s.Revisits, rv)
	}
	st := &s.Stats
	for _, p := range []*int64{&st.Fetched, &st.Retries, &st.Robots, &st.Sitemaps, &st.Bytes, &st.Links, &st.Wait} {
		*p = int64(min(r.uvarint(), math.MaxInt64))
	}
	for i := range st.Class {
		st.Class[i] = int64(min(r.uvarint(), math.MaxInt64))
	}
	for i := range st.Status {
		st.Status[i] = int64(min(r.uvarint(), math.MaxInt64))
	}
	if version >= stageVersion2 {
		for _, p := range []*int64{&st.Refetches, &st.NotModified, &st.Unchanged, &st.Changed} {
			*p = int64(min(r.uvarint(), math.MaxInt64))
		}
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			r.fail()
			n = 0
		}
		for range n {
			h := lastModHint{URL: r.str(), LastMod: r.varint()}
			if h.LastMod <= 0 {
				r.fail()
			}
			s.LastMods = append(s.LastMods, h)
		}
	}
	if version >= stageVersion3 {
		n := r.uvarint()
		if n == 0 && version == stageVersion3 || n > uint64(len(r.b)) {
			r.fail()
			n = 0
		}
		for range n {
			h := nearDupHint{URL: r.str(), Of: r.str()}
			if h.URL == "" || h.Of == "" {
				r.fail()
			}
			s.NearDups = append(s.NearDups, h)
		}
	}
	if version >= stageVersion4 {
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			r.fail()
			n = 0
		}
		for range n {
			h := directivesHint{URL: r.str()}
			f := r.byte1()
			h.D.NoIndex = f&dirNoIndex != 0
			if f&dirCanonical != 0 {
				if h.D.Canonical = r.str(); h.D.Canonical == "" {
					r.fail()
				}
			}
			if h.URL == "" || f&^knownDirs != 0 {
				r.fail()
			}
			s.Directives = append(s.Directives, h)
		}
		st.TrapRepetition = int64(min(r.uvarint(), math.MaxInt64))
		st.TrapCalendar = int64(min(r.uvarint(), math.MaxInt64))
		if len(s.Directives) == 0 && st.TrapRepetition == 0 && st.TrapCalendar == 0 {
			r.fail() // written in version 3 or lower
		}
	}
	if tj := r.str(); tj != "" && r.err == nil {
		if err := json.Unmarshal([]byte(tj), &st.Troubled); err != nil {
			r.fail()
		}
	}
	if r.err != nil || len(r.b) != 0 {
		return s, fmt.Errorf("%w: staged batch", errRecord)
	}
	return s, nil
}

// handled lists the page URLs a batch answers (recorded or requeued).
func (s *stageBatch) handled(fn func(url string)) {
	for _, op := range s.Ops {
		fn(op.URL)
	}
	for _, u := range s.Requeues {
		fn(u)
	}
}
