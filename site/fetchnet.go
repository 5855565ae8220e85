package site

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/meridian-crawler/meridian/fetcher"
)

// proxyFunc returns the fetcher's proxy choice for a --proxy value: nil
// for "", the environment's HTTPS_PROXY and HTTP_PROXY for "env", or the
// URL for both schemes; NO_PROXY from the environment applies to both
// (fetcher.ProxyFunc).
func proxyFunc(v string) (func(*url.URL) (*url.URL, error), error) {
	switch v {
	case "":
		return nil, nil
	case "env":
		f, err := fetcher.ProxyFunc("", true)
		if err == nil && f == nil {
			err = errors.New("env: neither HTTPS_PROXY nor HTTP_PROXY is set")
		}
		return f, err
	}
	return fetcher.ProxyFunc(v, true)
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
