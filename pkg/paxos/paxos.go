// Package paxos elects a leader with Paxos and majority leases, as a pure
// state machine (see package election for the interface): never more than
// one leader at any instant, whatever the network and the scheduler do,
// under a stated bound on how fast clocks may drift.
//
// Every node is a proposer, an acceptor and a learner, the three roles of
// Paxos Made Simple (Lamport, 2001; see docs/algorithms.md#references): a
// quorum is a majority of the n configured members
// (n >= 2f+1 tolerates f failures), and a side of a partition without a
// majority never elects.
//
// # The protocol, for leadership
//
// Ballots are the terms, owned per member as for the other algorithms
// (member i only uses terms t with t mod n = (i+1) mod n), so a ballot
// names its proposer; a node takes a new ballot above every term it has
// seen and stores it before it sends it, so no ballot is ever used twice.
//
//   - Phase 1. A candidate broadcasts Prepare(b). An acceptor that has
//     promised nothing higher, and holds no lease it granted that may still
//     be valid, promises b (stored before it answers) and reports the last
//     proposal it accepted (Promise); otherwise it refuses (Nack) with the
//     ballot it promised and, if it holds a lease, its holder and how long
//     it lasts. It also refuses, naming the leader, while it still hears a
//     leader above the candidate (vouches: a pre-vote asked with the
//     Prepare); refusing is always safe.
//   - Phase 2. With promises from a majority, the candidate broadcasts
//     Propose(b): itself as the leader of ballot b. An acceptor that has
//     promised nothing higher accepts (stored before it answers), which
//     grants the proposer a lease, and answers Accepted. With a majority
//     of them, the proposer holds the lease and leads term b: it announces
//     it. The value agreed for ballot b is always its owner: each
//     leadership is its own decision, and what the promises report is used
//     to learn the newest term, not to carry an old value forward; what
//     makes leadership exclusive in time is the lease, below.
//   - Renewal. The leader proposes again, with the same ballot and a new
//     round number (Seq), every heartbeat interval; its Proposes are its
//     heartbeats, and carry its ID once it holds the lease, which is how
//     the learners learn it.
//
// # Leases and the safety argument
//
// Let L be LeaseTicks and L' = LeaderLeaseTicks = LeaderLease(L, ρ), where ρ
// bounds how far the rate of any node's clock may be from real time. An
// acceptor that accepts a proposal that arrived at (real) time t_a holds
// a grant until its clock has advanced L + 1 ticks from the tick t_a fell
// in (the extra tick covers reading its clock in whole ticks), that is,
// at least until t_a + L/(1+ρ): counted from the arrival, which a driver
// passes with StepAt when it hands the Propose over before ticks that
// fell due before the arrival, never from the earlier tick. A leader
// that sent that proposal at t_s <= t_a counts on it until its clock has
// advanced L' ticks from the tick it read when it sent, that is, at most
// until t_s + (L'+1)/(1-ρ) <= t_s + L/(1+ρ). So a leader's lease, built on
// the grants of a majority M, ends in real time before any of those
// grants does. An acceptor promises no new ballot while a grant it holds
// may be valid (even to the same node: another process may carry its ID).
// Any candidate needs promises from a majority, which shares an acceptor
// with M; that acceptor promises only after its grant has ended, so after
// the old leader's lease ended. Renewals keep the argument: a renewal
// accepted by a majority refreshes their grants before the old lease ends;
// an acceptor that has promised a higher ballot refuses renewals of the
// old one. Hence at no instant do two nodes hold valid leases, and a node
// acts as leader only while it holds one: it steps down when its lease
// ends unless a renewal made it longer, and its driver checks the lease
// against its monotonic clock before it reports leadership, answers a
// query or announces, so a leader resumed from a pause does not act on a
// lease that ended while it was paused.
//
// Every promise, acceptance and release is stored before the answer that
// depends on it leaves the node (election.AcceptorState in the hard
// state), so a restarted acceptor never breaks a promise. Neither the time
// of a grant nor its release is stored (a release is not worth a write on
// the path of a hand-over): an acceptor restarted after accepting a
// proposal promises nothing for L+1 ticks, in case its grant still holds;
// so does one whose storage is new, since it may be a replacement that
// lost the storage of an earlier run. Only a node whose own storage says
// it never accepted anything promises at once.
//
// A leader hands over without waiting for its lease to run out: it stops
// acting as leader first, then broadcasts Resign for its ballot, on which
// every acceptor releases the grant (and stores that). It does so when it
// leaves (SIGTERM) and when a higher node campaigns (the highest-ranked
// live member leads when nothing is wrong).
//
// # Liveness
//
// With a majority connected and messages delivered within t_max, a leader
// is elected within the lease after the old leader's last renewal (the
// grants must run out), plus a few message delays. When the leader fails,
// is cut off or resigns, the highest live node campaigns first and every
// other node defers by (r+1)·T, r being the live higher members it knows
// of, as with Bully; a candidate backs off when it hears a higher node
// campaign or lead, and a higher node that hears a lower leader campaigns,
// which makes that leader hand over. Duelling candidates cannot livelock:
// the higher always retries and the lower always backs off.
//
// # Ranks
//
// Higher and lower, here, are by rank (election.Config.Rank: by ID, or
// by a hash that spreads leaders over the members): which node campaigns
// first, which candidate backs off, which leader hands over, and which
// leader an acceptor vouches for against a candidate. Ballots stay owned
// by ID.
package paxos

