// Package node runs one election.Machine over NATS: the runtime of the node
// service.
//
// A Node owns one goroutine (Run) that owns the machine. It selects over the
// context, a timer set to the machine's next deadline (Machine.Due: an idle
// node does not wake up until something is due), and two bounded queues:
// leadership claims (heartbeats and Coordinators) and everything else, the
// claims first, so that no other traffic can delay the current leader's
// heartbeats. Each queued message carries the time it arrived, and the
// machine gets, before it, only the ticks that fell due before that time:
// a node descheduled for a while handles what arrived meanwhile before its
// own time-outs fire, instead of timing out on messages waiting in its
// queue. When a deadline comes with nothing queued, a node that does not
// lead first flushes its connection and handles what that brings (settle):
// a message still unread in its socket is handled before the deadline's
// tick, though what is measured from its arrival (a Paxos grant) is
// measured from when it really arrived.
//
// NATS subscription callbacks never block. Each checks a message, cheapest
// check first, and queues it without waiting: its size; with member keys,
// its signature over the raw bytes by the member its Election-Signer
// header names (protocol.MemberKeys.Verify); its decoding
// (protocol.Decode), after which its sender must be that signer
// (protocol.CheckSigner); its subject (protocol.CheckRoute); its
// fields against the membership (protocol.Validate); and its freshness
// (protocol.ReplayGuard: a message already received, one of an earlier
// incarnation of its sender, or one dated further than MaxMessageAge from
// this node's clock). A message that fails a check, or finds its queue
// full, is dropped, logged at debug level and counted by reason; it never
// reaches the machine. Every subscription has pending limits, so a flood
// costs bounded memory.
//
// The machine is driven through pkg/driver, the driver the simulator uses
// too: it turns time into ticks, drops the messages of stale ticks,
// batches, and hands each message the tick it arrived in. After every
// batch of events the node carries out the driver's Ready: it writes the
// hard state to the data directory when it changed (and stops if it
// cannot: a node must not act on a term that a restart could forget),
// then publishes each message on protocol.SubjectFor (stamped with its
// incarnation, number and time, and signed with the node's key when it has
// one), then,
// when the machine has claimed a new term, a protocol.Announcement on the
// cluster's leader subject. Only while it leads does the node subscribe to
// the query subject, where it answers with that announcement: a request
// while no node leads fails at once with "no responders".
//
// Point-to-point messages are published with a reply subject under one of
// the node's own NATS inboxes that names the receiver and the message. The
// node never gets a reply to them, except the server's "no responders"
// status when nobody is subscribed to the receiver's inbox: the receiver's
// connection is gone, and the machine hears at once that it is unreachable
// instead of waiting for a time-out. Only a status for a message sent in
// the last second, and not answered before, counts.
//
// The node reaches NATS only through a Transport (transport.go): New
// wraps a *nats.Conn in one, NewWithTransport takes another, such as the
// in-memory network of pkg/node/nodetest that tests the runtime without
// sockets or real time.
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
// up, learns the cluster's term, subscribes, starts the machine and blocks
// until its context ends; then the machine resigns (a leader hands over at
// once), its last messages are published and flushed, and the connection
// is drained and closed. Beside the machine, Run calls the application's
// Config.Callbacks, modelled on client-go's leaderelection:
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
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-election/baton/pkg/bully"
	"github.com/baton-election/baton/pkg/byzantine"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/core"
	"github.com/baton-election/baton/pkg/paxos"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/ring"
)

// Defaults of Config.
const (
	DefaultTick            = 10 * time.Millisecond
	DefaultInboxSize       = 1024
	DefaultShutdownTimeout = time.Second
	DefaultMaxMessageAge   = 2 * time.Second
	DefaultLearnTimeout    = 500 * time.Millisecond
	// DefaultPendingMsgs and DefaultPendingBytes bound what NATS may hold
	// for each subscription before the node's callback takes it.
	DefaultPendingMsgs  = 1024
	DefaultPendingBytes = 1 << 20
)

