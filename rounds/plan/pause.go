package plan

import "time"

// A node's fetcher pause. A node fetches only while a leader takes its
// reports: by FailTimeout after the leader last heard of it, the leader
// gives its parts to others, so it pauses once no leader has taken a
// report for half of that (its lease), and resumes once a leader takes one
// again and its replica has caught up with what that leader had (its next
// watch then drops the parts moved away). A node that hands its
// leadership over stays paused, and in a Solo crawl a node fetches only
// while it leads. Starting always pauses; there is no rule to it.

// NodeState is a node's state as its pause rules read it.
type NodeState struct {
	// Paused: the rules have paused the node's fetcher.
	Paused bool
	// Handing: a hand-over of its leadership is under way; it stays
	// paused until the hand-over ends, whatever the reports.
	Handing bool
	// Solo: only the crawl database's leader fetches.
	Solo bool
	// Leads: the node leads the crawl database.
	Leads bool
	// LastOK is when a leader last took the node's report.
	LastOK time.Time
	// ResumeAt: paused, the node resumes once its replica has applied
	// this index, the leader's when it last took a report (0: no leader
	// has taken one since the pause).
	ResumeAt uint64
	// Applied is the replica's applied index.
	Applied uint64
}

// LeaseLost reports whether no leader has taken the node's report for
// more than half of failTimeout before now. Exactly half is still within
// the lease.
func (s NodeState) LeaseLost(now time.Time, failTimeout time.Duration) bool {
	return now.Sub(s.LastOK) > failTimeout/2
}

// ShouldPause reports whether the node's fetcher pauses now (and aborts
// its requests in flight): it runs, does not drain (a drain has paused it
// already), and its lease is lost.
func (s NodeState) ShouldPause(now time.Time, failTimeout time.Duration) bool {
	return !s.Paused && s.LeaseLost(now, failTimeout)
}

// MayResume reports whether nothing keeps the fetcher paused but the
// reports: the node neither drains nor hands its leadership over, and, in
// a Solo crawl, it leads.
func (s NodeState) MayResume() bool {
	return !s.Handing && (!s.Solo || s.Leads)
}

// Resumable reports whether a paused node has what it needs to resume but
// its replica's progress and the lease: a leader took a report since the
// pause, and nothing else holds it paused (MayResume). Checked again right
// before a resume, under the lock every pause takes.
func (s NodeState) Resumable() bool {
	return s.Paused && s.ResumeAt != 0 && s.MayResume()
}

// ResumeVerdict is what a paused node does about its pause before a watch.
type ResumeVerdict uint8

// The verdicts of NodeState.Resume.
const (
	// StayPaused: not paused, no leader took a report since the pause,
	// the replica is behind the leader's index, or something holds the
	// node paused.
	StayPaused ResumeVerdict = iota
	// ForgetReply: the report that set ResumeAt is older than the lease:
	// the node would fetch just as it should pause; it waits for a new
	// reply (ResumeAt back to 0).
	ForgetReply
	// Unpause: resume the fetcher (after the watch, if Resumable still
	// holds then).
	Unpause
)

var resumeNames = [...]string{"stay paused", "forget reply", "unpause"}

// String names the verdict.
func (v ResumeVerdict) String() string {
	if int(v) < len(resumeNames) {
		return resumeNames[v]
	}
	return "resume verdict?"
}

// Resume decides whether a paused node resumes at now: once its replica
// has applied ResumeAt, while nothing else holds it paused, and only while
// a leader has taken a report within the lease.
func (s NodeState) Resume(now time.Time, failTimeout time.Duration) ResumeVerdict {
	switch {
	case !s.Resumable() || s.Applied < s.ResumeAt:
		return StayPaused
	case s.LeaseLost(now, failTimeout):
		return ForgetReply
	default:
		return Unpause
	}
}

// HandOverVerdict is what becomes of a node's pause when a hand-over of
// its leadership ends.
type HandOverVerdict uint8

// The verdicts of HandOverEnd.
const (
	// AsBefore: the node was paused before the hand-over began: its
	// pause stays as it was, lifted by the usual rules.
	AsBefore HandOverVerdict = iota
	// Resumed: the hand-over failed and nothing holds the node paused:
	// its fetcher resumes.
	Resumed
	// HoldPaused: the fetcher stays paused, with no reply to resume on
	// (ResumeAt 0), as a node that does not lead is paused: the hand-over
	// succeeded, or it failed while the node drains or no longer leads a
	// Solo crawl.
	HoldPaused
)

var handOverNames = [...]string{"as before", "resumed", "hold paused"}

// String names the verdict.
func (v HandOverVerdict) String() string {
	if int(v) < len(handOverNames) {
		return handOverNames[v]
	}
	return "hand-over verdict?"
}

// HandOverEnd decides a node's pause when a hand-over ends: transferred,
// the node no longer leads and stays paused until it leads again; failed,
// it resumes unless it was paused before or something else holds it paused
// (s.Handing is read as false: the hand-over is over).
func HandOverEnd(transferred bool, s NodeState) HandOverVerdict {
	s.Handing = false
	switch {
	case transferred:
		return HoldPaused
	case s.Paused:
		return AsBefore
	case s.MayResume():
		return Resumed
	default:
		return HoldPaused
	}
}
