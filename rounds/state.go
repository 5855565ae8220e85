package rounds

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// Phase is where a round is.
type Phase string

// The phases a round goes through. Generate is short and happens before a
// round enters the state, so a round in the state is fetching or updating.
const (
	PhaseGenerate Phase = "generate"
	PhaseFetch    Phase = "fetch"
	PhaseUpdate   Phase = "update"
)

// State is the crawl's round state, kept in the crawl database.
type State struct {
	Next     uint64   `json:"next"`     // the next round to generate; rounds start at 1
	Active   []Active `json:"active"`   // rounds generated and not yet fully updated, oldest first
	Virtual  float64  `json:"virtual"`  // the OPIC virtual page's cash
	Injected float64  `json:"injected"` // cash injected by seeds in all
	Spent    float64  `json:"spent"`    // cash distributed by fetches in all (= total history)
	Done     uint64   `json:"done"`     // rounds completed
	// Sent is the cash of the URLs sent to other sites (their outboxes);
	// PutsIn and VirtualIn the cash other sites sent here, on URLs and
	// for the virtual page, as of the last update (a federation's
	// accounts: see Crawler.cashError).
	Sent      float64 `json:"sent,omitempty"`
	PutsIn    float64 `json:"puts_in,omitempty"`
	VirtualIn float64 `json:"virtual_in,omitempty"`
	// HandedBack counts the frontier URLs this site gave back to their
	// owner when it returned from being down (see Crawler.handBack).
	HandedBack uint64 `json:"handed_back,omitempty"`
	// StopAt is the last round the site generates (0: no limit): set by
	// the leader from its --rounds when the site's run begins.
	StopAt uint64 `json:"stop_at,omitempty"`
	// Finished is set when the site's crawl ended; every node then stops.
	// A node started after it begins a new run (the mark is cleared).
	Finished *Finish `json:"finished,omitempty"`
}

// Why a crawl ended: Finish.Reason.
const (
	// EndExhausted: nothing is left to fetch (the frontier is empty and
	// no host is backing off).
	EndExhausted = "exhausted"
	// EndRounds: the site generated the rounds it was told to (--rounds).
	EndRounds = "rounds"
	// EndBudget: URLs are left in the frontier, but all of them are of
	// hosts closed for their page budget (--host-budget), or URLs left it
	// because their registrable domain used its (--pld-budget, Finish.Parked):
	// nothing more can be generated.
	EndBudget = "budget"
	// EndSignal: the node was stopped (SIGINT or SIGTERM to `site up`, or
	// its context cancelled) before the crawl ended; the site, not this
	// package, records it (Crawler.MarkEnd). Restarted, the crawl resumes.
	EndSignal = "signal"
)

// Finish says why and when a site's crawl ended, and what it left.
type Finish struct {
	Reason string    `json:"reason"` // EndExhausted, EndRounds, EndBudget or EndSignal
	At     time.Time `json:"at"`
	// Rounds is how many rounds were done in all when it ended.
	Rounds uint64 `json:"rounds"`
	// Frontier is how many URLs were left unfetched in the frontier (0
	// for an exhausted crawl); InFlight how many were in rounds generated
	// and not yet updated (only a signal leaves any: they resume).
	Frontier uint64 `json:"frontier"`
	InFlight uint64 `json:"in_flight,omitempty"`
	// Parked is how many URLs of an EndBudget crawl left the frontier
	// unfetched because their registrable domain used its --pld-budget
	// (store.Batch.Park).
	Parked uint64 `json:"parked,omitempty"`
}

