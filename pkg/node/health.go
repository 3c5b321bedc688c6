package node

import (
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node/transport"
)

// lateTicks bounds how late, in ticks, the loop may reach a deadline of
// the machine, or a timer fire, or a state write take, before the node
// counts as late itself: a wake-up a tick or two late is scheduling
// noise, not a stall (the driver draws the same line, election.StaleTicks).
const lateTicks = 2

// Reasons of election_suspicions_total.
const (
	// suspectSilent: the leader time-out fired while this node was on
	// time: the leader (or the path from it) was silent.
	suspectSilent = "leader_silent"
	// suspectLate: the leader time-out fired while this node was late
	// itself (a timer, its loop or a state write beyond the bound, within
	// the longest leader time-out): the silence may be its own.
	suspectLate = "node_late"
	// suspectClosed: a connection event reported the leader's connection
	// closed.
	suspectClosed = "connection_closed"
	// suspectBeatsLost: the beats of the leader's process stopped
	// (transport.PeerSilent).
	suspectBeatsLost = "beats_lost"
)

// Outcomes of election_leader_probes_total.
const (
	probeSent     = "sent"
	probeAnswered = "answered"
)

// Outcomes of election_deadlines_withheld_total.
const (
	withheldHeard   = "heard" // something came in that moved the deadline
	withheldExpired = "expired"
)

// health is what the loop knows of its own timeliness and of its peers,
// for the evidence of its suspicions. It is owned by the loop; every part
// is bounded (one entry per member, a fixed number of buckets).
type health struct {
	members []uint64    // sorted
	heard   []time.Time // arrival of the last message accepted from each member
	// dynamic: with dynamic membership, heardOf holds what heard holds
	// for a static membership, for at most election.MaxDynamicMembers
	// members.
	dynamic bool
	heardOf map[uint64]time.Time
	// The largest of each in the longest leader time-out; deadlineLate is
	// how late the loop reached the machine's deadlines as a follower or
	// candidate.
	timerLag, loopLag, stateWrite, deadlineLate recent
	// late is how late the loop reached the machine's last deadline as a
	// follower or candidate, or, within the longest leader time-out of a
	// deadline reached late, that one.
	late time.Duration
	// withheld is how long the node withheld that deadline before it gave
	// it; 0 if it did not.
	withheld time.Duration
	// deadline is the evidence as it stood when the loop last gave such a
	// deadline's tick: a time-out is reported with it.
	deadline struct {
		leader         uint64
		at, heard      time.Time // heard: the leader's last message then
		late, withheld time.Duration
	}
	// down is the last report of a member down (transport.PeerDown or
	// PeerSilent), which tells why its leadership was given up.
	down transport.Inbound
}

// atDeadline notes the evidence as it stands at now, when the loop gives
// the tick of a deadline of a follower or candidate of leader.
func (h *health) atDeadline(leader uint64, now time.Time) {
	h.deadline.leader, h.deadline.at, h.deadline.heard = leader, now, time.Time{}
	if h.dynamic {
		h.deadline.heard = h.heardOf[leader]
	} else if i, ok := slices.BinarySearch(h.members, leader); ok {
		h.deadline.heard = h.heard[i]
	}
	h.deadline.late, h.deadline.withheld = h.late, h.withheld
}

func newHealth(members []uint64, dynamic bool, span time.Duration, start time.Time) health {
	return health{
		members:      members,
		dynamic:      dynamic,
		heardOf:      make(map[uint64]time.Time),
		heard:        make([]time.Time, len(members)),
		timerLag:     newRecent(span, start),
		loopLag:      newRecent(span, start),
		stateWrite:   newRecent(span, start),
		deadlineLate: newRecent(span, start),
	}
}

// heardFrom notes a message accepted from member id at at.
func (h *health) heardFrom(id uint64, at time.Time) {
	if h.dynamic {
		if _, ok := h.heardOf[id]; ok || len(h.heardOf) < election.MaxDynamicMembers {
			h.heardOf[id] = at
		}
		return
	}
	if i, ok := slices.BinarySearch(h.members, id); ok {
		h.heard[i] = at
	}
}

// heardAgo is how long ago, at now, a message of member id arrived; false
// if none did.
func (h *health) heardAgo(id uint64, now time.Time) (time.Duration, bool) {
	if h.dynamic {
		at, ok := h.heardOf[id]
		return now.Sub(at), ok
	}
	i, ok := slices.BinarySearch(h.members, id)
	if !ok || h.heard[i].IsZero() {
		return 0, false
	}
	return now.Sub(h.heard[i]), true
}

