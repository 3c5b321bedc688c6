// Package bully implements the Bully election algorithm as a pure state
// machine (see package election for the interface, terms and guarantees).
//
// The rules of the textbook algorithm (Garcia-Molina, 1982; see
// docs/algorithms.md#references), where higher and lower are by rank
// (election.Config.Rank: the ID, or a hash that spreads leaders over the
// members):
//
//   - A node that suspects the leader (its heartbeats stopped), that starts
//     or restarts, or whose leader resigned, holds an election: it sends
//     Election to every higher member (a broadcast; lower ones do not act
//     on it).
//   - A node that receives Election from a lower member answers with
//     Answer and holds its own election, unless it already is in one. A
//     leader answers and re-asserts itself with Coordinator.
//   - A candidate that gets no Answer within T = 2·t_max + t_process (the
//     AnswerTicks of election.Timing) becomes leader and broadcasts
//     Coordinator. One that got an Answer but no Coordinator within
//     CoordinatorTicks starts again.
//   - A node that recovers, or a replacement with the same ID, starts an
//     election at once even if the coordinator is working; if it is the
//     highest live member it takes over.
//
// # Refinements
//
// They keep failover fast and the message count bounded without changing
// the outcome:
//
//   - Election is a broadcast, so a candidate hears the Election of every
//     higher candidate: that tells it what an Answer would (a higher node
//     is alive and holds its own election), and counts as one. A node that
//     starts its own election because of a lower Election therefore needs
//     no separate Answer: its Election is the answer.
//   - A follower whose leader is a live higher node answers a lower
//     Election but does not start an election of its own: the leader hears
//     the same broadcast and re-asserts itself. Without this, every lower
//     Election would restart the election of every node between it and the
//     leader, and each Coordinator would end them only for the next lower
//     Election to start them again.
//   - A leader re-asserts itself with Coordinator at most once per
//     heartbeat interval (its heartbeats, which follow within that
//     interval, say the same), or per coordinator wait if that is
//     shorter; in between it answers. It claims a new term
//     at once, though, when the Election shows a term newer than its own.
//   - A candidate none of whose higher members can be alive (each
//     resigned, or was the leader whose connection closed) does not wait
//     T for Answers that cannot come. A leader whose heartbeats only
//     stopped may still answer: the highest live node waits T for it (a
//     late leader answers and re-asserts itself in its own term, with no
//     takeover and takeback), and a follower asks it (Probe) T before
//     the time-out, which a live leader answers with a heartbeat.
//   - The leader time-out follows the arrivals of the leader's
//     heartbeats (mean + 4σ of the last gaps, and one and a half times
//     the longest recent gap, between the configured time-out and
//     election.MaxAdaptiveTimeoutFactor times it).
//   - When the leader fails or resigns, every follower learns it at about
//     the same moment. The highest live node claims at once; every other
//     node defers its Election by (r+1)·T, r being the number of live
//     higher members it knows of, and holds its election only if no
//     leader, and no higher node's Election, was heard meanwhile. So the
//     highest live node's claim reaches the others long before they would
//     act, even on a loaded machine, and if it is dead too, the next one
//     down acts first. Without this, every follower would broadcast an
//     Election at once, (n-1)·(n-2) deliveries, for an outcome that one
//     Coordinator tells.
//   - A follower challenged by a lower node's claim (a Coordinator or
//     heartbeat with a newer term) while its own leader is a live higher
//     node does not hold an election: the leader hears the same claim and
//     answers it with a newer term.
//   - A node that starts asks who leads (election.Config.Found) before its
//     machine starts. A live leader that ranks higher it follows at once:
//     its election would end with that leader. A working lower leader it
//     challenges at once, as the rules say. When nobody answers (the
//     cluster starts, or has no leader), it acts as after a failure: the
//     highest member holds its election after T, and every other defers
//     by (r+1)·T, r being its higher members, so that nodes that start
//     together elect the highest of them once instead of each declaring
//     itself in turn (with 101 nodes, an Election from each, answered by
//     every higher one, is 10,000 deliveries for one outcome).
//   - A node that has just started always waits T, so that it hears the
//     cluster's current term before it claims a newer one; if in that time
//     it has heard no leader at all, it waits until the leader time-out
//     has passed since it started.
//   - A node that declared itself for want of an Answer and then, within
//     the leader time-out, hears from a higher node (its messages, or an
//     Answer that came too late) knows
//     that T was too short for the delays of the moment: a loaded machine
//     (101 processes on two cores) delays messages by hundreds of
//     milliseconds. It waits twice as long for Answers from then on, and
//     defers by that much, up to the leader time-out; without this, every
//     late Answer was one more claim, and every claim more load.
//
// # Messages per election
//
// For n members, counting publications (a broadcast is one publication,
// delivered to n-1 nodes): a node that restarts while the leader works
// costs its Election, at most one Answer from each higher node and at most
// one Coordinator, so O(n); an election held by the highest live node costs
// its Election and its Coordinator. The worst case is every node
// suspecting the leader at once: n-1 Elections, each answered by the
// higher nodes that are not candidates yet, so at most n-1 Elections,
// (n-1)(n-2)/2 Answers and one Coordinator; O(n²).
package bully

