package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Errors of a Group.
var (
	// ErrNoElection is returned for a cluster the group does not take
	// part in.
	ErrNoElection = errors.New("node: not in this election")
	// ErrStopped is returned by Add once the group's Run has returned.
	ErrStopped = errors.New("node: the group has stopped")
)

// MaxStarting bounds the elections of a Group that start at once: that
// learn their cluster's term and store their first state. The others
// wait their turn, so that a process that starts thousands of elections
// spreads the queries, the state writes and the first rounds of its
// elections instead of sending them all at once, more than the members
// read within the message age.
const MaxStarting = 256

// MaxElections bounds the elections of one Group.
const MaxElections = 16384

// DefaultGroupInboxSize is the InboxSize of an election of a Group unless
// its Config gives one. An idle lane holds no buffer (transport.Lanes),
// but a burst that reaches thousands of elections at once may fill each
// one's up to its bound, at 280 bytes an entry: DefaultInboxSize would
// allow about 300 KB each.
const DefaultGroupInboxSize = 64

// GroupConfig configures a Group: what the elections of one member
// process share other than their connection (GroupDeps.Conn).
type GroupConfig struct {
	// ID is the member's ID, the same in every election of the group.
	ID uint64
	// Beat is how often the group's connection says that the process is
	// alive, once for all its elections (protocol.BeatSubject; the
	// connection beats and follows the beats: natsnode.GroupConfig).
	// Zero: no beats. With beats, a Bully or ring election's failures
	// are found by the beats and the connection events, and its own
	// heartbeats are a backstop (a process whose elections' loops stop
	// while it still beats): they go quiet, and its timing is backstop's
	// (BeatBackstop, QuietBackstop). Paxos and byzantine elections keep
	// their timing: their heartbeats renew leases.
	Beat time.Duration
	// ShutdownTimeout bounds the drain of the connection once every
	// election has left; DefaultShutdownTimeout if zero.
	ShutdownTimeout time.Duration
	// StateJournal is the file where the group appends its elections'
	// states, locked while the group runs: the states that change at once
	// are appended together with one sync, however many they are, and
	// each election's state file is written later (when the election
	// leaves, when the group stops, and at its next start after a crash);
	// past a few MiB, the journal is emptied into a snapshot beside it
	// (the same path with ".snapshot"). Keep it with the elections' data
	// directories, and use the same path at every start: until the group
	// has stopped cleanly, an election's state may be in the journal or
	// the snapshot alone. Empty: each change of state replaces the state
	// file, which costs a rename per election and two syncs of the file
	// system for the states that change at once.
	StateJournal string
	Logger       *slog.Logger
}

// GroupConn is the connection that the elections of a Group share, and
// what is subscribed and sent on it once for all of them (connection
// events, batches of their broadcasts, beats). The group starts it
// before its elections and stops it after, then drains it; the
// transports of the elections are built on it by whoever adds them
// (natsnode.Group). Its counters are the group's metrics.
type GroupConn interface {
	// Start starts what the elections share on the connection; Stop ends
	// it, sending what waits.
	Start() error
	Stop()
	// Connected reports whether the connection is up now.
	Connected() bool
	// Drain delivers what was sent and closes the connection, waiting at
	// most timeout before closing it at once; Close closes it at once.
	Drain(timeout time.Duration)
	Close()
	// SubscriptionDrops is the messages that the shared subscriptions
	// dropped; Batches the batches published and the messages in them;
	// Refused the batches received and dropped whole; Beats the members
	// whose beats stopped and the beats dropped.
	SubscriptionDrops() int
	Batches() (batches, messages uint64)
	Refused() uint64
	Beats() (lost, refused uint64)
	// BeatsFollowed is the members whose beats are followed now: heard
	// beating, and not reported down since.
	BeatsFollowed() int
}

// GroupDeps are what a Group is built on.
type GroupDeps struct {
	// Conn is the elections' connection.
	Conn GroupConn
}

// BeatBackstop is how many times slower than configured an election of a
// Group with beats (GroupConfig.Beat) sends its heartbeats while they
// are frequent, says that it is present, and, for Bully, waits at its
// start for a leader before it leads.
const BeatBackstop = 10

