package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// Roles a certificate can name. A site's certificate authenticates the site
// to other sites (the federation); a node's certificate authenticates one
// node to the other nodes of its own site.
const (
	RoleSite = "site"
	RoleNode = "node"
)

// URIScheme is the scheme of the URI SAN that carries a Meridian identity:
// meridian://site/SITE for a site, meridian://node/SITE/NODE for a node.
const URIScheme = "meridian"

// Identity is who a certificate speaks for: a whole site, or one node of a
// site. It travels in the certificate as exactly one URI SAN with the
// scheme "meridian".
type Identity struct {
	Role string // RoleSite or RoleNode
	Site string // the site's name
	Node string // the node's name; empty for RoleSite
}

// SiteIdentity returns the identity of site.
func SiteIdentity(site string) Identity { return Identity{Role: RoleSite, Site: site} }

// NodeIdentity returns the identity of node, a node of site.
func NodeIdentity(site, node string) Identity {
	return Identity{Role: RoleNode, Site: site, Node: node}
}

// Validate reports whether id is well formed: a known role, valid names,
// and a node name exactly when the role is RoleNode.
func (id Identity) Validate() error {
	switch id.Role {
	case RoleSite:
		if id.Node != "" {
			return fmt.Errorf("%w: a site identity names no node (got node %q)", ErrIdentity, id.Node)
		}
	case RoleNode:
		if err := ValidateName(id.Node); err != nil {
			return fmt.Errorf("%w: node: %w", ErrIdentity, err)
		}
	default:
		return fmt.Errorf("%w: unknown role %q (want %q or %q)", ErrIdentity, id.Role, RoleSite, RoleNode)
	}
	if err := ValidateName(id.Site); err != nil {
		return fmt.Errorf("%w: site: %w", ErrIdentity, err)
	}
	return nil
}

// URI returns the URI SAN for id: meridian://site/SITE or
// meridian://node/SITE/NODE.
func (id Identity) URI() *url.URL {
	p := "/" + id.Site
	if id.Role == RoleNode {
		p += "/" + id.Node
	}
	return &url.URL{Scheme: URIScheme, Host: id.Role, Path: p}
}

// String returns the URI form of id.
func (id Identity) String() string { return id.URI().String() }

// ParseIdentity parses a Meridian URI SAN (see Identity.URI).
func ParseIdentity(u *url.URL) (Identity, error) {
	if u == nil || u.Scheme != URIScheme {
		return Identity{}, fmt.Errorf("%w: not a %s:// URI: %v", ErrIdentity, URIScheme, u)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.Port() != "" {
		return Identity{}, fmt.Errorf("%w: %s: unexpected user, port, query or fragment", ErrIdentity, u)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	var id Identity
	switch {
	case u.Host == RoleSite && len(parts) == 1:
		id = Identity{Role: RoleSite, Site: parts[0]}
	case u.Host == RoleNode && len(parts) == 2:
		id = Identity{Role: RoleNode, Site: parts[0], Node: parts[1]}
	default:
		return Identity{}, fmt.Errorf("%w: %s: want %s://site/SITE or %s://node/SITE/NODE", ErrIdentity, u, URIScheme, URIScheme)
	}
	if err := id.Validate(); err != nil {
		return Identity{}, fmt.Errorf("%s: %w", u, err)
	}
	return id, nil
}

// CertIdentity returns the identity that cert names: its one URI SAN with the
// scheme "meridian". A certificate with none, or with more than one, has no
// identity. CertIdentity does not verify cert; see PeerIdentity.
func CertIdentity(cert *x509.Certificate) (Identity, error) {
	var found []*url.URL
	for _, u := range cert.URIs {
		if u.Scheme == URIScheme {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 0:
		return Identity{}, fmt.Errorf("%w: certificate %q has no %s:// URI SAN", ErrIdentity, cert.Subject.CommonName, URIScheme)
	case 1:
		return ParseIdentity(found[0])
	default:
		return Identity{}, fmt.Errorf("%w: certificate %q has %d %s:// URI SANs, want one", ErrIdentity, cert.Subject.CommonName, len(found), URIScheme)
	}
}

// PeerIdentity returns the identity of the other end of a TLS connection,
// taken from its certificate only if crypto/tls verified that certificate's
// chain (VerifiedChains is set: a server that requires and verifies client
// certificates, or a client that verifies the server). An unverified or
// missing certificate has no identity. It can be called from a
// tls.Config.VerifyConnection callback, during the handshake.
//
// Connections made with TLS.Server and TLS.Client have no VerifiedChains
// (this package verifies their peers itself): use TLS.PeerIdentity there.
func PeerIdentity(cs tls.ConnectionState) (Identity, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, fmt.Errorf("%w: peer presented no verified certificate", ErrIdentity)
	}
	return CertIdentity(cs.VerifiedChains[0][0])
}
