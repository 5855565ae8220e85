package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// TLS is one identity's mutual-TLS material from a certificate directory:
// its pair, the deployment's CA, and the revocation list, which it reads
// again when the file changes (at most once a second, when it verifies a
// peer). A TLS starts no goroutine and needs no closing; it is safe for
// concurrent use.
type TLS struct {
	id   Identity
	pair tls.Certificate
	v    *verifier
}

// LoadNode loads the mutual-TLS material of node of site from dir:
// dir/ca.pem, dir/SITE.NODE.pem and its key, and dir/crl.pem if there is
// one. It checks what Load checks: the pair matches, chains to the CA, is
// valid now, names meridian://node/SITE/NODE, and is not revoked. Errors
// name the file at fault. It never needs ca-key.pem.
//
// The pair is checked when it is loaded: a process whose own certificate
// is revoked or expires later keeps presenting it, and its peers refuse it.
func LoadNode(dir, site, node string) (*TLS, error) {
	return loadMaterial(dir, NodeIdentity(site, node))
}

// LoadSite is LoadNode for site's own pair, dir/SITE.pem: for the
// federation between sites.
func LoadSite(dir, site string) (*TLS, error) {
	return loadMaterial(dir, SiteIdentity(site))
}

// Identity returns the identity whose pair t presents.
func (t *TLS) Identity() Identity { return t.id }

// Server returns a TLS 1.3-only server configuration that presents t's
// pair and requires a client certificate that chains to the deployment's
// CA, is valid now, is not revoked, and names an identity that allow
// accepts (see AllowNodesOf and AllowSites; allow must not be nil).
// Otherwise the handshake fails with an error that names the peer's
// identity (if its certificate names one) and why, wrapping ErrInvalid,
// ErrRevoked or ErrIdentity; a client with no certificate at all fails in
// crypto/tls ("client didn't provide a certificate").
//
// The verification is this package's own, done in VerifyPeerCertificate
// (and in VerifyConnection for a resumed session), so that its errors can
// say who and why: ClientAuth is tls.RequireAnyClientCert and the
// connection's VerifiedChains stay empty. Use t.PeerIdentity, not the
// package's PeerIdentity, to learn who connected. A clone must keep both
// callbacks; to accept fewer peers, narrow allow instead.
//
// Session tickets are off, so that every connection makes a full
// handshake in which the client presents its certificate and proves it
// holds the key. A resumed session skips VerifyPeerCertificate and would be
// checked only by VerifyConnection, against the certificate remembered in
// the ticket: a clone that replaced VerifyConnection would let a
// certificate revoked since the ticket was issued back in.
func (t *TLS) Server(allow func(Identity) error) *tls.Config {
	if allow == nil {
		panic("certs: TLS.Server: nil allow (use AllowNodesOf or AllowSites)")
	}
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{t.pair},
		ClientAuth:             tls.RequireAnyClientCert,
		VerifyPeerCertificate:  t.v.verifyRaw(x509.ExtKeyUsageClientAuth, allow),
		VerifyConnection:       t.v.verifyResumed(x509.ExtKeyUsageClientAuth, allow),
		SessionTicketsDisabled: true,
	}
}

// Client returns a TLS 1.3-only client configuration that presents t's
// pair and verifies the server as Server verifies clients: its certificate
// must chain to the deployment's CA, be valid now, not be revoked, and name
// an identity that allow accepts (allow must not be nil).
//
// The identity check replaces hostname verification: nodes are dialled by
// IP:port, and their certificates carry only loopback IP SANs. So
// InsecureSkipVerify is set, and the chain is verified in
// VerifyPeerCertificate (and, for a resumed session, VerifyConnection)
// instead: a clone must keep both callbacks, and must not clear
// InsecureSkipVerify (crypto/tls would then also check the ServerName).
// ServerName is left empty; set it for SNI if you like, it is not checked.
// The configuration has no ClientSessionCache, so it never resumes a
// session. As with Server, VerifiedChains stay empty: use t.PeerIdentity.
func (t *TLS) Client(allow func(Identity) error) *tls.Config {
	if allow == nil {
		panic("certs: TLS.Client: nil allow (use AllowNodesOf or AllowSites)")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{t.pair},
		// Not insecure: VerifyPeerCertificate verifies the chain and the
		// identity, in place of the hostname.
		InsecureSkipVerify:    true,
		VerifyPeerCertificate: t.v.verifyRaw(x509.ExtKeyUsageServerAuth, allow),
		VerifyConnection:      t.v.verifyResumed(x509.ExtKeyUsageServerAuth, allow),
	}
}

// PeerIdentity returns the identity of the other end of a connection made
// with t's Server or Client configuration (or any connection whose peer
// presented a certificate): it verifies the peer's certificate again, as
// they do (chain to the CA, valid now, not revoked; not the allow
// function), and returns the identity it names. It costs a signature
// check: call it once per connection, not once per request.
func (t *TLS) PeerIdentity(cs tls.ConnectionState) (Identity, error) {
	return t.v.verify(cs.PeerCertificates, x509.ExtKeyUsageAny, nil)
}

