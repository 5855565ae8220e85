package federation

import (
	"context"
	"fmt"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
)

// What a site's shards need to receive each other's batches as a site
// receives another site's: a frame applied once by sequence number, the
// cash counted per sender (package shardset delivers between shards).

// ApplyFrame applies a framed batch (AppendFrame) from the crawl database
// named from to db, as a federation endpoint applies a batch: URLs
// inserted if absent or their cash added, applied once by sequence number
// (a frame applied before changes nothing), the cash counted in db's
// inbound record of from. It returns the last sequence number applied from
// from afterwards. A frame that overlaps what was applied without being
// covered by it wraps ErrRefused: the sender asks Applied and sends the
// rest.
func ApplyFrame(ctx context.Context, db *crawldb.DB, from string, frame []byte) (uint64, error) {
	b, err := Decode(frame, Limits{})
	if err != nil {
		return 0, fmt.Errorf("federation: frame from %s: %w: %w", from, ErrRejected, err)
	}
	if b.From != from {
		return 0, fmt.Errorf("federation: frame from %s: %w: it says it is from %q", from, ErrRejected, b.From)
	}
	st := db.Store()
	if _, err := applyInbound(ctx, db, from, b, recordedIn(st), true); err != nil {
		return 0, err
	}
	return Applied(st, from)
}

// Applied returns the last sequence number applied in st from the crawl
// database named from (0: none).
func Applied(st *store.Store, from string) (uint64, error) {
	v, err := st.User(inPrefix + from)
	if err != nil {
		return 0, fmt.Errorf("federation: inbound state of %s: %w", from, err)
	}
	in, err := decodeInbound(v)
	if err != nil {
		return 0, err
	}
	return in.Seq, nil
}

// InboundTotals sums st's inbound records: the cash received on URLs and
// for the virtual page, and the batches applied, from every sender.
func InboundTotals(st *store.Store) (puts, virtual float64, batches uint64, err error) {
	err = st.UserScan(inPrefix, func(k string, v []byte) error {
		in, err := decodeInbound(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		puts += in.Cash
		virtual += in.Virtual
		batches += in.Batches
		return nil
	})
	return puts, virtual, batches, err
}