// String says, in a line for people, why the crawl ended and what it left.
// An exhausted crawl's line, alone, says "crawl exhausted".
func (f Finish) String() string {
	switch f.Reason {
	case EndExhausted:
		return fmt.Sprintf("crawl exhausted: every reachable URL in scope has been fetched (%d rounds)", f.Rounds)
	case EndRounds:
		return fmt.Sprintf("crawl stopped at its round limit (--rounds) after %d rounds: %d URLs left unfetched in the frontier", f.Rounds, f.Frontier)
	case EndBudget:
		return fmt.Sprintf("crawl stopped after %d rounds: %s", f.Rounds, f.BudgetLeft(true))
	case EndSignal:
		return fmt.Sprintf("crawl stopped by a signal after %d rounds: %d URLs left unfetched in the frontier, %d in rounds in flight (starting the node again resumes it)", f.Rounds, f.Frontier, f.InFlight)
	}
	return fmt.Sprintf("crawl ended (%s) after %d rounds: %d URLs left unfetched in the frontier", f.Reason, f.Rounds, f.Frontier)
}

// BudgetLeft says what an EndBudget crawl left, and which budgets held
// it: the URLs left in the frontier (--host-budget), and those parked
// for their registrable domain's budget (--pld-budget, Parked). have:
// "have used", else "used".
func (f Finish) BudgetLeft(have bool) string {
	used, has := "used", "used"
	if have {
		used, has = "have used", "has used"
	}
	switch {
	case f.Parked == 0:
		return fmt.Sprintf("the %d URLs left in the frontier are all of hosts that %s their page budget (--host-budget)", f.Frontier, used)
	case f.Frontier == 0:
		return fmt.Sprintf("the %d URLs left unfetched are all of hosts whose registrable domain %s its page budget (--pld-budget)", f.Parked, has)
	}
	return fmt.Sprintf("the %d URLs left in the frontier are all of hosts that %s their page budget (--host-budget), and %d more left unfetched of hosts whose registrable domain %s its (--pld-budget)",
		f.Frontier, used, f.Parked, has)
}

// Active is a round in flight.
type Active struct {
	Round     uint64    `json:"round"`
	Phase     Phase     `json:"phase"`
	Generated int       `json:"generated"`
	Started   time.Time `json:"started"`
	Fetched   time.Time `json:"fetched,omitzero"` // when its fetch phase ended
	Parts     int       `json:"parts"`            // parts its fetch list was split into
}

func (s *State) clone() State {
	c := *s
	c.Active = append([]Active(nil), s.Active...)
	if s.Finished != nil {
		f := *s.Finished
		c.Finished = &f
	}
	return c
}

func (s *State) active(round uint64) *Active {
	for i := range s.Active {
		if s.Active[i].Round == round {
			return &s.Active[i]
		}
	}
	return nil
}

func (s *State) remove(round uint64) {
	for i := range s.Active {
		if s.Active[i].Round == round {
			s.Active = append(s.Active[:i], s.Active[i+1:]...)
			return
		}
	}
}

func (s *State) encode() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return b
}

func loadState(st *store.Store) (State, error) {
	s := State{Next: 1}
	b, err := st.Round()
	if err != nil {
		return s, fmt.Errorf("rounds: read state: %w", err)
	}
	if len(b) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("rounds: decode state: %w", err)
	}
	if s.Next == 0 {
		s.Next = 1
	}
	return s, nil
}

// progressKey names the node-layer key that holds how many of a round's
// update commands have been applied.
func progressKey(round uint64) string { return "rounds/update/" + strconv.FormatUint(round, 10) }

func encodeProgress(n uint64) []byte { return binary.AppendUvarint(nil, n) }

func loadProgress(st *store.Store, round uint64) (uint64, error) {
	b, err := st.User(progressKey(round))
	if err != nil {
		return 0, fmt.Errorf("rounds: read update progress of round %d: %w", round, err)
	}
	if len(b) == 0 {
		return 0, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, fmt.Errorf("rounds: update progress of round %d: %w", round, errRecord)
	}
	return n, nil
}

// decodeJSON decodes a JSON value stored in the crawl database.
func decodeJSON(b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: missing", errRecord)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", errRecord, err)
	}
	return nil
}

// ReadState reads the round state from a crawl database's store (for
// checks on a stopped site).
func ReadState(st *store.Store) (State, error) { return loadState(st) }
