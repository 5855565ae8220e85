package realweb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// proxyName is the name the proxy's requests are logged under.
const proxyName = "proxy"

// proxySource is the proxy's address: it listens there and its
// connections to the hosts leave from it, so a host's log tells a
// request through the proxy (Request.ViaProxy) from a direct one.
var proxySource = netip.AddrFrom4([4]byte{127, 88, 1, 1})

// proxy is a logging HTTP proxy: CONNECT tunnels to a host's port, and
// absolute-form requests forwarded, as HTTP proxies in front of crawlers
// do. It resolves the web's names itself.
type proxy struct {
	url  string
	srv  *http.Server
	tr   *http.Transport
	wg   sync.WaitGroup // the server and the tunnels
	done chan struct{}  // closed by close: tunnels end
}

// startProxy starts the web's proxy.
func (w *Web) startProxy() (*proxy, error) {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(proxySource, 0).String())
	if err != nil {
		return nil, fmt.Errorf("realweb: proxy: listen: %w", err)
	}
	p := &proxy{url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	dialer := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(proxySource, 0))}
	dial := func(ctx context.Context, network, hostport string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, err
		}
		addrs := w.names[host]
		if len(addrs) == 0 {
			return nil, fmt.Errorf("realweb: proxy: no host %s", host)
		}
		var errs []error
		for _, a := range addrs { // each in turn, as a proxy does
			d := dialer
			if a.Is6() {
				d = &net.Dialer{Timeout: dialer.Timeout} // ::1 cannot be reached from an IPv4 source
			}
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	p.tr = &http.Transport{DialContext: dial, Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 4}
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			p.tunnel(rw, r, dial)
			return
		}
		if !r.URL.IsAbs() {
			http.Error(rw, "realweb proxy: not an absolute-form request", http.StatusBadRequest)
			return
		}
		p.forward(rw, r)
	})
	p.srv = &http.Server{Handler: w.log.logged(proxyName, h, netip.Addr{}), ReadHeaderTimeout: 10 * time.Second}
	p.wg.Add(1)
	go func() { // owner: the proxy; close shuts it down
		defer p.wg.Done()
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.o.Logger.Error("realweb: proxy", "err", err)
		}
	}()
	return p, nil
}

// tunnel answers a CONNECT: a TCP tunnel to the host, until either side
// closes or the proxy does.
func (p *proxy) tunnel(rw http.ResponseWriter, r *http.Request, dial func(context.Context, string, string) (net.Conn, error)) {
	up, err := dial(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	sw, ok := rw.(*statusWriter)
	if !ok {
		up.Close()
		http.Error(rw, "realweb proxy: cannot hijack", http.StatusInternalServerError)
		return
	}
	hijacker, ok := sw.ResponseWriter.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(rw, "realweb proxy: cannot hijack", http.StatusInternalServerError)
		return
	}
	sw.status = http.StatusOK // logged as 200; the bytes go below
	down, buf, err := hijacker.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	ended := make(chan struct{})
	var left atomic.Int32
	left.Store(2)
	p.wg.Add(3)
	copyHalf := func(dst net.Conn, src io.Reader) { // owner: the proxy; ends when a side closes or close runs
		defer p.wg.Done()
		io.Copy(dst, src)
		if c, ok := dst.(interface{ CloseWrite() error }); ok {
			c.CloseWrite()
		}
		if left.Add(-1) == 0 {
			close(ended)
		}
	}
	go copyHalf(up, buf)
	go copyHalf(down, up)
	go func() { // owner: the proxy; closes the tunnel's sockets when it ends or the proxy closes
		defer p.wg.Done()
		select {
		case <-p.done:
		case <-ended:
		}
		up.Close()
		down.Close()
	}()
}

// forward sends an absolute-form request on to its host and copies the
// answer back.
func (p *proxy) forward(rw http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Connection")
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		rw.Header()[k] = vs
	}
	if resp.ContentLength >= 0 {
		rw.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	rw.WriteHeader(resp.StatusCode)
	io.Copy(rw, resp.Body)
}

// close stops the proxy and its tunnels.
func (p *proxy) close() {
	close(p.done)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		p.srv.Close()
	}
	p.tr.CloseIdleConnections()
	p.wg.Wait()
}