// AllowNodesOf returns an allow function for TLS.Server and TLS.Client
// that accepts the nodes of site and nothing else: not another site's
// nodes, and not a site's certificate. Its errors wrap ErrIdentity.
func AllowNodesOf(site string) func(Identity) error {
	return func(id Identity) error {
		if id.Role != RoleNode || id.Site != site {
			return because(fmt.Sprintf("%s, want a node of site %s", describe(id), site), ErrIdentity)
		}
		return nil
	}
}

// AllowSites returns an allow function for TLS.Server and TLS.Client that
// accepts any site's certificate except except's (a site's federation
// peers are the other sites; "" excepts none), and no node's. Its errors
// wrap ErrIdentity.
func AllowSites(except string) func(Identity) error {
	return func(id Identity) error {
		switch {
		case id.Role != RoleSite && except == "":
			return because(fmt.Sprintf("%s, want a site", describe(id)), ErrIdentity)
		case id.Role != RoleSite:
			return because(fmt.Sprintf("%s, want a site other than %s", describe(id), except), ErrIdentity)
		case id.Site == except:
			return because(fmt.Sprintf("site %s itself, want another site", id.Site), ErrIdentity)
		}
		return nil
	}
}

// describe says what id is, for errors.
func describe(id Identity) string {
	if id.Role == RoleNode {
		return "a node of site " + id.Site
	}
	return "site " + id.Site
}

// verifier verifies peers' certificates for a TLS.
type verifier struct {
	caFile string         // where roots came from, for errors
	roots  *x509.CertPool // the deployment's CA
	crl    *crlWatch
	now    func() time.Time // time.Now; tests move it
}

// verifyRaw returns a VerifyPeerCertificate callback: certificates of a
// full handshake.
func (v *verifier) verifyRaw(usage x509.ExtKeyUsage, allow func(Identity) error) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		certs := make([]*x509.Certificate, 0, len(raw))
		for i, b := range raw {
			c, err := x509.ParseCertificate(b)
			if err != nil {
				return refuse("", fmt.Sprintf("its certificate %d does not parse: %v", i, err), ErrInvalid, err)
			}
			certs = append(certs, c)
		}
		_, err := v.verify(certs, usage, allow)
		return err
	}
}

// verifyResumed returns a VerifyConnection callback that checks resumed
// sessions (which skip VerifyPeerCertificate) the same way.
func (v *verifier) verifyResumed(usage x509.ExtKeyUsage, allow func(Identity) error) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if !cs.DidResume {
			return nil // VerifyPeerCertificate did it
		}
		_, err := v.verify(cs.PeerCertificates, usage, allow)
		return err
	}
}

// verify checks a peer's certificates (leaf first) for usage and returns
// the identity the leaf names. A nil allow accepts every identity.
func (v *verifier) verify(certs []*x509.Certificate, usage x509.ExtKeyUsage, allow func(Identity) error) (Identity, error) {
	if len(certs) == 0 {
		return Identity{}, refuse("", "it presented no certificate", ErrIdentity)
	}
	leaf := certs[0]
	who := certName(leaf)
	now := v.now()
	opts := x509.VerifyOptions{Roots: v.roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}
	if len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	if _, err := leaf.Verify(opts); err != nil {
		return Identity{}, refuse(who, fmt.Sprintf("its certificate does not verify against %s: %v", v.caFile, err), ErrInvalid, err)
	}
	id, err := CertIdentity(leaf)
	if err != nil {
		return Identity{}, refuse(who, err.Error(), err)
	}
	if err := v.crl.check(now, leaf); err != nil {
		return Identity{}, refuse(who, err.Error(), err)
	}
	if allow != nil {
		if err := allow(id); err != nil {
			errs := []error{err}
			if !errors.Is(err, ErrIdentity) {
				errs = append(errs, ErrIdentity)
			}
			return Identity{}, refuse(who, err.Error(), errs...)
		}
	}
	return id, nil
}

// certName names a certificate's holder for errors: the identity it claims
// (verified or not), or its CommonName.
func certName(c *x509.Certificate) string {
	if id, err := CertIdentity(c); err == nil {
		return id.String()
	}
	return fmt.Sprintf("with certificate %q", c.Subject.CommonName)
}

// refuse returns the error for a refused peer: "certs: peer WHO refused:
// WHY", wrapping errs.
func refuse(who, why string, errs ...error) error {
	if who != "" {
		who += " "
	}
	return because("certs: peer "+who+"refused: "+why, errs...)
}

// reason is an error that reads as msg and wraps errs, so that a message
// can say what happened in its own words and still match a sentinel.
type reason struct {
	msg  string
	errs []error
}

func because(msg string, errs ...error) error { return &reason{msg: msg, errs: errs} }

func (r *reason) Error() string   { return r.msg }
func (r *reason) Unwrap() []error { return r.errs }