// claimsQueueSize bounds the queue of leadership claims.
const claimsQueueSize = 64

// ReasonInboxFull is the drop reason of a valid message that arrived while
// its queue was full. The other reasons are protocol.Reasons.
const ReasonInboxFull protocol.Reason = "inbox_full"

// Errors of New and Run.
var (
	ErrConfig           = errors.New("node: invalid configuration")
	ErrRunning          = errors.New("node: Run called twice")
	ErrConnectionClosed = errors.New("node: NATS connection closed")
)

// Config configures a Node.
type Config struct {
	// Cluster is the cluster name; it must pass protocol.ValidateCluster.
	Cluster string
	// Algorithm selects the election algorithm.
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
	// Signer is this node's member key (its ELECTION_KEY_FILE), and Keys
	// the public keys of every member (ELECTION_KEYS_FILE): both or
	// neither. With them, the node signs everything it publishes
	// (messages, announcements, query answers), and drops, as forged,
	// every message not signed by the member it names, and connection
	// events whose user key is not the member's. Without them, messages
	// are neither signed nor checked.
	Signer *protocol.Signer
	Keys   *protocol.MemberKeys
	// MaxMessageAge is how far a message's timestamp may be from this
	// node's clock, either way, for the message to be accepted: it bounds
	// both the replay of a captured message to a node started since and
	// the clock skew between nodes. DefaultMaxMessageAge if zero.
	MaxMessageAge time.Duration
	// LearnTimeout bounds how long Run asks the cluster for its current
	// term before starting the machine. DefaultLearnTimeout if zero.
	LearnTimeout time.Duration
	// InboxSize bounds the events waiting for the machine;
	// DefaultInboxSize if zero.
	InboxSize int
	// PendingMsgs and PendingBytes bound what NATS holds for each
	// subscription; DefaultPendingMsgs and DefaultPendingBytes if zero.
	PendingMsgs, PendingBytes int
	// ShutdownTimeout bounds how long Run waits, once its context ends, for
	// the last messages to be flushed and the connection to drain;
	// DefaultShutdownTimeout if zero.
	ShutdownTimeout time.Duration
	// Logger receives the node's logs; slog.Default() if nil. The caller
	// tags it (the node service adds "node" and "cluster").
	Logger *slog.Logger
	// ConnectionEvents is ConnectionEventsAuto (the default, if empty) or
	// ConnectionEventsOff: whether the node follows the NATS server's
	// connection events to notice at once that a member's connection
	// closed (see events.go and internal/natsconf).
	ConnectionEvents string
	// Probe, if set, opens a connection to the node's NATS server under
	// the given connection name and closes it. The node uses it at start
	// to check that the server delivers connection events, and logs and
	// exports (election_connection_events) whether it does.
	Probe func(ctx context.Context, name string) error
	// Now is the wall clock; time.Now if nil. It dates the messages and
	// checks their freshness.
	Now func() time.Time
	// Callbacks are called by Run as the node's leadership changes: the
	// application's work while this node leads runs in OnStartedLeading.
	// None if zero.
	Callbacks Callbacks
}

