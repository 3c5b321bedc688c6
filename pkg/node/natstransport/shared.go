package natstransport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Shared is what the adapters of one process's elections share when they
// run over one connection (node.Group): the connection, which none of
// them closes; its connection events, subscribed and decoded once and
// handed to every adapter, so that a peer process's closed connection
// fails over, at once, every election it took part in; the wildcard
// subscriptions that deliver every election's subjects
// (subscribeElections); the batches of their broadcasts; and the
// process's beats (beat.go).
//
// The connection's name is protocol.ConnectionName(Conn, ID): every
// process of one deployment names its connection after the same cluster,
// Conn, and an adapter takes a connection event about Conn's member id for
// one about its own election's member id.
type Shared struct {
	nc  *nats.Conn
	cfg SharedConfig
	log *slog.Logger

	mu       sync.RWMutex          // written as adapters open and close; read per message
	adapters map[*Adapter]struct{} // that take connection events
	clusters map[string]*Adapter   // that take batched messages, by election
	subs     []*nats.Subscription
	seen     chan struct{} // closed by the first connection event
	once     sync.Once

	stop context.CancelFunc
	wg   sync.WaitGroup // the probe

	// The batch being filled, and its size in entries; published in the
	// order filled (publishing). to holds the batches of point-to-point
	// messages being filled, by the member addressed, published after
	// the broadcasts' batch of the same flush.
	batchMu    sync.Mutex
	batch      []byte
	entries    int
	to         map[uint64]*toBatch
	pending    bool // an entry waits in a batch
	publishing sync.Mutex
	wake       chan struct{} // the first entry of a batch wakes the flusher
	batches    atomic.Uint64 // batches published
	batchedOut atomic.Uint64 // messages in them
	refused    atomic.Uint64 // batches received and dropped whole

	// The beats followed (beat.go), the members found silent and the
	// beats dropped.
	beats        beats
	beatsLost    atomic.Uint64
	beatsRefused atomic.Uint64

	// inbox is where the elections' subscriptions deliver (ChanSubscribe):
	// the wildcard ones of every election (subscribeElections) and a
	// leader's query subscription. One goroutine, dispatch, hands each
	// message to its subscription's handler. A message without a
	// subscription is a settle's marker.
	inbox    chan *nats.Msg
	hmu      sync.RWMutex
	handlers map[*nats.Subscription]nats.MsgHandler
	markers  map[*nats.Msg]chan struct{} // under hmu

	closed chan struct{} // closed when the connection closes (watchClosed)

	streams leader.Streams // the stream of the elections' announcements

	// replyRoot prefixes the reply subjects of every election's
	// point-to-point messages (<replyRoot>.<cluster>.<peer>.<n>), and
	// elecSubs are the few wildcard subscriptions that deliver every
	// election's subjects (subscribeElections).
	replyRoot   string
	replyPrefix string // replyRoot and a dot, matched on every message
	elecSubs    []*nats.Subscription

	// The reply subjects of the batches of point-to-point messages
	// (<batchReplyRoot>.<member>.<n>), so that a batch that finds no
	// receiver comes back as Unreachable to each election it carried a
	// message of; toSent numbers them.
	batchReplyRoot string
	toSent         uint64 // under publishing
	toReplies      replies[[]*Adapter]

	// The rounds of settle: rounds counts those started, settling is
	// set while one runs, and settled is closed when it ends.
	settleMu sync.Mutex
	settling bool
	rounds   uint64
	settled  chan struct{}
}

// SharedConfig configures a Shared.
type SharedConfig struct {
	// Conn is the cluster after which the processes of the deployment
	// name their connections, ID this process's member ID.
	Conn string
	ID   uint64
	// ConnectionEvents: follow the server's connection events.
	ConnectionEvents bool
	// Probe and ProbeTimeout: as in Config, once for the connection.
	Probe        func(ctx context.Context, name string) error
	ProbeTimeout time.Duration
	// Batch is how long the elections' messages wait to leave together
	// in batches (protocol.BatchSubject, protocol.BatchToSubject): the
	// first one waits that long, and every other sent meanwhile goes
	// with it.
	// DefaultBatchWindow if zero; negative, each leaves on its own.
	Batch time.Duration
	// Signer signs the batches, and Keys checks the batches received,
	// as the elections' own (Config.Signer and Config.Keys): both or
	// neither.
	Signer *signing.Signer
	Keys   *signing.MemberKeys
	// Beat is how often this process says that it is alive
	// (protocol.BeatSubject), and BeatTimeout how long a member heard
	// beating may fall silent before every election is told that it is
	// down, as when its connection closes (beat.go). Zero Beat: no beats
	// are sent or followed. MaxAge bounds how far a beat's time may be
	// from this process's clock; DefaultMaxAge if zero.
	Beat, BeatTimeout time.Duration
	MaxAge            time.Duration
	Logger            *slog.Logger
}

