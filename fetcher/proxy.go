package fetcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpproxy"

	"github.com/meridian-crawler/meridian/fetcher/localaddr"
)

// ErrBadProxy is wrapped by the errors of a proxy URL the fetcher cannot
// use: one that does not parse, has no host or port, or is not http://
// (https:// and socks5:// proxies are not supported).
var ErrBadProxy = errors.New("fetcher: bad proxy URL")

// ProxyFunc returns an Options.Proxy: with env, the proxies of the
// environment's HTTP_PROXY, HTTPS_PROXY and NO_PROXY (or their lower-case
// forms), read once now and applied as golang.org/x/net/http/httpproxy
// does (NO_PROXY lists names, with their subdomains, and IP prefixes to
// reach directly; requests to localhost and loopback addresses are always
// direct); proxyURL, if not "", is the proxy of both http and https URLs
// in place of HTTP_PROXY and HTTPS_PROXY (NO_PROXY still applies with
// env). A proxy URL without a scheme is taken as http://; only http://
// proxies are supported. It returns nil (every request direct) when no
// proxy is set, and an error wrapping ErrBadProxy for every proxy URL it
// cannot use.
func ProxyFunc(proxyURL string, env bool) (func(*url.URL) (*url.URL, error), error) {
	var cfg httpproxy.Config
	if env {
		cfg = *httpproxy.FromEnvironment()
	}
	httpFrom, httpsFrom := "HTTP_PROXY", "HTTPS_PROXY"
	if proxyURL != "" {
		cfg.HTTPProxy, cfg.HTTPSProxy = proxyURL, proxyURL
		httpFrom, httpsFrom = "the proxy", "the proxy"
		cfg.CGI = false // the guard is against HTTP_PROXY set by a CGI request
	}
	if cfg.HTTPProxy == "" && cfg.HTTPSProxy == "" {
		return nil, nil
	}
	var errs []error
	if _, _, err := checkProxy(cfg.HTTPProxy, httpFrom); err != nil {
		errs = append(errs, err)
	}
	if cfg.HTTPSProxy != cfg.HTTPProxy {
		if _, _, err := checkProxy(cfg.HTTPSProxy, httpsFrom); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg.ProxyFunc(), nil
}

// checkProxy parses a proxy URL as httpproxy does (no scheme: http://)
// and checks that the fetcher can use it; it returns the URL and its
// "host:port". An empty raw is no proxy. from names where raw came from,
// for the error.
func checkProxy(raw, from string) (*url.URL, string, error) {
	if raw == "" {
		return nil, "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		if v, err2 := url.Parse("http://" + raw); err2 == nil {
			u, err = v, nil
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("fetcher: %s does not parse: %w: %w", from, ErrBadProxy, err)
	}
	return checkProxyURL(u, from)
}

// checkProxyURL checks a proxy URL the fetcher is to use and returns its
// "host:port" (port 80 if it names none), as the transport dials it.
func checkProxyURL(u *url.URL, from string) (*url.URL, string, error) {
	if u.Scheme != "http" {
		return nil, "", fmt.Errorf("fetcher: %s %s: scheme %q: only http:// proxies are supported: %w", from, u.Redacted(), u.Scheme, ErrBadProxy)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return nil, "", fmt.Errorf("fetcher: %s %s: no host: %w", from, u.Redacted(), ErrBadProxy)
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c >= 0x7f {
			return nil, "", fmt.Errorf("fetcher: %s %s: host %q is not ASCII: %w", from, u.Redacted(), host, ErrBadProxy)
		}
	}
	if port == "" {
		port = "80"
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, "", fmt.Errorf("fetcher: %s %s: port %q: %w", from, u.Redacted(), port, ErrBadProxy)
	}
	return u, net.JoinHostPort(host, port), nil
}

// proxyRoute is the proxy a request goes through (dialTarget.proxy).
type proxyRoute struct {
	url  *url.URL
	addr string // "host:port", as the transport dials it
}

// proxyFor returns the proxy Options.Proxy gives for a request to rawURL;
// nil for a direct request.
func (f *Fetcher) proxyFor(rawURL string) (*proxyRoute, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetcher: proxy for %s: %w", rawURL, err)
	}
	p, err := f.o.Proxy(u)
	switch {
	case err != nil:
		return nil, fmt.Errorf("fetcher: proxy for %s: %w", rawURL, err)
	case p == nil:
		return nil, nil
	}
	p, addr, err := checkProxyURL(p, "proxy")
	if err != nil {
		return nil, fmt.Errorf("fetcher: request for %s: %w", rawURL, err)
	}
	return &proxyRoute{url: p, addr: addr}, nil
}

// requestProxy is the transport's Proxy: the proxy get chose for the
// request (see dialTarget), nil for a direct one.
func requestProxy(req *http.Request) (*url.URL, error) {
	if dt, ok := req.Context().Value(dialKey{}).(*dialTarget); ok && dt.proxy != nil {
		return dt.proxy.url, nil
	}
	return nil, nil
}

// dialProxy connects to the proxy of a request (dt.proxy.addr; the
// transport dials nothing else for a proxied request), from the local
// address localaddr.Pick chooses among Options.LocalAddrs (if any). The
// proxy's address is not checked by netguard (a proxy on loopback or a
// private network is normal) and Options.Port does not apply to it. Like
// dial, it is bounded by the connect timeout and stopped when Run ends.
func (f *Fetcher) dialProxy(ctx context.Context, dt *dialTarget, addr string) (net.Conn, error) {
	if addr != dt.proxy.addr {
		return nil, fmt.Errorf("fetcher: dial %s: the request goes through the proxy at %s", addr, dt.proxy.addr)
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(f.runCtx, cancel)
	defer stop()
	if len(f.o.LocalAddrs) == 0 {
		return f.dialer.DialContext(dctx, "tcp", addr)
	}
	host, port, _ := net.SplitHostPort(addr)
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		ips, err := net.DefaultResolver.LookupNetIP(dctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("fetcher: dial proxy %s: %w", addr, err)
		}
		ip = ips[0].Unmap() // LookupNetIP returns an error rather than no address
	}
	local, err := localaddr.Pick(f.o.LocalAddrs, ip)
	if err != nil {
		return nil, fmt.Errorf("fetcher: dial proxy %s: %w", addr, err)
	}
	bound := f.dialer // a copy: the shared dialer is read by every worker
	bound.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0))
	return bound.DialContext(dctx, "tcp", net.JoinHostPort(ip.String(), port))
}
