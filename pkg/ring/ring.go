// Package ring implements the Chang–Roberts ring election as a pure state
// machine (see package election for the interface, terms and guarantees).
//
// Nodes form a ring ordered by rank (election.Config.Rank: by ID, or by
// a hash that spreads leaders over the members); each sends to its
// successor, the next higher member (the highest wraps round to the
// lowest). The rules of the textbook algorithm (Chang and Roberts, 1979;
// see docs/algorithms.md#references), where larger and smaller IDs are
// compared by rank (the messages carry IDs):
//
//   - An initiator marks itself participating and sends Election carrying
//     its own ID to its successor.
//   - A non-participant that receives Election forwards the larger of its
//     own ID and the received one, and becomes participating.
//   - A participant drops a smaller ID and forwards a larger one; when its
//     own ID comes back it knows it is leader, becomes non-participating and
//     sends Elected round the ring.
//   - Every node that receives Elected records the leader, becomes
//     non-participating and forwards it, unless it is the leader.
//   - Dead successors are skipped.
//
// What these rules leave to the implementation:
//
//   - Failure detection. Every ring message is acknowledged (Ack); a
//     successor that does not acknowledge in time, or that the transport
//     reports unreachable (nobody listens on its inbox) or down (its
//     connection closed), is skipped and the message goes to the next one.
//     In time is T (AnswerTicks) at first; a successor that turns out to
//     have been alive when it was skipped (a message from it arrives) gets
//     twice as long the next time, up to the leader time-out (and a third
//     of CoordinatorTicks). A participant's wait for the round counts only
//     from when its message has left it (been acknowledged), so that the
//     waits for successors that do not answer never make it give up a
//     round that is still on its way. On a loaded
//     machine (101 processes on two cores delay messages by hundreds of
//     milliseconds) every hop outlasts T: each skip sends the round on
//     twice, and skips of live successors multiplied the rounds without
//     end; the wait learns the delays instead. Followers suspect a leader
//     whose heartbeats stop and initiate an election; the highest of
//     them sends its round to the silent leader first, which, if it was
//     only late, acknowledges and re-asserts itself in its own term.
//   - Recovery. A node that starts initiates at once; so does every node
//     whose leader resigned, and a node that hears a lower node claim the
//     lead. A participant that sees no Elected within CoordinatorTicks (its
//     message was lost, or the candidate it carried died) starts again.
//   - Terms. Election messages carry the highest term their forwarders
//     know, so the winner claims a term above every live node's.
//   - Copies. Duplicates, and messages resent round a successor that was
//     only slow, must not multiply round the ring, and a node wins only on
//     a round it sent in its current participation, not on a late copy of
//     an earlier one. An Election keeps the
//     Seq its initiator gave it, so (candidate, Seq) names a round; a
//     participant passes each round on once. A node passes each leadership
//     (Elected, or a heartbeat it already knows) on once, and drops a late
//     Election for its own leader or, unless it is participating, for
//     itself. A leader that receives Election for a lower candidate
//     re-asserts itself with a heartbeat instead of starting a round.
//   - Telling everybody. A node that wins also broadcasts a heartbeat at
//     once, so every node learns the new leader after one message instead
//     of one hop per node; the Elected round still goes round the ring as
//     the rules say, and stops at the first node that already knows (a
//     node passes each leadership on once).
//   - One round after a failure. When the leader fails or resigns, every
//     follower learns it at about the same moment. The highest live node
//     initiates at once; every other node defers by (r+1)·T, r being the
//     number of live higher members it knows of, and initiates only if no
//     round has reached it and no leader was heard meanwhile. The highest
//     live node's round is the one that wins, and it needs only one pass
//     round the ring; rounds started by every node would cost O(n log n)
//     messages for the same outcome. After a resignation, which is
//     certain, the others wait longer: CoordinatorTicks, as long as a
//     round may take to pass every member. (The round reaches the nodes
//     just below the highest last; with T per higher member they started
//     rounds of their own at 101 nodes, which slowed the one that wins. A
//     time-out may be wrong on a loaded machine, and there the shorter
//     wait recovers sooner.)
//   - Re-assertion. A leader that receives Election for a lower candidate
//     re-asserts itself with a heartbeat, at most once per heartbeat
//     interval: its periodic heartbeats say the same.
//   - Stale knowledge. Which successors are gone is forgotten whenever a
//     node starts participating, and a candidate whose round arrives is
//     tried again. A round whose candidate is the successor being skipped
//     stops there, since its candidate is dead. A leader passes a higher
//     candidate's round on but goes on leading until that candidate's
//     Elected reaches it, so a dead candidate's round cannot leave the
//     cluster without a leader.
package ring

