package node

import (
	"encoding/json"
	"net/http"
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

func (n *Node) setStatus(st election.Status) {
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
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n.Status())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}
