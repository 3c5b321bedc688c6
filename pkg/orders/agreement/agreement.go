package agreement

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/generals"
	"github.com/baton-election/baton/pkg/protocol"
)

// MaxOrders bounds Config.MaxOrders.
const MaxOrders = 1024

const (
	// maxPending bounds the messages of orders not opened yet, and
	// maxPending/N those of one sender, so that a liar fills only its
	// share.
	maxPending = 64
	// maxCertified bounds the certified (term, leader) pairs kept.
	maxCertified = 8
	// maxForged bounds the signatures of one member checked in vain, in
	// one order, on relays that contradict another and are not for this
	// member.
	maxForged = 8
)

// Errors. ErrNotLeader and ErrBusy are also package orders' (its Issue
// returns them as they are), hence their prefix.
var (
	// ErrConfig: the configuration is invalid.
	ErrConfig = errors.New("agreement: invalid configuration")
	// ErrNotLeader: Issue was called on a member that the newest
	// certificate (Lead) does not name as leader.
	ErrNotLeader = errors.New("orders: this member is not the certified leader")
	// ErrBusy: MaxOrders orders are under way.
	ErrBusy = errors.New("orders: too many orders under way")
)

// ID identifies an order within its cluster: the term of the leader that
// issued it and its number among that leader's orders, from 1.
type ID struct{ Term, Seq uint64 }

// After reports whether a comes after b: a greater term, or the same term
// and a greater number.
func (a ID) After(b ID) bool {
	return a.Term > b.Term || (a.Term == b.Term && a.Seq > b.Seq)
}

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

// Config configures one member's Machine.
type Config struct {
	// Cluster is the cluster's name.
	Cluster string
	// Signer signs this member's relays; its Member is this member.
	Signer certify.Signer
	// Members are the members' IDs, generals.MinMembers to
	// generals.MaxMembers of them, this member's among them.
	Members []uint64
	// Keys are the members' keys: they check the leaders' certificates
	// and the relays' signatures. Every member of Members has one.
	Keys certify.Members
	// Round is the duration of a round; positive.
	Round time.Duration
	// MaxOrders bounds the orders under way, 1 to MaxOrders.
	MaxOrders int
	// Default is the value decided when no value has a majority, and the
	// value of a path that did not arrive in its round; valid UTF-8 of at
	// most generals.MaxValueSize bytes.
	Default string
	// Floor is the greatest order this member took part in before it
	// (re)started, as its last Ready.Highest said; zero if none. No
	// order at or below it is opened or issued again.
	Floor ID
}

// Ready is what the machine wants done since the last Ready, for the
// caller to carry out in this order: store Highest; broadcast Messages;
// publish Decisions and Evidence; log Events.
type Ready struct {
	// Highest, if not nil, is the greatest order this member now takes
	// part in: to be kept on stable storage before any of Messages is
	// sent, and given back as Config.Floor after a restart, so that the
	// member never relays along its own paths in one order twice (two
	// different relays of an order along one path are evidence against
	// it).
	Highest *ID
	// Messages are this member's oral messages, to be broadcast in order
	// (every member sees every relay), each signed by the caller as a
	// whole.
	Messages []protocol.OrderMessage
	// Decisions are the orders this member decided (on the leader, the
	// orders it issued), to be published signed.
	Decisions []Order
	// Evidence are the proofs found that a member lied (two signed relays
	// of one order along one path with different values), each once per
	// liar and order, to be broadcast.
	Evidence []certify.Evidence
	// Events are what happened, for the logs.
	Events []Event
}

// EventKind names something that happened to the machine.
type EventKind int

// The events.
const (
	// Opened: the leader's message opened an order (Order, Member the
	// leader).
	Opened EventKind = iota + 1
	// Refused: an order was not opened: MaxOrders under way (Order,
	// Member the leader).
	Refused
	// Rejected: a message, or a relay within one, was refused (Order,
	// Member the sender, Err why): a bad certificate, shape, path or
	// signature.
	Rejected
	// Dropped: an early message was dropped, the buffer of messages of
	// orders not opened yet being full (Order, Member the sender).
	Dropped
	// Equivocation: a member sent this one a second value along a path
	// (Order, Member the liar, Path).
	Equivocation
	// Convicted: two signed relays of a member along one path of an order
	// with different values (Order, Member the liar, Path): Ready's
	// Evidence holds them.
	Convicted
)