import (
	"errors"
	"slices"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/core"
	"github.com/baton-election/baton/pkg/protocol"
)

// phase is where a proposer is.
type phase int

const (
	idle      phase = iota
	preparing       // Prepare sent, gathering promises
	proposing       // Propose sent, gathering acceptances
	leading         // holds the lease
)

// maxRounds bounds the renewal rounds whose acceptances are still counted.
const maxRounds = 8

// errNoLease is returned by New for a timing without a lease.
var errNoLease = errors.New("paxos: the timing has no lease (LeaseTicks)")

// errQuiet is returned by New for a timing with quiet heartbeats: every
// heartbeat renews the lease.
var errQuiet = errors.New("paxos: quiet heartbeats (QuietHeartbeatTicks): every heartbeat renews the lease")

// errNoVoters is returned by New for a dynamic membership without voters.
var errNoVoters = errors.New("paxos: dynamic membership needs voters (election.Config.Voters)")

// round is one Propose of the current ballot: when it was sent and who
// accepted it.
type round struct {
	seq    uint64
	sentAt int
	acks   []uint64
	cfg    *protocol.Voters // the voters it was proposed under (dynamic membership)
}

// acceptor is the acceptor's state, which this package owns: what it
// must not forget (its promise and acceptance, part of the hard state
// that Ready hands to the driver to store before the messages that
// depend on it), and the grant it holds, which it forgets on a restart.
type acceptor struct {
	state       election.AcceptorState
	saved       election.AcceptorState // state as last handed to Ready
	grantUntil  int                    // tick at which the grant of the accepted proposal ends; 0: none
	grantInc    uint64                 // incarnation of the process the grant went to, 0 if unknown
	restartWait int                    // tick before which this restarted acceptor promises nothing
}

// Machine is one node running Paxos. It implements election.Machine.
type Machine struct {
	c  *core.Core
	id uint64
	// voters are, with a static membership, the members, sorted: each
	// acts as an acceptor and a majority decides. With a dynamic one the
	// voters are cfg, the newest voter configuration this node adopted
	// (see voters.go), and cfgSaved the one last handed to Ready; a
	// member that does not vote only proposes and learns.
	voters   []uint64
	cfg      *protocol.Voters
	cfgSaved *protocol.Voters
	timing   election.Timing
	inc      uint64 // this run's incarnation
	restored bool   // its state came from its own disk
	now      int    // ticks since New

	acc  acceptor
	late int // while StepAt runs: ticks between the current tick and the message's arrival

	// Proposer.
	phase      phase
	ballot     uint64
	promises   []uint64
	round      uint64
	rounds     []round
	leaseUntil int // tick at which the lease ends
	sinceRenew int
	// A leader moving to a higher ballot, because an acceptor promised one
	// and refuses its renewals: the ballot it prepares, the promises, and
	// when it started.
	upgrade    uint64
	upPromises []uint64
	upSince    int

	// resuming: the proposal in flight is this node's own ballot again,
	// proposed when its lease ran out (see resume).
	resuming bool

	// Follower and candidate.
	heard int // tick the leader, or a higher node's campaign, was last heard
	// arrivals follows the gaps between the leader's renewals (its
	// time-out follows them, see limit; core.Arrivals.Heard); probed:
	// this silence's Probe is out.
	arrivals core.Arrivals
	probed   bool
	vouch    int    // tick the leader it follows was last heard renewing or resuming (vouches)
	wait     int    // ticks until the next campaign; 0: none scheduled
	blocked  uint64 // the holder of the lease that stalled our campaign
	released uint64 // the last node heard releasing its lease
}

var _ election.Machine = (*Machine)(nil)

// New returns a node that has not started yet. cfg.Timing must have a
// lease (LeaseTicks and LeaderLeaseTicks).
func New(cfg election.Config) (*Machine, error) {
	if cfg.Timing.LeaseTicks == 0 {
		return nil, errNoLease
	}
	if cfg.Timing.QuietHeartbeatTicks != 0 {
		return nil, errQuiet
	}
	c, err := core.NewCore(cfg)
	if err != nil {
		return nil, err
	}
	voters, _ := cfg.Validate() // valid: NewCore checked it
	var vc *protocol.Voters
	if cfg.Dynamic {
		if vc, err = startVoters(cfg); err != nil {
			return nil, err
		}
		voters = nil
	}
	return &Machine{
		c: c, id: cfg.ID, voters: voters, cfg: vc, cfgSaved: cfg.State.Voters, timing: cfg.Timing,
		inc: cfg.Incarnation, restored: cfg.Restored,
		acc: acceptor{state: cfg.State.Acceptor, saved: cfg.State.Acceptor},
	}, nil
}