import (
	"slices"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/core"
	"github.com/baton-election/baton/pkg/protocol"
)

// Machine is one node running the ring election. It implements
// election.Machine.
type Machine struct {
	c             *core.Core
	id            uint64
	timing        election.Timing
	participating bool
	forwarded     []round    // rounds sent on while participating
	passed        leadership // the last leadership passed on
	wait          int        // ticks left to see Elected while participating
	pending       []pending  // ring messages sent but not yet acknowledged
	sinceAssert   int        // ticks since this leader last re-asserted itself
	// ackWait is, per successor that was skipped while alive, how long to
	// wait for its Ack; AnswerTicks for the others.
	ackWait map[uint64]int
	// timedOut are the successors skipped for want of an Ack, until a
	// message from them shows whether they were alive.
	timedOut map[uint64]bool
}

// round identifies an election round by its candidate and by the Seq its
// initiator gave it, which every forwarder keeps: a copy of a round (a
// duplicate, or a message resent round a slow successor) has the same
// round, a new round of the same candidate a new one.
type round struct{ candidate, seq uint64 }

// leadership is a leader and its term.
type leadership struct{ leader, term uint64 }

// pending is a ring message waiting for its Ack.
type pending struct {
	msg    protocol.Message
	left   int  // ticks before the receiver is skipped
	silent bool // sent to a leader that fell silent (suspectSilent)
}

var _ election.Machine = (*Machine)(nil)

// New returns a node that has not started yet.
func New(cfg election.Config) (*Machine, error) {
	c, err := core.NewCore(cfg)
	if err != nil {
		return nil, err
	}
	return &Machine{c: c, id: cfg.ID, timing: cfg.Timing, ackWait: make(map[uint64]int), timedOut: make(map[uint64]bool)}, nil
}

// Start initiates an election at once, as a recovered node must, unless
// the node found a live leader with a higher ID when it started
// (election.Config.Found): it follows that leader, since the round would
// end with it.
//
// With dynamic membership the node first says it is present, and a node
// that does not follow a found leader waits T for the others' answers
// before it initiates: a round needs the successors.
func (m *Machine) Start() {
	if m.c.Left() {
		return
	}
	m.c.Announce()
	switch {
	case m.c.FollowFound():
	case m.c.AskReclaim():
		// Keeping the leader found, whose term is below this node's:
		// it claims again above it; a round otherwise.
		m.c.Defer(true)
		m.participating = false
		m.wait = m.c.CoordinatorTicks()
	case m.c.Dynamic():
		m.c.Defer(true)
		m.participating = false
		m.wait = m.timing.AnswerTicks
	default:
		m.initiate()
	}
}

// maxHops is how many hops a ring message may have made: two rounds of
// the members (the Election's round to the largest ID and the Elected
// round). With dynamic membership a member's count may lag the others',
// so the bound is two rounds of the most members there may be.
func (m *Machine) maxHops() int {
	if m.c.Dynamic() {
		return 2 * election.MaxDynamicMembers
	}
	return 2 * len(m.c.Members())
}

// Members returns the members, this node included, sorted: with dynamic
// membership, those present. It implements election.Membership.
func (m *Machine) Members() []uint64 { return m.c.Members() }

// Tick advances the node's clock.
func (m *Machine) Tick() {
	if m.c.Left() {
		return
	}
	m.tickPending()
	leader := m.c.Leader()
	timedOut := m.c.Tick() // a leader's heartbeat, a follower's time-out
	switch m.c.Role() {
	case election.Leader:
		m.sinceAssert++
		if m.participating && !m.holding() {
			// A higher candidate's round that this leader passed on:
			// if it never completes, the leader simply goes on leading.
			m.wait--
			m.participating = m.wait > 0
		}
	case election.Follower:
		if timedOut {
			m.suspectSilent(leader)
		}
	case election.Candidate:
		if m.participating && m.holding() {
			return // the round has not left this node yet
		}
		m.wait--
		if m.wait <= 0 {
			m.initiate()
		}
	}
}

// holding reports whether a ring message this node sent waits for its Ack:
// a participant's wait for the round to come back counts only from when
// the round has left it, so that the waits for successors that do not
// answer, however many, do not make it give up a round that is still on
// its way.
func (m *Machine) holding() bool { return len(m.pending) > 0 }

