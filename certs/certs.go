// Package certs makes and loads the certificates of a Meridian deployment:
// one certificate authority per deployment, one certificate per site, for
// mutual TLS 1.3 between sites (the federation), and one per node, for
// mutual TLS 1.3 between the nodes of a site (Raft, the crawl database's API
// and the nodes' calls to each other).
//
// A directory of certificates holds:
//
//	ca.pem             the CA certificate (every site and node needs it)
//	ca-key.pem         the CA's private key (only where certificates are made)
//	SITE.pem           a site's certificate, for both server and client auth
//	SITE-key.pem       its private key
//	SITE.NODE.pem      a node's certificate, for both server and client auth
//	SITE.NODE-key.pem  its private key
//	crl.pem            the revoked certificates, signed by the CA (see Revoke)
//
// A certificate says who it speaks for with one URI SAN,
// meridian://site/SITE or meridian://node/SITE/NODE; see Identity. A site's
// certificate also carries the DNS SAN SITE, a node's NODE.SITE, and both
// the IP SANs 127.0.0.1 and ::1, so that plain hostname verification works
// on loopback and against a site's name. Private keys are ECDSA P-256 in
// PKCS #8, written 0600.
//
// Load gives a site the crypto/tls configurations the federation uses, which
// verify peers against the CA (and crl.pem) and leave the identity check to
// the caller. LoadNode and LoadSite give a TLS, whose Server and Client
// configurations also check the peer's identity (AllowNodesOf, AllowSites),
// and whose verification picks up a crl.pem that changes while the process
// runs.
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
	// ErrExists is returned by Init, IssueSite, IssueNode and Issue rather
	// than overwrite a file.
	ErrExists = errors.New("certs: already exists")
	// ErrInvalidName is returned for a site or node name that is not 1 to 63
	// lower-case letters, digits and inner hyphens, or that is reserved.
	ErrInvalidName = errors.New("certs: invalid name")
	// ErrIdentity is returned when a certificate or URI names no valid
	// Meridian identity, or the wrong one.
	ErrIdentity = errors.New("certs: no valid identity")
	// ErrInvalid is returned when a file holds no usable certificate or key.
	ErrInvalid = errors.New("certs: invalid certificate or key")
	// ErrRevoked is returned when a certificate is listed in crl.pem.
	ErrRevoked = errors.New("certs: revoked")
)

// File names inside a certificate directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
	// CRLFile is the deployment's certificate revocation list, signed by
	// the CA; see Revoke.
	CRLFile = "crl.pem"
)

// Validity periods of what Init and IssueSite make (and Issue, by default).
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
// overwrite an existing pair: see Replace to issue a new one.
func IssueSite(dir, site string) error {
	return issue(dir, SiteIdentity(site), IssueOptions{}, false)
}

// IssueNode makes the certificate and key of node of site,
// dir/SITE.NODE.pem and dir/SITE.NODE-key.pem (0600), signed by the CA in
// dir. The certificate is good for both server and client authentication
// and names meridian://node/SITE/NODE (URI SAN), NODE.SITE (DNS SAN),
// 127.0.0.1 and ::1 (IP SANs); its CommonName is SITE.NODE. Like IssueSite
// it refuses, with an error wrapping ErrExists, to overwrite a pair.
func IssueNode(dir, site, node string) error {
	return issue(dir, NodeIdentity(site, node), IssueOptions{}, false)
}

// IssueOptions are the validity period of a certificate that Issue or
// Replace makes. The zero value gives the defaults.
type IssueOptions struct {
	// NotBefore is when the certificate becomes valid. Zero: an hour ago
	// (so that peers whose clocks lag a little accept it), or LeafValidity
	// before NotAfter if NotAfter is earlier than that.
	NotBefore time.Time
	// NotAfter is when it expires. Zero: LeafValidity from now, or when the
	// CA expires if that is sooner. It must be after NotBefore and not after
	// the CA's own NotAfter (a leaf cannot outlive its CA). A NotAfter in
	// the past makes an expired certificate, for tests.
	NotAfter time.Time
}

// Issue makes id's certificate and key in dir (see PairFiles), signed by
// the CA in dir, valid as o says; IssueSite and IssueNode are Issue with the
// zero IssueOptions. It refuses, with an error wrapping ErrExists, to
// overwrite either file of the pair.
func Issue(dir string, id Identity, o IssueOptions) error {
	return issue(dir, id, o, false)
}

// Replace issues a new pair for id, whose certificate must already be in
// dir: a new key and a new serial number, valid as o says, signed by the CA
// in dir. This is how a pair is rotated. Each file is written to a
// temporary file in dir and renamed over the old one, key first, so neither
// is ever half written; a crash between the two renames leaves the new key
// beside the old certificate, which Load reports ("not the key of"), and
// calling Replace again mends it.
//
// The old certificate is not revoked: peers accept it until it expires.
// To retire it, Revoke id before Replace (Revoke lists id's current
// certificate). A running process keeps presenting the pair it loaded; it
// presents the new one once it loads it again (restart it).
func Replace(dir string, id Identity, o IssueOptions) error {
	return issue(dir, id, o, true)
}