// Start begins the node's life: a node that found a live leader that
// ranks higher when it started (election.Config.Found) follows it;
// otherwise a node that comes back holds an election at once if it is
// the highest-ranked live member, and takes over; a lower one defers
// by (r+1)·T, as after a leader's failure, and backs off when it hears a
// higher node campaign or lead (at a cold start, the highest starts and
// the others need not). An acceptor restarted with a grant it may still
// hold promises nothing for a lease first.
func (m *Machine) Start() {
	if m.c.Left() {
		return
	}
	if !m.restored || m.acc.state.Accepted != 0 {
		// It may have granted a lease it no longer knows the time of, or
		// (with storage of its own that is new) at all.
		m.acc.restartWait = m.now + m.timing.LeaseTicks + 1
	}
	m.heard = m.now
	m.c.Announce()
	if m.c.FollowFound() {
		return // a live higher leader: its renewals will tell if it fails
	}
	m.suspect()
}

// votes reports whether id is a voter: only the voters' promises,
// acceptances and refusals count.
func (m *Machine) votes(id uint64) bool {
	if m.cfg != nil {
		return m.cfg.Votes(id)
	}
	_, ok := slices.BinarySearch(m.voters, id)
	return ok
}

// voter reports whether this node is a voter, and acts as an acceptor.
func (m *Machine) voter() bool { return m.votes(m.id) }

// quorate reports whether ids, distinct voters, are a quorum: a majority
// of the members, or of the voter configuration cfg.
func (m *Machine) quorate(ids []uint64, cfg *protocol.Voters) bool {
	if cfg != nil {
		return cfg.Quorate(ids)
	}
	return len(ids) >= len(m.voters)/2+1
}

// Members returns the members, this node included, sorted: with dynamic
// membership, those present. It implements election.Membership.
func (m *Machine) Members() []uint64 { return m.c.Members() }

// Tick advances the node's clock by one tick.
func (m *Machine) Tick() {
	if m.c.Left() {
		return
	}
	m.c.CountTick()
	m.now++
	t := m.timing
	limit := m.limit()
	if lead := core.ProbeLead(t, limit); m.phase == idle && m.c.Leader() != 0 && !m.probed && lead > 0 && m.now-m.heard >= limit-lead {
		// Ask the silent leader before suspecting it: its answer is a
		// renewal.
		m.probed = true
		m.c.SendProbe()
	}
	if m.resuming && m.phase == proposing {
		// Resuming: propose again every heartbeat interval, as a
		// leader renews (the first may not have left, out of date
		// after a stall).
		m.sinceRenew++
		if m.sinceRenew >= t.HeartbeatTicks {
			m.propose()
		}
	}
	switch {
	case m.phase == leading && m.now >= m.leaseUntil:
		// The lease ran out without a renewal: stop acting as leader
		// before anything else, then propose again under the same
		// ballot.
		m.stopLeading()
		m.heard = m.now
		m.resume()
	case m.phase == leading:
		if m.upgrade != 0 && m.now-m.upSince >= m.c.CoordinatorTicks() {
			m.upgrade = 0 // stalled; the next refusal starts another
		}
		m.sinceRenew++
		if m.sinceRenew >= t.HeartbeatTicks {
			m.propose()
		}
	case m.c.Leader() != 0 && m.now-m.heard >= limit:
		// The leader fell silent.
		m.c.MarkDeparted(m.c.Leader())
		m.c.Forget(true)
		m.suspect()
	case m.wait > 0:
		m.wait--
		if m.wait == 0 {
			m.campaign()
		}
	case m.c.Leader() == 0 && m.phase == idle && m.now-m.heard >= t.LeaderTimeoutTicks:
		// No leader, and nobody campaigns.
		m.suspect()
	}
}

// Due is how many ticks until the next Tick can have an effect.
func (m *Machine) Due() int { return min(m.due(), m.c.PresenceDue()) }

// due is Due for the Paxos roles, without the membership's clock.
func (m *Machine) due() int {
	t := m.timing
	switch {
	case m.c.Left():
		return 1 << 30
	case m.phase == leading:
		return max(1, min(t.HeartbeatTicks-m.sinceRenew, m.leaseUntil-m.now))
	case m.resuming && m.phase == proposing:
		return max(1, min(t.HeartbeatTicks-m.sinceRenew, m.wait))
	}
	// As Tick decides: the leader's silence (and before it the probe),
	// else the wait, else (no leader, nobody campaigning) the silence of
	// any leader.
	silence := max(1, t.LeaderTimeoutTicks-(m.now-m.heard))
	if m.c.Leader() != 0 {
		limit := m.limit()
		silence = max(1, limit-(m.now-m.heard))
		if lead := core.ProbeLead(t, limit); m.phase == idle && !m.probed && lead > 0 {
			silence = max(1, min(silence, limit-lead-(m.now-m.heard)))
		}
	}
	switch {
	case m.c.Leader() != 0 && m.wait > 0:
		return min(silence, m.wait)
	case m.c.Leader() != 0:
		return silence
	case m.wait > 0:
		return m.wait
	case m.phase == idle:
		return silence
	}
	return 1 << 30 // campaigning with no wait: only messages move it
}

