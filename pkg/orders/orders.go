package orders

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/generals"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
)

// Defaults of Config.
const (
	// DefaultRound is the default duration of a round: a few heartbeat
	// intervals, well above a message's delivery on a local network.
	DefaultRound = 100 * time.Millisecond
	// DefaultMaxOrders is the default bound on the orders under way.
	DefaultMaxOrders = 16
	// MaxMaxOrders bounds Config.MaxOrders.
	MaxMaxOrders = 1024
)

const (
	// inboxSize and inboxBytes bound the messages waiting for the owner
	// goroutine, in number and in bytes; a message that finds no room is
	// dropped and counted. OM(f) among 12 members sends thousands of
	// messages an order, which arrive in bursts.
	inboxSize  = 4096
	inboxBytes = 16 << 20
	// maxPending bounds the messages of orders not opened yet, and
	// maxPending/N those of one sender, so that a liar fills only its
	// share.
	maxPending = 64
	// maxCertified bounds the verified (term, leader) pairs kept.
	maxCertified = 8
)

// Errors.
var (
	// ErrConfig: the configuration is invalid.
	ErrConfig = errors.New("orders: invalid configuration")
	// ErrNotLeader: Issue was called on a member that the newest
	// certified announcement does not name as leader.
	ErrNotLeader = errors.New("orders: this member is not the certified leader")
	// ErrBusy: MaxOrders orders are under way.
	ErrBusy = errors.New("orders: too many orders under way")
	// ErrStopped: Run is not running (not started, or ended).
	ErrStopped = errors.New("orders: not running")
)

// Order is an order of a cluster's leader: its identity and the value
// this member decided (the issued value on the leader).
type Order struct {
	Cluster string
	// Term is the term of the leader that issued the order.
	Term uint64
	// Seq numbers the order among those of Term, from 1.
	Seq uint64
	// Leader is the member that issued it.
	Leader uint64
	// Value is the value.
	Value string
}

// Clock gives the time and the timers of the round deadlines.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures one member's Service.
type Config struct {
	// Cluster is the cluster's name.
	Cluster string
	// Signer is this member's key; its ID must have that key in Keys.
	Signer *protocol.Signer
	// Keys are the members' public keys (ELECTION_KEYS_FILE): the
	// members of the agreement, 4 to generals.MaxMembers of them.
	Keys *protocol.MemberKeys
	// Round is the duration of a round; DefaultRound if zero.
	Round time.Duration
	// MaxOrders bounds the orders under way, 1 to MaxMaxOrders;
	// DefaultMaxOrders if zero.
	MaxOrders int
	// Default is the value decided when no value has a majority, and the
	// value of a message that did not arrive in its round; valid UTF-8
	// of at most generals.MaxValueSize bytes. Empty by default.
	Default string
	// Logger receives the service's logs; none if nil.
	Logger *slog.Logger
	// Clock gives the time; the system's if nil.
	Clock Clock
	// Leaders yields the cluster's certified leaders in increasing term
	// (an announcement whose certificate does not hold under Keys is
	// ignored); if nil, leader.Watch on the service's connection with
	// leader.WithKeys(Keys). Run ends with the error it yields.
	Leaders func(ctx context.Context) iter.Seq2[protocol.Announcement, error]
}

// Stats counts what a Service did.
type Stats struct {
	// Opened counts the orders this member opened as a lieutenant.
	Opened uint64
	// Issued counts the orders this member issued as the leader.
	Issued uint64
	// Decided counts the decisions this member published.
	Decided uint64
	// Received counts the oral messages its machines accepted.
	Received uint64
	// Equivocations counts the second messages along one path with
	// another value (generals.ErrEquivocation): proofs that a member lied.
	Equivocations uint64
	// Rejected counts the messages, or relays within one, dropped for a
	// bad signature, a bad certificate, a bad shape or a path the
	// agreement refuses.
	Rejected uint64
	// Dropped counts the messages dropped for want of room: a full
	// inbox, MaxOrders under way, a full buffer of early messages.
	Dropped uint64
	// Stale counts the messages of orders already decided or refused.
	Stale uint64
}

type counters struct {
	opened, issued, decided, received, equivocations, rejected, dropped, stale atomic.Uint64
}

