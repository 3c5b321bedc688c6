package node

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Status returns the node's current view. It is safe to call from any
// goroutine. A node whose lease has ended on the monotonic clock is not
// reported as leader, even before its own goroutine has noticed (after a
// pause, say).
func (n *Node) Status() protocol.Status {
	st, _ := n.view.Load().at(time.Now())
	return st
}

// view is what the node shows of itself, published as one immutable value
// (Node.view): its status, the end of its lease and the announcement that
// queries are answered with belong to the same moment. Every reader
// (/status, the metrics, the query responder, the callbacks) loads it
// once, so none sees a leadership with the lease of another moment, such
// as a node still leading whose lease was already cleared.
type view struct {
	status protocol.Status // LeaseRemainingMS is not set here
	// leaseUntil is, while the node leads under a lease (Paxos), when the
	// lease ends on the monotonic clock; zero otherwise.
	leaseUntil time.Time
	// leading is this node's announcement while it leads under its term,
	// nil otherwise.
	leading *protocol.Announcement
	// running: the machine runs (from its start until Run ends it).
	running bool
}

// at is the status v shows at now, and the end of the lease it leads
// under (zero if none): a lease that has ended by now shows as a follower
// without a leader.
func (v *view) at(now time.Time) (protocol.Status, time.Time) {
	st := v.status
	if st.State != election.Leader.String() || v.leaseUntil.IsZero() {
		return st, time.Time{}
	}
	left := v.leaseUntil.Sub(now)
	if left <= 0 {
		st.State, st.Leader = election.Follower.String(), nil
		ended := v.leaseUntil.Round(0)
		st.Since = &ended
		return st, time.Time{}
	}
	ms := left.Milliseconds()
	st.LeaseRemainingMS = &ms
	return st, v.leaseUntil
}

// leadingAt is this node's announcement if v shows it leading at now, and
// nil otherwise (its lease has ended, say).
func (v *view) leadingAt(now time.Time) *protocol.Announcement {
	if v.leading == nil || (!v.leaseUntil.IsZero() && !now.Before(v.leaseUntil)) {
		return nil
	}
	return v.leading
}

// setView publishes the status st, with the end of its lease (zero if
// none), the announcement queries are answered with (nil unless it
// leads) and whether the machine runs, as one value.
func (n *Node) setView(st election.SoftState, leaseUntil time.Time, leading *protocol.Announcement, running bool) {
	s := protocol.Status{
		ID:        n.id,
		Cluster:   n.cfg.Cluster,
		Algorithm: n.cfg.Algorithm,
		Term:      st.Term,
		State:     st.Role.String(),
	}
	if n.membership != nil {
		s.Members = n.membership.Members() // replaced, never changed, by the machine
	}
	if vc, ok := n.membership.(voterChanger); ok {
		s.Voters = vc.Voters() // replaced, never changed, by the machine
	}
	if st.Leader != 0 {
		leader := st.Leader
		s.Leader = &leader
	}
	v := &view{status: s, leaseUntil: leaseUntil, leading: leading, running: running}
	old := n.view.Load()
	if old != nil && old.same(v) {
		return // most events change nothing a reader sees: a heartbeat, a tick
	}
	switch {
	case !running:
	case old != nil && old.running && sameLeadership(old.status, s):
		v.status.Since = old.status.Since
	default:
		now := time.Now().Round(0) // the wall clock alone
		v.status.Since = &now
	}
	n.publishView(v)
}

// same reports whether v shows what w does. The machine replaces its
// members and voters, never changes them (setView), so the voters are
// the same if their pointers are.
func (v *view) same(w *view) bool {
	a, b := v.status, w.status
	return v.running == w.running && v.leading == w.leading && v.leaseUntil.Equal(w.leaseUntil) &&
		sameLeadership(a, b) && a.LeaseRemainingMS == nil && b.LeaseRemainingMS == nil &&
		slices.Equal(a.Members, b.Members) && a.Voters == b.Voters
}

// sameLeadership reports whether a and b show the same leadership: the
// same leader, term and state (the same ETag).
func sameLeadership(a, b protocol.Status) bool {
	return a.Term == b.Term && a.State == b.State &&
		(a.Leader == nil) == (b.Leader == nil) && (a.Leader == nil || *a.Leader == *b.Leader)
}

// publishView publishes v and wakes the watchers if what they see
// changed: the leadership (the ETag) or whether the node runs.
func (n *Node) publishView(v *view) {
	old := n.view.Swap(v)
	if old == nil || old.running != v.running || !sameLeadership(old.status, v.status) {
		n.changed()
	}
}

// snapshot is the view the node published last.
func (n *Node) snapshot() *view { return n.view.Load() }

// Healthy reports whether the node is running and connected.
func (n *Node) Healthy() bool {
	return n.view.Load().running && n.tr.Connected()
}

// Registry is the node's own metrics registry. Callers may register more
// collectors on it (the Go runtime's, the process's).
func (n *Node) Registry() *prometheus.Registry { return n.metrics.registry }

// watchers are the channels notified on every status change.
type watchers struct {
	mu  sync.Mutex
	chs map[chan struct{}]struct{}
}

func (n *Node) watch() chan struct{} {
	ch := make(chan struct{}, 1)
	n.watchers.mu.Lock()
	defer n.watchers.mu.Unlock()
	if n.watchers.chs == nil {
		n.watchers.chs = make(map[chan struct{}]struct{})
	}
	n.watchers.chs[ch] = struct{}{}
	return ch
}

func (n *Node) unwatch(ch chan struct{}) {
	n.watchers.mu.Lock()
	defer n.watchers.mu.Unlock()
	delete(n.watchers.chs, ch)
}

// changed notifies every watcher; publishView calls it when what they
// see has changed.
func (n *Node) changed() {
	n.watchers.mu.Lock()
	defer n.watchers.mu.Unlock()
	for ch := range n.watchers.chs {
		notify(ch)
	}
}