// Step handles a message that arrived in the current tick.
func (m *Machine) Step(msg protocol.Message) { m.StepAt(msg, m.now) }

// StepAt handles a message that arrived in tick arrived of this node's
// clock, which may be later than the ticks given so far (a driver that
// settles at a deadline hands over what a flush brought before the
// deadline's tick): a grant is counted from the later of the two, so that
// it never ends before L+1 ticks after the Propose really arrived. Every
// other reaction (hearing the leader, time-outs) uses the current tick.
// It implements election.ArrivalStepper.
func (m *Machine) StepAt(msg protocol.Message, arrived int) {
	m.late = max(0, arrived-m.now)
	defer func() { m.late = 0 }()
	if !m.c.ReceiveLate(msg, m.late) {
		return
	}
	if msg.Cfg != nil {
		m.adopt(msg.Cfg) // stored before any answer under it
	}
	switch msg.Type {
	case protocol.TypePrepare:
		m.onPrepare(msg)
	case protocol.TypePromise:
		m.onPromise(msg)
	case protocol.TypePropose:
		m.onPropose(msg)
	case protocol.TypeAccepted:
		m.onAccepted(msg)
	case protocol.TypeNack:
		m.onNack(msg)
	case protocol.TypeResign:
		m.onResign(msg)
	case protocol.TypeProbe:
		// A follower has not heard us for a while: renew now, or propose
		// again if the lease lapsed and we are resuming.
		if (m.phase == leading || m.resuming && m.phase == proposing) && m.sinceRenew > 0 {
			m.propose()
		}
	}
}

// limit is the follower's leader time-out now: LeaderTimeoutTicks, raised
// by the spread of the leader's renewals (core.Arrivals), at most
// election.MaxAdaptiveTimeoutFactor times as long.
func (m *Machine) limit() int {
	return m.arrivals.Limit(m.timing.LeaderTimeoutTicks)
}

// resume proposes again, under the ballot whose lease just ran out, to
// lead on in the same term: a leader whose renewals were answered late (a
// busy host) keeps its term instead of being elected again with a new
// one. It is Phase 2 again with the ballot a majority promised: an
// acceptor that has promised a higher ballot since refuses it, and the
// lease counts, as every lease does, from the new proposal's sending, so
// the lease argument holds as for a renewal. A Nack of a higher ballot
// ends the resume (onNack); if no majority accepts within resumeTicks,
// the node campaigns with a new ballot.
func (m *Machine) resume() {
	if m.c.Left() || m.ballot == 0 {
		return
	}
	m.phase, m.resuming, m.rounds = proposing, true, m.rounds[:0]
	m.wait = m.resumeTicks()
	m.propose()
}

// resumeTicks is how long a leader whose lease ran out proposes again
// under its ballot before it campaigns with a new one: as long as its
// followers may wait for it (election.MaxAdaptiveTimeoutFactor leader
// time-outs) and a campaign's Phase 2. The lease lapses when the
// leader's host stalled, and the runtime gives a stall's ticks at once
// when it ends; a shorter wait would run out within them, and the leader
// would campaign, with a new term, while its followers still waited for
// it. Campaigning sooner would not help: a majority that does not
// answer a proposal does not answer a Prepare either, and a follower
// that campaigns makes the acceptors refuse the resume with a Nack,
// which ends it at once.
func (m *Machine) resumeTicks() int {
	return election.MaxAdaptiveTimeoutFactor*m.timing.LeaderTimeoutTicks + m.c.CoordinatorTicks()
}

// Unreachable records that a peer cannot be reached.
func (m *Machine) Unreachable(id uint64) {
	if !m.c.Left() {
		m.c.MarkGone(id)
	}
}

// PeerDown records that a peer's connection closed. If it was the leader,
// this node campaigns now (at once if it is the highest live node, else
// after its deferral) instead of after the leader time-out. That cannot
// shorten the old leader's lease: acceptors still promise nothing until
// the grants they hold run out, whatever a candidate heard; the event only
// saves the time-out on top of them. (A leader cut off from NATS but alive
// keeps its lease until it ends, and no longer.)
func (m *Machine) PeerDown(id uint64) {
	m.arrivals.Forget(id) // it left: its next renewal follows a restart
	if m.c.PeerDown(id) && m.phase == idle && m.wait == 0 {
		m.suspect()
	}
}

// Resign leaves the cluster cleanly: a leader stops leading, then tells
// the acceptors to release its lease, so that a successor is elected at
// once.
func (m *Machine) Resign() {
	if m.c.Left() {
		return
	}
	if m.phase == leading {
		m.stopLeading()
		m.release()
		m.c.Leave(m.ballot) // tells the acceptors to release the lease
		return
	}
	m.c.Leave(0)
}

// Ready returns and clears what the node wants done, with the hard state
// (terms and the acceptor's state) if any of it changed since the last
// Ready.
func (m *Machine) Ready() election.Ready {
	r := m.c.Ready()
	if r.State == nil && m.acc.state == m.acc.saved && m.cfg == m.cfgSaved {
		return r
	}
	st := election.HardState{Term: m.c.Term(), MaxTerm: m.c.MaxTerm()}
	if r.State != nil {
		st = *r.State
	}
	st.Acceptor = m.acc.state
	m.acc.saved = m.acc.state
	if m.cfg != nil && m.cfg.Version > 0 {
		st.Voters = m.cfg
	}
	m.cfgSaved = m.cfg
	r.State = &st
	return r
}

