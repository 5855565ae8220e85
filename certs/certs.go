// Package certs makes and loads the certificates of a Meridian deployment:
// one certificate authority per deployment, and one certificate per site
// (later, per node) signed by it, for mutual TLS 1.3 between sites.
//
// A directory of certificates holds:
//
//	ca.pem          the CA certificate (every site needs it)
//	ca-key.pem      the CA's private key (only where certificates are made)
//	SITE.pem        a site's certificate, for both server and client auth
//	SITE-key.pem    its private key
//
// A certificate says who it speaks for with one URI SAN,
// meridian://site/SITE (and, for issue 14, meridian://node/SITE/NODE); see
// Identity. It also carries the DNS SAN SITE and the IP SANs 127.0.0.1 and
// ::1, so that plain hostname verification works on loopback and against the
// site's name. Private keys are ECDSA P-256 in PKCS #8, written 0600.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Errors of this package; the ones returned are wrapped with context.
var (
	// ErrExists is returned by Init and IssueSite rather than overwrite a file.
	ErrExists = errors.New("certs: already exists")
	// ErrInvalidName is returned for a site or node name that is not 1 to 63
	// lower-case letters, digits and inner hyphens, or that is reserved.
	ErrInvalidName = errors.New("certs: invalid name")
	// ErrIdentity is returned when a certificate or URI names no valid
	// Meridian identity, or the wrong one.
	ErrIdentity = errors.New("certs: no valid identity")
	// ErrInvalid is returned when a file holds no usable certificate or key.
	ErrInvalid = errors.New("certs: invalid certificate or key")
)

// File names inside a certificate directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// Validity periods of what Init and IssueSite make.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 2 * 365 * 24 * time.Hour
	// clockSkew backdates NotBefore so that peers whose clocks lag a little
	// accept a fresh certificate.
	clockSkew = time.Hour
)

// ValidateName reports whether name can name a site or a node: 1 to 63
// characters, lower-case ASCII letters, digits and '-', neither first nor
// last a '-' (a DNS label, since a site's name is also its DNS SAN). The names
// "ca" and any name ending in "-key" are reserved: their files would collide
// with the CA's or with another site's key.
func ValidateName(name string) error {
	if len(name) == 0 || len(name) > 63 {
		return fmt.Errorf("%w: %q: want 1 to 63 characters, got %d", ErrInvalidName, name, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("%w: %q: character %q at %d (want lower-case letters, digits and '-')", ErrInvalidName, name, c, i)
		}
	}
	if name[0] == '-' || name[len(name)-1] == '-' {
		return fmt.Errorf("%w: %q: must not begin or end with '-'", ErrInvalidName, name)
	}
	if name == "ca" || len(name) >= 4 && name[len(name)-4:] == "-key" {
		return fmt.Errorf("%w: %q is reserved (its files would collide with ca.pem or another name's key)", ErrInvalidName, name)
	}
	return nil
}

// PairFiles returns the paths of id's certificate and key in dir:
// SITE.pem and SITE-key.pem for a site, SITE.NODE.pem and SITE.NODE-key.pem
// for a node (names hold no '.', so the two never collide).
func PairFiles(dir string, id Identity) (certFile, keyFile string) {
	base := id.Site
	if id.Role == RoleNode {
		base += "." + id.Node
	}
	return filepath.Join(dir, base+".pem"), filepath.Join(dir, base+"-key.pem")
}

// Init makes the deployment's certificate authority: dir/ca.pem and
// dir/ca-key.pem (0600), creating dir (0700) if needed. It refuses, with an
// error wrapping ErrExists, if either file is already there: a new CA would
// orphan every certificate the old one signed.
func Init(dir string) error {
	certFile, keyFile := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs: init: %w", err)
	}
	for _, p := range []string{certFile, keyFile} {
		if err := absent(p); err != nil {
			return fmt.Errorf("certs: init: refusing to overwrite the CA: %w", err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: init: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return fmt.Errorf("certs: init: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Meridian deployment CA", Organization: []string{"Meridian"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true, // the CA signs leaves only
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("certs: init: sign CA: %w", err)
	}
	return writePair(certFile, keyFile, der, key)
}

// IssueSite makes site's certificate and key, dir/SITE.pem and
// dir/SITE-key.pem (0600), signed by the CA in dir (see Init). The
// certificate is good for both server and client authentication and names
// meridian://site/SITE (URI SAN), SITE (DNS SAN and CommonName), 127.0.0.1
// and ::1 (IP SANs). It refuses, with an error wrapping ErrExists, to
// overwrite an existing pair: remove both files to issue a new one.
func IssueSite(dir, site string) error {
	return issue(dir, SiteIdentity(site))
}

// issue makes id's pair in dir; it is where issue 14's nodes come in.
func issue(dir string, id Identity) error {
	if err := id.Validate(); err != nil {
		return fmt.Errorf("certs: issue: %w", err)
	}
	certFile, keyFile := PairFiles(dir, id)
	for _, p := range []string{certFile, keyFile} {
		if err := absent(p); err != nil {
			return fmt.Errorf("certs: issue %s: %w", id, err)
		}
	}
	ca, caKey, err := loadCAKey(dir)
	if err != nil {
		return fmt.Errorf("certs: issue %s: %w", id, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: issue %s: generate key: %w", id, err)
	}
	serial, err := newSerial()
	if err != nil {
		return fmt.Errorf("certs: issue %s: %w", id, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         id.Site,
			Organization:       []string{"Meridian"},
			OrganizationalUnit: []string{id.Role},
		},
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(LeafValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{id.URI()},
		DNSNames:    []string{id.Site},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if id.Role == RoleNode {
		tmpl.Subject.CommonName = id.Site + "." + id.Node
		tmpl.DNSNames = []string{id.Node + "." + id.Site}
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter // a leaf cannot outlive its CA
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: issue %s: sign: %w", id, err)
	}
	return writePair(certFile, keyFile, der, key)
}

// Load returns the TLS configurations of site from dir: server, which
// presents dir/SITE.pem and requires and verifies a client certificate
// signed by dir/ca.pem, and client, which presents the same certificate and
// verifies servers against dir/ca.pem. Both allow TLS 1.3 only. Load needs
// ca.pem and the site's pair, never ca-key.pem, and checks that the pair
// matches, chains to the CA, is valid now, and names meridian://site/SITE.
// Errors name the file at fault.
//
// The client configuration leaves ServerName empty: the caller sets it (the
// federation client sets it to the peer's site name, its DNS SAN).
func Load(dir, site string) (server, client *tls.Config, err error) {
	return load(dir, SiteIdentity(site))
}

func load(dir string, id Identity) (*tls.Config, *tls.Config, error) {
	if err := id.Validate(); err != nil {
		return nil, nil, fmt.Errorf("certs: load: %w", err)
	}
	pool, err := loadCAPool(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: load %s: %w", id, err)
	}
	certFile, keyFile := PairFiles(dir, id)
	pair, err := loadPair(certFile, keyFile, id)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: load %s: %w", id, err)
	}
	leaf := pair.Leaf
	for _, ku := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{ku}}); err != nil {
			return nil, nil, fmt.Errorf("certs: load %s: %s: %w: does not verify against %s: %w", id, certFile, ErrInvalid, filepath.Join(dir, CAFile), err)
		}
	}
	got, err := CertIdentity(leaf)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: load %s: %s: %w", id, certFile, err)
	}
	if got != id {
		return nil, nil, fmt.Errorf("certs: load %s: %s: %w: it names %s", id, certFile, ErrIdentity, got)
	}
	server := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	client := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
	}
	return server, client, nil
}

