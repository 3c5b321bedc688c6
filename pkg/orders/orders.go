package orders

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/generals"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Defaults of Config.
const (
	// DefaultRound is the default duration of a round: a few heartbeat
	// intervals, well above a message's delivery on a local network.
	DefaultRound = 100 * time.Millisecond
	// DefaultMaxOrders is the default bound on the orders under way.
	DefaultMaxOrders = 16
	// MaxMaxOrders bounds Config.MaxOrders.
	MaxMaxOrders = agreement.MaxOrders
)

// inboxSize and inboxBytes bound the messages waiting for the owner
// goroutine, in number and in bytes, and each sender may fill only its
// share, 1/N of each: a message that finds no room is dropped and
// counted, so that a member that floods the others drops only its own
// messages. OM(f) among 12 members sends thousands of messages an
// order, which arrive in bursts; a share holds an honest member's
// messages of several orders.
const (
	inboxSize  = 8192
	inboxBytes = 32 << 20
)

// Errors.
var (
	// ErrConfig: the configuration is invalid.
	ErrConfig = errors.New("orders: invalid configuration")
	// ErrNotLeader: Issue was called on a member that the newest
	// certified announcement does not name as leader.
	ErrNotLeader = agreement.ErrNotLeader
	// ErrBusy: MaxOrders orders are under way.
	ErrBusy = agreement.ErrBusy
	// ErrStopped: Run is not running (not started, or ended).
	ErrStopped = errors.New("orders: not running")
)

// Order is an order of a cluster's leader: its identity and the value
// this member decided (the issued value on the leader).
type Order = agreement.Order