// Service is one member's part in the agreements on the orders of its
// cluster's leaders. New starts nothing; Run does the work.
type Service struct {
	nc     *nats.Conn
	cfg    Config
	log    *slog.Logger
	ids    []uint64       // members in increasing ID order: the machines' indexes
	index  map[uint64]int // member ID → index
	selfID uint64
	self   int
	rounds int

	inbox   chan inbound
	queued  atomic.Int64 // bytes in inbox
	issues  chan issueRequest
	started atomic.Bool
	ready   chan struct{}
	done    chan struct{}
	stats   counters
}

// inbound is a checked message on its way to the owner, with its size.
type inbound struct {
	om   protocol.OrderMessage
	size int64
}

type issueRequest struct {
	value string
	lead  *protocol.Announcement // IssueAs's, checked
	reply chan issueResult
}

type issueResult struct {
	order Order
	err   error
}

// New returns the service of cfg.Signer's member on nc.
func New(nc *nats.Conn, cfg Config) (*Service, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrConfig)
	}
	if err := protocol.ValidateCluster(cfg.Cluster); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Signer == nil || cfg.Keys == nil {
		return nil, fmt.Errorf("%w: Signer and Keys are required", ErrConfig)
	}
	if key, ok := cfg.Keys.PublicKey(cfg.Signer.ID()); !ok || key != cfg.Signer.PublicKey() {
		return nil, fmt.Errorf("%w: member %d's key is not among Keys", ErrConfig, cfg.Signer.ID())
	}
	n := cfg.Keys.Len()
	if n < generals.MinMembers || n > generals.MaxMembers {
		return nil, fmt.Errorf("%w: %d members, want %d to %d", ErrConfig, n, generals.MinMembers, generals.MaxMembers)
	}
	if cfg.Round < 0 {
		return nil, fmt.Errorf("%w: Round %v", ErrConfig, cfg.Round)
	}
	if cfg.Round == 0 {
		cfg.Round = DefaultRound
	}
	if cfg.MaxOrders < 0 || cfg.MaxOrders > MaxMaxOrders {
		return nil, fmt.Errorf("%w: MaxOrders %d, want 1 to %d", ErrConfig, cfg.MaxOrders, MaxMaxOrders)
	}
	if cfg.MaxOrders == 0 {
		cfg.MaxOrders = DefaultMaxOrders
	}
	if err := protocol.CheckOrderValue(cfg.Default); err != nil {
		return nil, fmt.Errorf("%w: Default: %w", ErrConfig, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		nc:     nc,
		cfg:    cfg,
		log:    log.With("member", cfg.Signer.ID(), "cluster", cfg.Cluster),
		ids:    cfg.Keys.IDs(),
		index:  make(map[uint64]int, n),
		selfID: cfg.Signer.ID(),
		rounds: generals.Faults(n) + 1,
		inbox:  make(chan inbound, inboxSize),
		issues: make(chan issueRequest),
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	for i, id := range s.ids {
		s.index[id] = i
	}
	s.self = s.index[s.selfID]
	return s, nil
}

// Stats returns the counts so far.
func (s *Service) Stats() Stats {
	c := &s.stats
	return Stats{
		Opened: c.opened.Load(), Issued: c.issued.Load(), Decided: c.decided.Load(),
		Received: c.received.Load(), Equivocations: c.equivocations.Load(),
		Rejected: c.rejected.Load(), Dropped: c.dropped.Load(), Stale: c.stale.Load(),
	}
}

// Issue issues value as the next order of this member's term, if the
// newest certified announcement Run has seen names this member as
// leader (ErrNotLeader otherwise), and returns the order. The members
// decide it within Rounds × Round of receiving it; leader.Orders yields
// it once f+1 of them have. It blocks until Run takes the request or ctx
// ends; without Run it returns ErrStopped.
func (s *Service) Issue(ctx context.Context, value string) (Order, error) {
	return s.request(ctx, issueRequest{value: value})
}

// IssueAs is Issue for a caller that knows it leads: a is this member's
// own certified announcement (from leader.Watch or leader.Current with
// WithKeys, or as the node published it). IssueAs checks a's certificate
// against Keys; if a is newer than what Run has seen, the service takes
// it as the cluster's newest leader, then issues as Issue does. An
// announcement older than the newest seen does not help: Issue's check
// still applies.
func (s *Service) IssueAs(ctx context.Context, a protocol.Announcement, value string) (Order, error) {
	switch {
	case a.Cluster != s.cfg.Cluster:
		return Order{}, fmt.Errorf("%w: the announcement is of cluster %q", ErrNotLeader, a.Cluster)
	case a.Leader != s.selfID:
		return Order{}, fmt.Errorf("%w: the announcement names %d in term %d", ErrNotLeader, a.Leader, a.Term)
	case a.Certificate == nil:
		return Order{}, fmt.Errorf("%w: the announcement has no certificate", ErrNotLeader)
	}
	if err := protocol.VerifyAnnouncement(s.cfg.Keys, a); err != nil {
		return Order{}, fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return s.request(ctx, issueRequest{value: value, lead: &a})
}

func (s *Service) request(ctx context.Context, req issueRequest) (Order, error) {
	if err := protocol.CheckOrderValue(req.value); err != nil {
		return Order{}, fmt.Errorf("orders: %w", err)
	}
	if !s.started.Load() {
		return Order{}, ErrStopped
	}
	req.reply = make(chan issueResult, 1)
	select {
	case s.issues <- req:
	case <-s.done:
		return Order{}, ErrStopped
	case <-ctx.Done():
		return Order{}, context.Cause(ctx)
	}
	r := <-req.reply // answered at once by the owner
	return r.order, r.err
}

// Ready is closed once Run has subscribed to the order messages: from
// then on the member takes part in every order issued.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Rounds is f+1, the rounds of every order.
func (s *Service) Rounds() int { return s.rounds }

// Run follows the cluster's leaders, takes part in every order, and
// issues those Issue asks for, until ctx ends (it returns nil) or the
// leaders can no longer be followed (it returns the error). It may be
// called once.
func (s *Service) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("orders: Run called twice")
	}
	defer close(s.done)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	sub, err := s.nc.Subscribe(protocol.OrderSubject(s.cfg.Cluster), s.onMessage)
	if err != nil {
		return fmt.Errorf("orders: subscribe: %w", err)
	}
	defer sub.Unsubscribe()
	if err := s.nc.Flush(); err != nil {
		return fmt.Errorf("orders: subscribe: %w", err)
	}
	close(s.ready)

	leaders := make(chan protocol.Announcement, 1)
	watchErr := make(chan error, 1)
	follow := s.cfg.Leaders
	if follow == nil {
		follow = func(ctx context.Context) iter.Seq2[protocol.Announcement, error] {
			return leader.Watch(ctx, s.nc, s.cfg.Cluster, leader.WithKeys(s.cfg.Keys))
		}
	}
	wg.Go(func() {
		for a, err := range follow(ctx) {
			if err != nil {
				watchErr <- err
				return
			}
			if a.Cluster != s.cfg.Cluster || a.Certificate == nil {
				s.log.Warn("leader ignored: not a certified leader of the cluster", "leader", a.Leader, "term", a.Term)
				continue
			}
			if err := protocol.VerifyAnnouncement(s.cfg.Keys, a); err != nil {
				s.log.Warn("leader ignored", "leader", a.Leader, "term", a.Term, "error", err)
				continue
			}
			select { // keep the newest only
			case <-leaders:
			default:
			}
			leaders <- a
		}
	})

	st := &state{open: map[orderID]*order{}, certified: map[uint64]uint64{}}
	var (
		wake   <-chan time.Time
		wakeAt time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-watchErr:
			return fmt.Errorf("orders: following the leader: %w", err)
		case a := <-leaders:
			s.onLeader(st, a)
		case in := <-s.inbox:
			s.queued.Add(-in.size)
			s.onOrderMessage(st, in.om)
		case req := <-s.issues:
			if req.lead != nil {
				s.onLeader(st, *req.lead)
			}
			o, err := s.issue(st, req.value)
			req.reply <- issueResult{o, err}
		case <-wake:
			wake, wakeAt = nil, time.Time{}
			s.onTick(st)
		}
		if next, ok := s.nextDeadline(st); ok && !next.Equal(wakeAt) {
			wake, wakeAt = s.cfg.Clock.After(next.Sub(s.cfg.Clock.Now())), next
		}
	}
}