// QuietBackstop is how many times slower than configured a Bully or ring
// election of a Group with beats sends its heartbeats once its leader's
// claim has been repeated election.QuietAfter times, and times out its
// leader: with the defaults, a heartbeat a second for ten seconds after
// a claim, then one every 10 s, and a time-out of 20 s. A process that
// follows a thousand quiet elections handles a hundred heartbeats a
// second. Its failures are found by the beats and the connection events;
// a member that may have missed a claim (it beats again after it fell
// silent or its connection closed, or this process's connection came
// back) hears the leader at once (transport.PeerBack).
const QuietBackstop = 100

// Group runs the elections that one member takes part in over one
// connection (GroupDeps.Conn; natsnode.Group over NATS): each is a Node
// of its own (its cluster's subjects, terms, data directory, callbacks
// and status), and the connection, its connection events and the metrics
// are the group's. Elections can be added and removed while the group
// runs.
type Group struct {
	conn GroupConn
	cfg  GroupConfig
	log  *slog.Logger
	// metrics are every election's: each counts on them, and the gauges
	// that read an election sum over the group's (a scrape's size does
	// not grow with the number of elections).
	metrics *Metrics
	// states writes the elections' state files together.
	states *stateWriter
	// starting bounds the elections that start at once (MaxStarting).
	starting chan struct{}

	mu       sync.Mutex
	byName   map[string]*groupElection
	order    []string        // clusters, in the order added
	ctx      context.Context // Run's, while it runs
	stopped  bool            // Run has returned
	started  bool            // Run was called
	failures chan error      // the first election that failed
	wg       sync.WaitGroup  // the elections' Runs
}

// groupElection is one election of a Group.
type groupElection struct {
	node   *Node
	cancel context.CancelFunc // ends its Run; nil before it starts
	done   chan struct{}      // closed when its Run returned
}

