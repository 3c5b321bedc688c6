// Package node runs one election.Machine over a transport: the runtime of
// the node service.
//
// New receives the node's own settings (Config, checked once, in New) and
// what it runs on (Deps), as a raft node receives its dependencies: the
// transport, what it asks the cluster as it starts, and the factory of
// its machine. Package natsnode builds them over a NATS connection, with
// the NATS settings (member keys, message age, pending limits, connection
// events); the package's tests give it the in-memory network of
// pkg/node/transport.
//
// The package has one part per job:
//
//   - the loop (loop.go, with apply.go carrying out each Ready): one
//     goroutine, Run's, owns the driver (pkg/driver) and through it the
//     machine, and carries out each Ready: store, show, send, announce;
//   - the transport (pkg/node/transport, Deps.Transport): the protocol's
//     messages in and out; over NATS, the adapter of
//     pkg/node/natstransport owns subjects, signatures, the checks of
//     what arrives, replay guard, per-sender shares, "no responders" and
//     connection events;
//   - the machine: Deps.Machines builds it (package machines has each
//     algorithm's); the node knows no algorithm, only election.Machine;
//   - the group (group.go): the elections of one member process over one
//     connection (GroupDeps.Conn), which share its state writes and
//     metrics (natsnode.Group builds the NATS connection, with its
//     connection events and beats, and adds each election's adapter);
//   - the bootstrap (bootstrap.go): what the cluster says of its term,
//     asked once before the machine starts;
//   - the store (store.go): the hard state on disk;
//   - what others read (view.go, http.go, metrics.go, participant.go):
//     /status, /healthz, /metrics and the callbacks read one immutable
//     snapshot of the node (view), which the loop publishes after each
//     change;
//   - the flaps (flaps.go): the loop follows the leaderships it learns of
//     and counts those reversed within a second
//     (election_leader_flaps_total).
//
// # The loop
//
// This is the one description of the runtime's loop (docs/architecture.md
// points here); the code is in loop.go and apply.go.
//
//   - Sleeping until due. The loop selects over the context, the closing
//     of the connection, a timer set to the machine's next deadline
//     (Machine.Due: an idle node does not wake up until something is due)
//     and the transport's two bounded lanes; then it gives the machine
//     every tick that fell due (Bully and the ring take those before
//     their deadline in one call, election.Skipper).
//   - Claims first. Leadership claims (heartbeats, Coordinators, a
//     member's closed connection) have a lane of their own
//     (transport.ClaimsSize), read before the other lane
//     (Config.InboxSize), so that no other traffic can delay the current
//     leader's heartbeats.
//   - Events in the order they happened. Each queued message carries the
//     time it arrived, and the machine gets, before it, only the ticks
//     that fell due before that time: a node descheduled for a while
//     handles what arrived meanwhile before its own time-outs fire,
//     instead of timing out on messages waiting in its queue.
//   - One write per batch. The loop handles up to 64 queued events
//     (maxBatch), then commits once: one write of state.json serves the
//     batch, whose messages then leave in order.
//   - Settling before a deadline. When a deadline comes with nothing
//     queued, a node that does not lead first settles its transport (the
//     NATS adapter flushes its connection and waits until its
//     subscriptions have queued what that brought) and handles what that
//     brings as arrived before the deadline's tick (Node.settle): a
//     leader's heartbeat or a higher node's Answer still unread in its
//     socket counts, though what is measured from its arrival (a Paxos
//     grant, election.ArrivalStepper) is measured from when it really
//     arrived. A leader does not settle: its deadlines are its own
//     heartbeats and lease.
//   - Late deadlines. A node that reaches a deadline of its machine more
//     than two ticks late (lateTicks: its timer fired late, or its loop
//     was busy or descheduled) and does not lead withholds it (withhold,
//     loop.go): it settles its transport if nothing is queued, hands
//     the machine what is pending before the deadline's tick, and waits
//     one heartbeat interval and the two ticks for what a leader
//     stalled with it has yet to send (what arrived within it is
//     handled first, also by a loop that is behind). An event that moves the deadline ends the
//     wait at once (a heartbeat, a claim, a closed connection). Without
//     leases (Bully, the ring) the machine's clock then does not count
//     the node's own lateness against the leader it heard; with leases
//     it catches up, as after settling. A hung leader is timed out at
//     most one heartbeat interval and two ticks (and the loop's own
//     backlog) later than it would have been on time.
//     docs/fault-model.md ("Busy hosts") tells the mechanism.
//   - Evidence. The loop keeps when it last accepted a message from each
//     member, its timer and loop lags and the duration of its state
//     writes (health.go); each suspicion of the leader is logged once
//     with them and counted by reason (election_suspicions_total).
//   - Stalls. After a stall (a paused process, a long garbage
//     collection) the machine gets the missed ticks at once, but the
//     messages of ticks more than election.StaleTicks before the last are
//     not sent: they are out of date, and repeated by those of the last
//     ticks.
//   - Committing. The machine is driven through pkg/driver, the driver
//     the simulator uses too: it turns time into ticks, drops the
//     messages of stale ticks, batches, stamps, and hands each message
//     the tick it arrived in. After every batch the node carries out the
//     driver's Ready (commit, apply.go): it writes the hard state to the
//     data directory when it changed (and stops if it cannot: a node must
//     not act on a term that a restart could forget), then shows the new
//     status, sends each message, and, when the machine has claimed a new
//     term, announces a protocol.Announcement. While it leads, the
//     transport answers the cluster's queries with that announcement.
//   - Leaving. When its context ends, the node resigns (a leader hands
//     over), stores and publishes its last messages, flushes and drains
//     the connection within Config.ShutdownTimeout; if the connection
//     closes for good, it stops without resigning (ErrConnectionClosed);
//     if its data directory fails, it stops without a word (it could not
//     store its Resign either).
//
// # Terms across restarts
//
// The node keeps its hard state (the term it last accepted or claimed, the
// highest term it has seen, its incarnation) in state.json in its data
// directory, which it locks for its lifetime. Before its machine starts it
// also asks the cluster for the current leader (the query subject) and
// reads the last announcement kept by a JetStream stream on the leader
// subject, if there is one, and starts from the highest term of the three;
// the machine follows the leader that answered if its ID is higher
// (election.Config.Found).
// So a node restarted with its data, or a whole cluster restarted, never
// announces a term at or below one announced before; a node without data
// relies on the live members and the stream.
//
// # Lifecycle
//
// New checks the configuration and starts nothing. Run is the node's one
// lifecycle: it opens the data directory, waits until the connection is
// up, learns the cluster's term, opens the transport, starts the machine
// and blocks until its context ends; then the machine resigns (a leader
// hands over at once), its last messages are sent, and the transport is
// closed (the NATS connection drained). Beside the machine, Run calls the
// application's Config.Callbacks, modelled on client-go's leaderelection:
// OnStartedLeading with a context that ends with the leadership (before
// the message that hands over leaves, and under Paxos no later than the
// lease), OnStoppedLeading after it, OnNewLeader for each leadership it
// learns of; Run returns only after them. Run owns the connection from the
// moment it is called. If the connection closes
// under it (the server gave up on it), Run returns ErrConnectionClosed
// without resigning; if the data directory fails, an error wrapping
// ErrStorage.
//
// # What is not guaranteed
//
// Messages are sent at most once: NATS core delivery is not acknowledged,
// and the algorithms tolerate loss. The shutdown waits at most
// ShutdownTimeout for the connection to drain.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
)