import (
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/core"
	"github.com/baton-election/baton/pkg/protocol"
)

// Machine is one node running Bully. It implements election.Machine.
type Machine struct {
	c           *core.Core
	id          uint64
	timing      election.Timing
	deferred    bool // a candidate that has not sent its Election yet
	answered    bool // a higher node answered our current election
	wait        int  // ticks left in the candidate's current wait
	age         int  // ticks since Start, counted up to the leader time-out
	heardLeader bool // a Coordinator or heartbeat arrived since Start
	sinceAssert int  // ticks since this leader last sent Coordinator
	// answerWait is how long a candidate waits for Answers: T, doubled
	// (up to the leader time-out) each time this node declared itself
	// while a higher node was alive.
	answerWait int
	alone      int // ticks left in which a higher node heard from shows that answerWait was short
}

var _ election.Machine = (*Machine)(nil)

// New returns a node that has not started yet.
func New(cfg election.Config) (*Machine, error) {
	c, err := core.NewCore(cfg)
	if err != nil {
		return nil, err
	}
	return &Machine{c: c, id: cfg.ID, timing: cfg.Timing, answerWait: cfg.Timing.AnswerTicks}, nil
}

// Start holds an election at once, as a recovered node must, unless the
// node found a live leader that ranks higher when it started
// (election.Config.Found): it follows that leader, since its election
// would end with it.
func (m *Machine) Start() {
	m.c.Announce()
	switch {
	case m.c.Left():
	case m.c.FollowFound():
		m.heardLeader = true
	case m.c.AskReclaim():
		// Keeping the leader found, whose term is below this node's:
		// it claims again above it, and this node follows; if it does
		// not within the coordinator wait, this node holds its election.
		m.heardLeader = true
		m.c.Defer(true)
		m.deferred = true
		m.answered = false
		m.wait = m.c.CoordinatorTicks()
	case m.c.FoundLeader() != 0:
		m.elect(true, true) // a lower coordinator works: challenge it at once
	default:
		// No coordinator answered: the cluster starts, or has no leader.
		// As after a failure, the highest member acts first and the
		// others defer by their rank.
		m.c.Defer(true)
		m.deferred = true
		m.answered = false
		m.wait = (m.c.HigherAliveCount() + 1) * m.answerWait
	}
}

// Tick advances the node's clock.
func (m *Machine) Tick() {
	if m.c.Left() {
		return
	}
	timedOut := m.c.Tick() // a leader's heartbeat, a follower's time-out
	if m.age < m.coldTicks() {
		m.age++
	}
	if m.alone > 0 {
		m.alone--
	}
	switch m.c.Role() {
	case election.Leader:
		m.sinceAssert++
	case election.Follower:
		if timedOut {
			m.suspectSilent()
		}
	case election.Candidate:
		m.wait--
		if m.wait > 0 {
			return
		}
		switch {
		case m.deferred && m.answered:
			// A higher node holds its election: wait for its Coordinator.
			m.deferred = false
			m.wait = m.c.CoordinatorTicks()
		case m.deferred:
			m.elect(false, true)
		case m.answered:
			// Answered, but no Coordinator came: start again.
			m.elect(false, true)
		case m.coldStart():
			// Nobody answered and no leader was heard: the others may
			// still be starting. Look again next tick.
			m.wait = 1
		default:
			// Nobody higher answered within T.
			m.lead()
			m.alone = m.timing.LeaderTimeoutTicks
		}
	}
}