// suspect reacts to the failure of the leader: the highest live node
// initiates at once; every other node defers by T for itself and for each
// live higher member, and a round that reaches it meanwhile makes it a
// participant instead.
func (m *Machine) suspect() {
	higher := m.c.HigherAliveCount()
	if higher == 0 {
		m.initiate()
		return
	}
	m.c.Defer(false)
	m.participating = false
	m.wait = (higher + 1) * m.timing.AnswerTicks
}

// suspectSilent reacts to a leader that fell silent (its time-out, not
// its connection's end nor its Resign): as suspect, except that the
// highest live node's round goes to the silent leader first, its
// successor, and waits T for its Ack, as for any successor. A live
// leader that was only late (a busy host) acknowledges and re-asserts
// itself in its own term (onElection): no new term, no takeover and
// takeback. A hung leader does not acknowledge, is skipped, and is
// replaced T after its time-out.
func (m *Machine) suspectSilent(leader uint64) {
	if leader != 0 && m.c.HigherAliveCount() == 0 {
		m.c.MarkAlive(leader) // tried again; skipped if it does not answer
		m.initiate()
		for i := range m.pending {
			if p := &m.pending[i]; p.msg.To == leader {
				// T, as Bully's highest node waits for a silent leader's
				// Answer: it had its time-out and the probe to answer.
				p.left, p.silent = m.timing.AnswerTicks, true
			}
		}
		return
	}
	m.suspect()
}

// resigned reacts to the resignation of the leader, which every follower
// hears at the same moment: the highest live node initiates at once, and
// every other node waits as long as a round may take to pass every member
// (CoordinatorTicks) before it initiates, unless a round reaches it first.
func (m *Machine) resigned() {
	if m.c.HigherAliveCount() == 0 {
		m.initiate()
		return
	}
	m.c.Defer(false)
	m.participating = false
	m.wait = m.c.CoordinatorTicks()
}

// Skip gives n ticks at once, 0 < n < Due(): as n calls of Tick. It
// implements election.Skipper.
func (m *Machine) Skip(n int) {
	if m.c.Left() {
		return
	}
	if m.participating || len(m.pending) > 0 || m.c.Role() == election.Candidate {
		for range n {
			m.Tick()
		}
		return
	}
	m.c.Skip(n)
	if m.c.Role() == election.Leader {
		m.sinceAssert += n
	}
}

// Due is how many ticks until the next Tick can have an effect.
func (m *Machine) Due() int {
	if m.c.Left() {
		return 1 << 30
	}
	due := min(m.c.Due(), m.c.PresenceDue()) // a leader's heartbeat, a follower's time-out, the membership's clock
	if (m.participating || m.c.Role() == election.Candidate) && !(m.participating && m.holding()) {
		due = min(due, m.wait) // a participant's wait for Elected, or a deferred node's
	}
	for _, p := range m.pending {
		due = min(due, p.left)
	}
	return max(1, due)
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
	if m.timedOut[msg.From] {
		// It was alive when it was skipped for want of an Ack: wait
		// longer for it from now on.
		delete(m.timedOut, msg.From)
		m.ackWait[msg.From] = min(2*m.waitFor(msg.From), m.maxAckWait())
	}
	switch msg.Type {
	case protocol.TypeAck:
		m.pending = slices.DeleteFunc(m.pending, func(p pending) bool {
			return p.msg.Seq == msg.Seq && p.msg.To == msg.From && p.msg.Candidate == msg.Candidate
		})
	case protocol.TypeElection:
		if msg.To != 0 {
			m.ack(msg)
			m.onElection(msg)
		}
	case protocol.TypeElected:
		m.ack(msg)
		m.onElected(msg)
	case protocol.TypeHeartbeat:
		m.onClaim(m.c.Claimed(msg.From, msg.From, msg.Term, true))
	case protocol.TypeResign:
		m.reroute(msg.From)
		if m.c.Resigned(msg) {
			m.resigned()
		}
	case protocol.TypeStale:
		if m.c.Staled(msg) {
			m.win()
		}
	case protocol.TypeProbe:
		m.c.AnswerProbe() // a follower that has not heard us for a while
	}
}

// Unreachable skips a peer that cannot be reached.
func (m *Machine) Unreachable(id uint64) {
	if m.c.Left() {
		return
	}
	m.reroute(id)
}

// PeerDown skips a peer whose connection closed. If it was the leader and
// this node is now the highest live one, it starts the election at once,
// without waiting for the leader time-out; a lower node only stops
// following the leader and joins that election when its round arrives (or
// suspects on its own time-out, if it does not), as Bully's does.
func (m *Machine) PeerDown(id uint64) {
	if m.c.Left() {
		return
	}
	m.reroute(id)
	if m.c.PeerDown(id) && m.c.Role() == election.Follower && m.c.HigherAliveCount() == 0 {
		m.suspect()
	}
}

