package fetcher

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
)

// TestTLSInsecure: HTTPS origins with a good certificate (the test CA's,
// trusted through Options.TLSRoots), an expired one, a self-signed one and
// one for another name. With TLSInsecure off, the bad ones fail with an
// error that says the certificate did not verify (StatusError, not a
// Retry, the host not backed off), reach no handler, and leave no WARC
// record; with it on, all are fetched, and the WARC response record of
// each bad one, on a new connection or a reused one, says why its
// certificate did not verify (WARCTLSUnverified), while the good one's
// has no such field. "on-h2" is "on" over HTTP/2 (ALPN through the
// TLSClientConfig the option sets).
func TestTLSInsecure(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	servers := []struct {
		host   string
		cert   tls.Certificate
		reason string // "" verifies
	}{
		{"good.test", ca.leaf(t, []string{"good.test"}, now.Add(-time.Hour), now.Add(time.Hour)), ""},
		{"expired.test", ca.leaf(t, []string{"expired.test"}, now.Add(-48*time.Hour), now.Add(-24*time.Hour)), "x509: certificate has expired or is not yet valid"},
		{"self.test", (*testCA)(nil).leaf(t, []string{"self.test"}, now.Add(-time.Hour), now.Add(time.Hour)), "x509: certificate signed by unknown authority"},
		{"wrong.test", ca.leaf(t, []string{"other.test"}, now.Add(-time.Hour), now.Add(time.Hour)), "x509: certificate is valid for other.test, not wrong.test"},
	}
	for _, mode := range []string{"off", "on", "on-h2"} {
		insecure, h2 := mode != "off", mode == "on-h2"
		t.Run(mode, func(t *testing.T) {
			origins := map[string]*origin{}
			hosts := newMemHosts() // robots.txt known: the page requests are the first
			var jobs []Job
			for _, s := range servers {
				o := startOriginH2(t, &s.cert, h2, textPage)
				origins[s.host] = o
				hosts.SaveHost(s.host, crawl.HostRecord{RobotsStatus: 404, RobotsExpiry: time.Now().Add(time.Hour)})
				jobs = append(jobs, Job{URL: o.url("https", s.host, "/a"), Host: s.host}, Job{URL: o.url("https", s.host, "/b"), Host: s.host})
			}
			dir := t.TempDir()
			wr, err := warcfile.Open(warcfile.Options{Dir: dir, Software: "meridian-test"})
			if err != nil {
				t.Fatal(err)
			}
			c := newCollector(1)
			f, err := New(Options{Workers: 4, HostDelay: 20 * time.Millisecond, Resolver: testTLDResolver(t), AllowPrivate: true,
				Hosts: hosts, TLSRoots: ca.pool, TLSInsecure: insecure, WARC: wr, OnResult: c.onResult, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			f.transport.ForceAttemptHTTP2 = h2 // read at the first request
			runCrawl(t, f, c, jobs, 10*time.Millisecond, 20*time.Second)
			if err := wr.Close(); err != nil {
				t.Fatal(err)
			}
			recs := warcByURI(readWARCs(t, dir))
			for _, s := range servers {
				reqs := origins[s.host].requests()
				for _, p := range []string{"/a", "/b"} {
					u := origins[s.host].url("https", s.host, p)
					r := c.final[u]
					if !insecure && s.reason != "" {
						if r == nil || r.Status != crawl.StatusError || r.Retry || r.HTTPStatus != 0 ||
							!strings.Contains(r.Err, "TLS certificate did not verify") || !strings.Contains(r.Err, s.reason) {
							t.Errorf("%s: %+v, want a StatusError, not a Retry, saying the certificate did not verify (%s)", u, r, s.reason)
						}
						if len(recs[u]) != 0 {
							t.Errorf("%s: %d WARC records, want none", u, len(recs[u]))
						}
						continue
					}
					if r == nil || r.Status != crawl.StatusFetched || r.HTTPStatus != http.StatusOK {
						t.Errorf("%s: %+v, want fetched", u, r)
						continue
					}
					resp := recordOf(t, recs, u, gowarc.Response)
					got, has := resp.warc.Get(WARCTLSUnverified), resp.warc.Has(WARCTLSUnverified)
					switch {
					case s.reason == "" && has:
						t.Errorf("%s: %s: %q on a verified connection", u, WARCTLSUnverified, got)
					case s.reason != "" && !strings.HasPrefix(got, s.reason):
						t.Errorf("%s: %s: %q, want %q…", u, WARCTLSUnverified, got, s.reason)
					}
					if req := recordOf(t, recs, u, gowarc.Request); req.warc.Has(WARCTLSUnverified) {
						t.Errorf("%s: the request record has %s", u, WARCTLSUnverified)
					}
				}
				wantProto := "HTTP/1.1"
				if h2 {
					wantProto = "HTTP/2.0"
				}
				for _, r := range reqs {
					if r.proto != wantProto {
						t.Errorf("%s%s: %s, want %s", s.host, r.uri, r.proto, wantProto)
					}
				}
				switch {
				case !insecure && s.reason != "":
					if len(reqs) != 0 {
						t.Errorf("%s: %d requests reached the handler through a certificate that does not verify", s.host, len(reqs))
					}
				case len(reqs) != 2:
					t.Errorf("%s: %d requests, want 2", s.host, len(reqs))
				case reqs[0].remote != reqs[1].remote:
					// Not an error of the fetcher's, but then the reused
					// connection's mark is not what was tested.
					t.Errorf("%s: the two requests came on two connections (%s, %s); want one reused", s.host, reqs[0].remote, reqs[1].remote)
				}
			}
			if st := f.Stats(); st.Backoffs != 0 {
				t.Errorf("%d back-offs, want none", st.Backoffs)
			}
		})
	}
}

// TestRobotsBadCertificate: a host whose robots.txt is behind a
// certificate that does not verify (TLSInsecure off) is refused, as a
// forbidden address is: its jobs are answered StatusError without a
// request, not a Retry, saying why, and it is not backed off (a fault
// that does not pass must not hold a crawl's end, as back-off and
// retries would).
func TestRobotsBadCertificate(t *testing.T) {
	now := time.Now()
	cert := (*testCA)(nil).leaf(t, []string{"self.test"}, now.Add(-time.Hour), now.Add(time.Hour))
	o := startOriginH2(t, &cert, false, textPage)
	hosts := newMemHosts() // nothing known: robots.txt is the first request
	c := newCollector(1)
	f, err := New(Options{Workers: 2, HostDelay: 20 * time.Millisecond, Resolver: testTLDResolver(t), AllowPrivate: true,
		Hosts: hosts, OnResult: c.onResult, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []Job{{URL: o.url("https", "self.test", "/a"), Host: "self.test"}, {URL: o.url("https", "self.test", "/b"), Host: "self.test"}}
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 20*time.Second)
	for _, j := range jobs {
		r := c.final[j.URL]
		if r == nil || r.Status != crawl.StatusError || r.Retry || !r.NoRequest || !strings.Contains(r.Err, "TLS certificate did not verify") {
			t.Errorf("%s: %+v, want StatusError, NoRequest, not a Retry, saying the certificate did not verify", j.URL, r)
		}
	}
	if n := len(o.requests()); n != 0 {
		t.Errorf("%d requests reached the handler", n)
	}
	if rec, ok, _ := hosts.LoadHost("self.test"); ok && !rec.BackoffUntil.IsZero() {
		t.Errorf("the host backs off until %v", rec.BackoffUntil)
	}
	if st := f.Stats(); st.Backoffs != 0 {
		t.Errorf("%d back-offs", st.Backoffs)
	}
}
