package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/spf13/cobra"
)

// certsCmd is `site certs --dir DIR --sites eu,us,asia`: the deployment's
// certificate authority, made if absent, and one certificate per site.
func certsCmd(stdout io.Writer) *cobra.Command {
	var dir, sites string
	cmd := &cobra.Command{
		Use:   "certs --dir DIR --sites NAME[,NAME...]",
		Short: "Make the deployment's certificate authority (if absent) and a certificate per site",
		Long: `Make the deployment's certificate authority and one certificate per site,
for mutual TLS between sites:

  DIR/ca.pem, DIR/ca-key.pem      the CA (made only if absent)
  DIR/NAME.pem, DIR/NAME-key.pem  one pair per site (kept if present and valid)

Running it again with more sites adds their pairs and keeps the others. Give
each site DIR/ca.pem and its own pair; keep DIR/ca-key.pem where certificates
are made. To replace a site's pair, remove its two files and run it again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return makeCerts(stdout, dir, sites)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "certs", "the directory of the certificates")
	cmd.Flags().StringVar(&sites, "sites", "", "the sites' names, comma-separated (e.g. eu,us,asia)")
	cmd.MarkFlagRequired("sites")
	return cmd
}

// makeCerts makes what certsCmd promises and says what it wrote and kept.
func makeCerts(stdout io.Writer, dir, list string) error {
	names, err := siteNames(list)
	if err != nil {
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
	for _, name := range names {
		id := certs.SiteIdentity(name)
		certFile, keyFile := certs.PairFiles(dir, id)
		err := certs.IssueSite(dir, name)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "wrote %s and %s (site %s)\n", certFile, keyFile, name)
		case errors.Is(err, certs.ErrExists):
			server, _, lerr := certs.Load(dir, name)
			if lerr != nil {
				return fmt.Errorf("site %s: its existing pair is not usable (remove %s and %s to issue a new one): %w", name, certFile, keyFile, lerr)
			}
			until := server.Certificates[0].Leaf.NotAfter.UTC().Format("2006-01-02")
			fmt.Fprintf(stdout, "kept %s and %s (site %s, valid until %s)\n", certFile, keyFile, name, until)
		default:
			return err
		}
	}
	return nil
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