// Defaults of Config.
const (
	DefaultTick            = 10 * time.Millisecond
	DefaultInboxSize       = 1024
	DefaultShutdownTimeout = time.Second
	DefaultLearnTimeout    = 500 * time.Millisecond
)

// Drop reasons of the runtime's own, beside protocol.Reasons: the
// lanes' and the NATS adapter's.
const (
	ReasonInboxFull     = transport.ReasonInboxFull
	ReasonSenderLimit   = transport.ReasonSenderLimit
	ReasonReplyNotInbox = transport.ReasonReplyNotInbox
)

// ConnectionEvents modes of the NATS settings of package natsnode
// (natsnode.Config and natsnode.GroupConfig).
const (
	// ConnectionEventsAuto subscribes to the connection events and, with a
	// probe, checks at start that the server delivers them.
	ConnectionEventsAuto = "auto"
	// ConnectionEventsOff ignores them: failures are detected by the
	// heartbeats alone.
	ConnectionEventsOff = "off"
)

// Errors of New and Run.
var (
	ErrConfig           = errors.New("node: invalid configuration")
	ErrRunning          = errors.New("node: Run called twice")
	ErrConnectionClosed = errors.New("node: NATS connection closed")
)

// Config configures a Node: the node's own settings. What it runs on
// (its transport, the machine's algorithm code, what it asks the cluster
// at start) comes in Deps; the NATS settings are package natsnode's.
type Config struct {
	// Cluster is the cluster name; it must pass protocol.ValidateCluster.
	Cluster string
	// Algorithm is the election algorithm the machine runs (Deps.Machines
	// builds it): the node shows it, announces it and knows from it
	// whether leaders hold leases.
	Algorithm protocol.Algorithm
	// Election is this node's ID, the membership and the timing in ticks.
	// Its State is ignored: the node restores its own from DataDir.
	Election election.Config
	// DataDir is the directory where the node keeps what must survive a
	// restart. It is created if missing, and locked while the node runs.
	// Required.
	DataDir string
	// Tick is the duration of one tick; DefaultTick if zero.
	Tick time.Duration
	// LearnTimeout bounds how long Run asks the cluster for its current
	// term before starting the machine. DefaultLearnTimeout if zero.
	LearnTimeout time.Duration
	// InboxSize bounds the events waiting for the machine;
	// DefaultInboxSize if zero.
	InboxSize int
	// ShutdownTimeout bounds how long Run waits, once its context ends, for
	// the last messages to be flushed and the transport to close;
	// DefaultShutdownTimeout if zero.
	ShutdownTimeout time.Duration
	// Logger receives the node's logs; slog.Default() if nil. The caller
	// tags it (the node service adds "node" and "cluster").
	Logger *slog.Logger
	// Now is the wall clock; time.Now if nil. It dates what the node
	// stores and announces.
	Now func() time.Time
	// Callbacks are called by Run as the node's leadership changes: the
	// application's work while this node leads runs in OnStartedLeading.
	// None if zero.
	Callbacks Callbacks
}