// Node drives one election machine over one NATS connection.
type Node struct {
	nc      Transport
	cfg     Config
	id      uint64
	members []uint64 // sorted
	log     *slog.Logger
	metrics *metrics
	guard   *protocol.ReplayGuard
	// maxPayload is the largest message accepted: protocol.MaxPayload, or
	// protocol.MaxCertifiedPayload for the byzantine algorithm.
	maxPayload int

	claims   chan event // heartbeats and Coordinators
	inbox    chan event // everything else
	senders  senders    // each member's share of them (fair.go)
	replyTo  string     // prefix of the reply subjects of point-to-point messages
	replies  replies
	running  atomic.Bool
	stopping atomic.Bool
	started  atomic.Bool
	// ingesting counts the subscription handlers of election messages
	// running now: settle waits for them to queue what they took.
	ingesting atomic.Int32
	// view is the node's status, lease and leadership, published together
	// (setView); never nil once New returns.
	view atomic.Pointer[view]
	// leadership's context ends as the leadership does, before any message
	// that follows it (a Resign) leaves: OnStartedLeading runs under it.
	leadership leadership
	subs       atomic.Pointer[[]Subscription]
	watchers   watchers      // notified of every status change (lead, /status)
	conns      *connections  // nil while connection events are off; set before subscribing
	probed     chan struct{} // closed when the start-up probe of connection events is over

	lastExpiredWarning atomic.Int64 // Unix ms of the last warning about expired messages
	incarnation        uint64       // this process's incarnation; set before the subscriptions
	startedAt          time.Time    // on the wall clock, when the incarnation began; set with it

	// Owned by the Run goroutine.
	current *announcement // the last leadership this node claimed
	// currentAnnounced: current has been published on the leader subject.
	currentAnnounced bool
	certifier        certifier      // the machine, if it certifies its leaders
	drv              *driver.Driver // drives the machine
	store            *store
	querySub         Subscription
}

// event is one entry of a queue: a message, a peer found unreachable, or a
// peer whose connection closed, with the time it arrived.
type event struct {
	msg         protocol.Message
	unreachable uint64
	down        uint64
	at          time.Time
}

// announcement is the encoded Announcement of a leadership.
type announcement struct {
	term   uint64
	data   []byte
	header nats.Header // the signature, when the node has a key
}

// New checks cfg and returns a node for nc. It starts nothing.
func New(nc *nats.Conn, cfg Config) (*Node, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrConfig)
	}
	return NewWithTransport(NATSTransport(nc), cfg)
}

// NewWithTransport checks cfg and returns a node for the connection tr. It
// starts nothing; Run owns tr from the moment it is called, as it owns the
// connection of New.
func NewWithTransport(tr Transport, cfg Config) (*Node, error) {
	if tr == nil {
		return nil, fmt.Errorf("%w: no transport", ErrConfig)
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
	if err := cfg.Callbacks.validate(); err != nil {
		return nil, err
	}
	if (cfg.Signer == nil) != (cfg.Keys == nil) {
		return nil, fmt.Errorf("%w: a member key needs the members' keys, and they need it", ErrConfig)
	}
	if cfg.Signer != nil {
		if cfg.Signer.ID() != cfg.Election.ID {
			return nil, fmt.Errorf("%w: the key is member %d's, this node is %d", ErrConfig, cfg.Signer.ID(), cfg.Election.ID)
		}
		if err := cfg.Keys.Check(members, cfg.Signer); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if cfg.Algorithm.NeedsKeys() && cfg.Signer == nil {
		return nil, fmt.Errorf("%w: %s needs member keys", ErrConfig, cfg.Algorithm)
	}
	if _, err := newMachine(cfg, cfg.Election); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch cfg.ConnectionEvents {
	case "":
		cfg.ConnectionEvents = ConnectionEventsAuto
	case ConnectionEventsAuto, ConnectionEventsOff:
	default:
		return nil, fmt.Errorf("%w: connection events %q: want %q or %q", ErrConfig, cfg.ConnectionEvents, ConnectionEventsAuto, ConnectionEventsOff)
	}
	if cfg.Tick < 0 || cfg.InboxSize < 0 || cfg.ShutdownTimeout < 0 || cfg.MaxMessageAge < 0 ||
		cfg.LearnTimeout < 0 || cfg.PendingMsgs < 0 || cfg.PendingBytes < 0 {
		return nil, fmt.Errorf("%w: negative duration or size", ErrConfig)
	}
	setDefault(&cfg.Tick, DefaultTick)
	setDefault(&cfg.InboxSize, DefaultInboxSize)
	setDefault(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&cfg.MaxMessageAge, DefaultMaxMessageAge)
	setDefault(&cfg.LearnTimeout, DefaultLearnTimeout)
	setDefault(&cfg.PendingMsgs, DefaultPendingMsgs)
	setDefault(&cfg.PendingBytes, DefaultPendingBytes)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	n := &Node{
		nc:         tr,
		cfg:        cfg,
		id:         cfg.Election.ID,
		members:    members,
		log:        cfg.Logger,
		metrics:    newMetrics(),
		guard:      protocol.NewReplayGuard(cfg.MaxMessageAge),
		maxPayload: protocol.MaxPayload,
		claims:     make(chan event, claimsQueueSize),
		inbox:      make(chan event, cfg.InboxSize),
	}
	if cfg.Algorithm == protocol.Byzantine {
		n.maxPayload = protocol.MaxCertifiedPayload
	}
	n.metrics.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "election_subscription_dropped_total",
		Help: "Messages NATS dropped before the node read them, because a subscription's pending limits were reached.",
	}, n.slowConsumerDrops))
	n.metrics.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "election_is_leader",
		Help: "1 while this node leads (under a lease, while the lease holds), 0 otherwise.",
	}, func() float64 {
		if n.Status().State == election.Leader.String() {
			return 1
		}
		return 0
	}))
	n.setView(election.Status{ID: n.id}, time.Time{}, nil)
	return n, nil
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