// NewGroup returns an empty group of elections over deps.Conn. It starts
// nothing.
func NewGroup(cfg GroupConfig, deps GroupDeps) (*Group, error) {
	if deps.Conn == nil {
		return nil, fmt.Errorf("%w: no connection", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	setDefault(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	conn := deps.Conn
	g := &Group{
		conn: conn, cfg: cfg, log: cfg.Logger,
		metrics:  NewMetrics(),
		states:   newStateWriter(cfg.StateJournal),
		starting: make(chan struct{}, MaxStarting),
		byName:   make(map[string]*groupElection),
		failures: make(chan error, 1),
	}
	// One term per election: /status?cluster= shows each.
	g.metrics.registry.Unregister(g.metrics.term)
	g.metrics.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "election_elections", Help: "Elections this process takes part in."},
			func() float64 { return float64(len(g.Clusters())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "election_inbox_pending", Help: helpInboxPending},
			func() float64 { return g.sum(func(n *Node) int { return n.pending() }) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "election_is_leader", Help: helpIsLeader},
			func() float64 { return g.sum(func(n *Node) int { return int(b2f(n.leads())) }) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "election_subscription_dropped_total", Help: helpSubscriptionDrops},
			func() float64 {
				return g.sum(func(n *Node) int { return n.subscriptionDrops() }) + float64(conn.SubscriptionDrops())
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "election_batches_sent_total", Help: "Batches published: each carries the broadcasts the elections sent within the batch window."},
			func() float64 { b, _ := conn.Batches(); return float64(b) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "election_batched_messages_total", Help: "Messages of the elections that left in batches."},
			func() float64 { _, m := conn.Batches(); return float64(m) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "election_batches_dropped_total", Help: "Batches received and dropped whole: their signature or their framing did not hold."},
			func() float64 { return float64(conn.Refused()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "election_beats_lost_total", Help: "Members whose beats stopped for the beat time-out: each of the process's elections was told that the member is down."},
			func() float64 { lost, _ := conn.Beats(); return float64(lost) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "election_beats_dropped_total", Help: "Beats received and dropped: undecodable, not signed by the member they name, out of date or replayed."},
			func() float64 { _, refused := conn.Beats(); return float64(refused) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "election_beats_followed", Help: "Members whose beats this process follows: heard beating, and not reported down since."},
			func() float64 { return float64(conn.BeatsFollowed()) }))
	return g, nil
}

// Validate checks the group's own settings: a member ID, no negative
// shutdown time-out or beat interval.
func (c GroupConfig) Validate() error {
	switch {
	case c.ID == 0:
		return fmt.Errorf("%w: no member ID", ErrConfig)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("%w: negative shutdown timeout", ErrConfig)
	case c.Beat < 0:
		return fmt.Errorf("%w: negative beat interval %v", ErrConfig, c.Beat)
	}
	return nil
}

// Config is the group's configuration, with its defaults.
func (g *Group) Config() GroupConfig { return g.cfg }

// Metrics are the group's, on which every election counts, and its
// transport with it (natstransport.Config.Meter).
func (g *Group) Metrics() *Metrics { return g.metrics }

// sum adds f of every election of the group.
func (g *Group) sum(f func(*Node) int) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	total := 0
	for _, e := range g.byName {
		total += f(e.node)
	}
	return float64(total)
}

// Add checks cfg and deps and adds their election to the group, and
// starts it at once if the group runs. Its Election.ID must be the
// group's, its cluster not already in the group, and its transport one on
// the group's connection (GroupDeps.Conn), counting on the group's
// Metrics (package natsnode builds it: natsnode.Group); its Logger, if
// nil, is the group's tagged with the cluster, and its InboxSize, if
// zero, DefaultGroupInboxSize.
func (g *Group) Add(cfg Config, deps Deps) (*Node, error) {
	if cfg.Election.ID != g.cfg.ID {
		return nil, fmt.Errorf("%w: member %d in a group of member %d", ErrConfig, cfg.Election.ID, g.cfg.ID)
	}
	if deps.Metrics != nil && deps.Metrics != g.metrics {
		return nil, fmt.Errorf("%w: an election of a group counts on the group's metrics", ErrConfig)
	}
	deps.Metrics = g.metrics
	if cfg.Logger == nil {
		cfg.Logger = g.log.With("cluster", cfg.Cluster)
	}
	setDefault(&cfg.InboxSize, DefaultGroupInboxSize)
	if g.cfg.Beat > 0 {
		cfg.Election.Timing = backstop(cfg.Algorithm, cfg.Election.Timing)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.stopped:
		return nil, ErrStopped
	case g.byName[cfg.Cluster] != nil:
		return nil, fmt.Errorf("%w: election %q is already in the group", ErrConfig, cfg.Cluster)
	case len(g.order) >= MaxElections:
		return nil, fmt.Errorf("%w: more than %d elections", ErrConfig, MaxElections)
	}
	n, err := newNode(cfg, deps, true)
	if err != nil {
		return nil, err
	}
	n.states = g.states
	n.starting = g.starting
	e := &groupElection{node: n, done: make(chan struct{})}
	g.byName[cfg.Cluster] = e
	g.order = append(g.order, cfg.Cluster)
	if g.ctx != nil {
		g.start(e)
	}
	return n, nil
}

// backstop is the timing of an election of algorithm in a group with
// beats (GroupConfig.Beat): a Bully or ring election's heartbeats
// BeatBackstop times t's while frequent and QuietBackstop times once
// quiet, on a grid of the frequent interval (election.Timing.QuietGrid:
// the quiet heartbeats of the group's elections come due in the same
// ticks, and leave in one batch), its leader time-out QuietBackstop
// times, its presence interval
// and a Bully election's wait for a leader at its start BeatBackstop
// times. Paxos and byzantine keep t: their heartbeats renew leases.
func backstop(algorithm protocol.Algorithm, t election.Timing) election.Timing {
	if algorithm != protocol.Bully && algorithm != protocol.Ring {
		return t
	}
	if algorithm == protocol.Bully {
		if t.ColdStartTicks == 0 {
			t.ColdStartTicks = t.LeaderTimeoutTicks
		}
		t.ColdStartTicks *= BeatBackstop
	}
	t.QuietHeartbeatTicks = t.HeartbeatTicks * QuietBackstop
	t.HeartbeatTicks *= BeatBackstop
	t.QuietGrid = t.HeartbeatTicks
	t.LeaderTimeoutTicks *= QuietBackstop
	t.PresenceTicks *= BeatBackstop
	// Unused by these algorithms, but checked against the heartbeats.
	t.LeaseTicks *= BeatBackstop
	t.LeaderLeaseTicks *= BeatBackstop
	return t
}

// start runs e's node under the group's context; g.mu is held.
func (g *Group) start(e *groupElection) {
	ctx, cancel := context.WithCancel(g.ctx)
	e.cancel = cancel
	g.wg.Go(func() {
		defer close(e.done)
		err := e.node.Run(ctx)
		if err != nil && ctx.Err() == nil {
			select {
			case g.failures <- fmt.Errorf("election %s: %w", e.node.cfg.Cluster, err):
			default:
			}
		}
	})
}

// Remove makes this member leave the election of cluster (a leader hands
// over) and waits until it has left.
func (g *Group) Remove(cluster string) error {
	g.mu.Lock()
	e := g.byName[cluster]
	if e == nil {
		g.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNoElection, cluster)
	}
	delete(g.byName, cluster)
	for i, c := range g.order {
		if c == cluster {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
	g.mu.Unlock()
	if e.cancel == nil {
		return nil // never started
	}
	e.cancel()
	<-e.done
	return nil
}

// Node returns the node of cluster's election, or nil.
func (g *Group) Node(cluster string) *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.byName[cluster]; e != nil {
		return e.node
	}
	return nil
}

// Clusters returns the group's elections, in the order added.
func (g *Group) Clusters() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

// Registry is the group's metrics registry, on which callers may register
// collectors of the process (the Go runtime's, say).
func (g *Group) Registry() *prometheus.Registry { return g.metrics.registry }

// Run takes part in every election of the group until ctx ends, then
// leaves each (a leader hands over), and drains the connection. It
// returns nil after a clean leave, ErrConnectionClosed if the connection
// closed under it, or the first error of an election that stopped on its
// own (its data directory failed, say), after leaving the others: a
// process that cannot keep one election's state stops as a whole.
func (g *Group) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.started {
		g.mu.Unlock()
		return ErrRunning
	}
	g.started = true
	if err := g.conn.Start(); err != nil {
		g.stopped = true
		g.mu.Unlock()
		g.conn.Close()
		return fmt.Errorf("node: connection events: %w", err)
	}
	if err := g.states.open(g.log); err != nil {
		g.stopped = true
		g.mu.Unlock()
		g.conn.Stop()
		g.conn.Close()
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g.ctx = runCtx
	go g.states.run() // until the elections have left: close(stop), <-done
	for _, c := range g.order {
		g.start(g.byName[c])
	}
	g.mu.Unlock()

	var err error
	select {
	case <-ctx.Done():
	case err = <-g.failures:
		g.log.Error("an election stopped; leaving the others", "err", err)
	}
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	stop()
	g.wg.Wait()
	close(g.states.stop)
	<-g.states.done
	g.conn.Stop()
	g.conn.Drain(g.cfg.ShutdownTimeout)
	if err == nil {
		select {
		case err = <-g.failures: // failed as the group stopped
		default:
		}
	}
	return err
}

// Handler serves the group's HTTP endpoints: GET /status?cluster=<c> is
// the status of election c (404 if the group is not in it; without
// cluster=, the first election's), GET /elections the statuses of every
// election, in the order added, as one JSON array, GET /healthz 200 while every election
// runs on a live connection, GET /metrics the group's metrics, and POST /voters?cluster=<c>
// ChangeVoters for election c.
func (g *Group) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		n, ok := g.pick(w, r)
		if ok {
			statusHandler{n}.serveStatus(w, r)
		}
	})
	mux.HandleFunc("GET /elections", func(w http.ResponseWriter, _ *http.Request) {
		clusters := g.Clusters()
		all := make([]protocol.Status, 0, len(clusters))
		for _, c := range clusters {
			if n := g.Node(c); n != nil {
				all = append(all, n.Status())
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(all)
	})
	mux.HandleFunc("POST /voters", func(w http.ResponseWriter, r *http.Request) {
		if n, ok := g.pick(w, r); ok {
			n.serveVoters(w, r)
		}
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !g.Healthy() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

// pick is the node a request's cluster= names, or the first; it answers
// 404 itself if there is none.
func (g *Group) pick(w http.ResponseWriter, r *http.Request) (*Node, bool) {
	cluster := r.URL.Query().Get("cluster")
	if cluster == "" {
		if cs := g.Clusters(); len(cs) > 0 {
			cluster = cs[0]
		}
	}
	n := g.Node(cluster)
	if n == nil {
		http.Error(w, fmt.Sprintf("not in election %q", cluster), http.StatusNotFound)
		return nil, false
	}
	return n, true
}

// Healthy reports whether every election of the group runs, on a live
// connection.
func (g *Group) Healthy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.order) == 0 || !g.conn.Connected() {
		return false
	}
	for _, e := range g.byName {
		if !e.node.view.Load().running {
			return false
		}
	}
	return true
}
