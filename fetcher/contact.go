package fetcher

import (
	"fmt"
	"net/netip"

	"github.com/meridian-crawler/meridian/fetcher/netguard"
)

// checkContact returns an error wrapping ErrNoContact if the fetcher's
// requests carry no contact (Options.Contact and Options.UserAgent both
// unset, so the User-Agent is the bare DefaultUserAgent("")) and one of
// host's addresses ips is public (netguard.Reason says nothing of it);
// nil otherwise. The first refusal of a fetcher is logged.
func (f *Fetcher) checkContact(host string, ips []netip.Addr) error {
	if f.o.Contact != "" || f.o.UserAgent != DefaultUserAgent("") {
		return nil
	}
	for _, ip := range ips {
		if netguard.Reason(ip) != "" {
			continue
		}
		if !f.noContactLogged.Swap(true) {
			f.log.Warn("fetcher: requests to public addresses refused: no contact in the User-Agent; set one (Options.Contact, --contact URL)", "host", host, "ip", ip)
		}
		return fmt.Errorf("%s is a public address: %w", ip, ErrNoContact)
	}
	return nil
}