// loadCAPool reads dir/ca.pem: one or more CA certificates.
func loadCAPool(dir string) (*x509.CertPool, error) {
	path := filepath.Join(dir, CAFile)
	certs, err := readCerts(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for i, c := range certs {
		if !c.IsCA || !c.BasicConstraintsValid {
			return nil, fmt.Errorf("%s: %w: certificate %d (%q) is not a CA", path, ErrInvalid, i, c.Subject.CommonName)
		}
		pool.AddCert(c)
	}
	return pool, nil
}

// loadCAKey reads the CA's certificate and key, to sign with.
func loadCAKey(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certFile, keyFile := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	certs, err := readCerts(certFile)
	if err != nil {
		return nil, nil, err
	}
	ca := certs[0]
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("%s: %w: not a CA certificate", certFile, ErrInvalid)
	}
	key, err := readKey(keyFile)
	if err != nil {
		return nil, nil, err
	}
	ek, ok := key.(*ecdsa.PrivateKey)
	if !ok || !ek.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("%s: %w: not the key of %s", keyFile, ErrInvalid, certFile)
	}
	return ca, ek, nil
}

// loadPair reads a certificate and its key, naming the file at fault.
func loadPair(certFile, keyFile string, id Identity) (tls.Certificate, error) {
	certs, err := readCerts(certFile)
	if err != nil {
		return tls.Certificate{}, hint(err, id)
	}
	key, err := readKey(keyFile)
	if err != nil {
		return tls.Certificate{}, hint(err, id)
	}
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return tls.Certificate{}, fmt.Errorf("%s: %w: unsupported key type %T", keyFile, ErrInvalid, key)
	}
	if eq, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(certs[0].PublicKey) {
		return tls.Certificate{}, fmt.Errorf("%s: %w: not the key of %s", keyFile, ErrInvalid, certFile)
	}
	pair := tls.Certificate{PrivateKey: key, Leaf: certs[0]}
	for _, c := range certs {
		pair.Certificate = append(pair.Certificate, c.Raw)
	}
	return pair, nil
}

// hint adds how to make a missing pair.
func hint(err error, id Identity) error {
	if errors.Is(err, fs.ErrNotExist) && id.Role == RoleSite {
		return fmt.Errorf("%w (make it with `site certs --dir DIR --sites %s`)", err, id.Site)
	}
	return err
}

// readCerts reads the CERTIFICATE blocks of a PEM file; there must be one.
func readCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *fs.PathError names the file
	}
	var certs []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: certificate %d: %w", path, ErrInvalid, len(certs), err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: %w: no PEM CERTIFICATE block", path, ErrInvalid)
	}
	return certs, nil
}

// readKey reads the first private key block of a PEM file.
func readKey(path string) (crypto.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%s: %w: no PEM PRIVATE KEY block", path, ErrInvalid)
		}
		var key crypto.PrivateKey
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", path, ErrInvalid, err)
		}
		return key, nil
	}
}

// writePair writes a key (0600) then its certificate (0644); if the second
// write fails the first file is removed, so a pair is never half made.
func writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: marshal key: %w", err)
	}
	if err := writeNew(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	if err := writeNew(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		os.Remove(keyFile)
		return err
	}
	return nil
}

// writeNew creates path with data, failing if it exists.
func writeNew(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("certs: %s: %w", path, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	return nil
}

// absent returns an error wrapping ErrExists if path exists.
func absent(path string) error {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return fmt.Errorf("%s: %w", path, ErrExists)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return err
	}
}

// newSerial returns a random 128-bit serial number.
func newSerial() (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	b[0] &= 0x7f // positive
	s := new(big.Int).SetBytes(b)
	if s.Sign() == 0 {
		s.SetInt64(1)
	}
	return s, nil
}