// newMachine builds the machine of the node's algorithm with ecfg.
func newMachine(cfg Config, ecfg election.Config) (election.Machine, error) {
	switch cfg.Algorithm {
	case protocol.Bully:
		return bully.New(ecfg)
	case protocol.Ring:
		return ring.New(ecfg)
	case protocol.Paxos:
		return paxos.New(ecfg)
	case protocol.Byzantine:
		if cfg.Signer == nil {
			return nil, fmt.Errorf("%s needs member keys", cfg.Algorithm)
		}
		return byzantine.New(byzantine.Config{Config: ecfg, Cluster: cfg.Cluster, Signer: cfg.Signer.Certify(), Keys: cfg.Keys.Members()})
	}
	return nil, fmt.Errorf("unknown algorithm %q", cfg.Algorithm)
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
	closed, stopClosed := n.nc.StatusChanged(nats.CLOSED)
	defer stopClosed()
	st, saved, err := openStore(n.cfg.DataDir)
	if err != nil {
		n.nc.Close()
		return err
	}
	n.store = st
	defer st.close()
	if err := n.awaitConnection(ctx, closed); err != nil {
		return err
	}
	if ctx.Err() != nil {
		n.drain()
		return nil
	}
	err = n.begin(ctx, saved)
	if n.probed != nil {
		defer func() { <-n.probed }()
	}
	if err != nil {
		n.nc.Close()
		return err
	}
	return n.loop(ctx, closed)
}

// begin learns the cluster's term, stores the state the machine starts
// from with a new incarnation, builds the machine and subscribes.
func (n *Node) begin(ctx context.Context, saved stored) error {
	eventSubs, err := n.subscribeEvents()
	if err != nil {
		return err
	}
	n.subs.Store(&eventSubs)
	// The probe runs beside the node and only logs and sets a gauge: the
	// node must not stay deaf to its peers while it waits for an event (a
	// node that does not answer counts as gone to the others). Run waits
	// for it before returning.
	n.probed = make(chan struct{})
	go func() {
		defer close(n.probed)
		n.probeEvents(ctx)
	}()
	asked := time.Now()
	learned := n.learn(ctx)
	took := time.Since(asked)
	state := saved.HardState
	// What the cluster says moves the terms no further than one member's
	// messages may (core.TermBurst): an announcement or an answer is a
	// member's word too, and one near the ceiling would leave this node
	// no term to claim. It catches up from the messages if it is behind.
	learned = learned.Bounded(state.MaxTerm + core.TermBurst)
	state.MaxTerm = max(state.MaxTerm, learned.MaxTerm())
	started := n.cfg.Now()
	inc := max(uint64(started.UnixNano()), saved.Incarnation+1)
	if err := n.store.write(stored{HardState: state, Incarnation: inc}); err != nil {
		return err
	}
	cfg := n.cfg.Election
	cfg.State = state
	cfg.Restored = saved.Version != 0 // state.json existed
	cfg.Incarnation = inc
	if learned.Leader != n.id {
		cfg.Found = election.Leadership{Leader: learned.Leader, Term: learned.Term}
	}
	machine, err := newMachine(n.cfg, cfg)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	drv, err := driver.New(machine, driver.Config{Tick: n.cfg.Tick, Incarnation: inc})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.drv = drv
	n.certifier, _ = machine.(certifier)
	n.incarnation, n.startedAt = inc, started
	n.setView(machine.Status(), time.Time{}, nil)
	n.log.Info("state restored", "dir", n.cfg.DataDir, "term", saved.Term, "max_term", saved.MaxTerm,
		"leader_found", learned.Leader, "leader_term", learned.Term, "last_announced_term", learned.Last,
		"learn_took", took.Round(time.Millisecond), "incarnation", inc)
	if err := n.subscribe(); err != nil {
		return err
	}
	// Make sure the server knows our subscriptions before anyone can
	// answer our first messages.
	if err := n.nc.Flush(n.cfg.ShutdownTimeout); err != nil {
		n.log.Warn("flush after subscribing", "err", err)
	}
	return nil
}