// wasLate reports whether, within the longest leader time-out before now,
// the node fired a timer, handled a message, reached a deadline or wrote
// its state later or slower than bound.
func (h *health) wasLate(now time.Time, bound time.Duration) bool {
	return h.timerLag.max(now) > bound || h.loopLag.max(now) > bound || h.stateWrite.max(now) > bound ||
		h.deadlineLate.max(now) > bound
}

// recent keeps the largest duration noted within span, to within a
// bucket (span/recentBuckets).
type recent struct {
	start   time.Time
	width   time.Duration
	buckets [recentBuckets]struct {
		n   int64 // which bucket of time since start it holds
		max time.Duration
	}
}

const recentBuckets = 8

func newRecent(span time.Duration, start time.Time) recent {
	return recent{start: start, width: max(span/recentBuckets, time.Millisecond)}
}

func (r *recent) index(now time.Time) int64 { return int64(max(0, now.Sub(r.start)) / r.width) }

// note notes d at now.
func (r *recent) note(now time.Time, d time.Duration) {
	n := r.index(now)
	b := &r.buckets[n%recentBuckets]
	if b.n != n {
		b.n, b.max = n, 0
	}
	b.max = max(b.max, d)
}

// max is the largest duration noted within span before now.
func (r *recent) max(now time.Time) time.Duration {
	n := r.index(now)
	var m time.Duration
	for _, b := range r.buckets {
		if b.n > n-recentBuckets && b.n <= n {
			m = max(m, b.max)
		}
	}
	return m
}

// ticks is k ticks as a duration, saturated.
func (n *Node) ticks(k int) time.Duration {
	if k <= 0 {
		return 0
	}
	if int64(k) > math.MaxInt64/int64(n.cfg.Tick) {
		return math.MaxInt64
	}
	return time.Duration(k) * n.cfg.Tick
}

// lateBound is how late the node may be before it counts as late.
func (n *Node) lateBound() time.Duration { return n.ticks(lateTicks) }

// suspected logs and counts one suspicion of the leadership (leader,
// term), with its evidence.
func (n *Node) suspected(kind election.EventKind, leader, term uint64) {
	now := time.Now()
	h := &n.health
	reason, msg := suspectClosed, "leader's connection closed"
	if h.down.Kind == transport.PeerSilent && h.down.Peer == leader {
		reason, msg = suspectBeatsLost, "leader's process fell silent"
	}
	late, withheld := h.late, h.withheld
	ago, heard := h.heardAgo(leader, now)
	if kind == election.LeaderTimedOut {
		if d := h.deadline; d.leader == leader && !d.at.IsZero() {
			// As it stood when the time-out's tick was given, not after
			// the rest of the batch.
			now, late, withheld = d.at, d.late, d.withheld
			ago, heard = now.Sub(d.heard), !d.heard.IsZero()
		}
		reason = suspectSilent
		if late > n.lateBound() || h.wasLate(now, n.lateBound()) {
			reason = suspectLate
		}
	}
	n.metrics.suspicions.WithLabelValues(reason).Inc()
	if kind == election.LeaderTimedOut {
		msg = "leader timed out"
	}
	attrs := []any{"leader", leader, "term", term, "reason", reason}
	if heard {
		attrs = append(attrs, "heard_ago", ago)
	} else {
		attrs = append(attrs, "heard_ago", "never")
	}
	attrs = append(attrs, "late", late, "withheld", withheld)
	attrs = append(attrs, n.evidence(now)...)
	n.log.Info(msg, attrs...)
	h.withheld, h.deadline.at = 0, time.Time{}
}

// evidence is the node's own timeliness at now, for the logs.
func (n *Node) evidence(now time.Time) []any {
	h := &n.health
	return []any{
		"timer_lag_max", h.timerLag.max(now),
		"loop_lag_max", h.loopLag.max(now),
		"state_write_max", h.stateWrite.max(now),
		"pending", n.pending(),
	}
}

// peersHeard is, for the logs, how long ago each other member was last
// heard ("never" if it was not).
func (n *Node) peersHeard(now time.Time) slog.Attr {
	var attrs []any
	for _, id := range n.currentMembers() {
		if id == n.id {
			continue
		}
		key := strconv.FormatUint(id, 10)
		if ago, ok := n.health.heardAgo(id, now); ok {
			attrs = append(attrs, slog.Duration(key, ago))
		} else {
			attrs = append(attrs, slog.String(key, "never"))
		}
	}
	return slog.Group("heard_ago", attrs...)
}

// pending is how many events wait in the lanes.
func (n *Node) pending() int {
	claims, others := n.lanes.Len()
	return claims + others
}

// currentMembers are the members as the node sees them now: with
// dynamic membership those present (the machine's), else the configured
// ones. Called by the loop.
func (n *Node) currentMembers() []uint64 {
	if n.membership != nil {
		return n.membership.Members()
	}
	return n.members
}
