package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// worker is the application: the work it does while its replica leads,
// and what it tells of it.
type worker struct {
	id       uint64
	cluster  string
	interval time.Duration
	log      *slog.Logger
	// status is the node's (Node.Status), set before the node runs.
	status func() protocol.Status

	leading     atomic.Bool
	term        atomic.Uint64 // of the leadership the work runs under, or ran under last
	done        atomic.Uint64 // units of work done, over every leadership
	leaderships atomic.Uint64 // leaderships worked under

	doneTotal  prometheus.Counter
	collisions prometheus.Counter
	// lastCollision rate-limits the log of ID collisions.
	mu            sync.Mutex
	lastCollision time.Time
}

func newWorker(cfg Config, log *slog.Logger) *worker {
	return &worker{
		id: cfg.id, cluster: cfg.Cluster, interval: cfg.WorkInterval, log: log,
		doneTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleet_work_done_total",
			Help: "Units of work this replica did while it led.",
		}),
		collisions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleet_id_collisions_total",
			Help: "Broadcasts from another process under this replica's member ID: two replicas share an ID (set NODE_ID).",
		}),
	}
}

// register adds the worker's metrics to the node's registry (/metrics).
func (w *worker) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{w.doneTotal, w.collisions} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// callbacks are the node's: the work runs in OnStartedLeading, whose
// context ends as soon as the replica stops leading, before the message
// that hands over leaves it. (The node logs each leader it learns of
// itself; OnNewLeader would tell the application.)
func (w *worker) callbacks() node.Callbacks {
	return node.Callbacks{
		OnStartedLeading: w.work,
		OnStoppedLeading: func() { w.log.Info("no longer leading", "work_done", w.done.Load()) },
	}
}

// work does one unit of work every interval until ctx ends. A real
// application would carry the term with every write it makes, as a fence
// (pkg/leader.Fence): with Bully and the ring a partition can give two
// leaders at once.
func (w *worker) work(ctx context.Context) {
	term := w.status().Term
	w.term.Store(term)
	w.leaderships.Add(1)
	w.leading.Store(true)
	defer w.leading.Store(false)
	w.log.Info("leading: working", "term", term)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			n := w.done.Add(1)
			w.doneTotal.Inc()
			w.log.Info("work done", "unit", n, "term", term)
		}
	}
}

// workStatus is the answer to GET /work.
type workStatus struct {
	ID      uint64 `json:"id"`
	Cluster string `json:"cluster"`
	// Leading: the work runs now.
	Leading bool `json:"leading"`
	// Term is the term the work runs under, or ran under last; 0 if it
	// never ran.
	Term uint64 `json:"term"`
	// Done counts the units of work done, over every leadership.
	Done uint64 `json:"done"`
	// Leaderships counts the leaderships worked under.
	Leaderships uint64 `json:"leaderships"`
}

// ServeHTTP answers GET /work.
func (w *worker) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(workStatus{
		ID: w.id, Cluster: w.cluster, Leading: w.leading.Load(), Term: w.term.Load(),
		Done: w.done.Load(), Leaderships: w.leaderships.Load(),
	})
}

// watchCollisions subscribes, on the replica's own connection, to the
// broadcasts that every member sends (presence, heartbeats,
// Coordinators). The connection does not echo its own messages, so one
// that names this replica's ID comes from another process: two replicas
// share an ID (two hostnames with one hash), and their terms are no
// longer unique. It is logged, at most once a minute, and counted; the
// cure is NODE_ID. The node drains the subscriptions when it stops.
func (w *worker) watchCollisions(nc *nats.Conn, cluster string) error {
	for _, t := range []protocol.Type{protocol.TypePresence, protocol.TypeHeartbeat, protocol.TypeCoordinator} {
		if _, err := nc.Subscribe(protocol.BroadcastSubject(cluster, t), w.checkCollision); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) checkCollision(msg *nats.Msg) {
	m, err := protocol.Decode(msg.Data)
	if err != nil || m.From != w.id {
		return
	}
	w.collisions.Inc()
	w.mu.Lock()
	defer w.mu.Unlock()
	if now := time.Now(); now.Sub(w.lastCollision) >= time.Minute {
		w.lastCollision = now
		w.log.Error("another process broadcasts as this member: two replicas share the member ID (their hostnames hash alike); give each a distinct NODE_ID",
			"id", w.id, "type", m.Type, "incarnation", m.Inc)
	}
}