// SharedInboxSize bounds the messages of a Shared connection's elections
// waiting for their handlers; beyond it NATS drops them (counted per
// subscription: election_subscription_dropped_total).
const SharedInboxSize = 64 << 10

// DefaultBatchWindow is SharedConfig.Batch's default: a millisecond added
// to a message's way, against a leader time-out of hundreds. A failover
// of many elections takes several hops, each waiting for its window: at
// 100 Bully elections, their failover took 15.6 ms with 5 ms, 9.4 ms with
// 1 ms and 9.1 ms with 0.2 ms, where 100 idle Paxos elections cost 8 %,
// 10 % and 11 % of a core per process.
const DefaultBatchWindow = time.Millisecond

// NewShared returns what the adapters over nc share. It starts nothing.
func NewShared(nc *nats.Conn, cfg SharedConfig) (*Shared, error) {
	if nc == nil {
		return nil, errors.New("natstransport: no NATS connection")
	}
	setDefault(&cfg.ProbeTimeout, DefaultProbeTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if (cfg.Signer == nil) != (cfg.Keys == nil) {
		return nil, errors.New("natstransport: a signer needs the members' keys, and they need it")
	}
	setDefault(&cfg.Batch, DefaultBatchWindow)
	setDefault(&cfg.MaxAge, DefaultMaxAge)
	if cfg.Beat < 0 || cfg.BeatTimeout < 0 || cfg.MaxAge < 0 {
		return nil, errors.New("natstransport: negative beat interval, beat time-out or age")
	}
	if cfg.Beat > 0 && cfg.BeatTimeout <= cfg.Beat {
		return nil, fmt.Errorf("natstransport: beat time-out %v must exceed the beat interval %v", cfg.BeatTimeout, cfg.Beat)
	}
	return &Shared{beats: beats{members: make(map[uint64]*beatOf)}, nc: nc, cfg: cfg, log: cfg.Logger, adapters: make(map[*Adapter]struct{}), clusters: make(map[string]*Adapter),
		seen: make(chan struct{}), wake: make(chan struct{}, 1),
		inbox: make(chan *nats.Msg, SharedInboxSize), handlers: make(map[*nats.Subscription]nats.MsgHandler),
		markers: make(map[*nats.Msg]chan struct{}), closed: make(chan struct{})}, nil
}

// Start subscribes to the batches and, unless they are off, to the
// connection events, checks beside the elections that the server
// delivers these (the probe of Config.Probe), and starts sending the
// batches and, with SharedConfig.Beat, sending and following the beats.
// Stop ends it.
func (s *Shared) Start() error {
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.wg.Go(func() { s.dispatch(ctx) })
	closedStat := s.nc.StatusChanged(nats.CLOSED)
	s.wg.Go(func() { s.watchClosed(ctx, closedStat) })
	connected := s.nc.StatusChanged(nats.CONNECTED)
	s.wg.Go(func() { s.reconnections(ctx, connected) })
	if err := s.subscribe(protocol.BatchSubject(s.cfg.Conn), s.onBatch); err != nil {
		s.Stop()
		return err
	}
	if err := s.subscribe(protocol.BatchToSubject(s.cfg.Conn, s.cfg.ID), s.onBatch); err != nil {
		s.Stop()
		return err
	}
	if err := s.subscribeElections(); err != nil {
		s.Stop()
		return err
	}
	if s.cfg.Batch > 0 {
		s.wg.Go(func() { s.flushEvery(ctx) })
	}
	if s.beating() {
		if err := s.subscribe(protocol.BeatSubject(s.cfg.Conn), s.onBeat); err != nil {
			s.Stop()
			return err
		}
		s.wg.Go(func() { s.beatEvery(ctx) })
	}
	if !s.cfg.ConnectionEvents {
		s.log.Info("connection events off: failures are detected by heartbeats alone")
		return nil
	}
	for _, subject := range []string{connectSubject, disconnectSubject} {
		connect := subject == connectSubject
		if err := s.subscribe(subject, func(msg *nats.Msg) { s.onConnEvent(msg, connect) }); err != nil {
			s.Stop()
			return err
		}
	}
	s.wg.Go(func() {
		probeEvents(ctx, s.log, s.seen, s.cfg.Probe, s.cfg.ProbeTimeout, probeName(s.cfg.Conn, s.cfg.ID))
	})
	return nil
}

func (s *Shared) subscribe(subject string, cb nats.MsgHandler) error {
	sub, err := s.nc.Subscribe(subject, cb)
	if err != nil {
		return fmt.Errorf("natstransport: subscribe %s: %w", subject, err)
	}
	if err := sub.SetPendingLimits(DefaultPendingMsgs, 64*DefaultPendingBytes); err != nil {
		sub.Unsubscribe()
		return fmt.Errorf("natstransport: subscribe %s: %w", subject, err)
	}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return nil
}

// Stop sends the batch being filled, unsubscribes, and waits for the
// probe and the flusher.
func (s *Shared) Stop() {
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	s.flush()
	s.mu.Lock()
	subs := append(s.subs, s.elecSubs...)
	s.subs, s.elecSubs = nil, nil
	s.mu.Unlock()
	for _, sub := range subs {
		sub.Unsubscribe()
	}
}

// subscribeElections subscribes, once for every election of the
// process, to the broadcast subjects of every cluster
// (election.*.<type>), to this member's inbox in every cluster
// (election.*.node.<id>) and to the reply subjects of the elections'
// point-to-point messages, on the shared inbox: a handful of
// subscriptions instead of about ten an election, which the server
// matches and a reconnection resends. onElection hands each message to
// its election's adapter; a message of a cluster the process is not in
// is dropped there.
func (s *Shared) subscribeElections() error {
	s.replyRoot = s.nc.NewInbox()
	s.replyPrefix = s.replyRoot + "."
	subjects := protocol.BroadcastSubjects("*")
	for _, subject := range protocol.BroadcastSubjectsOf("*", protocol.Byzantine) {
		if !slices.Contains(subjects, subject) {
			subjects = append(subjects, subject)
		}
	}
	subjects = append(subjects, protocol.InboxSubject("*", s.cfg.ID), s.replyRoot+".>")
	s.batchReplyRoot = s.nc.NewInbox()
	handlers := map[string]nats.MsgHandler{s.batchReplyRoot + ".>": s.onBatchReply}
	subjects = append(subjects, s.batchReplyRoot+".>")
	for _, subject := range subjects {
		handler := handlers[subject]
		if handler == nil {
			handler = s.onElection
		}
		sub, err := s.subscribeFor(subject, handler)
		if err != nil {
			return fmt.Errorf("natstransport: subscribe %s: %w", subject, err)
		}
		s.mu.Lock()
		s.elecSubs = append(s.elecSubs, sub)
		s.mu.Unlock()
	}
	if err := s.nc.FlushTimeout(s.cfg.ProbeTimeout); err != nil {
		s.log.Warn("flush after subscribing", "err", err)
	}
	return nil
}

// onElection hands a message of an election subject, or a reply to a
// point-to-point message, to the adapter of its cluster, if the process
// is in that election and the adapter takes the subject.
func (s *Shared) onElection(msg *nats.Msg) {
	if rest, ok := strings.CutPrefix(msg.Subject, s.replyPrefix); ok {
		cluster, _, _ := strings.Cut(rest, ".")
		if a := s.adapterOf(cluster); a != nil {
			a.onReply(msg)
		}
		return
	}
	rest, ok := strings.CutPrefix(msg.Subject, protocol.Root+".")
	if !ok {
		return
	}
	cluster, _, _ := strings.Cut(rest, ".")
	if a := s.adapterOf(cluster); a != nil && a.takes(msg.Subject) {
		a.onMessage(msg)
	}
}

// adapterOf is the open adapter of cluster's election, or nil.
func (s *Shared) adapterOf(cluster string) *Adapter {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.clusters[cluster]
}

// SubscriptionDrops is how many messages NATS dropped for the
// connection's shared subscriptions (the elections' wildcard ones, the
// batches, the beats and the connection events).
func (s *Shared) SubscriptionDrops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for _, sub := range append(s.subs[:len(s.subs):len(s.subs)], s.elecSubs...) {
		if d, err := sub.Dropped(); err == nil {
			total += d
		}
	}
	return total
}