// Deps are what a node receives from outside, as a raft node receives its
// transport and storage: New checks that each is there.
type Deps struct {
	// Transport carries the protocol's messages in and out: the NATS
	// adapter (package natsnode builds it from a connection), or the
	// in-memory network of pkg/node/transport on which this package's
	// tests run. Run owns it from the moment it is called.
	Transport transport.Transport
	// Cluster is what the node asks for the cluster's leader and term as
	// it starts (bootstrap.go).
	Cluster TermSource
	// Machines builds the node's election machine (package machines).
	Machines Machines
	// Metrics are what the node counts on, and its transport with it
	// (they implement transport.Meter and natstransport.Meter): new ones
	// if nil. They are one node's: the node registers on them the gauges
	// that read it. A Group gives its own to each of its elections.
	Metrics *Metrics
}

// Machines builds the node's election machine from its election
// configuration: package machines has that of each algorithm
// (machines.Factory's New). checked, if not nil, is called for each
// signature the machine checks (election_signature_checks_total). New
// calls it once to check the configuration, Run once to start the machine.
type Machines func(cfg election.Config, checked func()) (election.Machine, error)

// Node drives one election machine over one transport.
//
// Its fields are set by New, except those of the loop: the loop's
// goroutine alone touches them. Whatever other goroutines read (HTTP, the
// metrics, the callbacks) is published in view, one immutable value.
type Node struct {
	tr      transport.Transport
	cluster TermSource // what the node asks the cluster as it starts
	cfg     Config
	machine Machines // builds the machine as Run starts
	id      uint64
	members []uint64 // sorted
	log     *slog.Logger
	metrics *Metrics
	lanes   *transport.Lanes
	states  *stateWriter // a Group's, which writes state.json; nil: alone
	// starting is a Group's: a node holds a place in it while it learns
	// the cluster's term and stores its first state (begin); nil: alone.
	starting chan struct{}

	started atomic.Bool // Run was called
	// requests carry ChangeVoters to the loop.
	requests chan votersRequest
	// view is the node's status, lease and leadership, published together
	// (setView); never nil once New returns.
	view atomic.Pointer[view]
	// leadership's context ends as the leadership does, before any message
	// that follows it (a Resign) leaves: OnStartedLeading runs under it.
	leadership leadership
	watchers   watchers // notified of every status change (lead, /status)

	// Owned by the loop.
	current *protocol.Announcement // the last leadership this node claimed
	// currentAnnounced: current has been announced.
	currentAnnounced bool
	certifier        certifier           // the machine, if it certifies its leaders
	membership       election.Membership // the machine, with dynamic membership
	drv              *driver.Driver      // drives the machine
	store            *store
	flaps            flapTracker   // the leaderships seen, for flaps.go
	health           health        // the evidence of its suspicions
	held             hold          // a deadline withheld, the node being late
	offset           time.Duration // real time the machine's clock did not count (release)
	epoch            time.Time     // the start of the machine's tick 0: on the grid (begin), or the loop's start (startOfTicks)
	aligned          bool          // a Group's: its ticks end on multiples of the tick (startOfTicks)
	wake             time.Time     // when the loop's timer is due
}