// Status returns the node's view, with the lease's end while it leads.
func (m *Machine) Status() election.SoftState {
	st := m.c.Status()
	if m.phase == leading {
		st.LeaseUntil = m.leaseUntil
	}
	return st
}

// suspect reacts to a leader that failed, left or is unknown: the highest
// live node campaigns at once; every other node defers by T for itself and
// for each live higher member.
func (m *Machine) suspect() {
	higher := m.c.HigherAliveCount()
	if higher == 0 {
		m.campaign()
		return
	}
	m.c.Defer(false)
	m.phase = idle
	m.wait = (higher + 1) * m.timing.AnswerTicks
}

// campaign runs Phase 1 with a new ballot.
func (m *Machine) campaign() {
	b := m.c.NewBallot()
	if b == 0 {
		return // every ballot of ours is above the ceiling
	}
	m.c.BecomeCandidate(true)
	m.phase, m.ballot, m.promises, m.rounds, m.blocked = preparing, b, m.promises[:0], m.rounds[:0], 0
	m.resuming = false
	m.wait = m.c.CoordinatorTicks() // start again if this ballot stalls
	m.c.Send(protocol.Message{Type: protocol.TypePrepare, Term: b, Cfg: m.cfg})
	if m.voter() {
		if reply := m.acceptPrepare(m.id, m.inc, b); reply.Type == protocol.TypePromise {
			m.promised(m.id)
		}
	}
}

// startUpgrade moves a leader to a ballot above every term it has seen,
// because an acceptor promised a higher ballot than its own and refuses
// its renewals. It goes on leading under the old ballot meanwhile; the
// acceptors that hold its grant promise it (the same process) at once.
func (m *Machine) startUpgrade() {
	if m.upgrade != 0 {
		return
	}
	b := m.c.NewBallot()
	if b == 0 {
		return
	}
	m.upgrade, m.upPromises, m.upSince = b, m.upPromises[:0], m.now
	m.c.Send(protocol.Message{Type: protocol.TypePrepare, Term: b, Cfg: m.cfg})
	if m.voter() {
		if reply := m.acceptPrepare(m.id, m.inc, b); reply.Type == protocol.TypePromise {
			m.upgradePromised(m.id)
		}
	}
}

func (m *Machine) upgradePromised(from uint64) {
	if !m.votes(from) {
		return
	}
	for _, id := range m.upPromises {
		if id == from {
			return
		}
	}
	m.upPromises = append(m.upPromises, from)
	if !m.quorate(m.upPromises, m.cfg) {
		return
	}
	// Propose under the new ballot; its acceptance by a majority extends
	// the lease and makes the new term this leader's.
	m.ballot, m.upgrade, m.rounds = m.upgrade, 0, m.rounds[:0]
	m.propose()
}

// backOff abandons this node's campaign for a higher node's: it waits the
// coordinator time-out for that node to lead before trying again.
func (m *Machine) backOff() {
	if m.phase == preparing || m.phase == proposing {
		m.phase = idle
	}
	m.wait = m.c.CoordinatorTicks()
}

// onPrepare is the acceptor's Phase 1, and what a proposer or leader
// learns from a campaign.
func (m *Machine) onPrepare(msg protocol.Message) {
	if m.c.Owner(msg.Term) != msg.From {
		return // a ballot its sender does not own
	}
	if m.voter() {
		m.answerPrepare(msg)
	} else if m.stale(msg.Cfg) {
		// A candidate that does not vote answers nothing, but one with
		// older voters than its own learns them from it (as from a
		// proposal, onPropose): else a candidate left holding a joint
		// configuration whose old voters are gone campaigns for ever,
		// while the only running voter of the new one holds it.
		m.c.Send(protocol.Message{Type: protocol.TypeNack, To: msg.From, Term: m.acc.state.Promised, Cfg: m.cfg})
	}
	if m.c.Above(m.id, msg.From) {
		return
	}
	// A higher node campaigns: it leads when nothing is wrong.
	m.heard = m.now
	if m.phase == leading {
		m.handOver(msg.From)
	}
	m.backOff()
}

// answerPrepare is the acceptor's answer to a Prepare.
func (m *Machine) answerPrepare(msg protocol.Message) {
	var reply protocol.Message
	if m.stale(msg.Cfg) {
		// Older voters than ours: the candidate learns ours from the
		// refusal.
		reply = protocol.Message{Type: protocol.TypeNack, Term: m.acc.state.Promised}
	} else if m.c.Above(m.id, msg.From) && (m.phase == preparing || m.phase == proposing) {
		// A candidate does not promise a lower candidate's ballot, which
		// would only stall its own campaign and the lower one's alike (a
		// refusal is always safe; the lower one backs off).
		reply = protocol.Message{Type: protocol.TypeNack, Term: m.acc.state.Promised}
	} else if wait := m.vouches(msg.From, msg.Term); wait > 0 {
		reply = protocol.Message{Type: protocol.TypeNack, Term: m.acc.state.Promised, Candidate: m.c.Leader(), Wait: wait}
	} else {
		reply = m.acceptPrepare(msg.From, msg.Inc, msg.Term)
	}
	reply.To, reply.Cfg = msg.From, m.cfg
	m.c.Send(reply)
}