// watchClosed closes s.closed when the connection closes, until ctx
// ends: the elections' adapters share it (Adapter.Closed).
func (s *Shared) watchClosed(ctx context.Context, closedStat chan nats.Status) {
	defer s.nc.RemoveStatusListener(closedStat)
	if s.nc.IsClosed() {
		close(s.closed)
		return
	}
	select {
	case <-closedStat:
		close(s.closed)
	case <-ctx.Done():
	}
}

// subscribeFor subscribes an election's handler cb to subject, on the
// shared inbox.
func (s *Shared) subscribeFor(subject string, cb nats.MsgHandler) (*nats.Subscription, error) {
	s.hmu.Lock() // dispatch finds the handler of any message of sub
	defer s.hmu.Unlock()
	sub, err := s.nc.ChanSubscribe(subject, s.inbox)
	if err != nil {
		return nil, err
	}
	s.handlers[sub] = cb
	return sub, nil
}

// forget drops sub's handler: what it still delivers is dropped.
func (s *Shared) forget(sub *nats.Subscription) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	delete(s.handlers, sub)
}

// dispatch hands each message of the inbox to its subscription's
// handler, which never blocks, until ctx ends.
func (s *Shared) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-s.inbox:
			s.hmu.RLock()
			h := s.handlers[m.Sub]
			done := s.markers[m]
			s.hmu.RUnlock()
			switch {
			case h != nil:
				h(m)
			case done != nil:
				close(done)
			}
		}
	}
}

