// Package natstransport is the NATS adapter of a node's transport
// (pkg/node/transport): the one place where the election meets NATS.
//
// It owns the subjects (protocol.SubjectFor and the others of
// pkg/protocol), the signatures of what it publishes (pkg/signing) and the checks of
// what it receives, the replay guard, the per-sender limits, the "no
// responders" status of point-to-point messages, the server's connection
// events, and the subscriptions' pending limits.
//
// NATS subscription callbacks never block. Each checks a message, cheapest
// check first, and queues it on the node's lanes without waiting: its
// size; with member keys, its signature over the raw bytes by the member
// its Election-Signer header names (signing.MemberKeys.Verify); its
// decoding (protocol.Decode), after which its sender must be that signer
// (signing.CheckSigner); its subject (protocol.CheckRoute); its fields
// against the membership (protocol.Validate); its addressee
// (protocol.CheckAddressee); its freshness (protocol.ReplayGuard: a
// message already received, one of an earlier incarnation of its sender,
// or one dated further than MaxMessageAge from this node's clock); and
// its sender's share (fair.go). A message that fails a check, or finds
// its lane full, is dropped, logged at debug level and counted by reason;
// it never reaches the machine. Every subscription has pending limits, so
// a flood costs bounded memory.
//
// Point-to-point messages are published with a reply subject under one of
// the node's own NATS inboxes that names the receiver and the message. The
// node never gets a reply to them, except the server's "no responders"
// status when nobody is subscribed to the receiver's inbox: the receiver's
// connection is gone, and the machine hears at once that it is unreachable
// instead of waiting for a time-out. Only a status for a message sent in
// the last second, and not answered before, counts.
//
// Only while the node leads does the adapter subscribe to the query
// subject, where it answers with the node's announcement: a request while
// no node leads fails at once with "no responders".
//
// Settle flushes the connection (the server answers a flush only after
// what it sent before) and then waits, through a barrier of the NATS
// client (nats.Conn.Barrier), until every subscription's callback has
// taken what came before the answer: what was unread in the socket is on
// the lanes when Settle returns.
package natstransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Defaults of Config.
const (
	DefaultPendingMsgs     = 1024
	DefaultPendingBytes    = 1 << 20
	DefaultShutdownTimeout = time.Second
	DefaultProbeTimeout    = 500 * time.Millisecond
)

// settleTimeout bounds how long Settle waits for the server's answer to
// its flush, and then for the callbacks.
const settleTimeout = 100 * time.Millisecond

// Config configures an Adapter.
type Config struct {
	// Cluster is the cluster's name, Algorithm the election's, ID this
	// node's, Members every member's, sorted.
	Cluster   string
	Algorithm protocol.Algorithm
	ID        uint64
	Members   []uint64
	// Dynamic: the membership is dynamic, so any ID that
	// protocol.DynamicMember allows may be a member's (Members holds the
	// members known at start).
	Dynamic bool
	// MaxPayload bounds a received message's size; protocol.MaxPayload if
	// zero.
	MaxPayload int
	// Signer and Keys: both or neither (see node.Config).
	Signer *signing.Signer
	Keys   *signing.MemberKeys
	// MaxMessageAge bounds a message's age either way (ReplayGuard).
	MaxMessageAge time.Duration
	// PendingMsgs and PendingBytes bound what NATS holds for each
	// subscription; DefaultPendingMsgs and DefaultPendingBytes if zero.
	PendingMsgs, PendingBytes int
	// ConnectionEvents: follow the server's connection events.
	ConnectionEvents bool
	// Probe, if set, opens and closes a connection under the given name,
	// to check that the server delivers connection events; ProbeTimeout
	// bounds the wait for its event (DefaultProbeTimeout if zero).
	Probe        func(ctx context.Context, name string) error
	ProbeTimeout time.Duration
	// ShutdownTimeout bounds Close; DefaultShutdownTimeout if zero.
	ShutdownTimeout time.Duration
	// Now is the wall clock; time.Now if nil.
	Now    func() time.Time
	Logger *slog.Logger
	// Meter counts the connection events and the signatures checked;
	// required.
	Meter Meter
	// Shared, if set, is the connection this adapter shares with the
	// other elections of its process: Close and Abort leave it open,
	// and its connection events come through Shared (which probes them;
	// Probe is not used).
	Shared *Shared
}