// coldStart reports whether this node has just started and heard no
// leader yet.
func (m *Machine) coldStart() bool {
	return !m.heardLeader && m.age < m.coldTicks()
}

// coldTicks is how long a node that started waits to hear a leader
// (election.Timing.ColdStartTicks).
func (m *Machine) coldTicks() int {
	if m.timing.ColdStartTicks > 0 {
		return m.timing.ColdStartTicks
	}
	return m.timing.LeaderTimeoutTicks
}

// Skip gives n ticks at once, 0 < n < Due(): as n calls of Tick. It
// implements election.Skipper.
func (m *Machine) Skip(n int) {
	if m.c.Left() {
		return
	}
	if m.c.Role() == election.Candidate {
		for range n {
			m.Tick()
		}
		return
	}
	m.c.Skip(n)
	if cold := m.coldTicks(); m.age < cold {
		m.age = min(m.age+n, cold)
	}
	m.alone = max(0, m.alone-n)
	if m.c.Role() == election.Leader {
		m.sinceAssert += n
	}
}

// Due is how many ticks until the next Tick can have an effect.
func (m *Machine) Due() int {
	if !m.c.Left() && m.c.Role() == election.Candidate {
		return max(1, min(m.wait, m.c.PresenceDue()))
	}
	return min(m.c.Due(), m.c.PresenceDue())
}

// StepAt handles a message that arrived in tick arrived of this node's
// clock, which may be later than the ticks given so far (a driver that
// settles at a deadline hands over what a flush brought before the
// deadline's tick): the leader it hears from is silent from the tick the
// message arrived in. It implements election.ArrivalStepper.
func (m *Machine) StepAt(msg protocol.Message, arrived int) {
	m.c.Arrived(arrived)
	defer m.c.Done()
	m.Step(msg)
}

// Step handles a message.
func (m *Machine) Step(msg protocol.Message) {
	if !m.c.Receive(msg) {
		return
	}
	id := m.id
	if m.alone > 0 && m.c.Above(msg.From, id) && msg.Type != protocol.TypeResign {
		// A higher node was alive when this one declared itself.
		m.alone = 0
		m.answerWait = min(2*m.answerWait, m.timing.LeaderTimeoutTicks)
	}
	switch msg.Type {
	case protocol.TypeElection:
		if m.c.Above(msg.From, id) {
			m.higherElection(msg)
		} else {
			m.lowerElection(msg)
		}
	case protocol.TypeAnswer:
		if m.c.Role() == election.Candidate && m.c.Above(msg.From, id) {
			m.answered = true
			m.wait = m.c.CoordinatorTicks()
		}
	case protocol.TypeCoordinator, protocol.TypeHeartbeat:
		m.heardLeader = true
		if m.c.Claimed(msg.From, msg.From, msg.Term, true) != core.Challenged {
			return
		}
		switch {
		case m.c.Role() == election.Candidate:
		case m.c.Role() == election.Follower && m.c.Above(m.c.Leader(), m.id):
			// Our live higher leader hears the same claim and answers it.
		default:
			m.elect(false, true)
		}
	case protocol.TypeResign:
		if m.c.Resigned(msg) {
			m.suspect()
		}
	case protocol.TypeStale:
		if m.c.Staled(msg) {
			m.lead()
		}
	case protocol.TypeProbe:
		m.c.AnswerProbe() // a follower that has not heard us for a while
	}
}

// higherElection handles the Election of a higher node. It needs no Answer,
// but the higher node may have just started and not know the current term;
// and to a candidate it says what an Answer would.
func (m *Machine) higherElection(msg protocol.Message) {
	if msg.Term < m.c.Term() {
		m.c.ReplyStale(msg.From, true)
	}
	if m.c.Role() == election.Candidate {
		m.answered = true
		m.wait = m.c.CoordinatorTicks()
	}
}

