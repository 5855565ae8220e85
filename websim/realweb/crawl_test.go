package realweb_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim/realweb"
)

// crawl runs one site over a new real web to exhaustion, with edit
// applied to its configuration, calls inspect (if not nil) with the site
// before it closes, and returns the web (its logs) and the site's data
// directory. The crawl must end by itself: a crawler that a trap or a
// server's signal holds forever fails here.
func crawl(t *testing.T, edit func(*site.Config, *realweb.Web), inspect func(*testing.T, *site.Site, *realweb.Web)) (*realweb.Web, string) {
	t.Helper()
	w, err := realweb.Start(realweb.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	data := t.TempDir()
	seeds := filepath.Join(data, "seeds.txt")
	if err := os.WriteFile(seeds, []byte(strings.Join(w.Seeds(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := site.DefaultConfig()
	cfg.Data, cfg.Websim, cfg.Seeds = filepath.Join(data, "site"), "off", seeds
	cfg.DNS, cfg.AllowPrivate, cfg.TLSCA = w.DNSAddr(), true, w.CAFile()
	cfg.UserAgent = realweb.UserAgent
	cfg.Listen, cfg.Progress = "127.0.0.1:0", 0
	cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay = 50*time.Millisecond, 0, time.Second
	cfg.Width, cfg.PerHost, cfg.Workers = 500, 10, 16
	cfg.Timeout, cfg.Backoff, cfg.BackoffMax = 5*time.Second, 500*time.Millisecond, 10*time.Second
	cfg.CheckCash = true
	if edit != nil {
		edit(&cfg, w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runErr := s.Run(ctx, nil)
	if runErr == nil && inspect != nil {
		inspect(t, s, w)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if runErr != nil {
		t.Fatalf("run: %v", runErr)
	}
	if ctx.Err() != nil {
		t.Fatalf("the crawl did not end by itself in %v", time.Since(start).Round(time.Second))
	}
	t.Logf("crawl ended in %v, %d requests", time.Since(start).Round(time.Millisecond), len(w.Requests("")))
	return w, cfg.Data
}

// checkVerdicts fails the test for each behaviour the servers' logs do
// not show.
func checkVerdicts(t *testing.T, vs []realweb.Verdict) {
	t.Helper()
	for _, v := range vs {
		if v.OK {
			t.Log(v)
		} else {
			t.Error(v)
		}
	}
}

// TestCrawlRealWeb crawls the real web with the defaults a serious
// crawler has (and its own User-Agent), and judges it by the servers'
// logs: encodings, robots.txt redirected and per agent, Retry-After,
// IPv6, HTTP/2, traps, the servers' and pages' signals, compression,
// https, no cookies, no proxy.
func TestCrawlRealWeb(t *testing.T) {
	t.Parallel()
	w, data := crawl(t, nil, checkDirectives)
	checkVerdicts(t, w.Judge(realweb.JudgeOptions{UserAgent: realweb.UserAgent}))
	checkRoundStats(t, data)
	recs := readWARC(t, data)
	checkCompressedArchived(t, w, recs)
	checkNoIndexArchived(t, w, recs, false)
	checkSideIndex(t, w, data)
}

// TestCrawlRealWebOptions crawls it through the web's proxy, with
// cookies, with unverifiable certificates accepted and noindex respected.
func TestCrawlRealWebOptions(t *testing.T) {
	t.Parallel()
	w, data := crawl(t, func(c *site.Config, w *realweb.Web) {
		c.Proxy, c.Cookies, c.TLSInsecure, c.RespectNoIndex = w.ProxyURL(), true, true, true
	}, nil)
	checkVerdicts(t, w.Judge(realweb.JudgeOptions{UserAgent: realweb.UserAgent, Proxy: true, Cookies: true, TLSInsecure: true}))
	recs := readWARC(t, data)
	checkNoIndexArchived(t, w, recs, true)
	for _, h := range []string{realweb.HostSelfSigned, realweb.HostExpired} {
		resp := recs.one(t, w.URL(h, "/"), gowarc.Response)
		if why := resp.warc.Get(fetcher.WARCTLSUnverified); !strings.Contains(why, "certificate") {
			t.Errorf("%s: the response record's %s is %q, want why the certificate did not verify", h, fetcher.WARCTLSUnverified, why)
		}
	}
	if resp := recs.one(t, w.URL(realweb.HostSecure, "/"), gowarc.Response); resp.warc.Has(fetcher.WARCTLSUnverified) {
		t.Errorf("a page of a host whose certificate verifies is marked %s", fetcher.WARCTLSUnverified)
	}
}

// checkDirectives: the crawl database records what pages said of
// themselves (noindex, canonical).
func checkDirectives(t *testing.T, s *site.Site, w *realweb.Web) {
	t.Helper()
	stores := s.Stores()
	for _, c := range []struct {
		page string
		want store.Directives
	}{
		{realweb.MetaNoIndexPage, store.Directives{NoIndex: true}},
		{realweb.HeaderNoIndexPage, store.Directives{NoIndex: true}},
		{realweb.CanonicalPage, store.Directives{Canonical: w.URL(realweb.HostSignals, realweb.CanonicalTarget)}},
		{realweb.CanonicalHeaderPage, store.Directives{Canonical: w.URL(realweb.HostSignals, realweb.CanonicalHeaderTarget)}},
	} {
		u := w.URL(realweb.HostSignals, c.page)
		var got store.Directives
		ok := false
		var err error
		for _, st := range stores {
			if got, ok, err = st.DirectivesOf(u); ok || err != nil {
				break
			}
		}
		if err != nil || !ok || got != c.want {
			t.Errorf("crawl database: directives of %s = %+v (recorded %v, %v), want %+v", u, got, ok, err, c.want)
		}
	}
}
