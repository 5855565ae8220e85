package site

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"golang.org/x/net/http/httpproxy"
)

// checkProxy reports what is wrong with a --proxy value: "" (none),
// "env", or an http:// URL with a host.
func checkProxy(v string) error {
	if v == "" || v == "env" {
		return nil
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http":
		return fmt.Errorf("want an http:// proxy URL (HTTP CONNECT carries https), or env, got scheme %q", u.Scheme)
	case u.Host == "":
		return errors.New("the URL has no host")
	case u.Path != "" && u.Path != "/" || u.RawQuery != "":
		return errors.New("a proxy URL has no path or query")
	}
	return nil
}

// proxyFunc returns the fetcher's proxy choice for a --proxy value: nil
// for "", the environment's HTTPS_PROXY and HTTP_PROXY for "env", or the
// URL for both schemes; NO_PROXY from the environment (getenv) applies
// in every case, as curl and net/http read it.
func proxyFunc(v string, getenv func(string) string) (func(*url.URL) (*url.URL, error), error) {
	if err := checkProxy(v); err != nil {
		return nil, err
	}
	env := func(names ...string) string {
		for _, n := range names {
			if s := getenv(n); s != "" {
				return s
			}
		}
		return ""
	}
	c := httpproxy.Config{NoProxy: env("NO_PROXY", "no_proxy")}
	switch v {
	case "":
		return nil, nil
	case "env":
		c.HTTPProxy, c.HTTPSProxy = env("HTTP_PROXY", "http_proxy"), env("HTTPS_PROXY", "https_proxy")
		if c.HTTPProxy == "" && c.HTTPSProxy == "" {
			return nil, errors.New("env: neither HTTPS_PROXY nor HTTP_PROXY is set")
		}
		for _, p := range []string{c.HTTPProxy, c.HTTPSProxy} {
			if p == "" {
				continue
			}
			if err := checkProxy(p); err != nil {
				return nil, fmt.Errorf("env: %q: %w", p, err)
			}
		}
	default:
		c.HTTPProxy, c.HTTPSProxy = v, v
	}
	return c.ProxyFunc(), nil
}

// tlsRoots returns the system's certificate authorities and those of the
// PEM file path (nil, nil for "": the fetcher uses the system's).
func tlsRoots(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// validToken reports whether s is a robots.txt product token: letters,
// '-' and '_'.
func validToken(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_") == ""
}