// String names the event kind for logs.
func (k EventKind) String() string {
	switch k {
	case Opened:
		return "opened"
	case Refused:
		return "refused"
	case Rejected:
		return "rejected"
	case Dropped:
		return "dropped"
	case Equivocation:
		return "equivocation"
	case Convicted:
		return "convicted"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// Event is one thing that happened, for the logs.
type Event struct {
	Kind   EventKind
	Order  ID
	Member uint64
	// Path is the path of member IDs the event is about, if any.
	Path []uint64
	// Err says why, for Rejected.
	Err error
}

// Stats counts what a machine did.
type Stats struct {
	// Opened counts the orders this member opened as a lieutenant.
	Opened uint64
	// Issued counts the orders this member issued as the leader.
	Issued uint64
	// Decided counts the orders this member decided (issued included).
	Decided uint64
	// Received counts the oral messages its generals machines accepted.
	Received uint64
	// Equivocations counts the second messages to this member along one
	// path with another value (generals.ErrEquivocation).
	Equivocations uint64
	// Evidence counts the proofs found that a member lied: two signed
	// relays of one member along one path with different values,
	// whoever they were addressed to; one per liar and order.
	Evidence uint64
	// Rejected counts the messages, or relays within one, refused for a
	// bad certificate, shape, path or signature.
	Rejected uint64
	// Dropped counts the messages dropped for want of room: MaxOrders
	// under way, a full buffer of early messages.
	Dropped uint64
	// Stale counts the messages of orders already decided or refused.
	Stale uint64
}

// Machine is one member's part in the agreements on the orders of its
// cluster's certified leaders: the orders it issues as leader and those
// it takes part in as a lieutenant. It is pure and deterministic: no I/O,
// no goroutines, no clock (every call that needs the time takes it), and
// its output depends only on its inputs. It is not safe for concurrent
// use.
type Machine struct {
	cfg    Config
	self   int // this member's index in cfg.Members (sorted)
	rounds int
	paths  int // the paths of an order: 1 + (n−1) + (n−1)(n−2) + …, f+1 terms

	lead      certify.Certificate // newest certified leader; Term 0 if none
	certified map[uint64]uint64   // term → leader, certificates verified
	highest   ID                  // greatest order opened or issued
	orders    map[ID]*order       // the orders followed
	seq       []*order            // the same, in increasing ID
	pending   []pendingMessage
	issued    []time.Time // when this member's orders under way were issued
	// refused is, by index, the greatest term of a certificate of its
	// own that the member sent and that did not hold (an honest member
	// never sends one): its certificates of terms up to it, unless
	// certified already, are refused unchecked.
	refused [generals.MaxMembers]uint64

	rd    Ready
	stats Stats
}

// order is an order this member follows: one it issued or opened, until
// its last round ends.
type order struct {
	id        ID
	commander uint64
	cmd       int               // the commander's index
	mc        *generals.Machine // nil on the leader, which decided when it issued
	decided   bool
	opened    time.Time
	ended     int // rounds ended
	// relays is, per path, the first relay seen along it (whoever it was
	// addressed to): a second one with another value, both signed, is
	// evidence. At most one per path of the order.
	relays    map[string]*seenRelay
	convicted [generals.MaxMembers]bool // liars found out in this order, by index
	// forged counts, by index, the relays whose signatures failed when
	// they contradicted another: past maxForged, such relays for other
	// members are not checked any more (a liar cannot make this member
	// spend without bound on its bad signatures).
	forged [generals.MaxMembers]int
	// taken is, per path, the digest of the relay to this member that
	// went to the generals machine, its signature checked: a copy is
	// skipped, another value is an equivocation (the whole message is
	// signed by its sender) checked only as evidence. At most one per
	// path of the order.
	taken map[string][certify.DigestSize]byte
	// untrusted marks, by index, the members that sent this member a
	// relay whose signature failed (an honest member never does; the
	// whole message was signed by it): none of their relays in this
	// order is checked any more.
	untrusted [generals.MaxMembers]bool
}

// seenRelay is a relay seen along a path; verified tells whether its
// signature was checked (relays for other members are checked only when
// they contradict another).
type seenRelay struct {
	signed   certify.SignedStatement
	verified bool
}

type pendingMessage struct {
	at time.Time
	om protocol.OrderMessage
}

// New returns the machine of cfg.Signer's member.
func New(cfg Config) (*Machine, error) {
	if err := protocol.ValidateCluster(cfg.Cluster); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Signer == nil || cfg.Keys == nil {
		return nil, fmt.Errorf("%w: Signer and Keys are required", ErrConfig)
	}
	n := len(cfg.Members)
	if n < generals.MinMembers || n > generals.MaxMembers {
		return nil, fmt.Errorf("%w: %d members, want %d to %d", ErrConfig, n, generals.MinMembers, generals.MaxMembers)
	}
	members := slices.Sorted(slices.Values(cfg.Members))
	for i, id := range members {
		if id == 0 || !cfg.Keys.Has(id) {
			return nil, fmt.Errorf("%w: member %d has no key", ErrConfig, id)
		}
		if i > 0 && members[i-1] == id {
			return nil, fmt.Errorf("%w: member %d twice", ErrConfig, id)
		}
	}
	self, ok := slices.BinarySearch(members, cfg.Signer.Member())
	if !ok {
		return nil, fmt.Errorf("%w: the signer, member %d, is not a member", ErrConfig, cfg.Signer.Member())
	}
	if cfg.Round <= 0 {
		return nil, fmt.Errorf("%w: Round %v", ErrConfig, cfg.Round)
	}
	if cfg.MaxOrders < 1 || cfg.MaxOrders > MaxOrders {
		return nil, fmt.Errorf("%w: MaxOrders %d, want 1 to %d", ErrConfig, cfg.MaxOrders, MaxOrders)
	}
	if err := protocol.CheckOrderValue(cfg.Default); err != nil {
		return nil, fmt.Errorf("%w: Default: %w", ErrConfig, err)
	}
	cfg.Members = members
	m := &Machine{
		cfg: cfg, self: self, rounds: generals.Faults(n) + 1,
		certified: map[uint64]uint64{}, highest: cfg.Floor, orders: map[ID]*order{},
	}
	for l, term := 1, 1; l <= m.rounds; l++ {
		m.paths += term
		term *= n - l
	}
	return m, nil
}

// Rounds is f+1, the rounds of every order.
func (m *Machine) Rounds() int { return m.rounds }

// indexOf is member id's index (its place among the sorted members), and
// whether it is a member.
func (m *Machine) indexOf(id uint64) (int, bool) { return slices.BinarySearch(m.cfg.Members, id) }

// Stats returns the counts so far.
func (m *Machine) Stats() Stats { return m.stats }

// Ready returns what the machine wants done since the last call, and
// forgets it.
func (m *Machine) Ready() Ready {
	rd := m.rd
	m.rd = Ready{}
	return rd
}

// Lead tells the machine of a certified leader (as the cluster's
// announcements name them): the newest one decides who may Issue. The
// certificate is checked against the keys; one of a term not above the
// newest known is only remembered as the leader of its term.
func (m *Machine) Lead(c certify.Certificate) error {
	if err := m.certify(c); err != nil {
		return err
	}
	if c.Term > m.lead.Term {
		m.lead = c
	}
	return nil
}

// certify checks that c holds for this cluster and remembers its leader.
func (m *Machine) certify(c certify.Certificate) error {
	if leader, ok := m.certified[c.Term]; ok && leader == c.Leader && c.Cluster == m.cfg.Cluster {
		return nil
	}
	if err := certify.VerifyCertificateFor(m.cfg.Keys, c, m.cfg.Cluster, c.Term, c.Leader); err != nil {
		return fmt.Errorf("member %d in term %d: %w", c.Leader, c.Term, err)
	}
	if _, member := m.indexOf(c.Leader); !member {
		return fmt.Errorf("member %d in term %d: not a member of the agreement", c.Leader, c.Term)
	}
	m.certified[c.Term] = c.Leader
	for len(m.certified) > maxCertified {
		lowest := uint64(math.MaxUint64)
		for t := range m.certified {
			lowest = min(lowest, t)
		}
		delete(m.certified, lowest)
	}
	return nil
}

// newestCertified is the newest term whose certificate the machine
// checked (Lead, or a leader's message); 0 if none.
func (m *Machine) newestCertified() uint64 {
	var newest uint64
	for t := range m.certified {
		newest = max(newest, t)
	}
	return newest
}

// Issue issues value as the next order of this member's term, if the
// newest certificate (Lead) names this member as leader (ErrNotLeader
// otherwise) and fewer than MaxOrders of its orders were issued within
// the rounds of an order before now (ErrBusy otherwise). The leader
// decides value at once: the order is among Ready's Decisions, and its
// messages among Ready's Messages.
func (m *Machine) Issue(now time.Time, value string) (Order, error) {
	if err := protocol.CheckOrderValue(value); err != nil {
		return Order{}, fmt.Errorf("orders: %w", err)
	}
	lead, selfID := m.lead, m.cfg.Members[m.self]
	switch {
	case lead.Term == 0 || lead.Leader != selfID:
		return Order{}, fmt.Errorf("%w: the certified leader is %d in term %d", ErrNotLeader, lead.Leader, lead.Term)
	case m.highest.Term > lead.Term:
		return Order{}, fmt.Errorf("%w: term %d superseded by an order of term %d", ErrNotLeader, lead.Term, m.highest.Term)
	}
	window := time.Duration(m.rounds) * m.cfg.Round
	m.issued = slices.DeleteFunc(m.issued, func(at time.Time) bool { return now.Sub(at) >= window })
	if len(m.issued) >= m.cfg.MaxOrders {
		return Order{}, fmt.Errorf("%w: %d orders issued in the last %v", ErrBusy, len(m.issued), window)
	}
	id := ID{Term: lead.Term, Seq: 1}
	if m.highest.Term == lead.Term {
		if m.highest.Seq == math.MaxUint64 {
			return Order{}, fmt.Errorf("%w: the orders of term %d are exhausted", ErrBusy, lead.Term)
		}
		id.Seq = m.highest.Seq + 1
	}
	mc, err := generals.New(generals.Config{Members: len(m.cfg.Members), Commander: m.self, Self: m.self, Default: m.cfg.Default})
	if err != nil {
		return Order{}, fmt.Errorf("orders: %w", err)
	}
	out, err := mc.Issue(value)
	if err != nil {
		return Order{}, fmt.Errorf("orders: %w", err)
	}
	m.raise(id)
	m.issued = append(m.issued, now)
	m.stats.Issued++
	o := &order{id: id, commander: selfID, cmd: m.self, decided: true, opened: now}
	m.follow(o)
	m.send(id, out, &lead)
	for _, e := range m.early(id) {
		m.take(o, e) // for evidence
	}
	issued := Order{Cluster: m.cfg.Cluster, Term: id.Term, Seq: id.Seq, Leader: selfID, Value: value}
	m.decide(issued)
	return issued, nil
}

// raise records that this member takes part in order id, the greatest so
// far.
func (m *Machine) raise(id ID) {
	m.highest = id
	h := id
	m.rd.Highest = &h
}

// follow adds o to the orders followed, which it comes after. Past
// 3·MaxOrders, the oldest decided one is forgotten (the undecided ones
// are at most 2·MaxOrders: MaxOrders of the newest certified term,
// MaxOrders of older ones).
func (m *Machine) follow(o *order) {
	o.relays = make(map[string]*seenRelay, m.paths)
	o.taken = make(map[string][certify.DigestSize]byte)
	m.orders[o.id] = o
	m.seq = append(m.seq, o)
	if len(m.seq) <= 3*m.cfg.MaxOrders {
		return
	}
	for i, old := range m.seq {
		if old.decided {
			m.forget(i)
			return
		}
	}
}

func (m *Machine) forget(i int) {
	delete(m.orders, m.seq[i].id)
	m.seq = slices.Delete(m.seq, i, i+1)
}

func (m *Machine) decide(o Order) {
	m.stats.Decided++
	m.rd.Decisions = append(m.rd.Decisions, o)
}

func (m *Machine) event(e Event) { m.rd.Events = append(m.rd.Events, e) }

func (m *Machine) reject(id ID, from uint64, path []uint64, err error) {
	m.stats.Rejected++
	m.event(Event{Kind: Rejected, Order: id, Member: from, Path: path, Err: err})
}

// Receive takes a message of another member, whose sender (om.From) the
// caller authenticated: the signature over the whole message is From's
// (A2 of package generals). Everything else in it is checked here: its
// shape, the leader's certificate, each relay's path and signature. The
// machine may keep om's paths and signatures (the evidence of a lie): the
// caller must not change them afterwards.
func (m *Machine) Receive(now time.Time, om protocol.OrderMessage) {
	id := ID{om.Term, om.Seq}
	if err := protocol.ValidateOrderMessage(om); err != nil {
		m.reject(id, om.From, nil, err)
		return
	}
	if om.Cluster != m.cfg.Cluster {
		m.reject(id, om.From, nil, fmt.Errorf("cluster %q", om.Cluster))
		return
	}
	if _, member := m.indexOf(om.From); !member {
		m.reject(id, om.From, nil, fmt.Errorf("sender %d is not a member", om.From))
		return
	}
	if om.From == m.cfg.Members[m.self] {
		return // its own
	}
	if o := m.orders[id]; o != nil {
		if o.decided {
			m.stats.Stale++ // still read for evidence
		}
		m.take(o, om)
		m.finishIfDecided(o)
		return
	}
	if !id.After(m.highest) {
		m.stats.Stale++
		return
	}
	if om.Certificate == nil {
		m.hold(now, om)
		return
	}
	if err := m.checkCommander(om); err != nil {
		m.reject(id, om.From, nil, err)
		return
	}
	// The orders of the newest certified term have MaxOrders slots, and
	// those of older terms (leaders superseded, maybe without knowing it)
	// MaxOrders others: a superseded leader cannot hold the current
	// leader's.
	current := m.newestCertified()
	undecided := 0
	for _, o := range m.seq {
		if !o.decided && (o.id.Term >= current) == (id.Term >= current) {
			undecided++
		}
	}
	if undecided >= m.cfg.MaxOrders {
		m.stats.Dropped++
		m.event(Event{Kind: Refused, Order: id, Member: om.From})
		return
	}
	cmd, _ := m.indexOf(om.From)
	mc, err := generals.New(generals.Config{Members: len(m.cfg.Members), Commander: cmd, Self: m.self, Default: m.cfg.Default})
	if err != nil {
		m.reject(id, om.From, nil, err)
		return
	}
	o := &order{id: id, commander: om.From, cmd: cmd, mc: mc, opened: now}
	m.raise(id)
	m.follow(o)
	m.stats.Opened++
	m.event(Event{Kind: Opened, Order: id, Member: om.From})
	m.take(o, om)
	for _, e := range m.early(id) {
		m.take(o, e)
	}
	m.finishIfDecided(o)
}

// early removes from the buffer, and returns, the messages of order id
// that overtook its leader's.
func (m *Machine) early(id ID) []protocol.OrderMessage {
	var early []protocol.OrderMessage
	m.pending = slices.DeleteFunc(m.pending, func(p pendingMessage) bool {
		if p.om.Term == id.Term && p.om.Seq == id.Seq {
			early = append(early, p.om)
			return true
		}
		return false
	})
	return early
}

// checkCommander checks that om, which carries a certificate, comes from
// the leader that certificate names, and that it holds.
func (m *Machine) checkCommander(om protocol.OrderMessage) error {
	c := om.Certificate
	if c.Leader != om.From || c.Term != om.Term {
		return fmt.Errorf("member %d sent, in term %d, the certificate of leader %d in term %d", om.From, om.Term, c.Leader, c.Term)
	}
	from, _ := m.indexOf(om.From)
	if leader, ok := m.certified[c.Term]; !(ok && leader == c.Leader) && c.Term <= m.refused[from] {
		return fmt.Errorf("member %d sent a certificate of its own of term %d, and one of term %d that did not hold: not checked again", om.From, c.Term, m.refused[from])
	}
	if err := m.certify(*c); err != nil {
		m.refused[from] = max(m.refused[from], c.Term)
		return err
	}
	return nil
}

// hold keeps a message of an order not opened yet.
func (m *Machine) hold(now time.Time, om protocol.OrderMessage) {
	mine := 0
	for _, p := range m.pending {
		if p.om.From == om.From {
			mine++
		}
	}
	if len(m.pending) >= maxPending || mine >= maxPending/len(m.cfg.Members) {
		m.stats.Dropped++
		m.event(Event{Kind: Dropped, Order: ID{om.Term, om.Seq}, Member: om.From})
		return
	}
	m.pending = append(m.pending, pendingMessage{at: now, om: om})
}

// take reads the relays of om, a message of order o: those addressed to
// this member go to o's generals machine, if it has not decided, once
// their signatures hold; every relay is compared with the first seen
// along its path, for evidence.
func (m *Machine) take(o *order, om protocol.OrderMessage) {
	from, _ := m.indexOf(om.From)
	self := m.cfg.Members[m.self]
	// Per message, each value's digest and each signature checked once.
	digests := make([]*[certify.DigestSize]byte, len(om.Values))
	type checked struct {
		sig, value int
		path       string
		ok         bool
	}
	var checks []checked
	var out []generals.Message
	for _, r := range om.Relays {
		var buf [protocol.MaxOrderPath]int
		path, err := m.checkPath(o, r, buf[:0])
		if err != nil {
			m.reject(o.id, om.From, r.Path, err)
			continue
		}
		var kb [protocol.MaxOrderPath]byte
		key := pathKey(path, kb[:0])
		value := om.Values[r.Value]
		if digests[r.Value] == nil {
			d := certify.Digest([]byte(value))
			digests[r.Value] = &d
		}
		// The relay as a signed statement (om's slices are not changed).
		relay := certify.SignedStatement{
			Statement: certify.Statement{Kind: certify.KindRelay, Cluster: m.cfg.Cluster, Member: om.From,
				Term: o.id.Term, Order: o.id.Seq, Path: r.Path, Digest: *digests[r.Value]},
			Signature: om.Signatures[r.Signature],
		}
		// A relay to this member goes to the generals machine once per
		// path, its signature checked, unless its sender sent one whose
		// signature failed. A copy of the relay taken is skipped; a
		// second value along the path (the generals machine keeps the
		// first) is an equivocation if signed, checked as evidence is,
		// boundedly.
		toSelf := r.To == self && o.mc != nil && !o.decided && !o.untrusted[from]
		taken, isTaken := o.taken[string(key)]
		if toSelf && isTaken && taken == relay.Statement.Digest {
			continue
		}
		equivocation := toSelf && isTaken
		deliver := toSelf && !isTaken
		seen := o.relays[string(key)]
		switch {
		case !deliver:
		case seen != nil && seen.verified && seen.signed.Statement.Digest == relay.Statement.Digest &&
			bytes.Equal(seen.signed.Signature, relay.Signature):
			// A copy of a relay checked already.
		default:
			i := slices.IndexFunc(checks, func(c checked) bool { return c.sig == r.Signature && c.value == r.Value && c.path == string(key) })
			if i < 0 {
				checks = append(checks, checked{sig: r.Signature, value: r.Value, path: string(key), ok: relay.Verify(m.cfg.Keys) == nil})
				i = len(checks) - 1
			}
			if !checks[i].ok {
				m.reject(o.id, om.From, r.Path, errors.New("the relay's signature is not its sender's; its relays in this order are no longer taken"))
				o.untrusted[from] = true
				continue
			}
		}
		if deliver {
			o.taken[string(key)] = relay.Statement.Digest
		}
		switch {
		case seen == nil:
			o.relays[string(key)] = &seenRelay{signed: relay, verified: deliver}
		case seen.signed.Statement.Digest != relay.Statement.Digest:
			signed := o.convicted[from] // proven a liar: not checked again
			if !o.convicted[from] && (deliver || o.forged[from] < maxForged) {
				signed = m.contradiction(o, from, seen, relay, deliver)
			}
			if equivocation && signed {
				m.stats.Equivocations++
				m.event(Event{Kind: Equivocation, Order: o.id, Member: om.From, Path: r.Path})
			}
		case deliver && !seen.verified:
			// The same relay, its signature checked this time.
			*seen = seenRelay{signed: relay, verified: true}
		}
		if !deliver {
			continue
		}
		msgs, err := o.mc.Receive(from, generals.Message{To: m.self, Path: path, Value: value})
		switch {
		case errors.Is(err, generals.ErrEquivocation):
			m.stats.Equivocations++
			m.event(Event{Kind: Equivocation, Order: o.id, Member: om.From, Path: r.Path})
		case errors.Is(err, generals.ErrLate):
			m.stats.Stale++
		case err != nil:
			m.reject(o.id, om.From, r.Path, err)
		default:
			m.stats.Received++
		}
		out = append(out, msgs...)
	}
	m.send(o.id, out, nil)
}

// checkPath checks r's path in order o (a path of members that starts at
// the commander, at most f+1 long, the recipient a member;
// protocol.ValidateOrderMessage checked the rest) and appends it, as
// member indexes, to buf.
func (m *Machine) checkPath(o *order, r protocol.OrderRelay, buf []int) ([]int, error) {
	if _, ok := m.indexOf(r.To); !ok {
		return nil, fmt.Errorf("relay to %d, not a member", r.To)
	}
	if len(r.Path) > m.rounds {
		return nil, fmt.Errorf("path %v longer than %d", r.Path, m.rounds)
	}
	for _, id := range r.Path {
		idx, ok := m.indexOf(id)
		if !ok {
			return nil, fmt.Errorf("path %v names a non-member", r.Path)
		}
		buf = append(buf, idx)
	}
	if buf[0] != o.cmd {
		return nil, fmt.Errorf("path %v does not start at the leader %d", r.Path, o.commander)
	}
	return buf, nil
}

// contradiction handles a relay, second, of o along the path of seen with
// another value, by the member of index liar: if both are signed by it,
// that is evidence. A stored relay whose signature fails is replaced by
// second, if second's holds. It reports whether second's signature
// holds.
func (m *Machine) contradiction(o *order, liar int, seen *seenRelay, second certify.SignedStatement, verified bool) bool {
	if !verified && second.Verify(m.cfg.Keys) != nil {
		o.forged[liar]++
		m.reject(o.id, second.Statement.Member, second.Statement.Path, errors.New("the relay's signature is not its sender's"))
		return false
	}
	if !seen.verified {
		if seen.signed.Verify(m.cfg.Keys) != nil {
			o.forged[liar]++
			*seen = seenRelay{signed: second, verified: true}
			return true
		}
		seen.verified = true
	}
	e := certify.Evidence{First: seen.signed, Second: second}
	if !certify.Contradicts(e.First.Statement, e.Second.Statement) {
		return true // the statements checked above are of one member, order and path
	}
	o.convicted[liar] = true
	m.stats.Evidence++
	m.rd.Evidence = append(m.rd.Evidence, e)
	m.event(Event{Kind: Convicted, Order: o.id, Member: second.Statement.Member, Path: slices.Clone(second.Statement.Path)})
	return true
}

// Tick ends the rounds whose deadlines have passed at now, forgets the
// orders whose last round has ended and the early messages whose order
// never opened.
func (m *Machine) Tick(now time.Time) {
	for _, o := range slices.Clone(m.seq) {
		if o.mc == nil || o.decided {
			continue
		}
		for o.ended < m.rounds && !now.Before(m.roundEnd(o, o.ended+1)) {
			o.ended++
			m.send(o.id, o.mc.EndRound(), nil)
		}
		m.finishIfDecided(o)
	}
	for i := 0; i < len(m.seq); {
		if o := m.seq[i]; o.decided && !now.Before(m.roundEnd(o, m.rounds)) {
			m.forget(i)
			continue
		}
		i++
	}
	life := time.Duration(m.rounds) * m.cfg.Round
	m.pending = slices.DeleteFunc(m.pending, func(p pendingMessage) bool { return now.Sub(p.at) >= life })
}

func (m *Machine) roundEnd(o *order, round int) time.Time {
	return o.opened.Add(time.Duration(round) * m.cfg.Round)
}

// Next is when Tick next has something to do: a round's end, an order's
// or an early message's expiry. It reports false when nothing waits.
func (m *Machine) Next() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, o := range m.seq {
		if o.decided {
			consider(m.roundEnd(o, m.rounds))
		} else {
			consider(m.roundEnd(o, o.ended+1))
		}
	}
	life := time.Duration(m.rounds) * m.cfg.Round
	for _, p := range m.pending {
		consider(p.at.Add(life))
	}
	return next, !next.IsZero()
}

func (m *Machine) finishIfDecided(o *order) {
	if o.decided || o.mc == nil {
		return
	}
	v, ok := o.mc.Decision()
	if !ok {
		return
	}
	o.decided = true
	m.decide(Order{Cluster: m.cfg.Cluster, Term: o.id.Term, Seq: o.id.Seq, Leader: o.commander, Value: v})
}

// send queues msgs, this member's oral messages of order id, in messages
// of at most MaxOrderRelays relays, each relay signed (one signature for
// each path and value); cert, if not nil, goes with each.
func (m *Machine) send(id ID, msgs []generals.Message, cert *certify.Certificate) {
	type signedPath struct {
		path  string
		value string
		sig   []byte
	}
	var sigs []signedPath
	for chunk := range slices.Chunk(msgs, protocol.MaxOrderRelays) {
		om := protocol.OrderMessage{Cluster: m.cfg.Cluster, Term: id.Term, Seq: id.Seq, From: m.cfg.Members[m.self], Certificate: cert}
		for _, g := range chunk {
			vi := slices.Index(om.Values, g.Value)
			if vi < 0 {
				vi = len(om.Values)
				om.Values = append(om.Values, g.Value)
			}
			path := make([]uint64, len(g.Path))
			for i, idx := range g.Path {
				path[i] = m.cfg.Members[idx]
			}
			key := string(pathKey(g.Path, nil))
			si := slices.IndexFunc(sigs, func(s signedPath) bool { return s.path == key && s.value == g.Value })
			if si < 0 {
				s, err := certify.Sign(m.cfg.Signer, certify.Relay(m.cfg.Cluster, id.Term, id.Seq, path, []byte(g.Value)))
				if err != nil {
					// A signer that cannot sign: nothing can leave.
					m.event(Event{Kind: Rejected, Order: id, Member: m.cfg.Members[m.self], Path: path, Err: err})
					continue
				}
				sigs = append(sigs, signedPath{path: key, value: g.Value, sig: s.Signature})
				si = len(sigs) - 1
			}
			sig := slices.IndexFunc(om.Signatures, func(s []byte) bool { return string(s) == string(sigs[si].sig) })
			if sig < 0 {
				sig = len(om.Signatures)
				om.Signatures = append(om.Signatures, sigs[si].sig)
			}
			om.Relays = append(om.Relays, protocol.OrderRelay{To: m.cfg.Members[g.To], Path: path, Value: vi, Signature: sig})
		}
		if len(om.Relays) > 0 {
			m.rd.Messages = append(m.rd.Messages, om)
		}
	}
}

// pathKey appends to buf a path of member indexes (below
// generals.MaxMembers), one byte each: a map key.
func pathKey(p []int, buf []byte) []byte {
	for _, idx := range p {
		buf = append(buf, byte(idx))
	}
	return buf
}