// Reassert makes a leader broadcast its heartbeat now. It implements
// election.Reasserter.
func (m *Machine) Reassert() { m.c.Heartbeat() }

// Resign leaves the cluster cleanly.
func (m *Machine) Resign() {
	m.c.Leave(0)
	m.pending = nil
}

// Ready returns and clears what the node wants done.
func (m *Machine) Ready() election.Ready { return m.c.Ready() }

// Status returns the node's view.
func (m *Machine) Status() election.SoftState { return m.c.Status() }

// initiate starts an election: participating, own ID to the successor.
func (m *Machine) initiate() {
	m.c.BecomeCandidate(true)
	m.c.ForgetGone()
	m.participating = true
	m.forwarded = m.forwarded[:0]
	m.wait = m.c.CoordinatorTicks()
	m.forward(protocol.Message{Type: protocol.TypeElection, Candidate: m.id, Term: m.c.MaxTerm()})
}

func (m *Machine) onElection(msg protocol.Message) {
	id := m.id
	if msg.Hops > m.maxHops() {
		return // circled too long: its candidate is gone
	}
	candidate := msg.Candidate
	if candidate != id {
		// The round shows that its candidate was alive when it started:
		// try it again, whatever this node noted about it before.
		m.c.MarkAlive(candidate)
	}
	next := protocol.Message{Type: protocol.TypeElection, Term: m.c.MaxTerm(), Seq: msg.Seq, Hops: msg.Hops + 1}
	seen := slices.Contains(m.forwarded, round{candidate, msg.Seq})
	switch {
	case candidate == id:
		if m.participating && seen {
			m.win()
		} else if m.c.Role() == election.Leader {
			// A copy of a round this node has already won went round
			// again: it must not claim again, but the nodes it passed are
			// participating, and its heartbeat ends that.
			m.reassert()
		}
		// Otherwise a copy of a round it gave up, or of one it sent in an
		// earlier participation: it must not claim on it.
	case m.c.Role() == election.Leader && m.c.Above(id, candidate):
		// A leader re-asserts itself at once, as Bully's does: its own ID
		// would win the round anyway.
		m.reassert()
	case !m.participating && candidate == m.c.Leader() && msg.Term < m.c.Term():
		// A copy of the round that elected our leader, late or resent:
		// passing it on would start that election over again. Such a copy
		// carries a term below our leader's, claimed after it went round;
		// a round of our leader at its term or above is a new one (it
		// restarted and lost its leadership).
	case !m.participating:
		if m.c.Role() != election.Leader {
			// A leader passes a higher candidate on but goes on leading
			// until that candidate's elected round reaches it.
			m.c.BecomeCandidate(false)
		}
		m.c.ForgetGone()
		m.participating = true
		m.forwarded = m.forwarded[:0]
		m.wait = m.c.CoordinatorTicks()
		next.Candidate = candidate
		if !m.c.Above(candidate, id) {
			next.Candidate = id
			next.Seq = 0 // a round of this node's own
		}
		m.forward(next)
	case m.c.Above(candidate, id) && !seen:
		next.Candidate = candidate
		m.forward(next)
	}
	// A participant drops a smaller ID (its own is already circulating) and
	// a copy of a round it has already passed on, so that duplicates and
	// resent copies cannot multiply round the ring.
}

func (m *Machine) onElected(msg protocol.Message) {
	if msg.Candidate == m.id || msg.Hops > m.maxHops() {
		return // the round is complete, or its leader is gone
	}
	was := m.participating
	verdict := m.c.Claimed(msg.From, msg.Candidate, msg.Term, false)
	passed := m.passed == (leadership{msg.Candidate, msg.Term})
	if verdict == core.Rejected || (verdict == core.Refreshed && (!was || passed)) {
		// A node forwards each leadership once: a copy of a round it has
		// already passed on (or that it knew from a heartbeat) stops here,
		// so duplicates and resent copies cannot multiply round the ring.
		if verdict == core.Refreshed {
			m.onClaim(verdict)
		}
		return
	}
	m.passed = leadership{msg.Candidate, msg.Term}
	m.forward(protocol.Message{Type: protocol.TypeElected, Candidate: msg.Candidate, Term: msg.Term, Hops: msg.Hops + 1})
	m.onClaim(verdict)
}

