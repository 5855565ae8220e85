package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/spf13/cobra"
)

// certsCmd is `site certs --dir DIR --sites eu,us,asia --nodes eu-1,eu-2`:
// the deployment's certificate authority, made if absent, one certificate
// per site and one per node; or, with --revoke and --rotate, a change to
// one identity's certificate.
func certsCmd(stdout io.Writer) *cobra.Command {
	var dir, sites, nodes, revoke, rotate string
	cmd := &cobra.Command{
		Use:   "certs --dir DIR [--sites NAME[,NAME...]] [--nodes NODE[,NODE...]] | --revoke NAME | --rotate NAME",
		Short: "Make the deployment's certificate authority (if absent) and certificates for sites and nodes; revoke or rotate one",
		Long: `Make the deployment's certificate authority and certificates for mutual TLS
between sites (the federation) and between the nodes of a site:

  DIR/ca.pem, DIR/ca-key.pem                the CA (made only if absent)
  DIR/SITE.pem, DIR/SITE-key.pem            one pair per site (--sites)
  DIR/SITE.NODE.pem, DIR/SITE.NODE-key.pem  one pair per node (--nodes)
  DIR/crl.pem                               the revoked certificates (--revoke)

--nodes takes SITE/NODE, or NODE alone if it is named after its site as
SITE-SOMETHING: eu-1 is node eu-1 of site eu, us-east-2 node us-east-2 of site
us-east. Running it again with more sites or nodes adds their pairs and keeps
the others. Give each site and node DIR/ca.pem, DIR/crl.pem (if there is one)
and its own pair; keep DIR/ca-key.pem where certificates are made.

--revoke NAME lists the current certificate of NAME (a site, SITE/NODE, or a
node named SITE-SOMETHING) in DIR/crl.pem, and keeps its files. Copy crl.pem
to every site and node: running ones refuse the certificate within a second of
their copy changing, and a revoked pair no longer loads.

--rotate NAME issues a new pair (a new key) for NAME, replacing its files;
restart NAME with it. The old certificate stays valid until it expires unless
it was revoked: to retire a pair, give both, --revoke NAME --rotate NAME
(revoke runs first). Where a site and a node share a name, say
meridian://site/NAME or SITE/NODE.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case revoke != "" || rotate != "":
				if sites != "" || nodes != "" {
					return errors.New("--revoke and --rotate change one certificate: give them without --sites and --nodes")
				}
				if revoke != "" {
					if err := revokeCert(stdout, dir, revoke); err != nil {
						return err
					}
				}
				if rotate != "" {
					return rotateCert(stdout, dir, rotate)
				}
				return nil
			case sites == "" && nodes == "":
				return errors.New("nothing to do: give --sites, --nodes, or both (or --revoke or --rotate)")
			}
			return makeCerts(stdout, dir, sites, nodes)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "certs", "the directory of the certificates")
	cmd.Flags().StringVar(&sites, "sites", "", "the sites' names, comma-separated (e.g. eu,us,asia)")
	cmd.Flags().StringVar(&nodes, "nodes", "", "the nodes, comma-separated, each SITE/NODE or SITE-SOMETHING (e.g. eu-1,eu-2,us/us-b)")
	cmd.Flags().StringVar(&revoke, "revoke", "", "revoke the current certificate of `NAME`: a site, SITE/NODE, or a node named SITE-SOMETHING")
	cmd.Flags().StringVar(&rotate, "rotate", "", "issue a new pair (new key) for `NAME`, replacing its files")
	return cmd
}

// makeCerts makes what certsCmd promises and says what it wrote and kept.
func makeCerts(stdout io.Writer, dir, siteList, nodeList string) error {
	var ids []certs.Identity
	var errs []error
	if siteList != "" {
		names, err := siteNames(siteList)
		errs = append(errs, err)
		for _, n := range names {
			ids = append(ids, certs.SiteIdentity(n))
		}
	}
	if nodeList != "" {
		nodes, err := nodeEntries(nodeList)
		errs = append(errs, err)
		ids = append(ids, nodes...)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	caFile, caKey := filepath.Join(dir, certs.CAFile), filepath.Join(dir, certs.CAKeyFile)
	switch err := certs.Init(dir); {
	case err == nil:
		fmt.Fprintf(stdout, "wrote %s and %s (new certificate authority; keep %s private)\n", caFile, caKey, caKey)
	case errors.Is(err, certs.ErrExists):
		fmt.Fprintf(stdout, "kept %s (existing certificate authority)\n", caFile)
	default:
		return err
	}
	for _, id := range ids {
		certFile, keyFile := certs.PairFiles(dir, id)
		err := certs.Issue(dir, id, certs.IssueOptions{})
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "wrote %s and %s (%s)\n", certFile, keyFile, describeID(id))
		case errors.Is(err, certs.ErrExists):
			c, lerr := loadCert(dir, id)
			if lerr != nil {
				return fmt.Errorf("%s: its existing pair is not usable (issue a new one with --rotate %s): %w", describeID(id), targetName(id), lerr)
			}
			until := c.NotAfter.UTC().Format("2006-01-02")
			fmt.Fprintf(stdout, "kept %s and %s (%s, valid until %s)\n", certFile, keyFile, describeID(id), until)
		default:
			return err
		}
	}
	return nil
}

// loadCert loads id's pair from dir, checking it as a running site or node
// would, and returns its certificate.
func loadCert(dir string, id certs.Identity) (*x509.Certificate, error) {
	var err error
	if id.Role == certs.RoleNode {
		_, err = certs.LoadNode(dir, id.Site, id.Node)
	} else {
		_, err = certs.LoadSite(dir, id.Site)
	}
	if err != nil {
		return nil, err
	}
	return certs.ReadCertificate(dir, id)
}

// revokeCert is --revoke NAME.
func revokeCert(stdout io.Writer, dir, target string) error {
	id, err := resolveTarget("--revoke", dir, target)
	if err != nil {
		return err
	}
	c, err := certs.ReadCertificate(dir, id)
	if err != nil {
		return err
	}
	serial := c.SerialNumber.Text(16)
	was, err := crlLists(dir, serial)
	if err != nil {
		return err
	}
	if err := certs.Revoke(dir, id); err != nil {
		return err
	}
	rl, err := certs.ReadCRL(dir)
	if err != nil {
		return err
	}
	crlFile := filepath.Join(dir, certs.CRLFile)
	certFile, keyFile := certs.PairFiles(dir, id)
	if was {
		fmt.Fprintf(stdout, "kept %s (the certificate of %s, serial %s, is already revoked)\n", crlFile, describeID(id), serial)
	} else {
		fmt.Fprintf(stdout, "wrote %s (revoked the certificate of %s, serial %s; list number %s, %d revoked in all)\n",
			crlFile, describeID(id), serial, rl.Number, len(rl.RevokedCertificateEntries))
	}
	fmt.Fprintf(stdout, "kept %s and %s (revoked: they no longer load; issue a new pair with --rotate %s)\n", certFile, keyFile, targetName(id))
	fmt.Fprintf(stdout, "copy %s to every site and node of the deployment: running ones refuse the certificate within a second of their copy changing\n", crlFile)
	return nil
}

// rotateCert is --rotate NAME.
func rotateCert(stdout io.Writer, dir, target string) error {
	id, err := resolveTarget("--rotate", dir, target)
	if err != nil {
		return err
	}
	old, err := certs.ReadCertificate(dir, id)
	if err != nil {
		return err
	}
	if err := certs.Replace(dir, id, certs.IssueOptions{}); err != nil {
		return err
	}
	c, err := loadCert(dir, id)
	if err != nil {
		return fmt.Errorf("%s: the new pair does not load: %w", describeID(id), err)
	}
	certFile, keyFile := certs.PairFiles(dir, id)
	fmt.Fprintf(stdout, "wrote %s and %s (%s: new key, serial %s, valid from %s until %s)\n", certFile, keyFile, describeID(id),
		c.SerialNumber.Text(16), c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
	oldSerial := old.SerialNumber.Text(16)
	switch was, err := crlLists(dir, oldSerial); {
	case err != nil:
		return err
	case was:
		fmt.Fprintf(stdout, "the old certificate, serial %s, is revoked\n", oldSerial)
	default:
		fmt.Fprintf(stdout, "the old certificate, serial %s, is not revoked: peers accept it until %s\n", oldSerial, old.NotAfter.UTC().Format("2006-01-02"))
	}
	fmt.Fprintf(stdout, "restart %s with the new pair\n", describeID(id))
	return nil
}

// crlLists reports whether dir/crl.pem lists serial (in hex).
func crlLists(dir, serial string) (bool, error) {
	rl, err := certs.ReadCRL(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range rl.RevokedCertificateEntries {
		if e.SerialNumber.Text(16) == serial {
			return true, nil
		}
	}
	return false, nil
}

// resolveTarget turns the NAME of --revoke or --rotate into an identity:
// a meridian:// URI, SITE/NODE, or a bare name, which is a site or a node
// named SITE-SOMETHING, whichever has a certificate in dir.
func resolveTarget(flag, dir, target string) (certs.Identity, error) {
	target = strings.TrimSpace(target)
	if strings.HasPrefix(target, certs.URIScheme+"://") {
		u, err := url.Parse(target)
		if err != nil {
			return certs.Identity{}, fmt.Errorf("%s %q: %w", flag, target, err)
		}
		id, err := certs.ParseIdentity(u)
		if err != nil {
			return certs.Identity{}, fmt.Errorf("%s %q: %w", flag, target, err)
		}
		return id, nil
	}
	if strings.Contains(target, "/") {
		id, err := parseNodeEntry(target)
		if err != nil {
			return certs.Identity{}, fmt.Errorf("%s %w", flag, err)
		}
		return id, nil
	}
	var candidates []certs.Identity
	if certs.ValidateName(target) == nil {
		candidates = append(candidates, certs.SiteIdentity(target))
	}
	if id, err := parseNodeEntry(target); err == nil {
		candidates = append(candidates, id)
	}
	if len(candidates) == 0 {
		return certs.Identity{}, fmt.Errorf("%s %q: not a site's name, SITE/NODE, or a node named SITE-SOMETHING", flag, target)
	}
	var found []certs.Identity
	var looked []string
	for _, id := range candidates {
		certFile, _ := certs.PairFiles(dir, id)
		looked = append(looked, certFile)
		switch _, err := os.Stat(certFile); {
		case err == nil:
			found = append(found, id)
		case !errors.Is(err, fs.ErrNotExist):
			return certs.Identity{}, fmt.Errorf("%s %q: %w", flag, target, err)
		}
	}
	switch len(found) {
	case 0:
		return certs.Identity{}, fmt.Errorf("%s %q: no certificate (looked for %s)", flag, target, strings.Join(looked, " and "))
	case 1:
		return found[0], nil
	default:
		return certs.Identity{}, fmt.Errorf("%s %q is both %s and %s: say %s or %s", flag, target,
			describeID(found[0]), describeID(found[1]), found[0], targetName(found[1]))
	}
}

// describeID says which site or node id is, for the command's output.
func describeID(id certs.Identity) string {
	if id.Role == certs.RoleNode {
		return fmt.Sprintf("node %s of site %s", id.Node, id.Site)
	}
	return "site " + id.Site
}

// targetName is how --revoke and --rotate can name id unambiguously.
func targetName(id certs.Identity) string {
	if id.Role == certs.RoleNode {
		return id.Site + "/" + id.Node
	}
	return id.Site
}

// siteNames splits and checks --sites, reporting every bad name at once.
func siteNames(list string) ([]string, error) {
	var names []string
	var errs []error
	seen := make(map[string]bool)
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		switch err := certs.ValidateName(n); {
		case err != nil:
			errs = append(errs, fmt.Errorf("--sites: %w", err))
		case seen[n]:
			errs = append(errs, fmt.Errorf("--sites: %q is listed twice", n))
		default:
			seen[n] = true
			names = append(names, n)
		}
	}
	return names, errors.Join(errs...)
}

// nodeEntries splits and checks --nodes, reporting every bad entry at once.
func nodeEntries(list string) ([]certs.Identity, error) {
	var ids []certs.Identity
	var errs []error
	seen := make(map[certs.Identity]string)
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		id, err := parseNodeEntry(e)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--nodes %w", err))
		case seen[id] != "":
			errs = append(errs, fmt.Errorf("--nodes %q: %s is listed twice (also as %q)", e, describeID(id), seen[id]))
		default:
			seen[id] = e
			ids = append(ids, id)
		}
	}
	return ids, errors.Join(errs...)
}

// parseNodeEntry parses one entry of --nodes: SITE/NODE, or NODE alone,
// whose site is then NODE up to its last '-' (eu-1 is node eu-1 of site
// eu). Its errors begin with the entry, quoted.
func parseNodeEntry(entry string) (certs.Identity, error) {
	site, node, ok := strings.Cut(entry, "/")
	if !ok {
		i := strings.LastIndexByte(entry, '-')
		if i <= 0 {
			return certs.Identity{}, fmt.Errorf("%q: cannot tell its site: say SITE/NODE, or name the node SITE-SOMETHING (e.g. eu-1)", entry)
		}
		site, node = entry[:i], entry
		if err := certs.ValidateName(node); err != nil {
			return certs.Identity{}, fmt.Errorf("%q: %w", entry, err)
		}
		if err := certs.ValidateName(site); err != nil {
			return certs.Identity{}, fmt.Errorf("%q: its site would be %q, the name up to its last '-': %w", entry, site, err)
		}
	}
	id := certs.NodeIdentity(site, node)
	if err := id.Validate(); err != nil {
		return certs.Identity{}, fmt.Errorf("%q: %w", entry, err)
	}
	return id, nil
}