// drained returns once dispatch has handed over what the inbox held when
// it was called, or after settleTimeout.
func (s *Shared) drained() {
	marker, done := &nats.Msg{}, make(chan struct{})
	s.hmu.Lock()
	s.markers[marker] = done
	s.hmu.Unlock()
	defer func() {
		s.hmu.Lock()
		delete(s.markers, marker)
		s.hmu.Unlock()
	}()
	timer := time.NewTimer(settleTimeout)
	defer timer.Stop()
	select {
	case s.inbox <- marker:
	case <-timer.C:
		s.log.Debug("the elections' inbox full before a deadline")
		return
	}
	select {
	case <-done:
	case <-timer.C:
		s.log.Debug("the elections' inbox not drained before a deadline", "waited", settleTimeout)
	}
}

// batched reports whether the elections' messages go in batches.
func (s *Shared) batched() bool { return s.cfg.Batch > 0 }

// toBatch is a batch of point-to-point messages being filled for one
// member: its payload, its entries, and the adapters of the elections
// whose messages it carries (an adapter that sends several in a row is
// listed once), which a "no responders" status for it tells that the
// member is unreachable.
type toBatch struct {
	data     []byte
	entries  int
	adapters []*Adapter
}

// enqueue adds the broadcast msg of cluster's election to the batch being
// filled, which leaves within the batch window; a batch that would exceed
// protocol.MaxBatchPayload or protocol.MaxBatchEntries leaves first.
func (s *Shared) enqueue(cluster string, msg []byte) {
	size := protocol.BatchEntrySize(cluster, len(msg))
	for {
		s.batchMu.Lock()
		if fits(len(s.batch), s.entries, size) {
			break // with the lock: the check and the append are one step
		}
		s.batchMu.Unlock()
		s.flush() // in order, before what is appended after
	}
	s.batch = protocol.AppendBatchEntry(s.batch, cluster, msg)
	s.entries++
	s.filled()
}

// enqueueTo adds the point-to-point msg of a's election, addressed to
// member to, to the batch being filled for that member, which leaves
// with the broadcasts' batch and after it; a batch that would exceed
// protocol.MaxBatchPayload or protocol.MaxBatchEntries leaves first.
func (s *Shared) enqueueTo(to uint64, a *Adapter, msg []byte) {
	size := protocol.BatchEntrySize(a.cfg.Cluster, len(msg))
	var b *toBatch
	for {
		s.batchMu.Lock()
		b = s.to[to]
		if b == nil || fits(len(b.data), b.entries, size) {
			break // with the lock: the check and the append are one step
		}
		s.batchMu.Unlock()
		s.flush() // in order, before what is appended after
	}
	if b == nil {
		if s.to == nil {
			s.to = make(map[uint64]*toBatch)
		}
		b = &toBatch{}
		s.to[to] = b
	}
	b.data = protocol.AppendBatchEntry(b.data, a.cfg.Cluster, msg)
	b.entries++
	if !slices.Contains(b.adapters[max(0, len(b.adapters)-1):], a) {
		b.adapters = append(b.adapters, a)
	}
	s.filled()
}