// orderID identifies an order within the cluster.
type orderID struct{ term, seq uint64 }

func (a orderID) after(b orderID) bool {
	return a.term > b.term || (a.term == b.term && a.seq > b.seq)
}

// order is an order this member takes part in as a lieutenant.
type order struct {
	id        orderID
	commander uint64
	mc        *generals.Machine
	opened    time.Time
	ended     int // rounds ended
}

type pendingMessage struct {
	at time.Time
	om protocol.OrderMessage
}

// state is the owner goroutine's.
type state struct {
	lead      protocol.Announcement // newest certified leader
	highest   orderID               // greatest order opened or issued
	open      map[orderID]*order
	pending   []pendingMessage
	certified map[uint64]uint64 // term → leader, certificates verified
	issued    []time.Time       // when this member's orders under way were issued
}

// onMessage is the subscription's callback: it checks the signature and
// the shape, and hands the message to the owner without blocking.
func (s *Service) onMessage(m *nats.Msg) {
	if len(m.Data) > protocol.MaxOrderMessage {
		s.reject("oversized order message", fmt.Errorf("%d bytes", len(m.Data)))
		return
	}
	signer, err := s.cfg.Keys.Verify(m.Subject, m.Data, m.Header)
	if err != nil {
		s.reject("order message", err)
		return
	}
	if signer == s.selfID {
		return // our own, echoed
	}
	om, err := protocol.DecodeOrderMessage(m.Data)
	if err == nil {
		err = protocol.CheckSigner(signer, om.From)
	}
	if err == nil && om.Cluster != s.cfg.Cluster {
		err = fmt.Errorf("cluster %q", om.Cluster)
	}
	if err != nil {
		s.reject("order message", err)
		return
	}
	size := int64(len(m.Data))
	if s.queued.Add(size) <= inboxBytes {
		select {
		case s.inbox <- inbound{om, size}:
			return
		default:
		}
	}
	s.queued.Add(-size)
	s.stats.dropped.Add(1)
	s.log.Warn("order message dropped: inbox full", "from", om.From, "term", om.Term, "seq", om.Seq)
}