// loop is the node's one goroutine from the machine's start to the end.
//
// It gives the machine its events in the order they happened: before a
// queued message, only the ticks that fell due before the message arrived.
// A node that was descheduled for a while (a loaded machine, a paused
// process) thus handles the answers and claims that arrived meanwhile
// before its own time-outs, as if it had never stalled, instead of timing
// out on messages that are waiting in its queue.
func (n *Node) loop(ctx context.Context, closed <-chan nats.Status) error {
	n.drv.Start(time.Now())
	timer := time.NewTimer(n.untilDeadline())
	defer timer.Stop()
	n.running.Store(true)
	n.log.Info("node started", "algorithm", n.cfg.Algorithm, "members", n.members, "tick", n.cfg.Tick,
		"signed", n.cfg.Signer != nil, "incarnation", n.drv.Incarnation())
	if err := n.commit(); err != nil {
		return n.fail(err)
	}
	for {
		ev, ok := n.queued()
		if !ok {
			// Nothing waits: catch up with the clock, then sleep until the
			// machine's next deadline or the next event.
			n.drv.Advance(time.Now())
			if err := n.commit(); err != nil {
				return n.fail(err)
			}
			timer.Reset(n.untilDeadline())
			select {
			case <-ctx.Done():
				n.shutdown()
				return nil
			case <-closed:
				n.setStopped()
				n.stopping.Store(true)
				n.log.Warn("NATS connection closed; stopping without resigning")
				return ErrConnectionClosed
			case <-timer.C:
				if err := n.settle(); err != nil {
					return n.fail(err)
				}
				continue
			case ev = <-n.claims:
			case ev = <-n.inbox:
			}
		}
		// This event and whatever else is queued, up to maxBatch, then one
		// commit: under load, one write of the state serves them all.
		for handled := 1; ; handled++ {
			n.drv.Advance(ev.at)
			n.handle(ev)
			if handled == maxBatch {
				break
			}
			if ev, ok = n.queued(); !ok {
				break
			}
		}
		if err := n.commit(); err != nil {
			return n.fail(err)
		}
		if ctx.Err() != nil {
			n.shutdown()
			return nil
		}
	}
}

// maxBatch bounds the events handled between two commits.
const maxBatch = 64

// settleTimeout bounds how long settle waits for the NATS server's answer
// to its flush.
const settleTimeout = 100 * time.Millisecond

// maxSettleYields bounds how many times settle lets the subscriptions'
// handlers run to queue what the flush brought.
const maxSettleYields = 64