// fits reports whether an entry of size bytes fits a batch of n bytes
// and entries entries; an empty batch takes any entry.
func fits(n, entries, size int) bool {
	room := n + size
	if n == 0 {
		room++ // the version byte
	}
	return entries == 0 || room <= protocol.MaxBatchPayload && entries < protocol.MaxBatchEntries
}

// filled ends an enqueue: s.batchMu is held, and the first entry of
// what the next flush sends wakes the flusher.
func (s *Shared) filled() {
	first := !s.pending
	s.pending = true
	s.batchMu.Unlock()
	if first {
		transport.Notify(s.wake)
	}
}

// flushEvery sends each batch one window after its first entry, until
// ctx ends.
func (s *Shared) flushEvery(ctx context.Context) {
	timer := time.NewTimer(s.cfg.Batch)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		timer.Reset(s.cfg.Batch)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		s.flush()
	}
}

// flush publishes the batch being filled, if any, signed with the
// signer: batches leave in the order they were filled, and everything an
// election enqueued before flush is on its way when flush returns.
func (s *Shared) flush() {
	s.publishing.Lock()
	defer s.publishing.Unlock()
	s.batchMu.Lock()
	batch, entries, to := s.batch, s.entries, s.to
	s.batch, s.entries, s.to, s.pending = nil, 0, nil, false
	s.batchMu.Unlock()
	if len(batch) > 0 {
		s.publish(&nats.Msg{Subject: protocol.BatchSubject(s.cfg.Conn), Data: batch}, entries)
	}
	if len(to) == 0 {
		return
	}
	now := time.Now()
	for _, id := range slices.Sorted(maps.Keys(to)) {
		b := to[id]
		s.toSent++
		reply := s.batchReplyRoot + "." + strconv.FormatUint(id, 10) + "." + strconv.FormatUint(s.toSent, 10)
		out := &nats.Msg{Subject: protocol.BatchToSubject(s.cfg.Conn, id), Reply: reply, Data: b.data}
		if s.publish(out, b.entries) {
			s.toReplies.add(reply, b.adapters, now)
		}
	}
}

// publish signs out (with the signer) and publishes it, counting it as a
// batch of entries messages. It reports whether it left.
func (s *Shared) publish(out *nats.Msg, entries int) bool {
	if s.cfg.Signer != nil {
		out.Header = s.cfg.Signer.Header(out.Subject, out.Data)
	}
	if err := s.nc.PublishMsg(out); err != nil {
		if !errors.Is(err, nats.ErrConnectionClosed) {
			s.log.Warn("publish a batch", "subject", out.Subject, "bytes", len(out.Data), "err", err)
		}
		return false
	}
	s.batches.Add(1)
	s.batchedOut.Add(uint64(entries))
	return true
}

// onBatchReply handles the server's answer to a batch of point-to-point
// messages: only a "no responders" status is expected, meaning that no
// process of the member addressed receives its batches. Each election
// whose message the batch carried is told that the member is
// unreachable, once, if the batch left within the last replyWindow.
func (s *Shared) onBatchReply(msg *nats.Msg) {
	if msg.Header.Get("Status") != "503" {
		return
	}
	adapters, ok := s.toReplies.take(msg.Subject, time.Now())
	if !ok {
		s.log.Debug("no-responders status for no batch of ours", "subject", msg.Subject)
		return
	}
	id, ok := replyPeer(msg.Subject, s.batchReplyRoot)
	if !ok {
		return
	}
	told := make(map[*Adapter]bool, len(adapters))
	for _, a := range adapters {
		if !told[a] {
			told[a] = true
			a.unreachable(id)
		}
	}
}

// Batches is how many batches this connection published, and how many
// messages they carried.
func (s *Shared) Batches() (batches, messages uint64) { return s.batches.Load(), s.batchedOut.Load() }