// lowerElection handles the Election of a lower node: this node is a
// higher live node, so the lower one must not declare itself.
func (m *Machine) lowerElection(msg protocol.Message) {
	switch m.c.Role() {
	case election.Leader:
		switch {
		case m.c.Term() < m.c.MaxTerm():
			m.lead() // the Election showed a newer term: claim above it
		case m.sinceAssert >= min(m.timing.HeartbeatTicks, m.timing.CoordinatorTicks):
			// At most once per heartbeat interval, and at least once in
			// the time an answered candidate waits for the Coordinator
			// (heartbeats far apart, as in a process with many elections).
			m.lead()
		default:
			m.answer(msg.From) // re-asserted recently; a heartbeat follows
		}
	case election.Candidate:
		m.answer(msg.From)
	case election.Follower:
		if l := m.c.Leader(); m.c.Above(l, m.id) || l != 0 && m.c.KeepLeader() {
			// A live higher leader, or one kept whatever its rank, hears
			// the same Election and re-asserts.
			m.answer(msg.From)
			return
		}
		m.elect(false, false) // our Election answers it
	}
}

func (m *Machine) answer(to uint64) {
	m.c.Send(protocol.Message{Type: protocol.TypeAnswer, To: to, Term: m.c.MaxTerm()})
}

// Unreachable records that a peer cannot be reached.
func (m *Machine) Unreachable(id uint64) {
	if !m.c.Left() {
		m.c.MarkGone(id)
	}
}

// PeerDown records that a peer's connection closed. If it was the leader
// and this node is now the highest live one, it holds its election at
// once, without waiting for the leader time-out. A lower node only stops
// following the leader: the highest live node's Coordinator normally
// reaches it long before its time-out; if it does not (that node is gone
// too), the time-out and the deferral of suspect take over. Acting on the
// event at every node would race the nodes' deferrals against the skew
// with which the event reaches them.
func (m *Machine) PeerDown(id uint64) {
	if m.c.PeerDown(id) && m.c.Role() == election.Follower && m.c.HigherAliveCount() == 0 {
		m.suspect()
	}
}

// Reassert makes a leader broadcast its heartbeat now. It implements
// election.Reasserter.
func (m *Machine) Reassert() { m.c.Heartbeat() }

// Resign leaves the cluster cleanly.
func (m *Machine) Resign() { m.c.Leave(0) }

// Ready returns and clears what the node wants done.
func (m *Machine) Ready() election.Ready { return m.c.Ready() }

// Status returns the node's view.
func (m *Machine) Status() election.SoftState { return m.c.Status() }

// Members returns the members, this node included, sorted: with dynamic
// membership, those present. It implements election.Membership.
func (m *Machine) Members() []uint64 { return m.c.Members() }

// suspect reacts to the failure or resignation of the leader: the highest
// live node claims at once; every other node defers its election by T for
// itself and for each live higher member.
func (m *Machine) suspect() {
	higher := m.c.HigherAliveCount()
	if higher == 0 {
		m.elect(false, true)
		return
	}
	m.c.Defer(false)
	m.deferred = true
	m.answered = false
	m.wait = (higher + 1) * m.answerWait
}

// suspectSilent reacts to a leader that fell silent (its time-out, not
// its connection's end nor its Resign): as suspect, except that the
// highest live node does not claim at once but holds its election and
// waits T for an Answer, as the textbook rule says, from the silent
// leader too. A live leader that was only late (a busy host) answers
// and re-asserts itself in its own term: no new term, no takeover and
// takeback. A hung leader does not answer, and is replaced T after its
// time-out.
func (m *Machine) suspectSilent() {
	if m.c.HigherAliveCount() == 0 {
		m.elect(true, true)
		return
	}
	m.suspect()
}

// elect holds an election: Election to every higher member, then wait for an
// Answer. wait marks a node that waits T even when no higher node counts
// as alive (it has just started, or its leader only fell silent);
// forget, one whose leader failed or left.
func (m *Machine) elect(wait, forget bool) {
	m.c.BecomeCandidate(forget)
	m.deferred = false
	m.answered = false
	m.wait = m.answerWait
	m.c.Send(protocol.Message{Type: protocol.TypeElection, Term: m.c.MaxTerm()})
	if !wait && m.c.HigherAliveCount() == 0 {
		m.lead()
	}
}

// lead makes this node leader (or re-asserts it) and broadcasts Coordinator.
// If every term it could claim is above the ceiling, it stays a candidate.
func (m *Machine) lead() {
	term := m.c.Claim()
	if term == 0 {
		m.wait = m.c.CoordinatorTicks()
		return
	}
	m.answered = false
	m.sinceAssert = 0
	m.c.Send(protocol.Message{Type: protocol.TypeCoordinator, Term: term})
}