// settle runs when the machine's next deadline has come with nothing
// queued, before the deadline's ticks are given. A follower or candidate
// first makes sure it has read everything the NATS server has sent it (a
// flush: the server answers it only after what it sent before), lets the
// subscriptions' handlers queue it, and hands it to the machine as if it
// had arrived in time: after every tick before the deadline's, which the
// loop gives next (so a heartbeat of a new leader, read there, is not
// followed at once by the silence it ended). On a loaded machine a node is
// often descheduled past its deadline while the leader's heartbeat, or a higher
// node's Answer, waits unread in its socket: without this it would time
// out a leader that is alive, or declare itself while a higher node is
// alive. Only the order is moved, not the time: each message still
// carries the time it arrived, and what is measured from the arrival (a
// Paxos acceptor's grant, election.ArrivalStepper) is measured from
// there, so a grant never ends before the lease argument assumes. A
// leader's deadlines are its own heartbeats and lease; it does not flush
// for them.
func (n *Node) settle() error {
	if n.drv.Status().Role == election.Leader {
		return nil
	}
	if err := n.nc.Flush(settleTimeout); err != nil {
		n.log.Debug("flush before a deadline", "err", err)
	}
	for range maxSettleYields {
		if n.pending() == 0 && n.ingesting.Load() == 0 {
			break
		}
		runtime.Gosched() // the handlers run; they never block
	}
	runtime.Gosched() // and one that was taking a message finishes
	ev, ok := n.queued()
	if !ok {
		return nil
	}
	n.drv.Settle() // the ticks before the deadline's, which the loop slept for
	for ; ok; ev, ok = n.queued() {
		n.handle(ev)
	}
	return n.commit()
}

// pending is how many messages wait in the subscriptions for their
// handlers.
func (n *Node) pending() int {
	subs := n.subs.Load()
	if subs == nil {
		return 0
	}
	total := 0
	for _, s := range *subs {
		if p, err := s.Pending(); err == nil {
			total += p
		}
	}
	return total
}

// queued returns the next queued event without waiting: leadership claims
// first, so that no other traffic can delay them.
func (n *Node) queued() (event, bool) {
	select {
	case ev := <-n.claims:
		return ev, true
	default:
	}
	select {
	case ev := <-n.claims:
		return ev, true
	case ev := <-n.inbox:
		return ev, true
	default:
		return event{}, false
	}
}

// untilDeadline is how long from now until the machine's next deadline.
func (n *Node) untilDeadline() time.Duration {
	return max(0, time.Until(n.drv.At(n.drv.Deadline())))
}

// setStopped marks the node as no longer running and wakes lead.
func (n *Node) setStopped() {
	n.running.Store(false)
	n.leadership.end()
	n.changed()
}

// handle gives one queued event to the machine.
func (n *Node) handle(ev event) {
	if ev.down != 0 {
		n.log.Debug("peer's connection closed", "peer", ev.down)
		n.drv.PeerDown(ev.down)
		return
	}
	if ev.unreachable != 0 {
		n.metrics.unreachable.Inc()
		n.log.Debug("peer unreachable", "peer", ev.unreachable)
		n.drv.Unreachable(ev.unreachable)
		return
	}
	n.log.Debug("receive", "msg", ev.msg)
	// With the tick it arrived in, which is later than the machine's when
	// settle hands it over before the deadline's tick: a Paxos grant is
	// counted from the arrival.
	n.drv.Step(ev.msg, ev.at)
}

// fail stops a node whose data directory failed: it must not go on acting
// on a term it could not store. It does not resign, since its Resign
// could not be stored either; the others detect its silence.
func (n *Node) fail(err error) error {
	n.setStopped()
	n.stopping.Store(true)
	n.log.Error("cannot store the node's state; stopping", "err", err)
	n.nc.Close()
	return err
}

// awaitConnection returns once the connection is up, ctx ends (nil), or the
// connection closes (ErrConnectionClosed).
func (n *Node) awaitConnection(ctx context.Context, closed <-chan nats.Status) error {
	connected, stopConnected := n.nc.StatusChanged(nats.CONNECTED)
	defer stopConnected()
	for !n.nc.IsConnected() {
		if n.nc.IsClosed() {
			return ErrConnectionClosed
		}
		n.log.Info("waiting for NATS")
		select {
		case <-ctx.Done():
			return nil
		case <-closed:
			return ErrConnectionClosed
		case <-connected:
		}
	}
	return nil
}

