package certs

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// crlRecheck is how often, at most, a running verifier looks at crl.pem.
const crlRecheck = time.Second

// Revoke lists id's current certificate in dir (see PairFiles) in
// dir/crl.pem, the deployment's revocation list, signed by the CA in dir (it
// needs ca-key.pem). It makes crl.pem if there is none; otherwise it keeps
// the entries already there, and the new list's number is one more than
// the old one's. The list is written to a temporary file and renamed into
// place, so that a reader never sees part of one. Revoking a certificate
// that is already listed changes nothing.
//
// Revoke keeps id's files. Copy crl.pem to every site and node of the
// deployment: Load and LoadNode refuse a revoked pair, and running
// processes refuse a revoked peer within about a second of their crl.pem
// changing. To give id a new pair, see Replace.
//
// Revoke must not run concurrently with itself on the same directory: the
// later list would lose the earlier's new entry.
func Revoke(dir string, id Identity) error {
	if err := id.Validate(); err != nil {
		return fmt.Errorf("certs: revoke: %w", err)
	}
	ca, caKey, err := loadCAKey(dir)
	if err != nil {
		return fmt.Errorf("certs: revoke %s: %w", id, err)
	}
	cert, err := ReadCertificate(dir, id)
	if err != nil {
		return err
	}
	certFile, _ := PairFiles(dir, id)
	if got, err := CertIdentity(cert); err != nil {
		return fmt.Errorf("certs: revoke %s: %s: %w", id, certFile, err)
	} else if got != id {
		return fmt.Errorf("certs: revoke %s: %s: %w: it names %s", id, certFile, ErrIdentity, got)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("certs: revoke %s: %s: %w: not signed by %s: %w", id, certFile, ErrInvalid, filepath.Join(dir, CAFile), err)
	}
	path := filepath.Join(dir, CRLFile)
	number := new(big.Int)
	var entries []x509.RevocationListEntry
	old, err := readCRL(path, []*x509.Certificate{ca})
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("certs: revoke %s: refusing to replace an unusable list: %w", id, err)
	default:
		for _, e := range old.RevokedCertificateEntries {
			if e.SerialNumber.Cmp(cert.SerialNumber) == 0 {
				return nil // already listed
			}
			entries = append(entries, x509.RevocationListEntry{SerialNumber: e.SerialNumber, RevocationTime: e.RevocationTime, ReasonCode: e.ReasonCode})
		}
		if old.Number != nil {
			number.Set(old.Number)
		}
	}
	now := time.Now()
	entries = append(entries, x509.RevocationListEntry{SerialNumber: cert.SerialNumber, RevocationTime: now})
	tmpl := &x509.RevocationList{
		RevokedCertificateEntries: entries,
		Number:                    number.Add(number, big.NewInt(1)),
		ThisUpdate:                now,
		// The list is the deployment's own, handed out by its operator, so
		// it is not reissued on a schedule: it is good as long as the CA.
		NextUpdate: ca.NotAfter,
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca, caKey)
	if err != nil {
		return fmt.Errorf("certs: revoke %s: sign the list: %w", id, err)
	}
	return writeAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644)
}

// ReadCRL returns dir/crl.pem, having checked that a CA in dir/ca.pem
// signed it. If there is no list, the error wraps fs.ErrNotExist.
func ReadCRL(dir string) (*x509.RevocationList, error) {
	cas, _, err := loadCAs(dir)
	if err != nil {
		return nil, fmt.Errorf("certs: read list: %w", err)
	}
	rl, err := readCRL(filepath.Join(dir, CRLFile), cas)
	if err != nil {
		return nil, fmt.Errorf("certs: read list: %w", err)
	}
	return rl, nil
}

// readCRL reads and checks a revocation list file.
func readCRL(path string, cas []*x509.Certificate) (*x509.RevocationList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *fs.PathError names the file
	}
	return parseCRL(path, data, cas)
}

