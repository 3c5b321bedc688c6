package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Status is a node's view of the election, as served on GET /status.
type Status struct {
	ID        uint64             `json:"id"`
	Cluster   string             `json:"cluster"`
	Algorithm protocol.Algorithm `json:"algorithm"`
	// Leader is nil while the leader is undefined.
	Leader *uint64 `json:"leader"`
	// Term is the term of the leadership this node last accepted or
	// claimed, 0 before any.
	Term uint64 `json:"term"`
	// State is follower, candidate or leader.
	State string `json:"state"`
	// LeaseRemainingMS is, while this node leads under a lease (Paxos),
	// how long the lease still holds, in milliseconds; absent otherwise.
	LeaseRemainingMS *int64 `json:"lease_remaining_ms,omitempty"`
}

// Status returns the node's current view. It is safe to call from any
// goroutine. A node whose lease has ended on the monotonic clock is not
// reported as leader, even before its own goroutine has noticed (after a
// pause, say).
func (n *Node) Status() Status {
	st := *n.status.Load()
	if st.State != election.Leader.String() {
		return st
	}
	until := n.lease.Load()
	if until == nil {
		return st
	}
	left := time.Until(*until)
	if left <= 0 {
		st.State, st.Leader = election.Follower.String(), nil
		return st
	}
	ms := left.Milliseconds()
	st.LeaseRemainingMS = &ms
	return st
}

// ETag names the leadership view of a status (leader, term and state),
// quoted as an HTTP entity tag: GET /status serves it, and a request that
// names it in If-None-Match with ?wait= waits for it to change.
func (s Status) ETag() string {
	leader := "null"
	if s.Leader != nil {
		leader = strconv.FormatUint(*s.Leader, 10)
	}
	return fmt.Sprintf(`"%s-%d-%s"`, leader, s.Term, s.State)
}

// MaxStatusWait bounds the wait of GET /status?wait=.
const MaxStatusWait = 5 * time.Minute

func (n *Node) setStatus(st election.Status) {
	if old := n.status.Load(); old != nil && old.Term == st.Term && old.State == st.Role.String() &&
		(old.Leader == nil) == (st.Leader == 0) && (old.Leader == nil || *old.Leader == st.Leader) {
		return // unchanged: nothing to store, nobody to wake
	}
	s := &Status{
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
	n.status.Store(s)
	n.changed()
}

// Healthy reports whether the node is running and connected to NATS.
func (n *Node) Healthy() bool {
	return n.running.Load() && n.nc.IsConnected()
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
		for st = n.Status(); match == st.ETag(); st = n.Status() {
			var leaseEnd <-chan time.Time
			if until := n.lease.Load(); st.LeaseRemainingMS != nil && until != nil {
				t := time.NewTimer(time.Until(*until)) // a lease that ends changes the state
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