// Meter counts the connection events and the signatures checked.
type Meter interface {
	// EventsDelivered: the server delivers connection events (the first
	// one arrived).
	EventsDelivered()
	// PeerDisconnected: an event reported a member's connection closed.
	PeerDisconnected()
	// SignatureChecked: the signature of a received message was checked
	// (with Config.Keys).
	SignatureChecked()
}

// Adapter is the transport.Transport of one NATS connection.
type Adapter struct {
	nc    *nats.Conn
	cfg   Config
	log   *slog.Logger
	lanes *transport.Lanes // set by Connect
	guard *protocol.ReplayGuard

	senders  senders // each member's share of the lanes (fair.go)
	replies  replies[struct{}]
	conns    *connections // nil while connection events are off
	stopping atomic.Bool
	// claimer is the member whose leadership claim (a heartbeat or a
	// Coordinator) the election took last, 0 before any: a hint of its
	// leader, by which a Shared connection tells the elections a member
	// led first when the member goes down (leadFirst).
	claimer atomic.Uint64

	// Set by Open before the subscriptions that read them.
	self    transport.Self
	replyTo string // prefix of the reply subjects of point-to-point messages
	// subjects are those the adapter takes from a Shared connection's
	// wildcard subscriptions; set by Open.
	subjects map[string]struct{}

	mu   sync.Mutex // guards subs
	subs []*nats.Subscription

	answer   atomic.Pointer[answer] // what queries are answered with; nil: none
	querySub *nats.Subscription     // owned by the node's loop (Lead)

	lastExpiredWarning atomic.Int64 // Unix ms of the last warning about expired messages

	closed     chan struct{} // closed when the connection is
	closedStat chan nats.Status
	stop       context.CancelFunc // ends the probe and the watcher of CLOSED
	ctx        context.Context
	wg         sync.WaitGroup // the probe and the watcher of CLOSED
	once       sync.Once
}

// answer is an encoded announcement and when it stops being valid.
type answer struct {
	of     *protocol.Announcement
	data   []byte
	header nats.Header
	until  time.Time // zero: no end
}

var _ transport.Transport = (*Adapter)(nil)

// New returns the adapter of nc. It starts nothing.
func New(nc *nats.Conn, cfg Config) (*Adapter, error) {
	if nc == nil {
		return nil, errors.New("natstransport: no NATS connection")
	}
	if cfg.Meter == nil {
		return nil, errors.New("natstransport: no meter")
	}
	setDefault(&cfg.MaxPayload, protocol.MaxPayload)
	setDefault(&cfg.PendingMsgs, DefaultPendingMsgs)
	setDefault(&cfg.PendingBytes, DefaultPendingBytes)
	setDefault(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&cfg.ProbeTimeout, DefaultProbeTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	closed := make(chan struct{})
	if cfg.Shared != nil {
		closed = cfg.Shared.closed
	}
	return &Adapter{
		nc:     nc,
		cfg:    cfg,
		log:    cfg.Logger,
		guard:  protocol.NewReplayGuard(cfg.MaxMessageAge),
		closed: closed,
		ctx:    ctx,
		stop:   stop,
	}, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Connect waits until the connection is up, then subscribes to the
// connection events and starts their probe beside the node (it only logs
// and counts; Close waits for it). While it waits, it logs why each
// attempt of the connection failed, as the client last saw it (the
// server's refusal, such as "nkeys not supported by the server"): at
// warn level each new reason, at debug level the repeats.
func (a *Adapter) Connect(ctx context.Context, in *transport.Lanes) error {
	a.once.Do(func() {
		a.lanes = in
		if a.cfg.Shared != nil {
			return // a.closed is the Shared connection's
		}
		a.closedStat = a.nc.StatusChanged(nats.CLOSED)
		a.wg.Go(a.watchClosed)
	})
	// The client turns reconnecting again after each attempt that failed.
	connected := a.nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING)
	defer a.nc.RemoveStatusListener(connected)
	waiting, last := false, ""
	for !a.nc.IsConnected() {
		if a.nc.IsClosed() {
			return transport.ErrClosed
		}
		switch err := a.nc.LastError(); {
		case err != nil && err.Error() != last:
			last = err.Error()
			a.log.Warn("waiting for NATS", "err", err)
		case err != nil:
			a.log.Debug("waiting for NATS", "err", err)
		case !waiting:
			a.log.Info("waiting for NATS")
		}
		waiting = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.closed:
			return transport.ErrClosed
		case <-connected:
		}
	}
	if err := a.subscribeEvents(); err != nil {
		return err
	}
	if a.cfg.Shared == nil {
		a.wg.Go(func() { a.probeEvents(a.ctx) })
	}
	return nil
}