// vouches is how many ticks more this acceptor vouches for the leader it
// follows against the Prepare of ballot b from candidate from: 0 if it
// does not. It vouches while it would not even probe the leader yet
// (its time-out less the probe's lead, ProbeLead), the leader being
// higher than the candidate: a candidate whose own time-out fired
// alone (its host stalled, or the leader's renewals reached it late)
// finds no majority, and hears the leader renew instead of making a new
// term. This is Raft's pre-vote, asked with the Prepare itself. A
// refusal is always safe. When the leader fails, its followers stop
// hearing it at once and each stops vouching about when the candidate
// times it out (on a quiet host, a probe's lead before); a closed
// connection or a resignation makes the leader undefined, and nothing
// vouches for it. A higher candidate takes over a live lower leader, as
// the highest-ranked live member must.
func (m *Machine) vouches(from, b uint64) int {
	l := m.c.Leader()
	if l == 0 || !m.c.Above(l, from) || l == m.id || b <= m.acc.state.Promised {
		return 0
	}
	limit := m.limit()
	return max(0, m.vouch+limit-core.ProbeLead(m.timing, limit)-m.now)
}

// acceptPrepare decides an acceptor's answer to Prepare(b) from process inc
// of node from, and records the promise if it makes one. While a lease it
// granted may be valid, it promises only the process that holds it.
func (m *Machine) acceptPrepare(from, inc, b uint64) protocol.Message {
	a := m.acc.state
	holder := m.granted() && a.Value == from && inc != 0 && inc == m.acc.grantInc
	switch {
	case b < a.Promised || (b == a.Promised && m.c.Owner(b) != from):
		return protocol.Message{Type: protocol.TypeNack, Term: a.Promised}
	case b == a.Promised:
		// A copy of a Prepare already promised.
	case m.now < m.acc.restartWait:
		if !m.restored {
			// New storage: remember the highest ballot heard while
			// waiting (see acceptPropose).
			a.Promised = b
			m.acc.state = a
		}
		return protocol.Message{Type: protocol.TypeNack, Term: a.Promised, Candidate: a.Value, Wait: m.acc.restartWait - m.now}
	case m.granted() && !holder:
		return protocol.Message{Type: protocol.TypeNack, Term: a.Promised, Candidate: a.Value, Wait: m.acc.grantUntil - m.now}
	default:
		a.Promised = b
		m.acc.state = a
	}
	return protocol.Message{Type: protocol.TypePromise, Term: b, Prior: a.Accepted, Candidate: a.Value}
}

// granted reports whether the lease this acceptor granted may still be
// valid.
func (m *Machine) granted() bool {
	return m.acc.state.Accepted != 0 && m.now < m.acc.grantUntil
}

// onPromise counts a promise for the current ballot, or for the ballot a
// leader moves to.
func (m *Machine) onPromise(msg protocol.Message) {
	switch {
	case m.phase == preparing && msg.Term == m.ballot:
		m.promised(msg.From)
	case m.phase == leading && m.upgrade != 0 && msg.Term == m.upgrade:
		m.upgradePromised(msg.From)
	}
}

func (m *Machine) promised(from uint64) {
	if !m.votes(from) {
		return
	}
	for _, id := range m.promises {
		if id == from {
			return
		}
	}
	m.promises = append(m.promises, from)
	if m.quorate(m.promises, m.cfg) {
		m.phase = proposing
		m.wait = m.c.CoordinatorTicks() // start again if Phase 2 stalls
		m.propose()
	}
}

// propose runs Phase 2 for the current ballot: a first proposal, or a
// renewal of the lease.
func (m *Machine) propose() {
	m.round++
	m.sinceRenew = 0
	r := round{seq: m.round, sentAt: m.now, cfg: m.cfg}
	if len(m.rounds) == maxRounds {
		m.rounds = append(m.rounds[:0], m.rounds[1:]...)
	}
	m.rounds = append(m.rounds, r)
	msg := protocol.Message{Type: protocol.TypePropose, Term: m.ballot, Seq: m.round, Cfg: m.cfg}
	if m.phase == leading {
		msg.Candidate = m.id
	}
	m.c.Send(msg)
	if m.voter() {
		if reply := m.acceptPropose(m.id, m.inc, m.ballot); reply.Type == protocol.TypeAccepted {
			m.accepted(m.id, m.round)
		}
	}
}

