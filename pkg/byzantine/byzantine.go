// Package byzantine elects a leader among n members of which up to
// f = ⌊(n−1)/3⌋ may lie in any way with their own keys, as a pure state
// machine (see package election for the interface). It signs its own
// statements and checks the others' with the members' Ed25519 keys
// (package certify); it does no I/O.
//
// # Terms and their leaders
//
// Term t has one designated leader: the members sorted from the highest
// rank down, index (t−1) mod n. So term 1 is led by the highest-ranked
// member, and a term whose leader fails passes to the next lower one.
// Ranks are election.Config.Rank: by ID, the zero Rank, or spread by a
// hash of the election and the member (election.Spread), which every
// member must be configured with alike; wherever this package speaks of a
// higher or lower member, it compares ranks. A member enters
// term 1 at its first start, and a term t > 1 only on proof: a time-out
// certificate of term t−1 (the signed time-outs of a quorum, so at least
// f+1 honest members gave t−1 up), or a certificate of term t (below).
// So a liar alone cannot move anyone's term. The proof is stored with
// the term (election.HardState.Proof). A member that restarts in a term
// it is designated for never leads that term again: it gives it up.
//
// # Votes and certificates
//
// The designated leader of its term broadcasts a Propose every heartbeat
// interval (round Seq, with the justification of the term). A member
// votes for it at most once per term: the vote, election.Vote in the hard
// state, is stored before the signed vote is broadcast, once per run;
// the leader's later rounds are answered with an Ack to the leader
// alone, a grant of the round, like a renewal's. A quorum of
// ⌈(n+f+1)/2⌉ votes for (cluster, term, leader) is a certificate; any two
// quorums share at least f+1 members, one of them honest, so no two
// certificates of one term name different leaders (an honest member only
// ever votes for the designated leader anyway). Every member that
// collects a quorum of votes forms the certificate, and the leader's
// renewals carry it.
//
// # Leases
//
// A vote, and an Ack of a later round, grants the leader a lease, as in
// package paxos: the member counts LeaseTicks+1 ticks from the Propose's
// arrival, and votes in no later term while a grant it gave may hold
// (unless the leader resigned it, or is a proven liar). A round that
// arrives after its leader's Resign of the term grants nothing. The
// leader counts LeaderLeaseTicks (election.LeaderLease) from when it
// sent the round, and reports Leader only with a certificate and while
// the grants of a quorum hold. An honest leader L2 of a later term holds a certificate
// whose quorum shares an honest member h with the quorum whose grants
// make L1's lease; h voted for L2 only after its grant to L1 ended, and
// grants nothing to a term below its vote, so L1's lease ended first:
// no two honest nodes report leader at once, whatever the f liars do.
//
// # The leader a member names
//
// A member names its term's certified leader (Status().Leader) only
// while it can hold that leader certified and alive: while it leads
// itself, while a round of the leader arrived within the leader
// time-out, or while the lease this member granted it may hold. Once
// both have run out with no newer certified leader, it names none (0,
// `leader: null` on the node's /status), as package paxos does: with
// more than f members down, the others cannot certify a successor, and
// they say so rather than name a dead leader for good. A leader that
// resigned its term, or was proven to lie, is named no longer either.
// The term stays: terms never go back.
//
// # Time-outs
//
// A member that hears no renewal of its term's leader for the leader
// time-out (or none with a certificate within the leader time-out of the
// term's start, counted from when the leases that it and the members it
// saw vote in the term before granted end) signs a time-out of the term,
// broadcasts it and votes no more in it; one whose connection to the
// leader closes (PeerDown), or that holds proof the leader lied, signs
// one too. A leader not certified within the leader time-out of its
// term's start signs one as well, but goes on proposing: a certificate
// that forms later is still used, and its rounds keep the members that
// formed it from giving the term up. A member that hears from a live
// member c above its term's leader signs a time-out of the term before
// c's next term ("times out for c"), so that a returning higher member
// takes over; a member whose term c failed to lead waits PenaltyFactor leader
// time-outs before it does that for c again. f+1 time-outs of one term
// make a member sign it too (one honest member gave it up); a quorum of
// them is the time-out certificate that starts the next term.
//
// # Evidence
//
// Two votes of one member in one term for different leaders prove that
// it lied (certify.Contradicts). A member that sees them (votes are
// broadcast) broadcasts the evidence, reports election.MemberLied, and
// ignores the liar from then on. Only vote evidence convicts: evidence
// about orders (two relays, package orders) is for the observer, and
// the machine neither acts on it nor passes it on, so that a liar cannot
// shut out of the election an honest member whose orders service was
// made to contradict itself.
//
// # What is assumed
//
// At most f members lie; their keys are their own; the members' public
// keys are the same everywhere. Clock rates differ from real time by at
// most the drift bound the lease was computed with. After the network
// settles, messages between honest members arrive within a bound well
// below the heartbeat interval. A member whose storage is lost may vote
// twice in a term it voted in before: it counts as one of the f.
//
// # Changes of the member set
//
// With Config.Changes, the member set changes at run time, one member at
// a time, by a certified decision of the members. Version 0 is the
// configured set (Config.Keys); version v+1 adds one member to version
// v, or removes one.
//
// The certified leader of a term whose certificate is of the latest
// version proposes the next (TypeBzChange): a member that asked to join
// with a credential the cluster's authority issued (Changes.Admit), or
// a member that left (its connection's end reported, PeerDown, or
// silent for the member time-out). A member
// accepts (TypeBzAccept, a signed accept) at most one set per term, only
// from its term's certified leader, only a set whose added member's
// credential holds or whose removed member it too saw leave, and never
// below Changes.MinMembers. A quorum of accepts is a prepared
// certificate; a member that holds one locks the set (it accepts no
// other set unless shown a prepared certificate of a later term) and
// commits it (TypeBzCommit, broadcast with the certificate); a quorum of
// commits makes the change final: every member that gathers it adopts
// the set. So two different sets of one version are never both final:
// the quorum that committed one shares an honest member with any quorum
// that accepts another in a later term, and it accepts only its lock.
// The accept and the lock are stored before they leave the member.
//
// A member uses the latest set it knows from the next term it enters:
// the term in which a change is made keeps its leader and its leases.
// Votes are signed with the version of the term's set, and a member's
// versions only grow (but for the leader of a term certified under the
// set before, which a member follows, and whose certificate its vote
// cannot make a second one), so once a quorum of version v+1 has voted,
// no quorum of version v can any more (the two share an honest member),
// and a change to version v+2 is proposed only under a certificate of
// version v+1: a leader whose term is of an older set hands it over
// when a change is due. The sets in use at any time are thus at most two
// adjacent ones, whose quorums share at least f+1 members (f of the
// smaller): one certified leader per term, and the lease argument of the
// package doc, hold across changes.
//
// Every member says it is present (a Hello) each presence interval, so
// that a member silent for the member time-out is known to have left
// by every other, not only by the leader it answers: a member accepts
// the removal of a member only if it saw it leave itself.
//
// Members that were away catch up from the changes the others keep (the
// last stepsKept); a member that joins sends a Hello with its key and
// credential until a change adds it.
//
// The node runs it with ELECTION_ALGORITHM=byzantine (package node), with
// ELECTION_MEMBERSHIP=dynamic a member set that changes; the
// simulator (package sim, RunByzantine and RunByzantineChurn) runs it
// among traitors.
package byzantine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/core"
	"github.com/baton-election/baton/pkg/protocol"
)