func (s *Service) reject(what string, err error) {
	s.stats.rejected.Add(1)
	s.log.Debug(what+" rejected", "error", err)
}

func (s *Service) onLeader(st *state, a protocol.Announcement) {
	if a.Term <= st.lead.Term || a.Certificate == nil {
		return
	}
	st.lead = a
	st.certified[a.Term] = a.Leader
	s.trimCertified(st)
}

func (s *Service) trimCertified(st *state) {
	for len(st.certified) > maxCertified {
		lowest := uint64(math.MaxUint64)
		for t := range st.certified {
			lowest = min(lowest, t)
		}
		delete(st.certified, lowest)
	}
}

// issue is Issue's work in the owner.
func (s *Service) issue(st *state, value string) (Order, error) {
	now := s.cfg.Clock.Now()
	lead := st.lead
	switch {
	case lead.Leader != s.selfID || lead.Certificate == nil:
		return Order{}, fmt.Errorf("%w: the certified leader is %d in term %d", ErrNotLeader, lead.Leader, lead.Term)
	case st.highest.term > lead.Term:
		return Order{}, fmt.Errorf("%w: term %d superseded by an order of term %d", ErrNotLeader, lead.Term, st.highest.term)
	}
	window := time.Duration(s.rounds) * s.cfg.Round
	st.issued = slices.DeleteFunc(st.issued, func(at time.Time) bool { return now.Sub(at) >= window })
	if len(st.issued) >= s.cfg.MaxOrders {
		return Order{}, fmt.Errorf("%w: %d orders issued in the last %v", ErrBusy, len(st.issued), window)
	}
	id := orderID{term: lead.Term, seq: 1}
	if st.highest.term == lead.Term {
		if st.highest.seq == math.MaxUint64 {
			return Order{}, fmt.Errorf("%w: the orders of term %d are exhausted", ErrBusy, lead.Term)
		}
		id.seq = st.highest.seq + 1
	}
	mc, err := generals.New(generals.Config{Members: len(s.ids), Commander: s.self, Self: s.self, Default: s.cfg.Default})
	if err != nil {
		return Order{}, fmt.Errorf("orders: %w", err)
	}
	out, err := mc.Issue(value)
	if err != nil {
		return Order{}, fmt.Errorf("orders: %w", err)
	}
	st.highest = id
	st.issued = append(st.issued, now)
	s.stats.issued.Add(1)
	s.send(id, out, lead.Certificate)
	o := Order{Cluster: s.cfg.Cluster, Term: id.term, Seq: id.seq, Leader: s.selfID, Value: value}
	s.publishDecision(o)
	s.log.Info("order issued", "term", id.term, "seq", id.seq)
	return o, nil
}