// onPropose is the acceptor's Phase 2, and the learner's view of the
// leader.
func (m *Machine) onPropose(msg protocol.Message) {
	// ok: this acceptor accepted the proposal; a candidate that does not
	// vote takes one it could have accepted: its proposer owns its
	// ballot, which is not below this node's term.
	ok := m.c.Owner(msg.Term) == msg.From && msg.Term >= m.c.Term() && !m.stale(msg.Cfg)
	if m.voter() {
		var reply protocol.Message
		if m.stale(msg.Cfg) {
			// Older voters than ours: the proposer learns ours.
			reply = protocol.Message{Type: protocol.TypeNack, Term: m.acc.state.Promised, Cfg: m.cfg}
		} else {
			reply = m.acceptPropose(msg.From, msg.Inc, msg.Term)
		}
		reply.To, reply.Seq = msg.From, msg.Seq
		switch reply.Type {
		case protocol.TypeAccepted:
			reply.Candidate = msg.Candidate // a renewal's acceptance says so
		case protocol.TypeNack:
			reply.Cfg = m.cfg
		}
		m.c.Send(reply)
		ok = reply.Type == protocol.TypeAccepted
	} else if m.stale(msg.Cfg) {
		// A candidate that does not vote answers nothing, but a
		// proposer with older voters than its own learns them from it:
		// else it would never follow that proposer, and nobody would
		// learn what it holds.
		m.c.Send(protocol.Message{Type: protocol.TypeNack, To: msg.From, Seq: msg.Seq, Term: m.acc.state.Promised, Cfg: m.cfg})
	}
	if msg.Candidate == 0 {
		if ok && msg.From == m.c.Leader() && msg.Term == m.c.Term() {
			// The leader it follows, resuming under its ballot after its
			// lease lapsed (its renewals answered late): alive, and
			// about to lead on in the same term. Its followers wait for
			// it rather than campaign with a new ballot; a resume that
			// finds no majority ends within resumeTicks, in a campaign.
			m.heard = max(m.heard, m.now+m.late)
			m.vouch = max(m.vouch, m.now+m.late)
		}
		return
	}
	// A leader that holds its lease (whether or not this acceptor could
	// accept its proposal).
	// Heard when it arrived: later than the current tick when the node
	// hands over, before the ticks of its own stall, a renewal that came
	// in during it (StepAt). Counted from the current tick, the stall's
	// ticks would time the leader out just after its renewal.
	at := m.now + m.late
	m.arrivals.Heard(msg.From, at, m.timing.LeaderTimeoutTicks)
	if m.probed && m.c.Leader() == msg.From {
		m.c.ProbeAnswered()
	}
	m.heard, m.probed = at, false
	if (m.phase == idle || m.c.Above(msg.From, m.id)) && ok {
		// Not a lower node's while this one campaigns: it may still lead
		// with its own ballot, below that term, and a node's term never
		// goes backwards. And only a proposal this acceptor accepted: one
		// it refused (a ballot below its promise: an old leader, or a
		// member that lies) would raise its term above the ballot of the
		// leader it does accept, which nothing would then tell to move
		// on (its renewals are accepted), and it could never follow it.
		// Follow refuses a term below this node's.
		m.c.Follow(msg.From, msg.Term)
	}
	if m.c.Leader() == msg.From {
		m.vouch = max(m.vouch, at)
	}
	switch {
	case m.c.Above(msg.From, m.id):
		if m.phase == leading {
			m.stopLeading() // our lease has ended, since theirs holds
		}
		m.phase, m.wait = idle, 0 // follow; its silence will tell
	case m.phase == idle && m.wait == 0 && !m.c.KeepLeader():
		// A lower node leads while this one is alive: take over.
		m.campaign()
	}
}

// acceptPropose decides an acceptor's answer to Propose(b) from process inc
// of node from, and records the acceptance, and the grant, if it accepts.
func (m *Machine) acceptPropose(from, inc, b uint64) protocol.Message {
	a := m.acc.state
	if b < a.Promised || m.c.Owner(b) != from {
		return protocol.Message{Type: protocol.TypeNack, Term: a.Promised}
	}
	if !m.restored && m.now < m.acc.restartWait {
		// Storage that is new: this acceptor may have promised a
		// higher ballot before, and forgotten it, so that accepting an
		// older one now could make a second majority. It accepts
		// nothing for a lease, as it promises nothing, and remembers
		// the highest ballot it hears meanwhile (refusing lower ones
		// after): the current leader's renewals reach it within the
		// lease.
		if b > a.Promised {
			a.Promised = b
			m.acc.state = a
		}
		return protocol.Message{Type: protocol.TypeNack, Term: a.Promised, Wait: m.acc.restartWait - m.now}
	}
	if a.Promised != b || a.Accepted != b || a.Value != from {
		a = election.AcceptorState{Promised: b, Accepted: b, Value: from}
		m.acc.state = a
	}
	// From the tick the Propose arrived in, which is later than the
	// current tick when the driver hands it over before ticks that fell
	// due before it arrived.
	m.acc.grantUntil, m.acc.grantInc = m.now+m.late+m.timing.LeaseTicks+1, inc
	return protocol.Message{Type: protocol.TypeAccepted, Term: b}
}

// onAccepted counts an acceptance of a round of the current ballot.
func (m *Machine) onAccepted(msg protocol.Message) {
	if msg.Term == m.ballot && (m.phase == proposing || m.phase == leading) {
		m.accepted(msg.From, msg.Seq)
	}
}