// issue makes id's pair in dir; replace says whether to replace an existing
// one (Replace) or to refuse to (Issue).
func issue(dir string, id Identity, o IssueOptions, replace bool) error {
	op := "issue"
	if replace {
		op = "replace"
	}
	if err := id.Validate(); err != nil {
		return fmt.Errorf("certs: %s: %w", op, err)
	}
	certFile, keyFile := PairFiles(dir, id)
	if replace {
		if _, err := os.Stat(certFile); err != nil {
			return fmt.Errorf("certs: replace %s: %w (nothing to replace: issue a pair first)", id, err)
		}
	} else {
		for _, p := range []string{certFile, keyFile} {
			if err := absent(p); err != nil {
				return fmt.Errorf("certs: issue %s: %w", id, err)
			}
		}
	}
	ca, caKey, err := loadCAKey(dir)
	if err != nil {
		return fmt.Errorf("certs: %s %s: %w", op, id, err)
	}
	notBefore, notAfter, err := o.period(time.Now(), ca)
	if err != nil {
		return fmt.Errorf("certs: %s %s: %w", op, id, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: %s %s: generate key: %w", op, id, err)
	}
	serial, err := newSerial()
	if err != nil {
		return fmt.Errorf("certs: %s %s: %w", op, id, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         id.Site,
			Organization:       []string{"Meridian"},
			OrganizationalUnit: []string{id.Role},
		},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: %s %s: sign: %w", op, id, err)
	}
	if replace {
		return replacePair(certFile, keyFile, der, key)
	}
	return writePair(certFile, keyFile, der, key)
}

// period returns the validity period o asks for, at now, under ca.
func (o IssueOptions) period(now time.Time, ca *x509.Certificate) (notBefore, notAfter time.Time, err error) {
	notBefore, notAfter = o.NotBefore, o.NotAfter
	if notAfter.IsZero() {
		notAfter = now.Add(LeafValidity)
		if notAfter.After(ca.NotAfter) {
			notAfter = ca.NotAfter // a leaf cannot outlive its CA
		}
	}
	if notBefore.IsZero() {
		notBefore = now.Add(-clockSkew)
		if !notAfter.After(notBefore) {
			notBefore = notAfter.Add(-LeafValidity)
		}
	}
	var errs []error
	if !notAfter.After(notBefore) {
		errs = append(errs, fmt.Errorf("NotAfter %s is not after NotBefore %s", notAfter.UTC().Format(time.RFC3339), notBefore.UTC().Format(time.RFC3339)))
	}
	if notAfter.After(ca.NotAfter) {
		errs = append(errs, fmt.Errorf("NotAfter %s is after the CA's, %s", notAfter.UTC().Format(time.RFC3339), ca.NotAfter.UTC().Format(time.RFC3339)))
	}
	return notBefore, notAfter, errors.Join(errs...)
}

// ReadCertificate returns id's certificate from dir (see PairFiles),
// without its key and without verifying it: to report on it, or to see
// which certificate Revoke would list.
func ReadCertificate(dir string, id Identity) (*x509.Certificate, error) {
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("certs: read: %w", err)
	}
	certFile, _ := PairFiles(dir, id)
	certs, err := readCerts(certFile)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", id, hint(err, id))
	}
	return certs[0], nil
}

// Load returns the TLS configurations of site from dir: server, which
// presents dir/SITE.pem and requires and verifies a client certificate
// signed by dir/ca.pem, and client, which presents the same certificate and
// verifies servers against dir/ca.pem. Both allow TLS 1.3 only. Load needs
// ca.pem and the site's pair, never ca-key.pem, and checks that the pair
// matches, chains to the CA, is valid now, names meridian://site/SITE, and
// is not listed in dir/crl.pem (if there is one). Errors name the file at
// fault.
//
// Both configurations also refuse a peer whose certificate dir/crl.pem
// lists, picking up a crl.pem that appears or changes while they are in use
// (see TLS), in a VerifyPeerCertificate callback: keep it if you clone
// them. The server's session tickets are off, so that a revoked certificate
// cannot come back on a resumed session. Which identities to accept is the
// caller's business (see PeerIdentity); LoadSite with TLS.Server and
// TLS.Client does that too.
//
// The client configuration leaves ServerName empty: the caller sets it (the
// federation client sets it to the peer's site name, its DNS SAN).
func Load(dir, site string) (server, client *tls.Config, err error) {
	m, err := loadMaterial(dir, SiteIdentity(site))
	if err != nil {
		return nil, nil, err
	}
	notRevoked := func(raw [][]byte, chains [][]*x509.Certificate) error {
		var leaf *x509.Certificate
		switch {
		case len(chains) > 0 && len(chains[0]) > 0:
			leaf = chains[0][0]
		case len(raw) > 0:
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return refuse("", "its certificate does not parse: "+err.Error(), ErrInvalid, err)
			}
			leaf = c
		default:
			return nil // crypto/tls decides about a missing certificate
		}
		if err := m.v.crl.check(m.v.now(), leaf); err != nil {
			return refuse(certName(leaf), err.Error(), err)
		}
		return nil
	}
	server = &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{m.pair},
		ClientAuth:             tls.RequireAndVerifyClientCert,
		ClientCAs:              m.v.roots,
		VerifyPeerCertificate:  notRevoked,
		SessionTicketsDisabled: true,
	}
	client = &tls.Config{
		MinVersion:            tls.VersionTLS13,
		Certificates:          []tls.Certificate{m.pair},
		RootCAs:               m.v.roots,
		VerifyPeerCertificate: notRevoked,
	}
	return server, client, nil
}