// onOrderMessage takes a checked message from another member.
func (s *Service) onOrderMessage(st *state, om protocol.OrderMessage) {
	id := orderID{om.Term, om.Seq}
	if o := st.open[id]; o != nil {
		s.deliver(o, om)
		s.finishIfDecided(st, o)
		return
	}
	if !id.after(st.highest) {
		s.stats.stale.Add(1)
		return
	}
	if om.Certificate == nil {
		s.hold(st, om)
		return
	}
	if err := s.checkCommander(st, om); err != nil {
		s.reject("order", err)
		return
	}
	if len(st.open) >= s.cfg.MaxOrders {
		s.stats.dropped.Add(1)
		s.log.Warn("order refused: too many under way", "term", om.Term, "seq", om.Seq, "open", len(st.open))
		return
	}
	mc, err := generals.New(generals.Config{Members: len(s.ids), Commander: s.index[om.From], Self: s.self, Default: s.cfg.Default})
	if err != nil {
		s.log.Error("order machine", "error", err)
		return
	}
	o := &order{id: id, commander: om.From, mc: mc, opened: s.cfg.Clock.Now()}
	st.open[id] = o
	st.highest = id
	s.stats.opened.Add(1)
	s.log.Debug("order opened", "term", id.term, "seq", id.seq, "leader", om.From)
	s.deliver(o, om)
	// The messages that overtook the leader's.
	var early []protocol.OrderMessage
	st.pending = slices.DeleteFunc(st.pending, func(p pendingMessage) bool {
		if p.om.Term == id.term && p.om.Seq == id.seq {
			early = append(early, p.om)
			return true
		}
		return false
	})
	for _, e := range early {
		s.deliver(o, e)
	}
	s.finishIfDecided(st, o)
}

// checkCommander checks that om, which carries a certificate, comes from
// the leader that certificate names, and that it holds.
func (s *Service) checkCommander(st *state, om protocol.OrderMessage) error {
	c := om.Certificate
	if c.Leader != om.From {
		return fmt.Errorf("member %d sent the certificate of leader %d in term %d", om.From, c.Leader, c.Term)
	}
	if leader, ok := st.certified[om.Term]; ok && leader == om.From {
		return nil
	}
	if err := certify.VerifyCertificateFor(s.cfg.Keys.Members(), *c, s.cfg.Cluster, om.Term, om.From); err != nil {
		return fmt.Errorf("member %d in term %d: %w", om.From, om.Term, err)
	}
	st.certified[om.Term] = om.From
	s.trimCertified(st)
	return nil
}

// hold keeps a message of an order not opened yet.
func (s *Service) hold(st *state, om protocol.OrderMessage) {
	mine := 0
	for _, p := range st.pending {
		if p.om.From == om.From {
			mine++
		}
	}
	if len(st.pending) >= maxPending || mine >= maxPending/len(s.ids) {
		s.stats.dropped.Add(1)
		s.log.Debug("early order message dropped: buffer full", "from", om.From, "term", om.Term, "seq", om.Seq)
		return
	}
	st.pending = append(st.pending, pendingMessage{at: s.cfg.Clock.Now(), om: om})
}