// watchClosed closes a.closed when the connection closes, or when the
// adapter is closed.
func (a *Adapter) watchClosed() {
	defer close(a.closed)
	defer a.nc.RemoveStatusListener(a.closedStat)
	if a.nc.IsClosed() {
		return
	}
	select {
	case <-a.closedStat:
	case <-a.ctx.Done():
		// Closed by Close or Abort, which close the connection first.
	}
}

// Open subscribes to the broadcast subjects, this node's inbox and the
// reply subjects of its point-to-point messages, each with pending
// limits, and flushes: the server knows them when it returns.
//
// On a Shared connection it subscribes to nothing: the connection's
// wildcard subscriptions deliver the election's subjects (those of its
// algorithm, and its inbox) and its replies, from now on.
func (a *Adapter) Open(self transport.Self) error {
	a.self = self
	subjects := append(protocol.BroadcastSubjectsOf(a.cfg.Cluster, a.cfg.Algorithm), protocol.InboxSubject(a.cfg.Cluster, a.cfg.ID))
	if s := a.cfg.Shared; s != nil {
		a.subjects = make(map[string]struct{}, len(subjects))
		for _, subject := range subjects {
			a.subjects[subject] = struct{}{}
		}
		a.replyTo = s.replyRoot + "." + a.cfg.Cluster
		s.open(a)
		return nil
	}
	for _, s := range subjects {
		if _, err := a.subscribe(s, a.onMessage); err != nil {
			return err
		}
	}
	a.replyTo = a.nc.NewInbox()
	if _, err := a.subscribe(a.replyTo+".*.*", a.onReply); err != nil {
		return err
	}
	if err := a.nc.FlushTimeout(a.cfg.ShutdownTimeout); err != nil {
		a.log.Warn("flush after subscribing", "err", err)
	}
	return nil
}

