// Package node runs one election.Machine over NATS: the runtime of the node
// service.
//
// A Node owns one goroutine (Run) that owns the machine. It selects over the
// context, a ticker of one tick, and a bounded inbox. NATS subscription
// callbacks never block: they decode the message (protocol.Decode), verify
// its signature when the cluster has a secret (protocol.Verify), check that
// it came on its own subject (protocol.CheckRoute) and could have been sent
// by a member (protocol.Validate), and push it to the inbox without waiting.
// A message that fails a check, or finds the inbox full, is dropped, logged
// at debug level and counted by reason; it never reaches the machine.
//
// After every event the node drains the machine's Ready: it publishes each
// message on protocol.SubjectFor (signed when a secret is set) and, when the
// machine has claimed a new term, a protocol.Announcement on the cluster's
// leader subject. The node that leads answers requests on the query subject
// with that announcement.
//
// Point-to-point messages are published with a reply subject under one of
// the node's own NATS inboxes that names the receiver. The node never gets a
// reply to them, except the server's "no responders" status when nobody is
// subscribed to the receiver's inbox: the receiver's connection is gone, and
// the machine hears at once that it is unreachable instead of waiting for a
// time-out.
//
// # Lifecycle
//
// New starts nothing. Run waits until the connection is up, subscribes,
// starts the machine and blocks until its context ends; then the machine
// resigns (a leader hands over at once), its last messages are published and
// flushed, and the connection is drained and closed. Run owns the connection
// from the moment it is called. If the connection closes under it (the
// server gave up on it), Run returns ErrConnectionClosed without resigning.
//
// # What is not guaranteed
//
// Messages are sent at most once: NATS core delivery is not acknowledged,
// and the algorithms tolerate loss. A message that arrives while the inbox
// is full is dropped. The shutdown waits at most ShutdownTimeout for the
// connection to drain.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/bully"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/ring"
)

// Defaults of Config.
const (
	DefaultTick            = 10 * time.Millisecond
	DefaultInboxSize       = 1024
	DefaultShutdownTimeout = time.Second
)

// ReasonInboxFull is the drop reason of a valid message that arrived while
// the inbox was full. The other reasons are protocol.Reasons.
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
	Election election.Config
	// Tick is the duration of one tick; DefaultTick if zero.
	Tick time.Duration
	// Secret is the cluster's shared HMAC key. When set, every message is
	// signed and every message received must carry a valid signature. When
	// empty, messages are neither signed nor checked.
	Secret []byte
	// InboxSize bounds the events waiting for the machine;
	// DefaultInboxSize if zero.
	InboxSize int
	// ShutdownTimeout bounds how long Run waits, once its context ends, for
	// the last messages to be flushed and the connection to drain;
	// DefaultShutdownTimeout if zero.
	ShutdownTimeout time.Duration
	// Logger receives the node's logs; slog.Default() if nil. The caller
	// tags it (the node service adds "node" and "cluster").
	Logger *slog.Logger
}

// Node drives one election machine over one NATS connection.
type Node struct {
	nc      *nats.Conn
	cfg     Config
	id      uint64
	members []uint64 // sorted
	machine election.Machine
	log     *slog.Logger
	metrics *metrics

	inbox    chan event
	replyTo  string // prefix of the reply subjects of point-to-point messages
	running  atomic.Bool
	stopping atomic.Bool
	started  atomic.Bool
	status   atomic.Pointer[Status]
	current  atomic.Pointer[announcement] // the leadership this node announced

	// Owned by the Run goroutine.
	last election.Status
}

// event is one entry of the inbox: a message, or a peer found unreachable.
type event struct {
	msg         protocol.Message
	unreachable uint64
}

// announcement is the encoded Announcement of a leadership.
type announcement struct {
	term   uint64
	data   []byte
	header nats.Header // the signature, when the cluster has a secret
}