// subscribe subscribes to the broadcast subjects, this node's inbox and
// the reply subjects of its point-to-point messages, each with pending
// limits.
func (n *Node) subscribe() error {
	var subs []Subscription
	subscribe := func(subject string, cb func(*nats.Msg)) error {
		counted := func(msg *nats.Msg) {
			n.ingesting.Add(1)
			defer n.ingesting.Add(-1)
			cb(msg)
		}
		sub, err := n.nc.Subscribe(subject, n.cfg.PendingMsgs, n.cfg.PendingBytes, counted)
		if err != nil {
			return fmt.Errorf("node: subscribe %s: %w", subject, err)
		}
		subs = append(subs, sub)
		return nil
	}
	subjects := append(protocol.BroadcastSubjectsOf(n.cfg.Cluster, n.cfg.Algorithm), protocol.InboxSubject(n.cfg.Cluster, n.id))
	for _, s := range subjects {
		if err := subscribe(s, n.onMessage); err != nil {
			return err
		}
	}
	n.replyTo = n.nc.NewInbox()
	if err := subscribe(n.replyTo+".*.*", n.onReply); err != nil {
		return err
	}
	if events := n.subs.Load(); events != nil {
		subs = append(subs, *events...)
	}
	n.subs.Store(&subs)
	return nil
}

// slowConsumerDrops is how many messages NATS dropped because a
// subscription's pending limits were reached.
func (n *Node) slowConsumerDrops() float64 {
	subs := n.subs.Load()
	if subs == nil {
		return 0
	}
	total := 0
	for _, s := range *subs {
		if d, err := s.Dropped(); err == nil {
			total += d
		}
	}
	return float64(total)
}

// shutdown resigns, publishes the Resign, and drains the connection.
func (n *Node) shutdown() {
	n.stopping.Store(true)
	n.drv.Resign()
	if err := n.commit(); err != nil {
		n.log.Error("store the state on leaving", "err", err)
	}
	n.setStopped()
	n.log.Info("node resigned")
	n.drain()
}

// drain flushes what was published and drains and closes the connection,
// waiting at most ShutdownTimeout in all.
func (n *Node) drain() {
	n.stopping.Store(true)
	deadline := time.NewTimer(n.cfg.ShutdownTimeout)
	defer deadline.Stop()
	closed, stopClosed := n.nc.StatusChanged(nats.CLOSED)
	defer stopClosed()
	if err := n.nc.Drain(); err != nil {
		if !errors.Is(err, nats.ErrConnectionClosed) {
			n.log.Warn("drain", "err", err)
		}
		n.nc.Close()
		return
	}
	select {
	case <-closed:
	case <-deadline.C:
		n.log.Warn("drain timed out; closing", "timeout", n.cfg.ShutdownTimeout)
		n.nc.Close()
	}
}

// replies are the point-to-point messages sent recently, by reply
// subject, so that a "no responders" status counts only for one of them,
// once.
type replies struct {
	mu   sync.Mutex
	sent map[string]time.Time
}

// replyWindow is how long a point-to-point message's "no responders"
// status is awaited.
const replyWindow = time.Second

// maxReplies bounds the reply subjects remembered; beyond it the oldest
// half-window is forgotten.
const maxReplies = 4096

func (r *replies) add(subject string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent == nil {
		r.sent = make(map[string]time.Time)
	}
	if len(r.sent) >= maxReplies {
		for s, at := range r.sent {
			if now.Sub(at) > replyWindow/2 {
				delete(r.sent, s)
			}
		}
	}
	if len(r.sent) < maxReplies {
		r.sent[subject] = now
	}
}

// take reports whether subject is the reply subject of a message sent in
// the last replyWindow, and forgets it.
func (r *replies) take(subject string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.sent[subject]
	delete(r.sent, subject)
	return ok && now.Sub(at) <= replyWindow
}