// PenaltyFactor is how many leader time-outs a member waits before it
// times out for a member again after that member failed to lead a term.
const PenaltyFactor = 8

// maxVotesKept bounds the votes kept per member for evidence.
const maxVotesKept = 8

// noTick is a tick long before any: a certified leader never heard from.
const noTick = -1 << 30

// Config configures one member's machine.
type Config struct {
	election.Config
	// Cluster is the cluster's name, signed into every statement.
	Cluster string
	// Signer signs this member's statements; its Member is Config.ID.
	Signer certify.Signer
	// Keys are the members' public keys: exactly Config.Members.
	Keys certify.Members
	// Changes, if set, lets the member set change at run time (see
	// members.go): Config.Members and Keys are then its version 0, Keys
	// a *certify.Keys, and Config.ID may be outside them (a member that
	// asks to join).
	Changes *Changes
}

// ErrConfig wraps every error of New.
var ErrConfig = errors.New("byzantine: invalid configuration")

// grant is the lease a member last granted.
type grant struct {
	term, leader uint64
	until        int
}

// Machine is one member's state machine.
type Machine struct {
	cfg Config
	id  uint64
	// The member set of the current term (fixed when the term is
	// entered: see members.go) and the latest this member knows.
	members
	latest        members
	timing        election.Timing
	now           int
	started, left bool
	hard          election.HardState
	cert          *certify.Certificate        // of the current term
	tc            *certify.TimeoutCertificate // of the term before
	heard         int                         // last sign of the term's leader
	// arrivals follows the gaps between the certified rounds of the
	// term's leader (the last in term roundTerm; core.Arrivals.Heard,
	// also across terms the same leader leads), and, in the leader
	// itself, the gaps after which it led again in the same term
	// (updateLease): the leader time-out follows them (limit).
	arrivals     core.Arrivals
	roundTerm    uint64
	leaderSeen   int // last tick the certified leader of the term was known alive (noTick: not since the certificate)
	grant        grant
	seq          uint64
	sentAt       map[uint64]int
	votes        map[uint64]certify.SignedStatement // for the current term's leader
	lastVote     int                                // tick the last of them, or a round they answer, arrived
	voteSent     uint64                             // the term in which this run broadcast its vote
	acked        map[uint64]uint64
	leading      bool
	leaseUntil   int
	claimed      bool
	timeouts     map[uint64]map[uint64][]byte // term → member → signature
	quit         uint64                       // a term this member gave up for its leader's silence (or, restarted, its own): it votes, or proposes, no more in it
	resigned     uint64                       // the highest term whose leader resigned it: no grants to its later rounds
	resignedBy   uint64                       // that leader (a term's leader differs between member sets)
	helped       bool                         // it helped members behind, last at lastHelp
	lastHelp     int
	far          map[uint64]farTimeout // member → its highest time-out beyond the window
	sentTimeout  map[uint64]int        // term → tick this member last sent its time-out
	seenVotes    map[uint64][]certify.SignedStatement
	liars        map[uint64]bool
	penalty      map[uint64]int
	lastFrom     map[uint64]int
	lastStatusTo map[uint64]int
	ready        election.Ready
	stateDirty   bool

	// The changes of the member set (members.go).
	steps      []certify.Step // the last changes adopted, oldest first
	accepted   accepted
	lock       *lockState
	committed  bool              // it signed its commit of lock
	commitSig  []byte            // its signature of that commit
	commitSent int               // when it last sent that commit
	commits    map[uint64][]byte // commits of lock, by member
	prop       *proposal
	joiners    map[uint64]joiner
	strangers  map[uint64]int // members of no set it knows that asked for the changes, and when it answered
	gone       map[uint64]int // member → tick its departure was reported
	genesis    members        // version 0, the configured set
	askedAt    int            // when it last asked for the changes it lacks
	presentAt  int            // when it last said it is present
	// handedOver is the term this member led and handed over
	// (handOver), handedAt when it last sent its Resign.
	handedOver uint64
	handedAt   int
}