// subscribe subscribes cb to subject with the pending limits; on a
// Shared connection, on its inbox, whose size bounds what waits.
func (a *Adapter) subscribe(subject string, cb nats.MsgHandler) (*nats.Subscription, error) {
	var sub *nats.Subscription
	var err error
	if a.cfg.Shared != nil {
		sub, err = a.cfg.Shared.subscribeFor(subject, cb)
	} else {
		sub, err = a.nc.Subscribe(subject, cb)
		if err == nil {
			if err = sub.SetPendingLimits(a.cfg.PendingMsgs, a.cfg.PendingBytes); err != nil {
				sub.Unsubscribe()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natstransport: subscribe %s: %w", subject, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.subs = append(a.subs, sub)
	return sub, nil
}

// unsubscribe ends sub, one of a.subs.
func (a *Adapter) unsubscribe(sub *nats.Subscription) error {
	if a.cfg.Shared != nil {
		a.cfg.Shared.forget(sub)
	}
	return sub.Unsubscribe()
}

// Send publishes m on protocol.SubjectFor, with the receiver's
// incarnation as this node knows it, signed with the node's key when it
// has one.
//
// On a Shared connection that batches, a broadcast goes in the batch
// being filled (Shared.enqueue), and a point-to-point message in the
// batch being filled for its member (Shared.enqueueTo), which leaves
// with the broadcasts' batch and after it.
func (a *Adapter) Send(m protocol.Message) error {
	now := a.cfg.Now()
	if m.To != 0 {
		m.ToInc = a.guard.Incarnation(m.To)
	}
	data, err := protocol.Encode(m)
	if err != nil {
		return fmt.Errorf("natstransport: encode: %w", err)
	}
	if s := a.cfg.Shared; s != nil && s.batched() {
		if m.To == 0 {
			s.enqueue(a.cfg.Cluster, data)
		} else {
			s.enqueueTo(m.To, a, data)
		}
		return nil
	}
	out := &nats.Msg{Subject: protocol.SubjectFor(a.cfg.Cluster, m), Data: data}
	if a.cfg.Signer != nil {
		out.Header = a.cfg.Signer.Header(out.Subject, data)
	}
	if m.To != 0 && a.replyTo != "" {
		out.Reply = a.replyTo + "." + strconv.FormatUint(m.To, 10) + "." + strconv.FormatUint(m.N, 10)
		a.replies.add(out.Reply, struct{}{}, now)
	}
	return a.nc.PublishMsg(out)
}

// encode encodes (and signs, with a key) an announcement.
func (a *Adapter) encode(an *protocol.Announcement) *answer {
	data, err := protocol.EncodeAnnouncement(*an)
	if err != nil {
		panic(fmt.Sprintf("natstransport: encode announcement: %v", err)) // a struct of strings and numbers
	}
	ans := &answer{of: an, data: data}
	if a.cfg.Signer != nil {
		ans.header = a.cfg.Signer.SignAnnouncement(a.cfg.Cluster, data)
	}
	return ans
}

// Announce publishes an on the cluster's leader subject.
func (a *Adapter) Announce(an protocol.Announcement) {
	if a.cfg.Shared != nil {
		a.cfg.Shared.flush() // after the messages that led to it
	}
	enc := a.encode(&an)
	out := &nats.Msg{Subject: protocol.LeaderSubject(a.cfg.Cluster), Data: enc.data, Header: enc.header}
	if err := a.nc.PublishMsg(out); err != nil {
		a.log.Warn("publish announcement", "term", an.Term, "err", err)
		return
	}
	a.log.Info("announced leadership", "term", an.Term)
}

// Lead sets the answer to queries, and subscribes to the query subject
// while there is one, so that a request while no node leads fails at once
// with "no responders" instead of waiting its whole time-out.
func (a *Adapter) Lead(an *protocol.Announcement, until time.Time) {
	if an == nil {
		a.answer.Store(nil)
	} else {
		old := a.answer.Load()
		enc := &answer{}
		if old != nil && old.of == an {
			*enc = *old
		} else {
			enc = a.encode(an)
		}
		enc.until = until
		a.answer.Store(enc)
	}
	switch {
	case an != nil && a.querySub == nil && !a.stopping.Load():
		sub, err := a.subscribe(protocol.QuerySubject(a.cfg.Cluster), a.onQuery)
		if err != nil {
			a.log.Warn("subscribe to queries", "err", err)
			return
		}
		a.querySub = sub
	case an == nil && a.querySub != nil:
		if err := a.unsubscribe(a.querySub); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			a.log.Warn("unsubscribe from queries", "err", err)
		}
		a.mu.Lock()
		for i, s := range a.subs {
			if s == a.querySub {
				a.subs = append(a.subs[:i], a.subs[i+1:]...)
				break
			}
		}
		a.mu.Unlock()
		a.querySub = nil
	}
}

// Settle flushes the connection, then waits until every subscription's
// callback has taken what arrived before the server's answer (a barrier
// of the NATS client, which runs after them), each bounded by
// settleTimeout. On a Shared connection, the elections that settle at
// once share one flush and barrier (Shared.settle): a barrier waits for
// every subscription of the connection, thousands with many elections.
func (a *Adapter) Settle() {
	if a.cfg.Shared != nil {
		a.cfg.Shared.settle()
		return
	}
	settle(a.nc, a.log)
}

// settle is Settle for the connection nc.
func settle(nc *nats.Conn, log *slog.Logger) { settleWithin(nc, log, settleTimeout) }

// settleWithin is settle, each step bounded by timeout; it reports
// whether both ended in time.
func settleWithin(nc *nats.Conn, log *slog.Logger, timeout time.Duration) bool {
	if err := nc.FlushTimeout(timeout); err != nil {
		log.Debug("flush before a deadline", "err", err)
		return false
	}
	done := make(chan struct{})
	if err := nc.Barrier(func() { close(done) }); err != nil {
		log.Debug("barrier before a deadline", "err", err)
		return false
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		log.Debug("subscriptions not settled before a deadline", "waited", timeout)
		return false
	}
}

// Connected implements transport.Transport.
func (a *Adapter) Connected() bool { return a.nc.IsConnected() }

// Closed implements transport.Transport. On a Shared connection it is
// closed when the connection closes, not when the adapter does.
func (a *Adapter) Closed() <-chan struct{} { return a.closed }

// Watch forwards the connection's status changes (connected,
// disconnected, reconnecting, closed) to ch until stop.
func (a *Adapter) Watch(ch chan<- struct{}) (stop func()) {
	var forwarders sync.WaitGroup
	var chans []chan nats.Status
	for _, s := range []nats.Status{nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED} {
		c := a.nc.StatusChanged(s)
		chans = append(chans, c)
		forwarders.Go(func() {
			for range c {
				transport.Notify(ch)
			}
		})
	}
	return func() {
		for _, c := range chans {
			a.nc.RemoveStatusListener(c) // closes c, which ends its forwarder
		}
		forwarders.Wait()
	}
}

// Close stops taking messages, drains and closes the connection, waiting
// at most ShutdownTimeout, and waits for the adapter's goroutines. On a
// Shared connection, it unsubscribes and flushes what was published
// instead, and leaves the connection open.
func (a *Adapter) Close() {
	a.stopping.Store(true)
	a.stop()
	if a.cfg.Shared != nil {
		a.leave()
		a.cfg.Shared.flush()
		if err := a.nc.FlushTimeout(a.cfg.ShutdownTimeout); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			a.log.Warn("flush on leaving", "err", err)
		}
	} else {
		a.drain()
	}
	a.wg.Wait()
}

// Abort closes the connection at once (on a Shared one, unsubscribes) and
// waits for the adapter's goroutines.
func (a *Adapter) Abort() {
	a.stopping.Store(true)
	a.stop()
	if a.cfg.Shared != nil {
		a.leave()
	} else {
		a.nc.Close()
	}
	a.wg.Wait()
}

// leave ends this adapter's part of a Shared connection: its connection
// events and its subscriptions.
func (a *Adapter) leave() {
	a.cfg.Shared.remove(a)
	a.mu.Lock()
	subs := a.subs
	a.subs = nil
	a.mu.Unlock()
	for _, s := range subs {
		if err := a.unsubscribe(s); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			a.log.Debug("unsubscribe on leaving", "subject", s.Subject, "err", err)
		}
	}
}

