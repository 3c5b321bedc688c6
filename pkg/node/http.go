package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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

// MaxStatusWait bounds the wait of GET /status?wait=.
const MaxStatusWait = 5 * time.Minute

// setView publishes the status st, with the end of its lease (zero if
// none), the announcement queries are answered with (nil unless it
// leads) and whether the machine runs, as one value.
func (n *Node) setView(st election.Status, leaseUntil time.Time, leading *protocol.Announcement, running bool) {
	s := protocol.Status{
		ID:        n.id,
		Cluster:   n.cfg.Cluster,
		Algorithm: n.cfg.Algorithm,
		Term:      st.Term,
		State:     st.Role.String(),
	}
	if st.Leader != 0 {
		leader := st.Leader
		s.Leader = &leader
	}
	n.publishView(&view{status: s, leaseUntil: leaseUntil, leading: leading, running: running})
}

// publishView publishes v and wakes the watchers if what they see
// changed.
func (n *Node) publishView(v *view) {
	old := n.view.Swap(v)
	if old == nil || old.status.ETag() != v.status.ETag() || old.running != v.running {
		n.changed()
	}
}

// Healthy reports whether the node is running and connected.
func (n *Node) Healthy() bool {
	return n.view.Load().running && n.tr.Connected()
}

// Registry is the node's own metrics registry. Callers may register more
// collectors on it (the Go runtime's, the process's).
func (n *Node) Registry() *prometheus.Registry { return n.metrics.registry }

// Handler serves GET /healthz, GET /status and GET /metrics.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !n.Healthy() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /status", n.serveStatus)
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

// serveStatus answers GET /status with the node's status and its ETag.
// With ?wait=<duration> (at most MaxStatusWait) and an If-None-Match
// header naming the current ETag, it waits until the status changes, and
// answers 304 Not Modified if the wait passes first: a client follows a
// node's view without polling it.
func (n *Node) serveStatus(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxStatusWait {
			http.Error(w, fmt.Sprintf("wait: %q is not a duration from 0 to %v, such as 30s", v, MaxStatusWait), http.StatusBadRequest)
			return
		}
		wait = d
	}
	st := n.Status()
	if match := r.Header.Get("If-None-Match"); wait > 0 && match == st.ETag() {
		changed := n.watch()
		defer n.unwatch(changed)
		deadline := time.NewTimer(wait)
		defer deadline.Stop()
		var until time.Time
		for st, until = n.view.Load().at(time.Now()); match == st.ETag(); st, until = n.view.Load().at(time.Now()) {
			var leaseEnd <-chan time.Time
			if !until.IsZero() {
				t := time.NewTimer(time.Until(until)) // a lease that ends changes the state
				defer t.Stop()
				leaseEnd = t.C
			}
			select {
			case <-changed:
			case <-leaseEnd:
			case <-deadline.C:
				w.Header().Set("ETag", match)
				w.WriteHeader(http.StatusNotModified)
				return
			case <-r.Context().Done():
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", st.ETag())
	json.NewEncoder(w).Encode(st)
}