// onClaim finishes handling a leadership claim.
func (m *Machine) onClaim(v core.Verdict) {
	switch v {
	case core.Accepted, core.Refreshed:
		m.participating = false
	case core.Challenged:
		if !m.participating {
			m.initiate()
		}
	}
}

// win makes this node leader, tells every node at once with a heartbeat
// and sends Elected round the ring. If every term it could claim is above
// the ceiling, it stays a candidate and its wait runs out again.
func (m *Machine) win() {
	term := m.c.Claim()
	if term == 0 {
		return
	}
	m.participating = false
	m.sinceAssert = 0
	m.c.Heartbeat()
	m.forward(protocol.Message{Type: protocol.TypeElected, Candidate: m.id, Term: term})
}

// reassert answers an election while this node leads. If its term is still
// the newest it knows, a heartbeat tells every node at once (unless one
// went out less than a heartbeat interval ago, and the next is due within
// one); otherwise it claims a newer term with a new elected round.
func (m *Machine) reassert() {
	if m.c.Term() < m.c.MaxTerm() {
		m.win()
		return
	}
	if m.sinceAssert >= m.timing.HeartbeatTicks {
		m.sinceAssert = 0
		m.c.Heartbeat()
	}
}

// forward sends a ring message to the successor and waits for its Ack. A
// node with no live successor is alone: its own election makes it leader.
// An Election or Elected message whose candidate is the successor being
// skipped stops here: its candidate is gone, and the round would only
// circle until its hops ran out.
func (m *Machine) forward(msg protocol.Message) {
	members := m.c.ByRank()
	self := slices.Index(members, m.id)
	to := uint64(0)
	for i := 1; i < len(members); i++ {
		id := members[(self+i)%len(members)]
		if !m.c.IsGone(id) {
			to = id
			break
		}
		if id == msg.Candidate {
			return
		}
	}
	if to == 0 {
		if msg.Type == protocol.TypeElection && m.c.Role() != election.Leader {
			m.win()
		}
		return
	}
	msg.To = to
	if msg.Seq == 0 || msg.Type != protocol.TypeElection {
		msg.Seq = m.c.NextSeq()
	}
	if msg.Type == protocol.TypeElection {
		m.forwarded = append(m.forwarded, round{msg.Candidate, msg.Seq})
	}
	m.c.Send(msg)
	m.pending = append(m.pending, pending{msg: msg, left: m.waitFor(to)})
}

func (m *Machine) ack(msg protocol.Message) {
	m.c.Send(protocol.Message{Type: protocol.TypeAck, To: msg.From, Seq: msg.Seq, Candidate: msg.Candidate, Term: m.c.MaxTerm()})
}

// maxAckWait bounds the wait for a successor's Ack: the leader time-out,
// and a third of CoordinatorTicks, so that a round that skips a successor
// that was slow once and has died since still completes before its
// participants give it up (in a small cluster, CoordinatorTicks is short).
func (m *Machine) maxAckWait() int {
	t := m.timing
	return max(t.AnswerTicks, min(t.LeaderTimeoutTicks, t.CoordinatorTicks/3))
}

// waitFor is how long to wait for successor id's Ack.
func (m *Machine) waitFor(id uint64) int {
	if w, ok := m.ackWait[id]; ok {
		return w
	}
	return m.timing.AnswerTicks
}

// tickPending skips successors that did not acknowledge in time.
func (m *Machine) tickPending() {
	for i := range m.pending {
		m.pending[i].left--
	}
	for {
		i := slices.IndexFunc(m.pending, func(p pending) bool { return p.left <= 0 })
		if i < 0 {
			return
		}
		// reroute resends every message pending to that node, with a
		// fresh wait.
		// A silent leader skipped teaches nothing about the wait for
		// Acks: if it was alive, its time-out said so already, and a
		// leader that was stopped and resumed seconds later would
		// double the wait for every later round (and failover).
		to := m.pending[i].msg.To
		if !m.pending[i].silent {
			m.timedOut[to] = true
		}
		m.reroute(to)
	}
}

// reroute marks id gone and resends every message pending to it.
func (m *Machine) reroute(id uint64) {
	m.c.MarkGone(id)
	var resend []protocol.Message
	m.pending = slices.DeleteFunc(m.pending, func(p pending) bool {
		if p.msg.To == id {
			resend = append(resend, p.msg)
			return true
		}
		return false
	})
	for _, msg := range resend {
		msg.To = 0
		if msg.Type != protocol.TypeElection {
			msg.Seq = 0
		}
		m.forward(msg)
	}
}