// onBatch checks a batch once (its size, its signature with keys, its
// entries) and hands each message to its election's adapter, which
// checks the rest as for a message on its own subject. A batch that
// fails is dropped whole and logged; a message for an election this
// process is not in is skipped.
func (s *Shared) onBatch(msg *nats.Msg) {
	var signer uint64
	if s.cfg.Keys != nil {
		var err error
		if signer, err = s.cfg.Keys.Verify(msg.Subject, msg.Data, msg.Header); err != nil {
			s.refused.Add(1)
			s.log.Debug("batch dropped", "reason", protocol.ReasonOf(err), "err", err)
			return
		}
	}
	var to uint64 // the member addressed: this one, in its own batches
	if msg.Subject != protocol.BatchSubject(s.cfg.Conn) {
		to = s.cfg.ID
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	err := protocol.ReadBatch(msg.Data, protocol.MaxCertifiedPayload, func(cluster string, m []byte) bool {
		if a := s.clusters[cluster]; a != nil {
			a.onBatched(m, signer, to, msg.Subject)
		}
		return true
	})
	if err != nil {
		s.refused.Add(1)
		s.log.Debug("batch dropped", "err", err)
	}
}

// Streams remembers, for every election over this connection, the
// JetStream stream that keeps their announcements (Cluster.Streams): found
// once, not once per election as it starts.
func (s *Shared) Streams() *leader.Streams { return &s.streams }

// Refused is how many batches this connection received and dropped whole
// (a signature or a framing that does not hold).
func (s *Shared) Refused() uint64 { return s.refused.Load() }

// add hands the connection events to a, from now on; remove stops them
// and its batched messages.
func (s *Shared) add(a *Adapter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.adapters[a] = struct{}{}
}

func (s *Shared) remove(a *Adapter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.adapters, a)
	if s.clusters[a.cfg.Cluster] == a {
		delete(s.clusters, a.cfg.Cluster)
	}
}

// open hands a the batched messages of its election, from now on.
func (s *Shared) open(a *Adapter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[a.cfg.Cluster] = a
}

// onConnEvent decodes a connection event once and hands it to every
// adapter.
func (s *Shared) onConnEvent(msg *nats.Msg, connect bool) {
	if len(msg.Data) > maxEventSize {
		return
	}
	var e connEvent
	if err := json.Unmarshal(msg.Data, &e); err != nil {
		s.log.Debug("undecodable connection event", "subject", msg.Subject, "err", err)
		return
	}
	s.once.Do(func() { close(s.seen) })
	cluster, id, named := protocol.ParseConnectionName(e.Client.Name)
	down := named && !connect && cluster == s.cfg.Conn
	if down && id != s.cfg.ID {
		s.disconnected(id)
	}
	s.mu.RLock()
	adapters := make([]*Adapter, 0, len(s.adapters))
	for a := range s.adapters {
		adapters = append(adapters, a)
	}
	s.mu.RUnlock()
	if down {
		// Each adapter checks the event; the name only orders them.
		leadFirst(adapters, id, func(a *Adapter) { a.connEvent(e, msg.Subject, connect) })
		return
	}
	for _, a := range adapters {
		a.connEvent(e, msg.Subject, connect)
	}
}

// settle settles the connection (the adapters' Settle) for every election
// that asks at once: a round of flush and barrier started after a call
// covers it, so a caller that finds a round running waits for its end
// and then joins the round another waiter started meanwhile, or starts
// one. A round costs the same whatever the number of callers.
func (s *Shared) settle() {
	s.settleMu.Lock()
	if s.settling {
		asked := s.rounds
		done := s.settled
		s.settleMu.Unlock()
		<-done
		s.settleMu.Lock()
		switch {
		case s.rounds > asked && s.settling:
			done = s.settled // started after the call: join it
			s.settleMu.Unlock()
			<-done
			return
		case s.rounds > asked:
			s.settleMu.Unlock() // started after the call, and over
			return
		}
	}
	s.settling = true
	s.rounds++
	done := make(chan struct{})
	s.settled = done
	s.settleMu.Unlock()
	settle(s.nc, s.log) // the connection's own subscriptions (batches)
	s.drained()         // the elections'
	s.settleMu.Lock()
	s.settling = false
	close(done)
	s.settleMu.Unlock()
}