// parseCRL parses the first X509 CRL block of data, read from path, and
// checks that one of cas signed it.
func parseCRL(path string, data []byte, cas []*x509.Certificate) (*x509.RevocationList, error) {
	var b *pem.Block
	for rest := data; ; {
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%s: %w: no PEM X509 CRL block", path, ErrInvalid)
		}
		if b.Type == "X509 CRL" {
			break
		}
	}
	rl, err := x509.ParseRevocationList(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrInvalid, err)
	}
	var errs []error
	for _, ca := range cas {
		err := rl.CheckSignatureFrom(ca)
		if err == nil {
			return rl, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("%s: %w: not signed by the CA: %w", path, ErrInvalid, errors.Join(errs...))
}

// crlWatch answers whether a certificate is revoked, from a crl.pem that
// may appear, change or go while the process runs. It looks at the file at
// most once every crlRecheck, and parses it again only when its size or
// modification time changed. While the file cannot be read or is not a
// list signed by the CA, every certificate is refused: it fails closed.
// A missing file lists nothing.
type crlWatch struct {
	path string
	cas  []*x509.Certificate

	mu struct {
		sync.Mutex
		checked time.Time            // when the file was last looked at; zero: never
		stamp   fileStamp            // the file that revoked or err comes from
		revoked map[string]time.Time // serial (hex) → revocation time
		err     error                // why the file is unusable; refuse everything
	}
}

// fileStamp tells whether a file changed; the zero value is no file.
type fileStamp struct {
	exists bool
	size   int64
	mod    int64 // UnixNano
}

// check returns nil if cert is not revoked at now, an error wrapping
// ErrRevoked if it is, and one wrapping ErrInvalid if the list is
// unusable.
func (w *crlWatch) check(now time.Time, cert *x509.Certificate) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.checked.IsZero() || now.Sub(w.mu.checked) >= crlRecheck || now.Before(w.mu.checked) {
		w.mu.checked = now
		w.refreshLocked()
	}
	if w.mu.err != nil {
		return w.mu.err
	}
	if at, ok := w.mu.revoked[cert.SerialNumber.Text(16)]; ok {
		return because(fmt.Sprintf("revoked: serial %s is listed in %s (since %s)", cert.SerialNumber.Text(16), w.path, at.UTC().Format(time.RFC3339)), ErrRevoked)
	}
	return nil
}

// refreshLocked reads the list again if the file changed.
func (w *crlWatch) refreshLocked() {
	f, err := os.Open(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		w.mu.stamp, w.mu.revoked, w.mu.err = fileStamp{}, nil, nil
		return
	}
	if err != nil {
		w.brokenLocked(err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		w.brokenLocked(err)
		return
	}
	stamp := fileStamp{exists: true, size: fi.Size(), mod: fi.ModTime().UnixNano()}
	if stamp == w.mu.stamp {
		return // unchanged: it says what it said
	}
	data, err := io.ReadAll(f)
	if err != nil {
		w.brokenLocked(err)
		return
	}
	rl, err := parseCRL(w.path, data, w.cas)
	if err != nil {
		w.brokenLocked(err)
		w.mu.stamp = stamp // parse it again only once it changes
		return
	}
	revoked := make(map[string]time.Time, len(rl.RevokedCertificateEntries))
	for _, e := range rl.RevokedCertificateEntries {
		revoked[e.SerialNumber.Text(16)] = e.RevocationTime
	}
	w.mu.stamp, w.mu.revoked, w.mu.err = stamp, revoked, nil
}

// brokenLocked makes the watch refuse every certificate because of err;
// the file is read again at the next look.
func (w *crlWatch) brokenLocked(err error) {
	w.mu.stamp, w.mu.revoked = fileStamp{}, nil
	w.mu.err = because(fmt.Sprintf("the revocation list is unusable, so every certificate is refused until it is mended: %v", err), ErrInvalid, err)
}
