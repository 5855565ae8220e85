package federation

import (
	"context"
	"fmt"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/route"
)

// Transport delivers framed batches of outbox entries (AppendFrame) to the
// crawl database of one kind of owner, and returns once it has applied
// them (or had applied them before: a retry). Errors wrap ErrRefused (the
// owner refused the batch for good: re-route, do not resend as it is),
// ErrRejected (a bug or a misconfiguration: do not retry blindly) or
// ErrUnavailable (retry with back-off).
//
// The outbox delivery picks one per owner (Fed.transport): another site's
// federation endpoint (mutual TLS) for another site; for another shard of
// this site, Options.Shards (a shard open in this process: LocalShard; on
// another node of the site: the node API).
type Transport interface {
	Deliver(ctx context.Context, to route.Owner, frame []byte) error
}

// transport picks how to deliver to owner o.
func (f *Fed) transport(o route.Owner) (Transport, error) {
	switch {
	case o.Site != "" && o.Site != f.o.Self:
		if _, ok := f.o.File.Site(o.Site); !ok {
			return nil, fmt.Errorf("federation: no transport to %s: site %q is not in the federation file", o, o.Site)
		}
		return siteTransport{f}, nil
	case f.o.Shards != nil:
		return f.o.Shards, nil
	default:
		return nil, fmt.Errorf("federation: no transport to %s of this site: it has no other shards", o)
	}
}

// siteTransport delivers to another site's federation endpoint.
type siteTransport struct{ f *Fed }

// Deliver puts frame to site to.Site's endpoint (Client.PutFrame).
func (t siteTransport) Deliver(ctx context.Context, to route.Owner, frame []byte) error {
	spec, ok := t.f.o.File.Site(to.Site)
	if !ok {
		return fmt.Errorf("federation: deliver to %s: %w: not in the federation file", to, ErrRejected)
	}
	return t.f.client.PutFrame(ctx, spec.Endpoint, to.Site, frame)
}

// LocalShard delivers to a shard whose crawl database is open in this
// process: the frame is decoded and applied to DB as a federation
// endpoint applies a batch (URLs inserted if absent, or their cash added;
// applied once by sequence number, the cash counted in DB's inbound record
// of the sender). It checks no ownership: the sender's routing decided.
type LocalShard struct {
	// From names the sending crawl database in the receiver's inbound
	// records (fed/in/FROM): one name per sender.
	From string
	// DB is the receiving shard's crawl database.
	DB *crawldb.DB
}

// Deliver decodes frame and applies it to l.DB.
func (l LocalShard) Deliver(ctx context.Context, to route.Owner, frame []byte) error {
	if l.DB == nil || l.From == "" {
		return fmt.Errorf("federation: deliver to %s: %w: local shard without a crawl database or a sender's name", to, ErrRejected)
	}
	b, err := Decode(frame, Limits{})
	if err != nil {
		return fmt.Errorf("federation: deliver to %s: %w: %w", to, ErrRejected, err)
	}
	st := l.DB.Store()
	_, err = applyInbound(ctx, l.DB, l.From, b, recordedIn(st), true)
	if err != nil {
		return fmt.Errorf("federation: deliver to %s: %w", to, err)
	}
	return nil
}