// New returns the machine of cfg.ID.
func New(cfg Config) (*Machine, error) {
	ec := cfg.Config
	if cfg.Changes != nil && !slices.Contains(ec.Members, ec.ID) {
		ec.Members = append(slices.Clone(ec.Members), ec.ID)
	}
	members, err := ec.Validate()
	if cfg.Changes != nil {
		members = slices.Clone(cfg.Members)
		slices.Sort(members)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	t := cfg.Timing
	switch {
	case t.LeaseTicks == 0:
		return nil, fmt.Errorf("%w: the byzantine algorithm needs a lease", ErrConfig)
	case t.QuietHeartbeatTicks != 0:
		return nil, fmt.Errorf("%w: quiet heartbeats (QuietHeartbeatTicks): every heartbeat renews the lease", ErrConfig)
	case cfg.Signer == nil || cfg.Keys == nil:
		return nil, fmt.Errorf("%w: a signer and the members' keys are required", ErrConfig)
	case cfg.Signer.Member() != cfg.ID:
		return nil, fmt.Errorf("%w: the signer is member %d, not %d", ErrConfig, cfg.Signer.Member(), cfg.ID)
	case cfg.Keys.Size() != len(members):
		return nil, fmt.Errorf("%w: %d keys for %d members", ErrConfig, cfg.Keys.Size(), len(members))
	case len(members) > certify.MaxMembers:
		return nil, fmt.Errorf("%w: %d members, at most %d", ErrConfig, len(members), certify.MaxMembers)
	}
	for _, id := range members {
		if !cfg.Keys.Has(id) {
			return nil, fmt.Errorf("%w: no key for member %d", ErrConfig, id)
		}
	}
	if err := certify.Timeout(cfg.Cluster, cfg.ID, 1).Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var set certify.MemberSet
	if c := cfg.Changes; c != nil {
		keys, ok := cfg.Keys.(*certify.Keys)
		if !ok {
			return nil, fmt.Errorf("%w: a member set that changes needs its keys as *certify.Keys", ErrConfig)
		}
		if set, err = certify.NewMemberSet(0, keys); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if c.Admit == nil {
			return nil, fmt.Errorf("%w: a member set that changes needs Admit", ErrConfig)
		}
		if t.PresenceTicks < 1 {
			return nil, fmt.Errorf("%w: a member set that changes needs a presence interval (Timing.PresenceTicks)", ErrConfig)
		}
		if !slices.Contains(members, cfg.ID) && (c.Key == "" || c.Cred == "") {
			return nil, fmt.Errorf("%w: member %d is not of the configured set and has no key and credential to join with", ErrConfig, cfg.ID)
		}
	}
	genesis := newMembers(0, set, cfg.Keys, members, cfg.Rank)
	return &Machine{
		cfg: cfg, id: cfg.ID, members: genesis, latest: genesis, genesis: genesis,
		timing: t, hard: cfg.State, leaderSeen: noTick,
		commits: map[uint64][]byte{}, gone: map[uint64]int{}, joiners: map[uint64]joiner{}, strangers: map[uint64]int{}, askedAt: noTick, presentAt: noTick,
		sentAt: map[uint64]int{}, votes: map[uint64]certify.SignedStatement{}, acked: map[uint64]uint64{},
		timeouts: map[uint64]map[uint64][]byte{}, seenVotes: map[uint64][]certify.SignedStatement{},
		liars: map[uint64]bool{}, far: map[uint64]farTimeout{}, sentTimeout: map[uint64]int{}, penalty: map[uint64]int{}, lastFrom: map[uint64]int{}, lastStatusTo: map[uint64]int{},
	}, nil
}

// Designated returns the leader of term t among the members sorted in
// decreasing rank (election.Config.Rank; by ID, in decreasing order):
// index (t−1) mod n.
func Designated(desc []uint64, t uint64) uint64 {
	if t == 0 || len(desc) == 0 {
		return 0
	}
	return desc[(t-1)%uint64(len(desc))]
}

func (m *Machine) designated(t uint64) uint64 { return Designated(m.desc, t) }

// above reports whether member a ranks above member b
// (election.Config.Rank).
func (m *Machine) above(a, b uint64) bool { return m.latest.rank.Above(a, b) }

// nextTermOf returns the smallest term above t that c leads in the
// latest member set (the set of the terms this member enters next), 0 if
// above protocol.MaxTerm or if c is not a member of it.
func (m *Machine) nextTermOf(c, t uint64) uint64 {
	idx := slices.Index(m.latest.desc, c)
	if idx < 0 {
		return 0
	}
	i := uint64(idx)
	n := uint64(m.latest.n)
	// terms led by c are ≡ i+1 (mod n)
	next := t + 1
	r := (next - 1) % n
	next += (i + n - r) % n
	if next > protocol.MaxTerm || next <= t {
		return 0
	}
	return next
}

func (m *Machine) term() uint64 { return m.hard.Term }

// Start begins the member's life.
func (m *Machine) Start() {
	if m.started || m.left {
		return
	}
	m.started = true
	m.restoreProof()
	if !m.participates() {
		// It asks to join: nothing else until a change adds it.
		m.hello()
		m.askedAt = m.now
		return
	}
	if !m.cfg.Restored || m.hard.Vote.Term != 0 {
		// It may hold a grant it no longer knows the time of.
		m.grant = grant{term: m.hard.Vote.Term, leader: m.hard.Vote.For, until: m.now + m.timing.LeaseTicks + 1}
	}
	m.hello()
	switch {
	case m.term() == 0:
		m.enter(1, nil, nil)
	case m.designated(m.term()) == m.id:
		// It led this term, or tried to, in an earlier run, and may have
		// resigned it since: it never leads it again (a Resign of it,
		// replayed, would release grants it counts on). It gives it up.
		m.quit = m.term()
		m.timeout(m.term())
	default:
		m.entered()
	}
	// The leader time-out runs from when it may vote again.
	m.heard = max(m.now, m.grant.until)
}

// Tick advances the member's clock by one tick.
func (m *Machine) Tick() {
	if !m.started || m.left {
		return
	}
	m.now++
	if !m.participates() {
		if m.now-m.askedAt >= m.timing.LeaderTimeoutTicks {
			m.askedAt = m.now
			m.hello() // it asks to join again
		}
		return
	}
	m.updateLease()
	if m.changing() {
		if m.now-m.presentAt >= m.timing.PresenceTicks {
			m.presentAt = m.now
			m.hello() // it is present
		}
		m.driveChange()
		m.resignAgain()
	}
	t := m.term()
	if m.designated(t) == m.id && m.quit != t {
		if m.leading {
			m.leaderSeen = m.now
		}
		if m.leading || m.cert != nil {
			// A certified leader whose lease lapsed does not give its term
			// up for it: it goes on proposing, and leads again when a
			// quorum answers. Its followers time it out if it is silent
			// to them, and it joins them when f+1 do (checkTimeouts). Were
			// it to sign, one follower late with it would make the f+1.
			m.heard = m.now
		}
		if m.now-m.lastPropose() >= m.timing.HeartbeatTicks {
			m.propose()
		}
	}
	if m.above(m.id, m.designated(t)) {
		// Keep telling the others that a higher member is alive.
		m.timeoutFor(m.id)
	}
	if m.now-m.heard >= m.limit() {
		m.heard = m.now // re-sent every leader time-out while stuck
		lead := m.designated(t)
		if lead != m.id {
			m.penalty[lead] = m.now + PenaltyFactor*m.timing.LeaderTimeoutTicks
			m.quit = t
		}
		// The leader itself gives its term up too, but goes on proposing:
		// a certificate that forms late is still used, and its rounds
		// keep the members that formed it from giving the term up.
		m.event(election.Event{Kind: election.LeaderTimedOut, Leader: lead, Term: t})
		m.timeout(t)
	}
}

// limit is the leader time-out now: LeaderTimeoutTicks, raised by the
// spread of the leader's certified rounds (core.Arrivals), at most
// election.MaxAdaptiveTimeoutFactor times as long. Only the rounds of the
// term's designated leader, with the certificate this member holds,
// count: a liar cannot lengthen it except as that leader.
func (m *Machine) limit() int {
	return m.arrivals.Limit(m.timing.LeaderTimeoutTicks)
}

func (m *Machine) lastPropose() int {
	if m.seq == 0 {
		return -1 << 30
	}
	return m.sentAt[m.seq]
}

// Due is how many ticks until the next Tick can have an effect: the
// leader's next round or the end of its lease, the leader time-out, and,
// for a member above its term's leader, when it may time out for itself
// again (its last time-out of that term a leader time-out old, or a
// higher member it defers to no longer heard from, or out of its
// penalty), and, for a member that names a certified leader it does not
// hear from, when it stops naming it. Between two of these a tick
// changes only the clock, so a node need not wake for it.
func (m *Machine) Due() int {
	if !m.started {
		return 1
	}
	if m.left {
		return 1 << 30
	}
	if !m.participates() {
		due := m.askedAt + m.timing.LeaderTimeoutTicks - m.now
		if end := m.leaderUntil() - m.now; m.cert != nil && end > 0 {
			due = min(due, end) // it names the leader no more then
		}
		return max(1, due)
	}
	t := m.term()
	lead := m.designated(t)
	due := m.heard + m.limit() - m.now
	if lead == m.id && m.quit != t {
		due = min(due, m.lastPropose()+m.timing.HeartbeatTicks-m.now)
	}
	if m.leading {
		due = min(due, m.leaseUntil-m.now)
		if m.changing() {
			due = min(due, m.changeDue())
		}
	}
	if m.changing() {
		due = min(due, m.presentAt+m.timing.PresenceTicks-m.now)
		if m.handedOver == t {
			due = min(due, m.handedAt+m.timing.HeartbeatTicks-m.now)
		}
	}
	if m.cert != nil && !m.leading {
		if end := m.leaderUntil() - m.now; end > 0 {
			due = min(due, end) // it names the leader no more then
		}
	}
	if m.above(m.id, lead) {
		x := m.nextTermOf(m.id, t) - 1
		if at, ok := m.sentTimeout[x]; ok {
			due = min(due, at+m.timing.LeaderTimeoutTicks-m.now)
		} else {
			due = 1
		}
		for _, h := range m.latest.desc {
			if !m.above(h, m.id) {
				break
			}
			if p := m.penalty[h]; p > m.now {
				due = min(due, p-m.now)
			}
			if m.lastFrom[h] > 0 {
				if end := m.lastFrom[h] + m.timing.LeaderTimeoutTicks - m.now; end > 0 {
					due = min(due, end)
				}
			}
		}
	}
	return max(1, due)
}

// Step hands the member a message that arrived now.
func (m *Machine) Step(msg protocol.Message) { m.StepAt(msg, m.now) }

// StepAt hands the member a message that arrived in tick arrived: a grant
// is counted from the later of arrived and the current tick.
func (m *Machine) StepAt(msg protocol.Message, arrived int) {
	if !m.started || m.left || msg.From == m.id || m.liars[msg.From] {
		return
	}
	if msg.Type == protocol.TypeBzHello && msg.Key != "" && !m.latest.has(msg.From) {
		m.onJoin(msg) // it asks to join (again)
		return
	}
	if !m.knows(msg.From) {
		if msg.Type == protocol.TypeBzHello && m.changing() && msg.Version < m.latest.version {
			m.onStranger(msg) // a member removed while it was away: the changes it lacks
		}
		return
	}
	arrived = max(arrived, m.now)
	m.lastFrom[msg.From] = m.now
	m.heardVersion(msg.Version)
	if !m.participates() {
		// It asks to join: it follows the changes, and the terms.
		switch msg.Type {
		case protocol.TypeBzStatus:
			m.follow(msg.Steps)
			if m.participates() {
				m.justify(msg.Term, msg.Cert, msg.TC) // added
			}
		case protocol.TypeBzCommit:
			m.onCommit(msg)
		}
		return
	}
	switch msg.Type {
	case protocol.TypeBzPropose:
		m.onPropose(msg, arrived)
	case protocol.TypeBzVote:
		m.onVote(msg)
	case protocol.TypeBzAck:
		m.onAck(msg)
	case protocol.TypeBzTimeout:
		m.justify(msg.Term, msg.Cert, msg.TC)
		m.onTimeout(msg)
	case protocol.TypeBzHello:
		m.onHello(msg)
	case protocol.TypeBzStatus:
		m.follow(msg.Steps)
		m.justify(msg.Term, msg.Cert, msg.TC)
	case protocol.TypeBzChange:
		m.onChange(msg)
	case protocol.TypeBzAccept:
		m.onAccept(msg)
	case protocol.TypeBzCommit:
		m.onCommit(msg)
	case protocol.TypeBzLock:
		if msg.Set != nil && msg.QC != nil {
			m.onPrepared(*msg.Set, *msg.QC, false)
		}
	case protocol.TypeBzEvidence:
		if msg.Evidence != nil {
			m.onEvidence(*msg.Evidence)
		}
	case protocol.TypeResign:
		m.onResign(msg)
	default:
		return
	}
	if !m.liars[msg.From] {
		m.timeoutFor(msg.From)
	}
}

// Unreachable is ignored: time-outs decide.
func (m *Machine) Unreachable(uint64) {}

// PeerDown times out the current term at once if its leader went down
// (unless this member just did, on the leader's Resign).
func (m *Machine) PeerDown(id uint64) {
	m.arrivals.Forget(id) // it left: its next round follows a restart
	if m.changing() && m.latest.has(id) && m.started && !m.left {
		m.gone[id] = m.now
		m.driveChange()
	}
	if !m.started || m.left || id == m.id || id != m.designated(m.term()) {
		return
	}
	m.event(election.Event{Kind: election.LeaderDisconnected, Leader: id, Term: m.term()})
	m.timeoutOnce(m.term())
}

// Resign leaves: a leader stops leading first, then tells the others,
// which release its lease and time its term out.
func (m *Machine) Resign() {
	if m.left {
		return
	}
	if m.leading {
		m.stepDown()
	}
	if m.started {
		m.send(protocol.Message{Type: protocol.TypeResign, Term: m.term()})
	}
	m.left = true
}

// Ready returns and clears what the member wants done.
func (m *Machine) Ready() election.Ready {
	if m.stateDirty {
		h := m.hard
		m.ready.State = &h
		m.stateDirty = false
	}
	r := m.ready
	m.ready = election.Ready{}
	return r
}

// Status returns the member's view.
func (m *Machine) Status() election.SoftState {
	st := election.SoftState{ID: m.id, Term: m.term(), Leader: m.leader()}
	switch {
	case m.leading && m.now < m.leaseUntil:
		st.Role, st.LeaseUntil = election.Leader, m.leaseUntil
	case !m.left && m.designated(m.term()) == m.id:
		st.Role = election.Candidate
	}
	return st
}

// leader is the member's view of who leads: the certified leader of its
// term while it may still be alive, 0 (undefined) otherwise. The leader
// is alive while it leads here, while a round of it arrived within the
// leader time-out, or while the lease this member granted it may hold.
// After both have run out without a newer certified leader (the leader
// died, and too few members are left to certify another), the member
// names no leader rather than the dead one; nor does it name one that
// resigned its term or was proven to lie.
func (m *Machine) leader() uint64 {
	if m.cert == nil {
		return 0
	}
	l := m.cert.Leader
	if m.liars[l] {
		return 0
	}
	if m.leading || m.now < m.leaderUntil() {
		return l
	}
	return 0
}

// leaderUntil is the tick at which the member stops naming its term's
// certified leader, unless it hears from it again: the leader time-out
// after its last round, or the end of the lease granted to it, whichever
// is later.
func (m *Machine) leaderUntil() int {
	until := m.leaderSeen + m.timing.LeaderTimeoutTicks
	if m.cert != nil && m.grant.term == m.term() && m.grant.leader == m.cert.Leader {
		until = max(until, m.grant.until)
	}
	return until
}

// Liars returns the members proven to have lied, in ascending order.
func (m *Machine) Liars() []uint64 {
	out := make([]uint64, 0, len(m.liars))
	for id := range m.liars {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Certificate returns the certificate of the current term's leader, if
// the member knows it.
func (m *Machine) Certificate() (certify.Certificate, bool) {
	if m.cert == nil {
		return certify.Certificate{}, false
	}
	return *m.cert, true
}

func (m *Machine) send(msg protocol.Message) {
	msg.From = m.id
	m.ready.Messages = append(m.ready.Messages, msg)
}

func (m *Machine) event(e election.Event) { m.ready.Events = append(m.ready.Events, e) }

// enter moves to term t (above the current one) on the proof cert or tc.
func (m *Machine) enter(t uint64, cert *certify.Certificate, tc *certify.TimeoutCertificate) {
	old := m.term()
	if t <= old || t > protocol.MaxTerm {
		return
	}
	// The members that voted in the old term granted its leader a lease
	// from their last vote: they vote in this term only once it ended.
	voted := 0
	if len(m.votes) > 0 {
		voted = m.lastVote + m.timing.LeaseTicks + 1
	}
	if m.designated(old) == m.id && m.cert != nil {
		// Hand over: stop acting first, then release the grants.
		if m.leading {
			m.stepDown()
		}
		if m.ready.Claimed == old {
			m.ready.Claimed = 0 // claimed and left at once: nothing to announce
		}
		m.send(protocol.Message{Type: protocol.TypeResign, Term: old})
	}
	if m.grant.leader == m.id {
		m.grant.until = 0 // it no longer acts on its own grant
	}
	m.hard.Term = t
	m.hard.MaxTerm = max(m.hard.MaxTerm, t)
	m.stateDirty = true
	m.cert, m.tc = nil, tc
	m.leaderSeen = noTick
	m.switchMembers()
	if cert != nil && cert.Version != m.members.version {
		if set, ok := m.setOf(cert.Version); ok {
			m.useMembers(set)
		}
	}
	m.saveProof()
	m.seq = 0
	clear(m.sentAt)
	clear(m.votes)
	clear(m.acked)
	m.claimed = false
	for x := range m.timeouts {
		if x < t {
			delete(m.timeouts, x)
		}
	}
	for x := range m.sentTimeout {
		if x < t {
			delete(m.sentTimeout, x)
		}
	}
	for id, f := range m.far {
		if f.term < t {
			delete(m.far, id)
		} else if f.term <= t+uint64(m.n) {
			delete(m.far, id)
			if m.timeouts[f.term] == nil {
				m.timeouts[f.term] = map[uint64][]byte{}
			}
			m.timeouts[f.term][id] = f.sig // entered checks them
		}
	}
	// The leader time-out runs from when this member, and the members it
	// saw vote in the old term, may vote again: else the members that
	// did not vote give the term up before a quorum can vote in it.
	m.heard = max(m.now, m.grant.until, voted)
	if cert != nil {
		m.setCert(cert)
	}
	m.entered()
}

// entered acts on the start of the current term.
func (m *Machine) entered() {
	t := m.term()
	if m.designated(t) == m.id {
		m.event(election.Event{Kind: election.ElectionStarted, Term: t})
		m.propose()
	} else if m.above(m.id, m.designated(t)) {
		m.timeoutFor(m.id)
	}
	// Time-outs of this term already gathered may complete a certificate.
	pending := make([]uint64, 0, len(m.timeouts))
	for x := range m.timeouts {
		pending = append(pending, x)
	}
	slices.Sort(pending)
	for _, x := range pending {
		m.checkTimeouts(x)
	}
}

// setCert records the certificate of the current term.
func (m *Machine) setCert(c *certify.Certificate) {
	if m.cert != nil || c.Term != m.term() {
		return
	}
	m.cert = c
	m.saveProof()
	m.heard, m.leaderSeen = m.now, m.now
	m.event(election.Event{Kind: election.LeaderChanged, Leader: c.Leader, Term: c.Term})
	m.updateLease()
}

// justify enters term t if cert (of t) or tc (of t−1) proves it.
func (m *Machine) justify(t uint64, cert *certify.Certificate, tc *certify.TimeoutCertificate) {
	if cert != nil && cert.Term == t && (t > m.term() || t == m.term() && m.cert == nil) {
		// The certificate holds among the set of its version: the latest,
		// or (its voters had not yet adopted the latest when they voted)
		// an earlier one this member knows.
		set, ok := m.setOf(cert.Version)
		if ok && certify.VerifyCertificateFor(set.keys, *cert, m.cfg.Cluster, t, Designated(set.desc, t)) == nil {
			if t > m.term() {
				m.enter(t, cert, nil)
			} else {
				m.useMembers(set)
				m.setCert(cert)
			}
			return
		}
	}
	if tc != nil && tc.Term+1 == t && t > m.term() && tc.Cluster == m.cfg.Cluster {
		if m.timeoutProven(tc) {
			m.enter(t, nil, tc)
		}
	}
}

// propose broadcasts the next round of the current term.
func (m *Machine) propose() {
	t := m.term()
	m.seq++
	m.sentAt[m.seq] = m.now
	for s, at := range m.sentAt {
		if m.now-at > m.timing.LeaseTicks+1 {
			delete(m.sentAt, s)
		}
	}
	msg := protocol.Message{Type: protocol.TypeBzPropose, Term: t, Seq: m.seq, Cert: m.cert}
	if m.changing() {
		msg.Version = m.latest.version
	}
	if m.cert == nil && t > 1 {
		msg.TC = m.tc
	}
	m.send(msg)
	// The leader's own vote and grant.
	if m.cert != nil && m.hard.Vote == (election.Vote{Term: t, For: m.id}) {
		m.grant = grant{term: t, leader: m.id, until: m.now + m.timing.LeaseTicks + 1}
		m.acked[m.id] = m.seq
	} else if m.vote(m.seq, m.now) {
		m.acked[m.id] = m.seq
	}
	m.updateLease()
}

// vote casts this member's vote for the current term's leader in answer
// to round seq that arrived in tick arrived, and grants the lease: the
// vote is broadcast once per run of the term, a later round answered
// with an Ack to the leader. False if it may not vote.
func (m *Machine) vote(seq uint64, arrived int) bool {
	t, lead := m.term(), m.designated(m.term())
	switch {
	case m.hard.Vote.Term > t:
		return false
	case m.hard.Vote.Term == t && m.hard.Vote.For != lead:
		return false // it voted in t for the leader of another member set
	case m.hard.Vote.Term < t:
		g := m.grant
		if g.term < t && g.until > m.now {
			return false // a grant it gave may still hold
		}
		m.hard.Vote = election.Vote{Term: t, For: lead}
		m.stateDirty = true
	}
	if m.voteSent == t {
		// Its vote is out: a later round is answered with a grant to the
		// leader alone. The vote broadcast again would cost every member
		// a delivery and a check in each round until the certificate.
		m.grant = grant{term: t, leader: lead, until: arrived + m.timing.LeaseTicks + 1}
		if lead != m.id {
			m.send(protocol.Message{Type: protocol.TypeBzAck, To: lead, Term: t, Seq: seq})
		}
		return true
	}
	ss, err := certify.Sign(m.cfg.Signer, certify.VoteIn(m.cfg.Cluster, m.id, t, lead, m.version))
	if err != nil {
		return false
	}
	m.grant = grant{term: t, leader: lead, until: arrived + m.timing.LeaseTicks + 1}
	m.send(protocol.Message{Type: protocol.TypeBzVote, Term: t, Seq: seq, Statement: &ss})
	m.voteSent = t
	m.addVote(ss)
	return true
}

func (m *Machine) onPropose(msg protocol.Message, arrived int) {
	t := msg.Term
	if msg.From != m.designated(t) && msg.Cert != nil && t >= m.term() && m.changing() {
		// A leader certified under a set other than the one this member
		// entered the term with (it had not adopted a change yet, or had
		// one more): its certificate tells which (justify).
		m.justify(t, msg.Cert, nil)
	}
	if msg.From != m.designated(t) {
		return
	}
	if t < m.term() {
		m.status(msg.From)
		return
	}
	if t > m.term() || msg.Cert != nil && m.cert == nil {
		if t > 1 || msg.Cert != nil {
			m.justify(t, msg.Cert, msg.TC)
		} else if m.term() == 0 {
			m.enter(1, nil, nil)
		}
	}
	if t != m.term() || m.resigned == t && m.resignedBy == msg.From {
		return // a leader that resigned: no more grants to it
	}
	if m.cert == nil && len(m.votes) > 0 {
		m.lastVote = m.now // its voters grant the lease again in answer to this round
	}
	// The leader is heard from when its round arrived: later than the
	// current tick when the node hands over, before the ticks of its
	// own stall, a round that came in during it (StepAt). Counted from
	// the current tick, the stall's ticks would time the leader out
	// just after its round.
	if m.cert != nil {
		m.leaderSeen = arrived // its certified leader is alive
	}
	if m.quit == t && msg.Cert == nil {
		return // a candidacy it gave up on: no more grants to it
	}
	if m.cert != nil {
		// Only the designated leader of t, with its certificate, gets
		// here: a liar cannot lengthen the time-out but as a leader.
		m.heard, m.roundTerm = arrived, t
		m.arrivals.Heard(msg.From, arrived, m.timing.LeaderTimeoutTicks)
	}
	if m.cert != nil && msg.Cert == nil {
		m.status(msg.From) // the leader lacks its certificate: here it is
	}
	if m.cert != nil && msg.Cert != nil && m.hard.Vote == (election.Vote{Term: t, For: msg.From}) {
		// A renewal: grant the lease again.
		m.grant = grant{term: t, leader: msg.From, until: arrived + m.timing.LeaseTicks + 1}
		m.send(protocol.Message{Type: protocol.TypeBzAck, To: msg.From, Term: t, Seq: msg.Seq})
		return
	}
	m.vote(msg.Seq, arrived)
}

func (m *Machine) onVote(msg protocol.Message) {
	ss := msg.Statement
	if ss == nil || ss.Statement.Cluster != m.cfg.Cluster {
		return
	}
	s := ss.Statement
	if prev, ok := m.votes[s.Member]; ok && sameVote(prev.Statement, s) {
		m.lastVote = m.now // a repeated vote renews its grant
		m.ackRound(msg)
		return
	}
	if slices.ContainsFunc(m.seenVotes[s.Member], func(o certify.SignedStatement) bool { return sameVote(o.Statement, s) }) {
		return // known, and not of the current term's leader
	}
	if ss.Verify(m.keys) != nil {
		return
	}
	m.addVote(*ss)
	if !m.liars[s.Member] {
		m.ackRound(msg)
	}
}

// ackRound counts a vote of the current term as an answer to its round.
func (m *Machine) ackRound(msg protocol.Message) {
	if msg.Term == m.term() && m.designated(msg.Term) == m.id && msg.Seq <= m.seq {
		if _, ok := m.votes[msg.From]; ok {
			m.acked[msg.From] = max(m.acked[msg.From], msg.Seq)
			m.updateLease()
		}
	}
}

// addVote keeps a verified vote for evidence, and counts it towards the
// certificate of the current term.
func (m *Machine) addVote(ss certify.SignedStatement) {
	s := ss.Statement
	kept := m.seenVotes[s.Member]
	for _, old := range kept {
		if certify.Contradicts(old.Statement, s) {
			m.convict(certify.Evidence{First: old, Second: ss})
			return
		}
	}
	if !slices.ContainsFunc(kept, func(o certify.SignedStatement) bool { return sameVote(o.Statement, s) }) {
		kept = append(kept, ss)
		if len(kept) > maxVotesKept {
			// Forget the vote of the lowest term.
			low := 0
			for i, o := range kept {
				if o.Statement.Term < kept[low].Statement.Term {
					low = i
				}
			}
			kept = slices.Delete(kept, low, low+1)
		}
		m.seenVotes[s.Member] = kept
	}
	t := m.term()
	if s.Term != t || s.Leader != m.designated(t) || s.Version != m.version || m.liars[s.Member] {
		return
	}
	m.votes[s.Member] = ss
	m.lastVote = m.now
	if m.cert == nil && len(m.votes) >= m.quorum {
		all := make([]certify.SignedStatement, 0, len(m.votes))
		for _, v := range m.votes {
			all = append(all, v)
		}
		if c, err := certify.NewCertificate(all); err == nil {
			m.setCert(&c)
		}
	}
}

// onAck counts an ack as a grant of the round it answers.
func (m *Machine) onAck(msg protocol.Message) {
	if msg.To == m.id && msg.Term == m.term() && m.designated(msg.Term) == m.id && msg.Seq <= m.seq {
		m.acked[msg.From] = max(m.acked[msg.From], msg.Seq)
		m.updateLease()
	}
}

// updateLease recomputes the leader's lease from the rounds its quorum
// answered last.
func (m *Machine) updateLease() {
	lease := 0
	if m.cert != nil && m.designated(m.term()) == m.id && !m.left {
		var at []int
		for member, s := range m.acked {
			if sent, ok := m.sentAt[s]; ok && !m.liars[member] {
				at = append(at, sent)
			}
		}
		if len(at) >= m.quorum {
			slices.Sort(at)
			slices.Reverse(at)
			lease = at[m.quorum-1] + m.timing.LeaderLeaseTicks
		}
	}
	if lease > m.now {
		if !m.leading && m.roundTerm == m.term() && m.leaderSeen != noTick && m.leaderSeen < m.now {
			// Leading again in the same term after the lease ran out
			// (its host stalled, or its quorum's answers came late):
			// the leader's own time-out of its term follows these gaps,
			// as its followers' follows its rounds.
			m.arrivals.Add(m.now - m.leaderSeen)
		}
		m.leaseUntil, m.leaderSeen = lease, m.now
		if !m.leading {
			m.roundTerm = m.term()
			m.arrivals.Forget(0) // this member leads: the next round it hears starts the gaps again
			m.leading = true
			if !m.claimed {
				m.claimed = true
				m.ready.Claimed = m.term()
			}
		}
		return
	}
	if m.leading {
		m.stepDown()
	}
}

func (m *Machine) stepDown() {
	m.leading = false
	m.leaseUntil = 0
	m.event(election.Event{Kind: election.SteppedDown, Leader: m.id, Term: m.term()})
}

// timeout signs and broadcasts this member's time-out of term x.
func (m *Machine) timeout(x uint64) {
	if x < m.term() || x >= protocol.MaxTerm || x > m.term()+uint64(m.n) {
		return
	}
	ss, err := certify.Sign(m.cfg.Signer, certify.Timeout(m.cfg.Cluster, m.id, x))
	if err != nil {
		return
	}
	m.sentTimeout[x] = m.now
	msg := protocol.Message{Type: protocol.TypeBzTimeout, Term: m.term(), Statement: &ss, Cert: m.cert}
	if m.cert == nil && m.term() > 1 {
		msg.TC = m.tc
	}
	m.send(msg)
	if m.members.has(m.id) {
		// Counted only by a member of its term's set: one added since
		// gives it up too (the others of the latest count it), but is
		// not one of this set's quorum.
		m.addTimeout(m.id, x, ss.Signature)
	}
}

// timeoutOnce times out term x, unless this member did within the last
// leader time-out: a leader that leaves is noticed twice (its Resign and
// its connection's end), and the second notice tells the others nothing
// new. A member still stuck in x signs it again a leader time-out later
// (Tick).
func (m *Machine) timeoutOnce(x uint64) {
	if at, ok := m.sentTimeout[x]; ok && m.now-at < m.timing.LeaderTimeoutTicks {
		return
	}
	m.timeout(x)
}

// farTimeout is a time-out of a term beyond the window of terms whose
// time-outs a member gathers.
type farTimeout struct {
	term uint64
	sig  []byte
}

func (m *Machine) addTimeout(member, x uint64, sig []byte) {
	if x < m.term() {
		return
	}
	if x > m.term()+uint64(m.n) {
		m.addFar(member, x, sig)
		return
	}
	byMember := m.timeouts[x]
	if byMember == nil {
		byMember = map[uint64][]byte{}
		m.timeouts[x] = byMember
	}
	byMember[member] = sig
	m.checkTimeouts(x)
}

// checkTimeouts joins a time-out that f+1 members signed, and enters the
// next term on a quorum of them.
func (m *Machine) checkTimeouts(x uint64) {
	byMember := m.timeouts[x]
	if x < m.term() || len(byMember) == 0 {
		return
	}
	if _, mine := byMember[m.id]; !mine && len(byMember) >= m.f+1 {
		m.timeout(x)
		return // timeout calls back here
	}
	if len(byMember) < m.quorum || x+1 > protocol.MaxTerm {
		return
	}
	var all []certify.SignedStatement
	for member, sig := range byMember {
		all = append(all, certify.SignedStatement{Statement: certify.Timeout(m.cfg.Cluster, member, x), Signature: sig})
	}
	tc, err := certify.NewTimeoutCertificate(all)
	if err != nil {
		return
	}
	m.enter(x+1, nil, &tc)
}

func (m *Machine) onTimeout(msg protocol.Message) {
	ss := msg.Statement
	if ss == nil || ss.Statement.Cluster != m.cfg.Cluster || ss.Statement.Kind != certify.KindTimeout {
		return
	}
	x := ss.Statement.Term
	if x < m.term() {
		m.helpBehind(msg.From, x)
		return
	}
	if _, ok := m.timeouts[x][msg.From]; ok {
		return
	}
	if f, ok := m.far[msg.From]; ok && f.term >= x {
		return
	}
	if ss.Verify(m.keys) != nil {
		return
	}
	m.addTimeout(msg.From, x, ss.Signature)
}

// timeoutFor times out for c, a live member above the current term's
// leader: it gives up the term before c's next one.
func (m *Machine) timeoutFor(c uint64) {
	t := m.term()
	lead := m.designated(t)
	if t == 0 || !m.above(c, lead) || m.liars[c] || m.now < m.penalty[c] {
		return
	}
	for _, h := range m.latest.desc {
		if !m.above(h, c) {
			break
		}
		if h != m.id && !m.liars[h] && m.now >= m.penalty[h] && m.now-m.lastFrom[h] < m.timing.LeaderTimeoutTicks && m.lastFrom[h] > 0 {
			return // a higher live member: time out for it instead
		}
	}
	next := m.nextTermOf(c, t)
	if next == 0 {
		return
	}
	x := next - 1
	if at, done := m.sentTimeout[x]; done && m.now-at < m.timing.LeaderTimeoutTicks {
		return
	}
	m.timeout(x)
}

// onHello answers a member's Hello with this member's term and its
// proof, and, if the member lacks changes of the member set, with them.
// With a member set that changes, a Hello of a member that is not behind
// (in term or set) goes unanswered: members say Hello whenever they
// miss changes, and each answer to each of them costs a message.
func (m *Machine) onHello(msg protocol.Message) {
	if !m.changing() {
		m.status(msg.From)
		return
	}
	if msg.Version < m.latest.version || msg.Term < m.term() || msg.Term == 0 {
		if last, ok := m.lastStatusTo[msg.From]; ok && m.now-last < m.timing.HeartbeatTicks {
			return
		}
		m.lastStatusTo[msg.From] = m.now
		m.send(m.statusMessage(msg.From, msg.Version))
	}
}

// helpBehind answers a member that gives up term x below this member's
// term: with the proof of the term, or, without one (after a restart),
// by giving x up too, so that the member can catch up. The proof goes
// only to a member further behind than the term just below: one that
// gives that term up does so with the others, and their time-outs, or
// the rounds and time-outs of this term, which carry the proof, bring it
// here; answering each of them would cost every member a proof to every
// other at each change of term.
func (m *Machine) helpBehind(from, x uint64) {
	if m.cert != nil || m.tc != nil {
		if x+1 < m.term() {
			m.status(from)
		}
		return
	}
	if m.term() < 2 || m.helped && m.now-m.lastHelp < m.timing.LeaderTimeoutTicks {
		return
	}
	m.helped, m.lastHelp = true, m.now
	// Its own term needed a quorum's time-outs of the term before (or
	// their certificate): give that term up, so that the members behind
	// gather a certificate of it with the others who did.
	ss, err := certify.Sign(m.cfg.Signer, certify.Timeout(m.cfg.Cluster, m.id, m.term()-1))
	if err != nil {
		return
	}
	m.send(protocol.Message{Type: protocol.TypeBzTimeout, Term: m.term(), Statement: &ss})
}

// status tells member to what this member's term is, with its proof, at
// most once a heartbeat interval per member.
func (m *Machine) status(to uint64) {
	if last, ok := m.lastStatusTo[to]; ok && m.now-last < m.timing.HeartbeatTicks {
		return
	}
	m.lastStatusTo[to] = m.now
	m.send(m.statusMessage(to, m.latest.version))
}

// statusMessage is the Status that tells member to this member's term,
// its proof, and the changes of the member set after version.
func (m *Machine) statusMessage(to, version uint64) protocol.Message {
	reply := protocol.Message{Type: protocol.TypeBzStatus, To: to, Term: m.term(), Cert: m.cert}
	if m.cert != nil {
		reply.Candidate = m.cert.Leader
	} else if m.term() > 1 {
		reply.TC = m.tc
	}
	if m.changing() {
		reply.Version = m.latest.version
		reply.Steps = m.stepsAfter(version)
	}
	return reply
}

func (m *Machine) onResign(msg protocol.Message) {
	if m.grant.leader == msg.From && m.grant.term == msg.Term {
		m.grant.until = 0
	}
	if msg.Term >= m.term() && msg.From == m.designated(msg.Term) && msg.Term >= m.resigned {
		// A round of the term sent before the Resign may still arrive
		// after it: it grants nothing. Only the rounds of the leader that
		// resigned: under another member set, which this member may
		// learn the term was certified under, the term has another
		// leader, whose rounds it still grants.
		m.resigned, m.resignedBy = msg.Term, msg.From
	}
	if msg.Term == m.term() && msg.From == m.designated(m.term()) {
		m.leaderSeen = noTick // it leads no more: named no longer once its grant ends
		m.timeoutOnce(m.term())
	}
}

// onEvidence convicts on another member's evidence: vote evidence only
// (see the package doc), checked against the keys.
func (m *Machine) onEvidence(e certify.Evidence) {
	if e.Kind() != certify.KindVote || m.liars[e.Member()] || e.Member() == m.id || certify.VerifyEvidence(m.keys, e) != nil {
		return
	}
	if e.First.Statement.Cluster != m.cfg.Cluster {
		return
	}
	m.convict(e)
}

// convict records that e's member lied, tells the others, and stops
// counting on it.
func (m *Machine) convict(e certify.Evidence) {
	liar := e.Member()
	if m.liars[liar] || liar == m.id {
		return
	}
	m.liars[liar] = true
	m.event(election.Event{Kind: election.MemberLied, Member: liar, Term: m.term()})
	m.send(protocol.Message{Type: protocol.TypeBzEvidence, Evidence: &e})
	delete(m.votes, liar)
	delete(m.acked, liar)
	delete(m.seenVotes, liar)
	for _, byMember := range m.timeouts {
		delete(byMember, liar)
	}
	if m.grant.leader == liar {
		m.grant.until = 0
	}
	m.updateLease()
	if m.designated(m.term()) == liar {
		m.timeout(m.term())
	}
}

// sameVote reports whether a and b are the same vote.
func sameVote(a, b certify.Statement) bool {
	return a.Kind == b.Kind && a.Cluster == b.Cluster && a.Member == b.Member && a.Term == b.Term && a.Leader == b.Leader && a.Version == b.Version
}

// addFar keeps member's highest time-out beyond the window (one per
// member, so a liar holds one entry), and enters the term after one that
// a quorum gave up: how a member far behind catches up.
func (m *Machine) addFar(member, x uint64, sig []byte) {
	if f, ok := m.far[member]; ok && f.term >= x {
		return
	}
	m.far[member] = farTimeout{term: x, sig: sig}
	var all []certify.SignedStatement
	for id, f := range m.far {
		if f.term == x {
			all = append(all, certify.SignedStatement{Statement: certify.Timeout(m.cfg.Cluster, id, x), Signature: f.sig})
		}
	}
	if len(all) < m.quorum || x+1 > protocol.MaxTerm {
		return
	}
	tc, err := certify.NewTimeoutCertificate(all)
	if err != nil {
		return
	}
	m.enter(x+1, nil, &tc)
}

// proof is the stored proof of a member's term
// (election.HardState.Proof) and, with a member set that changes, the
// state of its changes: the last changes adopted (the last is the latest
// set), the last set accepted, and the set held prepared.
type proof struct {
	Cert     *certify.Certificate        `json:"cert,omitempty"`
	TC       *certify.TimeoutCertificate `json:"tc,omitempty"`
	Steps    []certify.Step              `json:"steps,omitempty"`
	Version  uint64                      `json:"version,omitempty"` // of the term's set
	Accepted *accepted                   `json:"accepted,omitempty"`
	Lock     *lockState                  `json:"lock,omitempty"`
}

// saveProof stores the proof of the current term and the state of the
// changes of the member set in the hard state: the oldest changes kept
// are left out if it would not fit election.MaxProofSize.
func (m *Machine) saveProof() {
	p := proof{Cert: m.cert, Steps: m.steps, Lock: m.lock, Version: m.members.version}
	if m.cert == nil {
		p.TC = m.tc
	}
	if m.accepted != (accepted{}) {
		a := m.accepted
		p.Accepted = &a
	}
	for {
		data, err := json.Marshal(p)
		switch {
		case err != nil:
			return
		case len(data) <= election.MaxProofSize:
			if p.Cert == nil && p.TC == nil && p.Steps == nil && p.Accepted == nil && p.Lock == nil && p.Version == 0 {
				data = nil // term 1 needs no proof
			}
			m.hard.Proof = string(data)
			m.stateDirty = true
			return
		case len(p.Steps) > 1:
			p.Steps = p.Steps[1:]
		case p.Cert != nil || p.TC != nil:
			p.Cert, p.TC = nil, nil // the term stays, unproven
		default:
			return
		}
	}
}

// restoreProof reads back the state of the changes of the member set,
// and the proof of the restored term; a proof that does not hold is
// dropped (the term stays: terms never go back). Its own storage is
// trusted: the member set it adopted is not checked again.
func (m *Machine) restoreProof() {
	if m.hard.Proof == "" {
		return
	}
	var p proof
	if json.Unmarshal([]byte(m.hard.Proof), &p) != nil {
		return
	}
	if m.changing() && len(p.Steps) > 0 {
		last := p.Steps[len(p.Steps)-1].Set
		if latest, err := membersOf(last, m.cfg.Rank); err == nil && last.Version > m.latest.version {
			m.latest, m.members = latest, latest
			m.steps = p.Steps
		}
		// The restored term goes on with the set it was entered with.
		if set, ok := m.setOf(p.Version); ok {
			m.useMembers(set)
		}
	}
	if m.changing() && p.Accepted != nil && p.Accepted.Version == m.latest.version+1 {
		m.accepted = *p.Accepted
	}
	if m.changing() && p.Lock != nil && p.Lock.Set.Version == m.latest.version+1 {
		m.lock = p.Lock
	}
	t := m.term()
	switch {
	case p.Cert != nil && m.restoreCert(p.Cert):
	case p.TC != nil && p.TC.Term+1 == t && p.TC.Cluster == m.cfg.Cluster && m.timeoutProven(p.TC):
		m.tc = p.TC
	}
}
