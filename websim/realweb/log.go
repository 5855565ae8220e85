package realweb

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Request is one request a host of the web received, as it received it:
// the server's own log, which the tests judge the crawler by.
type Request struct {
	Host     string         // the host's name (the Host header without its port)
	At       time.Time      // when the request's headers were read
	Done     time.Time      // when its response was written
	Method   string         // "GET", or "CONNECT" at the proxy
	URI      string         // the request target as sent: "/a%20b?q=1", or absolute-form at the proxy
	Proto    string         // "HTTP/1.1", "HTTP/2.0"
	Remote   netip.AddrPort // the client's address and port
	TLS      bool           // over TLS
	Status   int            // the status answered
	Header   http.Header    // the request's headers
	ViaProxy bool           // it came from the web's proxy (ProxyURL)
}

// Path returns the request target's path, as sent (escapes kept).
func (r Request) Path() string {
	p, _, _ := strings.Cut(r.URI, "?")
	return p
}

// requestLog holds every request of the web, in arrival order.
type requestLog struct {
	mu   sync.Mutex
	reqs []Request
}

func (l *requestLog) add(r Request) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

// all returns a copy of the requests for which keep is true, in order.
func (l *requestLog) all(keep func(*Request) bool) []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Request
	for i := range l.reqs {
		if keep(&l.reqs[i]) {
			r := l.reqs[i]
			r.Header = r.Header.Clone()
			out = append(out, r)
		}
	}
	return out
}

// statusWriter records the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on (the proxy's tunnel and streaming answers).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// logged wraps a host's handler so that every request it answers is
// logged under name; a request from proxySrc came through the proxy.
func (l *requestLog) logged(name string, h http.Handler, proxySrc netip.Addr) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := Request{
			Host: name, At: time.Now(), Method: r.Method, URI: r.RequestURI, Proto: r.Proto,
			TLS: r.TLS != nil, Header: r.Header.Clone(),
		}
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			rec.Remote = ap
			rec.ViaProxy = ap.Addr().Unmap() == proxySrc
		}
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		rec.Status, rec.Done = sw.status, time.Now()
		if rec.Status == 0 {
			rec.Status = http.StatusOK
		}
		l.add(rec)
	})
}

// paths returns the paths of reqs, sorted, each once.
func paths(reqs []Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Path())
	}
	slices.Sort(out)
	return slices.Compact(out)
}