// New checks cfg and deps and returns a node on deps.Transport. It starts
// nothing; Run owns the transport from the moment it is called.
func New(cfg Config, deps Deps) (*Node, error) { return newNode(cfg, deps, false) }

// newNode checks cfg and deps, fills cfg's defaults and returns a node.
// In a group, the metrics are the group's, which reads the node through
// them itself; alone, the node registers its own gauges.
func newNode(cfg Config, deps Deps, inGroup bool) (*Node, error) {
	switch {
	case deps.Transport == nil || deps.Cluster == nil:
		return nil, fmt.Errorf("%w: no transport", ErrConfig)
	case deps.Machines == nil:
		return nil, fmt.Errorf("%w: no machine factory", ErrConfig)
	}
	if err := protocol.ValidateCluster(cfg.Cluster); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg.Election.State = election.HardState{}
	members, err := cfg.Election.Validate()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: no data directory", ErrConfig)
	}
	if r := cfg.Election.Rank; r.IsSpread() && r.Cluster() != cfg.Cluster {
		return nil, fmt.Errorf("%w: election %s is ranked as election %s's", ErrConfig, cfg.Cluster, r.Cluster())
	}
	if err := cfg.Callbacks.validate(); err != nil {
		return nil, err
	}
	if _, err := deps.Machines(cfg.Election, nil); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Tick < 0 || cfg.InboxSize < 0 || cfg.ShutdownTimeout < 0 || cfg.LearnTimeout < 0 {
		return nil, fmt.Errorf("%w: negative duration or size", ErrConfig)
	}
	setDefault(&cfg.Tick, DefaultTick)
	setDefault(&cfg.InboxSize, DefaultInboxSize)
	setDefault(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&cfg.LearnTimeout, DefaultLearnTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	n := &Node{
		tr:       deps.Transport,
		cluster:  deps.Cluster,
		cfg:      cfg,
		machine:  deps.Machines,
		id:       cfg.Election.ID,
		members:  members,
		log:      cfg.Logger,
		metrics:  deps.Metrics,
		requests: make(chan votersRequest),
		aligned:  inGroup,
	}
	if n.metrics == nil {
		n.metrics = NewMetrics()
	}
	if !inGroup {
		n.metrics.registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "election_inbox_pending", Help: helpInboxPending},
				func() float64 { return float64(n.pending()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "election_is_leader", Help: helpIsLeader},
				func() float64 { return b2f(n.leads()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "election_subscription_dropped_total", Help: helpSubscriptionDrops},
				func() float64 { return float64(n.subscriptionDrops()) }))
	}
	n.lanes = transport.NewLanes(cfg.InboxSize, n.metrics)
	n.health = newHealth(members, cfg.Election.Dynamic, n.ticks(election.MaxAdaptiveTimeoutFactor*cfg.Election.Timing.LeaderTimeoutTicks), time.Now())
	n.setView(election.SoftState{ID: n.id}, time.Time{}, nil, false)
	return n, nil
}