// drain flushes what was published and drains and closes the connection,
// waiting at most ShutdownTimeout in all.
func (a *Adapter) drain() { Drain(a.nc, a.cfg.ShutdownTimeout, a.log) }

// Drain drains and closes nc, waiting at most timeout for the drain
// before it closes nc at once.
func Drain(nc *nats.Conn, timeout time.Duration, log *slog.Logger) {
	if nc.IsClosed() {
		return
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	closed := nc.StatusChanged(nats.CLOSED)
	defer nc.RemoveStatusListener(closed)
	if err := nc.Drain(); err != nil {
		if !errors.Is(err, nats.ErrConnectionClosed) {
			log.Warn("drain", "err", err)
		}
		nc.Close()
		return
	}
	select {
	case <-closed:
	case <-deadline.C:
		log.Warn("drain timed out; closing", "timeout", timeout)
		nc.Close()
	}
}

// takes reports whether the adapter takes a message of subject from a
// Shared connection's wildcard subscriptions.
func (a *Adapter) takes(subject string) bool {
	_, ok := a.subjects[subject]
	return ok
}

// Signed reports whether the adapter signs what it publishes (it has
// member keys).
func (a *Adapter) Signed() bool { return a.cfg.Signer != nil }

// SubscriptionDrops is how many messages NATS dropped because a
// subscription's pending limits were reached.
func (a *Adapter) SubscriptionDrops() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0
	for _, s := range a.subs {
		if d, err := s.Dropped(); err == nil {
			total += d
		}
	}
	return total
}