// deliver hands o's machine the relays of om addressed to this member,
// and sends what it answers.
func (s *Service) deliver(o *order, om protocol.OrderMessage) {
	from := s.index[om.From] // a member: its key verified the message
	var out []generals.Message
	for _, r := range om.Relays {
		if r.To != s.selfID {
			continue
		}
		path := make([]int, len(r.Path))
		known := true
		for i, id := range r.Path {
			idx, ok := s.index[id]
			path[i], known = idx, known && ok
		}
		if !known {
			s.reject("relay", fmt.Errorf("path %v names a non-member", r.Path))
			continue
		}
		msgs, err := o.mc.Receive(from, generals.Message{To: s.self, Path: path, Value: om.Values[r.Value]})
		switch {
		case errors.Is(err, generals.ErrEquivocation):
			s.stats.equivocations.Add(1)
			s.log.Warn("equivocation: a member relayed two values along one path",
				"liar", om.From, "term", o.id.term, "seq", o.id.seq, "path", r.Path)
		case errors.Is(err, generals.ErrLate):
			s.stats.stale.Add(1)
		case err != nil:
			s.reject("relay", err)
		default:
			s.stats.received.Add(1)
		}
		out = append(out, msgs...)
	}
	s.send(o.id, out, nil)
}

// onTick ends the rounds whose deadlines have passed and forgets the
// early messages whose order never opened.
func (s *Service) onTick(st *state) {
	now := s.cfg.Clock.Now()
	for _, o := range st.open {
		for o.ended < s.rounds && !now.Before(s.roundEnd(o, o.ended+1)) {
			o.ended++
			s.send(o.id, o.mc.EndRound(), nil)
		}
		s.finishIfDecided(st, o)
	}
	life := time.Duration(s.rounds) * s.cfg.Round
	st.pending = slices.DeleteFunc(st.pending, func(p pendingMessage) bool { return now.Sub(p.at) >= life })
}

func (s *Service) roundEnd(o *order, round int) time.Time {
	return o.opened.Add(time.Duration(round) * s.cfg.Round)
}

// nextDeadline is the next round's end or early message's expiry.
func (s *Service) nextDeadline(st *state) (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, o := range st.open {
		consider(s.roundEnd(o, o.ended+1))
	}
	life := time.Duration(s.rounds) * s.cfg.Round
	for _, p := range st.pending {
		consider(p.at.Add(life))
	}
	return next, !next.IsZero()
}

func (s *Service) finishIfDecided(st *state, o *order) {
	v, ok := o.mc.Decision()
	if !ok {
		return
	}
	delete(st.open, o.id)
	s.publishDecision(Order{Cluster: s.cfg.Cluster, Term: o.id.term, Seq: o.id.seq, Leader: o.commander, Value: v})
}

func (s *Service) publishDecision(o Order) {
	data, err := protocol.EncodeDecision(protocol.Decision{Cluster: o.Cluster, Term: o.Term, Seq: o.Seq, Value: o.Value, Member: s.selfID})
	if err != nil {
		s.log.Error("encode decision", "error", err)
		return
	}
	s.stats.decided.Add(1)
	s.log.Debug("order decided", "term", o.Term, "seq", o.Seq, "leader", o.Leader)
	s.publish(protocol.DecidedSubject(s.cfg.Cluster), data)
}

// send publishes msgs, this member's oral messages of order id, in
// messages of at most MaxOrderRelays relays; cert, if not nil, goes with
// each.
func (s *Service) send(id orderID, msgs []generals.Message, cert *certify.Certificate) {
	for chunk := range slices.Chunk(msgs, protocol.MaxOrderRelays) {
		om := protocol.OrderMessage{Cluster: s.cfg.Cluster, Term: id.term, Seq: id.seq, From: s.selfID, Certificate: cert}
		for _, m := range chunk {
			vi := slices.Index(om.Values, m.Value)
			if vi < 0 {
				vi = len(om.Values)
				om.Values = append(om.Values, m.Value)
			}
			path := make([]uint64, len(m.Path))
			for i, idx := range m.Path {
				path[i] = s.ids[idx]
			}
			om.Relays = append(om.Relays, protocol.OrderRelay{To: s.ids[m.To], Path: path, Value: vi})
		}
		data, err := protocol.EncodeOrderMessage(om)
		if err != nil {
			s.log.Error("encode order message", "error", err)
			continue
		}
		s.publish(protocol.OrderSubject(s.cfg.Cluster), data)
	}
}

func (s *Service) publish(subject string, data []byte) {
	msg := &nats.Msg{Subject: subject, Data: data, Header: s.cfg.Signer.Header(subject, data)}
	if err := s.nc.PublishMsg(msg); err != nil {
		s.log.Warn("publish", "subject", subject, "error", err)
	}
}