// loadMaterial reads and checks id's pair in dir, the CA it chains to and
// the revocation list, and returns them as a TLS.
func loadMaterial(dir string, id Identity) (*TLS, error) {
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("certs: load: %w", err)
	}
	cas, pool, err := loadCAs(dir)
	if err != nil {
		return nil, fmt.Errorf("certs: load %s: %w", id, err)
	}
	certFile, keyFile := PairFiles(dir, id)
	pair, err := loadPair(certFile, keyFile, id)
	if err != nil {
		return nil, fmt.Errorf("certs: load %s: %w", id, err)
	}
	leaf := pair.Leaf
	for _, ku := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{ku}}); err != nil {
			return nil, fmt.Errorf("certs: load %s: %s: %w: does not verify against %s: %w", id, certFile, ErrInvalid, filepath.Join(dir, CAFile), err)
		}
	}
	got, err := CertIdentity(leaf)
	if err != nil {
		return nil, fmt.Errorf("certs: load %s: %s: %w", id, certFile, err)
	}
	if got != id {
		return nil, fmt.Errorf("certs: load %s: %s: %w: it names %s", id, certFile, ErrIdentity, got)
	}
	v := &verifier{
		caFile: filepath.Join(dir, CAFile),
		roots:  pool,
		crl:    &crlWatch{path: filepath.Join(dir, CRLFile), cas: cas},
		now:    time.Now,
	}
	if err := v.crl.check(v.now(), leaf); err != nil {
		return nil, fmt.Errorf("certs: load %s: %s: %w", id, certFile, err)
	}
	return &TLS{id: id, pair: pair, v: v}, nil
}

// loadCAs reads dir/ca.pem: one or more CA certificates.
func loadCAs(dir string) ([]*x509.Certificate, *x509.CertPool, error) {
	path := filepath.Join(dir, CAFile)
	certs, err := readCerts(path)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	for i, c := range certs {
		if !c.IsCA || !c.BasicConstraintsValid {
			return nil, nil, fmt.Errorf("%s: %w: certificate %d (%q) is not a CA", path, ErrInvalid, i, c.Subject.CommonName)
		}
		pool.AddCert(c)
	}
	return certs, pool, nil
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
	switch {
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case id.Role == RoleSite:
		return fmt.Errorf("%w (make it with `site certs --dir DIR --sites %s`)", err, id.Site)
	default:
		return fmt.Errorf("%w (make it with `site certs --dir DIR --nodes %s/%s`)", err, id.Site, id.Node)
	}
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
	if err := finish(f, data); err != nil {
		os.Remove(path)
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	return nil
}

// finish writes data to the new file f, syncs and closes it.
func finish(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replacePair writes a new key and certificate over an existing pair: both
// to temporary files first, then renamed into place, key first.
func replacePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: marshal key: %w", err)
	}
	keyTmp, err := writeTemp(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	if err != nil {
		return err
	}
	certTmp, err := writeTemp(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	if err != nil {
		os.Remove(keyTmp)
		return err
	}
	if err := os.Rename(keyTmp, keyFile); err != nil {
		os.Remove(keyTmp)
		os.Remove(certTmp)
		return fmt.Errorf("certs: %w", err)
	}
	if err := os.Rename(certTmp, certFile); err != nil {
		os.Remove(certTmp)
		return fmt.Errorf("certs: %w (%s now holds the new key and %s the old certificate: replace the pair again)", err, keyFile, certFile)
	}
	return syncDir(filepath.Dir(certFile))
}

// writeAtomic replaces path with data: written to a temporary file in the
// same directory, synced, and renamed over path, so that readers see the
// old file or the new one, never part of one.
func writeAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("certs: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// writeTemp writes data to a new temporary file beside path (a dot file:
// names hold no dot, so it collides with nothing) with mode perm, synced,
// and returns its name.
func writeTemp(path string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("certs: %w", err)
	}
	if err = f.Chmod(perm); err != nil {
		f.Close()
	} else {
		err = finish(f, data)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("certs: write %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("certs: sync %s: %w", dir, err)
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