func (m *Machine) accepted(from, seq uint64) {
	for i := range m.rounds {
		r := &m.rounds[i]
		if r.seq != seq {
			continue
		}
		if r.cfg != nil && !r.cfg.Votes(from) || r.cfg == nil && !m.votes(from) {
			return // not a voter of the round's configuration
		}
		for _, id := range r.acks {
			if id == from {
				return
			}
		}
		r.acks = append(r.acks, from)
		if !m.quorate(r.acks, r.cfg) {
			return
		}
		defer m.chosen(r.cfg) // after the lease: r may move as rounds are proposed
		m.leaseUntil = max(m.leaseUntil, r.sentAt+m.timing.LeaderLeaseTicks)
		switch {
		case m.now >= m.leaseUntil:
		case m.phase == proposing:
			m.phase, m.wait = leading, 0
			m.arrivals.Forget(0) // the leader it followed was not leading meanwhile
			if !m.resuming || !m.c.Resume(m.ballot) {
				m.c.Lead(m.ballot)
			}
			m.resuming = false
			m.propose() // at once: renews, and tells the learners who leads
		case m.c.Term() != m.ballot:
			m.c.Lead(m.ballot) // the same leader, moved to a newer term
		}
		return
	}
}

// onNack learns what a refusal tells: a higher ballot, a lease held.
func (m *Machine) onNack(msg protocol.Message) {
	if !m.votes(msg.From) {
		return // only the voters' refusals count
	}
	if m.phase == leading {
		if msg.Term > m.ballot {
			m.startUpgrade() // that acceptor refuses our renewals
		}
		return
	}
	if m.phase != preparing && m.phase != proposing {
		return
	}
	if m.phase == proposing && msg.Term <= m.ballot {
		// A refusal of our Prepare from an acceptor we no longer need: a
		// majority has promised, and only a higher ballot can stop the
		// proposal now. (Shortening the wait on it made the candidate
		// start over in the middle of its Phase 2.)
		return
	}
	holder := msg.Candidate
	switch {
	case holder != 0 && m.c.Above(holder, m.id) && !m.c.IsGone(holder):
		// A higher node holds a lease: it leads.
		m.backOff()
	case holder != 0 && holder == m.released:
		// Its release is on its way to that acceptor: try again soon,
		// once (if the release was lost, the grant runs out instead).
		m.released = 0
		m.wait = min(m.wait, 1)
	case holder != 0:
		// A lower node holds a lease, and hands over when it hears our
		// Prepare; or a node we know to be gone, whose lease runs out:
		// try again when it releases it, or when that acceptor's grant
		// ends at the latest.
		m.blocked = holder
		m.wait = min(m.wait, msg.Wait+1)
	case msg.Term > m.ballot && m.c.Above(m.c.Owner(msg.Term), m.id):
		m.backOff() // a higher node's ballot
	case msg.Term > m.ballot:
		m.wait = min(m.wait, m.timing.AnswerTicks) // a lower node's ballot: outbid it
	case msg.Wait > 0:
		m.wait = min(m.wait, msg.Wait+1) // a restarted acceptor, waiting a lease
	}
}

// onResign handles a node that left or handed over: an acceptor releases
// the lease it granted to it, and a follower of it elects a successor.
// Only the process that holds the grant releases it: a Resign from
// another incarnation with the same ID (a replacement stopped while the
// leader still runs) would free the acceptor to promise another leader
// while the holder still counts on its lease.
func (m *Machine) onResign(msg protocol.Message) {
	if a := m.acc.state; a.Accepted == msg.Term && a.Value == msg.From && msg.Inc == m.acc.grantInc {
		m.acc.grantUntil = 0 // released
	}
	if !m.c.SameClaimant(msg) {
		return // another process than the leader's with its ID
	}
	m.released = msg.From
	if msg.Candidate == 0 {
		m.c.MarkDeparted(msg.From) // it left; a hand-over names its successor
		m.c.MemberLeft(msg.From)
	}
	m.arrivals.Forget(msg.From) // it resigned: its next renewal follows a new election
	switch {
	case m.c.Leader() == msg.From:
		m.c.Forget(false)
		m.suspect()
	case msg.From == m.blocked && m.phase == preparing:
		// The holder of the lease that stalled our campaign released it.
		m.campaign()
	}
}

// handOver stops leading and releases the lease, for the higher node to.
func (m *Machine) handOver(to uint64) {
	m.stopLeading()
	m.c.Send(protocol.Message{Type: protocol.TypeResign, Term: m.ballot, Candidate: to})
	m.release()
}

// stopLeading makes a leader stop acting as one, before anything else.
func (m *Machine) stopLeading() {
	m.phase, m.leaseUntil, m.rounds, m.upgrade = idle, 0, m.rounds[:0], 0
	m.c.StepDown()
}

// release releases this node's own acceptor's grant to itself.
func (m *Machine) release() {
	if a := m.acc.state; a.Accepted == m.ballot && a.Value == m.id {
		m.acc.grantUntil = 0
	}
}