// signed reports whether the node's transport signs what it sends (the
// NATS adapter with member keys).
func (n *Node) signed() bool {
	s, ok := n.tr.(interface{ Signed() bool })
	return ok && s.Signed()
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// certifier is a machine whose leaders hold certificates (byzantine): an
// announcement carries the certificate of its term.
type certifier interface {
	Certificate() (certify.Certificate, bool)
}

// Run drives the machine until ctx ends, then leaves cleanly and drains the
// connection. Beside it, it calls Config.Callbacks as the leadership
// changes, and returns only once they have returned. It returns nil after
// a clean leave, ErrConnectionClosed if the connection closed under it, an
// error wrapping ErrStorage if the data directory failed, or the error
// that kept it from starting.
func (n *Node) Run(ctx context.Context) error {
	if !n.started.CompareAndSwap(false, true) {
		return ErrRunning
	}
	if cb := n.cfg.Callbacks; cb.set() {
		leadCtx, stopLead := context.WithCancel(ctx)
		led := make(chan struct{})
		go func() {
			defer close(led)
			n.lead(leadCtx, cb)
		}()
		defer func() {
			stopLead()
			<-led
		}()
	}
	return n.run(ctx)
}

// run is Run without the callbacks.
func (n *Node) run(ctx context.Context) error {
	st, saved, err := openStore(n.cfg.DataDir)
	if err != nil {
		n.tr.Abort()
		return err
	}
	st.writer = n.states
	n.store = st
	defer func() {
		if err := st.close(); err != nil {
			n.log.Error("writing the state file from the group's journal", "err", err)
		}
	}()
	switch err := n.tr.Connect(ctx, n.lanes); {
	case errors.Is(err, transport.ErrClosed):
		n.tr.Abort()
		return ErrConnectionClosed
	case ctx.Err() != nil:
		n.tr.Close()
		return nil
	case err != nil:
		n.tr.Abort()
		return err
	}
	if n.starting != nil {
		// A Group's elections start MaxStarting at a time at most.
		select {
		case n.starting <- struct{}{}:
		case <-ctx.Done():
			n.tr.Close()
			return nil
		}
	}
	err = n.begin(ctx, saved)
	if n.starting != nil {
		<-n.starting
	}
	if err != nil {
		n.tr.Abort()
		return err
	}
	return n.loop(ctx)
}

// begin learns the cluster's term (bootstrap.go), stores the state the
// machine starts from with a new incarnation, builds the machine and
// opens the transport for it.
func (n *Node) begin(ctx context.Context, saved stored) error {
	asked := time.Now()
	learned, err := Learn(ctx, n.cluster, n.cfg.LearnTimeout)
	if err != nil {
		n.log.Debug("learning the cluster's leader and term", "learned", learned, "err", err)
	}
	took := time.Since(asked)
	start := Bootstrap(saved.HardState, saved.Incarnation, learned, n.id, n.cfg.Now())
	if err := n.writeState(stored{HardState: start.State, Incarnation: start.Incarnation}); err != nil {
		return err
	}
	cfg := n.cfg.Election
	if g := cfg.Timing.QuietGrid; g > 0 {
		// The machine's ticks end on multiples of the tick since the
		// Unix epoch, and its quiet heartbeats on multiples of the grid:
		// those of the other elections of the process come due at the
		// same instants, and leave in the same batch.
		n.epoch = onTick(time.Now(), n.cfg.Tick)
		cfg.Timing.QuietPhase = int(n.epoch.UnixNano() / int64(n.cfg.Tick) % int64(g))
	}
	cfg.State = start.State
	cfg.Restored = saved.Version != 0 // state.json existed
	cfg.Incarnation = start.Incarnation
	cfg.Found = start.Found
	machine, err := n.machine(cfg, n.metrics.signatureChecks.Inc)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	drv, err := driver.New(machine, driver.Config{Tick: n.cfg.Tick, Incarnation: start.Incarnation})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.drv = drv
	n.certifier, _ = machine.(certifier)
	if cfg.Dynamic {
		n.membership, _ = machine.(election.Membership)
	}
	n.setView(machine.Status(), time.Time{}, nil, false)
	n.log.Info("state restored", "dir", n.cfg.DataDir, "term", saved.Term, "max_term", saved.MaxTerm,
		"leader_found", learned.Leader, "leader_term", learned.Term, "last_announced_term", learned.Last,
		"learn_took", took.Round(time.Millisecond), "incarnation", start.Incarnation)
	return n.tr.Open(transport.Self{Incarnation: start.Incarnation, Started: start.At})
}

// fail stops a node whose data directory failed: it must not go on acting
// on a term it could not store. It does not resign, since its Resign
// could not be stored either; the others detect its silence.
func (n *Node) fail(err error) error {
	n.stopped()
	n.log.Error("cannot store the node's state; stopping", "err", err)
	n.tr.Abort()
	return err
}

// shutdown resigns, sends the Resign, and closes the transport.
func (n *Node) shutdown() {
	n.drv.Resign()
	if err := n.commit(); err != nil {
		n.log.Error("store the state on leaving", "err", err)
	}
	n.stopped()
	n.log.Info("node resigned")
	n.tr.Close()
}

// stopped shows the node as no longer running, and ends its leadership.
func (n *Node) stopped() {
	n.leadership.end()
	n.tr.Lead(nil, time.Time{})
	v := n.view.Load()
	n.publishView(&view{status: v.status})
}