// New checks cfg and returns a node for nc. It starts nothing.
func New(nc *nats.Conn, cfg Config) (*Node, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrConfig)
	}
	if err := protocol.ValidateCluster(cfg.Cluster); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	members, err := cfg.Election.Validate()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var machine election.Machine
	switch cfg.Algorithm {
	case protocol.Bully:
		machine, err = bully.New(cfg.Election)
	case protocol.Ring:
		machine, err = ring.New(cfg.Election)
	default:
		return nil, fmt.Errorf("%w: unknown algorithm %q", ErrConfig, cfg.Algorithm)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Tick < 0 || cfg.InboxSize < 0 || cfg.ShutdownTimeout < 0 {
		return nil, fmt.Errorf("%w: negative tick, inbox size or shutdown time-out", ErrConfig)
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.InboxSize == 0 {
		cfg.InboxSize = DefaultInboxSize
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{
		nc:      nc,
		cfg:     cfg,
		id:      cfg.Election.ID,
		members: members,
		machine: machine,
		log:     cfg.Logger,
		metrics: newMetrics(),
		inbox:   make(chan event, cfg.InboxSize),
	}
	n.last = machine.Status()
	n.setStatus(n.last)
	return n, nil
}

// Run drives the machine until ctx ends, then leaves cleanly and drains the
// connection. It returns nil after a clean leave, ErrConnectionClosed if the
// connection closed under it, or the error that kept it from starting.
func (n *Node) Run(ctx context.Context) error {
	if !n.started.CompareAndSwap(false, true) {
		return ErrRunning
	}
	closed := n.nc.StatusChanged(nats.CLOSED)
	defer n.nc.RemoveStatusListener(closed)
	if err := n.awaitConnection(ctx, closed); err != nil {
		return err
	}
	if ctx.Err() != nil {
		n.drain()
		return nil
	}
	if err := n.subscribe(); err != nil {
		n.nc.Close()
		return err
	}
	// Make sure the server knows our subscriptions before anyone can
	// answer our first messages.
	if err := n.nc.FlushTimeout(n.cfg.ShutdownTimeout); err != nil {
		n.log.Warn("flush after subscribing", "err", err)
	}

	ticker := time.NewTicker(n.cfg.Tick)
	defer ticker.Stop()
	n.running.Store(true)
	n.log.Info("node started", "algorithm", n.cfg.Algorithm, "members", n.members, "tick", n.cfg.Tick, "signed", len(n.cfg.Secret) > 0)
	n.machine.Start()
	n.afterEvent(false)
	for {
		select {
		case <-ctx.Done():
			n.shutdown()
			return nil
		case <-closed:
			n.running.Store(false)
			n.stopping.Store(true)
			n.log.Warn("NATS connection closed; stopping without resigning")
			return ErrConnectionClosed
		case <-ticker.C:
			n.machine.Tick()
			n.afterEvent(true)
		case ev := <-n.inbox:
			if ev.unreachable != 0 {
				n.metrics.unreachable.Inc()
				n.log.Debug("peer unreachable", "peer", ev.unreachable)
				n.machine.Unreachable(ev.unreachable)
			} else {
				n.log.Debug("receive", "msg", ev.msg)
				n.machine.Step(ev.msg)
			}
			n.afterEvent(false)
		}
	}
}

// awaitConnection returns once the connection is up, ctx ends (nil), or the
// connection closes (ErrConnectionClosed).
func (n *Node) awaitConnection(ctx context.Context, closed <-chan nats.Status) error {
	connected := n.nc.StatusChanged(nats.CONNECTED)
	defer n.nc.RemoveStatusListener(connected)
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

// subscribe subscribes to the broadcast subjects, this node's inbox, the
// query subject and the reply subjects of its point-to-point messages.
func (n *Node) subscribe() error {
	subjects := append(protocol.BroadcastSubjects(n.cfg.Cluster), protocol.InboxSubject(n.cfg.Cluster, n.id))
	for _, s := range subjects {
		if _, err := n.nc.Subscribe(s, n.onMessage); err != nil {
			return fmt.Errorf("node: subscribe %s: %w", s, err)
		}
	}
	if _, err := n.nc.Subscribe(protocol.QuerySubject(n.cfg.Cluster), n.onQuery); err != nil {
		return fmt.Errorf("node: subscribe to queries: %w", err)
	}
	n.replyTo = n.nc.NewInbox()
	if _, err := n.nc.Subscribe(n.replyTo+".*", n.onReply); err != nil {
		return fmt.Errorf("node: subscribe to replies: %w", err)
	}
	return nil
}

// shutdown resigns, publishes the Resign, and drains the connection.
func (n *Node) shutdown() {
	n.stopping.Store(true)
	n.machine.Resign()
	n.afterEvent(false)
	n.running.Store(false)
	n.log.Info("node resigned")
	n.drain()
}

// drain flushes what was published and drains and closes the connection,
// waiting at most ShutdownTimeout in all.
func (n *Node) drain() {
	n.stopping.Store(true)
	deadline := time.NewTimer(n.cfg.ShutdownTimeout)
	defer deadline.Stop()
	closed := n.nc.StatusChanged(nats.CLOSED)
	defer n.nc.RemoveStatusListener(closed)
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

// onMessage is the callback of every election subject. It never blocks.
func (n *Node) onMessage(msg *nats.Msg) {
	if n.stopping.Load() {
		return
	}
	m, err := protocol.Decode(msg.Data)
	if err == nil && len(n.cfg.Secret) > 0 {
		err = protocol.Verify(n.cfg.Secret, msg.Subject, msg.Data, msg.Header.Get(protocol.SignatureHeader))
	}
	if err == nil {
		err = protocol.CheckRoute(n.cfg.Cluster, msg.Subject, m)
	}
	if err == nil {
		err = protocol.Validate(m, n.members)
	}
	if err != nil {
		n.drop(protocol.ReasonOf(err), msg.Subject, err)
		return
	}
	select {
	case n.inbox <- event{msg: m}:
		n.metrics.received.WithLabelValues(string(m.Type)).Inc()
	default:
		n.drop(ReasonInboxFull, msg.Subject, nil)
	}
}

// onReply handles the server's answer to a point-to-point message: only a
// "no responders" status is expected, meaning the receiver is gone.
func (n *Node) onReply(msg *nats.Msg) {
	if n.stopping.Load() || msg.Header.Get("Status") != "503" {
		return
	}
	peer, err := strconv.ParseUint(msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:], 10, 64)
	if err != nil || !slices.Contains(n.members, peer) {
		return
	}
	select {
	case n.inbox <- event{unreachable: peer}:
	default:
		n.drop(ReasonInboxFull, msg.Subject, nil)
	}
}

// onQuery answers a request for the leader, if this node leads.
func (n *Node) onQuery(msg *nats.Msg) {
	if msg.Reply == "" || n.stopping.Load() {
		return
	}
	a := n.current.Load()
	st := n.status.Load()
	if a == nil || st.State != election.Leader.String() || st.Term != a.term {
		return
	}
	if err := msg.RespondMsg(&nats.Msg{Data: a.data, Header: a.header}); err != nil {
		n.log.Warn("answer query", "err", err)
	}
}

// drop counts and logs a message that does not reach the machine.
func (n *Node) drop(reason protocol.Reason, subject string, err error) {
	n.metrics.dropped.WithLabelValues(string(reason)).Inc()
	n.log.Debug("message dropped", "reason", reason, "subject", subject, "err", err)
}

// afterEvent carries out what the machine wants after an event and updates
// the status and metrics. tick tells whether the event was a tick.
func (n *Node) afterEvent(tick bool) {
	rd := n.machine.Ready()
	for _, m := range rd.Messages {
		n.log.Debug("send", "msg", m)
		n.publish(m)
	}
	st := n.machine.Status()
	if rd.Claimed != 0 {
		// Announce once the status shows the leadership, so whoever
		// hears the announcement finds it in /status and in queries.
		defer n.announce(rd.Claimed)
	}
	prev := n.last
	n.last = st
	if st == prev && rd.Claimed == 0 {
		return
	}
	if prev.Role != election.Candidate && (st.Role == election.Candidate || rd.Claimed != 0) {
		n.metrics.electionsStarted.Inc()
	}
	if tick && prev.Role == election.Follower && prev.Leader != 0 && prev.Leader != n.id && st.Leader != prev.Leader {
		n.metrics.leaderTimeouts.Inc()
		n.log.Info("leader timed out", "leader", prev.Leader, "term", prev.Term)
	}
	if st.Leader != 0 && (st.Leader != prev.Leader || st.Term != prev.Term) {
		n.metrics.leaderChanges.Inc()
		n.log.Info("leader", "leader", st.Leader, "term", st.Term, "state", st.Role)
	}
	n.metrics.term.Set(float64(st.Term))
	if st.Role == election.Leader {
		n.metrics.isLeader.Set(1)
	} else {
		n.metrics.isLeader.Set(0)
	}
	n.setStatus(st)
}

// publish sends one message of the machine.
func (n *Node) publish(m protocol.Message) {
	data, err := protocol.Encode(m)
	if err != nil {
		n.log.Error("encode", "msg", m, "err", err)
		return
	}
	out := &nats.Msg{Subject: protocol.SubjectFor(n.cfg.Cluster, m), Data: data}
	if len(n.cfg.Secret) > 0 {
		out.Header = nats.Header{}
		out.Header.Set(protocol.SignatureHeader, protocol.Sign(n.cfg.Secret, out.Subject, data))
	}
	if m.To != 0 && n.replyTo != "" {
		out.Reply = n.replyTo + "." + strconv.FormatUint(m.To, 10)
	}
	if err := n.nc.PublishMsg(out); err != nil {
		n.log.Warn("publish", "msg", m, "err", err)
		return
	}
	n.metrics.sent.WithLabelValues(string(m.Type)).Inc()
}

// announce publishes this node's leadership with term on the leader subject
// and keeps it to answer queries.
func (n *Node) announce(term uint64) {
	data, err := protocol.EncodeAnnouncement(protocol.Announcement{
		Cluster:   n.cfg.Cluster,
		Leader:    n.id,
		Term:      term,
		Algorithm: n.cfg.Algorithm,
		At:        protocol.Timestamp{Time: time.Now().UTC()},
	})
	if err != nil {
		n.log.Error("encode announcement", "err", err)
		return
	}
	a := &announcement{term: term, data: data}
	if len(n.cfg.Secret) > 0 {
		a.header = nats.Header{}
		a.header.Set(protocol.SignatureHeader, protocol.SignAnnouncement(n.cfg.Secret, n.cfg.Cluster, data))
	}
	n.current.Store(a)
	out := &nats.Msg{Subject: protocol.LeaderSubject(n.cfg.Cluster), Data: data, Header: a.header}
	if err := n.nc.PublishMsg(out); err != nil {
		n.log.Warn("publish announcement", "term", term, "err", err)
		return
	}
	n.log.Info("announced leadership", "term", term)
}