// Clock gives the time and the timers of the round deadlines.
type Clock interface {
	Now() time.Time
	// Until returns a channel that receives once the clock reads at or
	// later (at once if it does already). A deadline is a time, not a
	// duration from a reading of the clock: however late the service
	// sets its timer, the deadline stays where it was.
	Until(at time.Time) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Until(at time.Time) <-chan time.Time { return time.After(time.Until(at)) }

// Config configures one member's Service.
type Config struct {
	// Cluster is the cluster's name.
	Cluster string
	// Signer is this member's key; its ID must have that key in Keys.
	Signer *signing.Signer
	// Keys are the members' public keys (ELECTION_KEYS_FILE): the
	// members of the agreement, 4 to generals.MaxMembers of them.
	Keys *signing.MemberKeys
	// Round is the duration of a round; DefaultRound if zero.
	Round time.Duration
	// MaxOrders bounds the orders under way of the newest certified
	// term, and those of older terms, 1 to MaxMaxOrders each;
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
	// leader.WithKeys(Keys) and leader.WithAlgorithm(protocol.Byzantine)
	// (Keys that state another algorithm or cluster are then an error).
	// Run ends with the error it yields.
	Leaders func(ctx context.Context) iter.Seq2[protocol.Announcement, error]
	// StateFile is the file where the member keeps the greatest order it
	// took part in (issued, or opened as a lieutenant): written,
	// atomically and durably, before any message of that order leaves,
	// and read when Run starts, so that after a restart the member takes
	// part in no order up to it again (see the package doc). One
	// member's service alone may use it; put it beside the node's data
	// (ELECTION_DATA). Required unless Ephemeral.
	StateFile string
	// Ephemeral, for tests only, runs without StateFile: the member keeps
	// nothing across restarts, so that a liar can replay an order to it
	// after one and have it sign two relays along one path (evidence
	// against an honest member). New refuses it together with StateFile.
	Ephemeral bool
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
	// Equivocations counts the second messages to this member along one
	// path with another value (generals.ErrEquivocation): proofs that a
	// member lied.
	Equivocations uint64
	// Evidence counts the proofs that a member lied which this member
	// found and published on the evidence subject: two signed relays of
	// one member along one path of an order with different values,
	// whoever they were addressed to; one per liar and order.
	Evidence uint64
	// Rejected counts the messages, or relays within one, dropped for a
	// bad signature, a bad certificate, a bad shape or a path the
	// agreement refuses.
	Rejected uint64
	// Dropped counts the messages dropped for want of room: a full
	// inbox or the sender's share of it (1/N), MaxOrders under way, a full
	// buffer of early messages.
	Dropped uint64
	// Stale counts the messages of orders already decided or refused.
	Stale uint64
}

// Service is one member's part in the agreements on the orders of its
// cluster's leaders: the NATS edge of an agreement.Machine, which it
// feeds with the messages it receives and checks, the certified leaders
// it follows and the time of its clock, and whose messages, decisions
// and evidence it signs and publishes. New starts nothing; Run does the
// work.
type Service struct {
	nc     *nats.Conn
	cfg    Config
	log    *slog.Logger
	selfID uint64
	mcfg   agreement.Config
	rounds int

	inbox  chan inbound
	queued atomic.Int64 // bytes in inbox
	// shares are the messages and bytes in inbox of each member, by
	// index in members (sorted IDs).
	members []uint64
	shares  []share
	issues  chan issueRequest
	started atomic.Bool
	ready   chan struct{}
	done    chan struct{}

	// The edge's own counts, and the machine's as of its last step.
	rejected, dropped atomic.Uint64
	mu                sync.Mutex
	machine           agreement.Stats
}

// inbound is a checked message on its way to the owner, with its size
// and its sender's index.
type inbound struct {
	om     protocol.OrderMessage
	size   int64
	sender int
}

// share is what one sender has in the inbox.
type share struct {
	messages, bytes atomic.Int64
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
	switch {
	case cfg.StateFile == "" && !cfg.Ephemeral:
		return nil, fmt.Errorf("%w: StateFile is required: a member that keeps nothing across restarts can be made to relay twice along its paths in one order, which is evidence against it (Ephemeral opts out, for tests only)", ErrConfig)
	case cfg.StateFile != "" && cfg.Ephemeral:
		return nil, fmt.Errorf("%w: StateFile %q and Ephemeral: choose one", ErrConfig, cfg.StateFile)
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
	mcfg := agreement.Config{
		Cluster: cfg.Cluster, Signer: cfg.Signer.Certify(), Members: cfg.Keys.IDs(), Keys: cfg.Keys.Members(),
		Round: cfg.Round, MaxOrders: cfg.MaxOrders, Default: cfg.Default,
	}
	if _, err := agreement.New(mcfg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		nc:      nc,
		cfg:     cfg,
		log:     log.With("member", cfg.Signer.ID(), "cluster", cfg.Cluster),
		selfID:  cfg.Signer.ID(),
		mcfg:    mcfg,
		rounds:  generals.Faults(n) + 1,
		inbox:   make(chan inbound, inboxSize),
		members: mcfg.Members,
		shares:  make([]share, n),
		issues:  make(chan issueRequest),
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
	}, nil
}

// Stats returns the counts so far.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	m := s.machine
	s.mu.Unlock()
	return Stats{
		Opened: m.Opened, Issued: m.Issued, Decided: m.Decided, Received: m.Received,
		Equivocations: m.Equivocations, Evidence: m.Evidence, Stale: m.Stale,
		Rejected: m.Rejected + s.rejected.Load(), Dropped: m.Dropped + s.dropped.Load(),
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
	if err := signing.VerifyAnnouncement(s.cfg.Keys, a); err != nil {
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
	mcfg := s.mcfg
	if s.cfg.StateFile != "" {
		floor, err := readState(s.cfg.StateFile)
		if err != nil {
			return err
		}
		mcfg.Floor = floor
	}
	m, err := agreement.New(mcfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
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
			// Orders are the byzantine algorithm's: its leaders count
			// only with a certificate, whatever an announcement names.
			return leader.Watch(ctx, s.nc, s.cfg.Cluster, leader.WithKeys(s.cfg.Keys), leader.WithAlgorithm(protocol.Byzantine))
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
			if err := signing.VerifyAnnouncement(s.cfg.Keys, a); err != nil {
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
			s.lead(m, a)
		case in := <-s.inbox:
			s.queued.Add(-in.size)
			s.shares[in.sender].messages.Add(-1)
			s.shares[in.sender].bytes.Add(-in.size)
			m.Receive(s.cfg.Clock.Now(), in.om)
		case req := <-s.issues:
			if req.lead != nil {
				s.lead(m, *req.lead)
			}
			o, err := m.Issue(s.cfg.Clock.Now(), req.value)
			if err == nil {
				err = s.apply(m)
			}
			if err == nil {
				s.log.Info("order issued", "term", o.Term, "seq", o.Seq)
			}
			req.reply <- issueResult{o, err}
		case <-wake:
			wake, wakeAt = nil, time.Time{}
			m.Tick(s.cfg.Clock.Now())
		}
		_ = s.apply(m) // logged; nothing left for an Issue's
		if next, ok := m.Next(); ok && !next.Equal(wakeAt) {
			wake, wakeAt = s.cfg.Clock.Until(next), next
		}
	}
}

// onMessage is the subscription's callback: it checks the signature and
// the shape, and hands the message to the owner without blocking.
func (s *Service) onMessage(m *nats.Msg) {
	if len(m.Data) > protocol.MaxOrderMessage {
		s.reject("oversized order message", fmt.Errorf("%d bytes", len(m.Data)))
		return
	}
	// The sender the message claims, whose share must have room before
	// its signature is checked: a member's flood past its share costs
	// no signature check. (A forger naming another member cannot fill
	// that member's share: only messages whose signature holds count.)
	claimed, err := strconv.ParseUint(m.Header.Get(signing.SignerHeader), 10, 64)
	idx, member := slices.BinarySearch(s.members, claimed)
	if err != nil || !member {
		s.reject("order message", fmt.Errorf("signer %.20q is not a member", m.Header.Get(signing.SignerHeader)))
		return
	}
	if claimed == s.selfID {
		return // our own, echoed
	}
	size := int64(len(m.Data))
	sh := &s.shares[idx]
	n := int64(len(s.members))
	if sh.messages.Load() >= inboxSize/n || sh.bytes.Load()+size > inboxBytes/n {
		s.drop(claimed, "its share of the inbox is full")
		return
	}
	signer, err := s.cfg.Keys.Verify(m.Subject, m.Data, m.Header)
	if err != nil {
		s.reject("order message", err)
		return
	}
	om, err := protocol.DecodeOrderMessage(m.Data)
	if err == nil {
		err = signing.CheckSigner(signer, om.From)
	}
	if err == nil && om.Cluster != s.cfg.Cluster {
		err = fmt.Errorf("cluster %q", om.Cluster)
	}
	if err != nil {
		s.reject("order message", err)
		return
	}
	// Only this callback adds to a share, so the room seen above is
	// still there.
	sh.messages.Add(1)
	sh.bytes.Add(size)
	if s.queued.Add(size) <= inboxBytes {
		select {
		case s.inbox <- inbound{om: om, size: size, sender: idx}:
			return
		default:
		}
	}
	s.queued.Add(-size)
	sh.messages.Add(-1)
	sh.bytes.Add(-size)
	s.drop(om.From, "inbox full")
}

// drop counts a message dropped for want of room, and logs the first
// drop and every 1024th: a flood is not logged message by message.
func (s *Service) drop(from uint64, why string) {
	if s.dropped.Add(1)%1024 == 1 {
		s.log.Warn("order messages dropped", "from", from, "why", why, "dropped", s.dropped.Load())
	}
}

func (s *Service) reject(what string, err error) {
	s.rejected.Add(1)
	s.log.Debug(what+" rejected", "error", err)
}

// lead hands the machine a certified leader Run follows or IssueAs
// was given (its announcement checked already).
func (s *Service) lead(m *agreement.Machine, a protocol.Announcement) {
	if a.Certificate == nil {
		return
	}
	if err := m.Lead(*a.Certificate); err != nil {
		s.log.Warn("leader ignored", "leader", a.Leader, "term", a.Term, "error", err)
	}
}

// apply carries out what the machine wants done: it keeps the greatest
// order it takes part in (StateFile), publishes its messages, decisions
// and evidence, signed, and logs its events. If the order cannot be
// kept, its messages do not leave (the member is silent in it, which
// the agreement tolerates) and apply returns why.
func (s *Service) apply(m *agreement.Machine) error {
	rd := m.Ready()
	var stored error
	if rd.Highest != nil && s.cfg.StateFile != "" {
		if stored = writeState(s.cfg.StateFile, *rd.Highest); stored != nil {
			s.log.Error("the order this member takes part in cannot be kept: its messages are not sent",
				"term", rd.Highest.Term, "seq", rd.Highest.Seq, "error", stored)
			rd.Messages = nil
		}
	}
	for _, om := range rd.Messages {
		data, err := protocol.EncodeOrderMessage(om)
		if err != nil {
			s.log.Error("encode order message", "error", err)
			continue
		}
		s.publish(protocol.OrderSubject(s.cfg.Cluster), data)
	}
	for _, o := range rd.Decisions {
		data, err := protocol.EncodeDecision(protocol.Decision{Cluster: o.Cluster, Term: o.Term, Seq: o.Seq, Value: o.Value, Member: s.selfID,
			At: protocol.Timestamp{Time: time.Now()}}) // the readers' clocks, not the rounds' (Config.Clock)
		if err != nil {
			s.log.Error("encode decision", "error", err)
			continue
		}
		s.log.Debug("order decided", "term", o.Term, "seq", o.Seq, "leader", o.Leader)
		s.publish(protocol.DecidedSubject(s.cfg.Cluster), data)
	}
	for _, e := range rd.Evidence {
		data, err := protocol.Encode(protocol.Message{Type: protocol.TypeBzEvidence, From: s.selfID, Evidence: &e})
		if err != nil {
			s.log.Error("encode evidence", "error", err)
			continue
		}
		s.publish(protocol.BroadcastSubject(s.cfg.Cluster, protocol.TypeBzEvidence), data)
	}
	for _, e := range rd.Events {
		s.logEvent(e)
	}
	s.mu.Lock()
	s.machine = m.Stats()
	s.mu.Unlock()
	return stored
}

func (s *Service) logEvent(e agreement.Event) {
	at := []any{"term", e.Order.Term, "seq", e.Order.Seq}
	switch e.Kind {
	case agreement.Opened:
		s.log.Debug("order opened", append(at, "leader", e.Member)...)
	case agreement.Refused:
		s.log.Warn("order refused: too many under way", append(at, "leader", e.Member)...)
	case agreement.Rejected:
		s.log.Debug("order message rejected", append(at, "from", e.Member, "path", e.Path, "error", e.Err)...)
	case agreement.Dropped:
		s.log.Debug("early order message dropped: buffer full", append(at, "from", e.Member)...)
	case agreement.Equivocation:
		s.log.Warn("equivocation: a member relayed two values along one path", append(at, "liar", e.Member, "path", e.Path)...)
	case agreement.Convicted:
		s.log.Warn("faulty member: it signed two relays of one order along one path with different values; evidence published",
			append(at, "liar", e.Member, "path", e.Path)...)
	}
}

func (s *Service) publish(subject string, data []byte) {
	msg := &nats.Msg{Subject: subject, Data: data, Header: s.cfg.Signer.Header(subject, data)}
	if err := s.nc.PublishMsg(msg); err != nil {
		s.log.Warn("publish", "subject", subject, "error", err)
	}
}
