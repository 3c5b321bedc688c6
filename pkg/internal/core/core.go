// Package core holds the state and the rules that Bully, the ring and
// Paxos share: terms, leader tracking, failure suspicion, the term part of
// the hard state and the events they report. Those machines are built on
// it (byzantine keeps rules of its own); drivers see them through
// election.Machine. Beside the machines, only its bounds on how far
// received terms may move (TermBurst, TermRate) are read elsewhere: by the
// node's bootstrap (pkg/node), which bounds the term it learns at start
// the same way, and by the simulator (pkg/sim).
//
// Where a rule asks which of two members is the higher, it compares their
// ranks (election.Config.Rank: by ID, or spread by a hash; Above,
// ByRank, HigherAliveCount); who owns a term (Owner) is decided by ID
// whatever the rank.
//
// The rules are kept by a few transitions, in the manner of a raft
// implementation's becomeFollower, becomeCandidate and becomeLeader:
//
//   - Follow, FollowFound and Claimed make a node a follower. None accepts
//     a term below the one accepted before, above protocol.MaxTerm, or not
//     owned by its leader: a node's term never goes backwards.
//   - BecomeCandidate and Defer enter an election; Claim and Lead make a
//     node leader. Claim and NewBallot take a term of this node's above
//     every term it has seen and count it as seen, so that the next Ready
//     stores it before any message that uses it leaves the node; Lead
//     takes only such a term, and none below the node's term.
//   - StepDown, Forget, PeerDown, Resigned and Leave make the leader
//     undefined (or, for Leave, end the node's part).
//   - Receive raises the highest term seen by a received term only as far
//     as the node's credit allows (TermBurst at once, TermRate a tick).
//
// Algorithms keep their own messages, timers and, for Paxos, the
// acceptor's state.
package core

import (
	"slices"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Core is the state and the rules that the election machines share. An
// algorithm keeps a *Core, changes its role only through the transitions
// (see the package doc) and adds its own messages and timers.
type Core struct {
	id      uint64
	members []uint64 // sorted
	index   int      // position of id in members
	// rank orders the members (election.Config.Rank); byRank are the
	// members in increasing rank (members itself when ranked by ID), and
	// rankIndex the position of id in it.
	rank      *election.Ranker
	byRank    []uint64
	rankIndex int
	timing    election.Timing

	role    election.Role
	leader  uint64 // 0 while undefined
	term    uint64 // term of the last leadership accepted or claimed
	maxTerm uint64 // highest term seen anywhere
	silent  int    // ticks since the leader was heard (or since the last heartbeat, as leader)
	beats   int    // a leader's heartbeats since it last claimed, up to election.QuietAfter
	gone    map[uint64]absence
	seq     uint64
	left    bool // resigned: ignore every later event
	waiting bool // a candidate that has deferred its election (Defer)
	found   election.Leadership

	// The leader time-out learns the delays of the moment: timeout is
	// LeaderTimeoutTicks, doubled (up to maxTimeoutFactor times) each time
	// the leader it timed out turns out to have been alive (a message from
	// it within the time-out after the suspicion, before any other
	// leadership was accepted: a leader that resumes from a pause after
	// its successor took over is no evidence), and halved back after
	// calmFactor time-outs of following without a suspicion.
	timeout      int
	suspected    uint64 // the leader last timed out, while a message from it would show the suspicion wrong
	sinceSuspect int
	calm         int
	// The time-out also follows the arrivals of the current leader's
	// messages (Limit), and a follower asks a leader it has not heard
	// for a while before it suspects it (probed: the Probe of this
	// silence is out).
	arrivals Arrivals
	probed   bool
	// late: while a message handed over with StepAt is handled, how many
	// ticks after the machine's current tick it arrived (see Arrived).
	late int

	// Received terms may raise maxTerm only as fast as the credit allows
	// (see Receive): now counts this node's ticks, credit is what they
	// may still raise it by as of tick creditAt.
	now      uint64
	credit   uint64
	creditAt uint64
	// claimInc is the incarnation of each member's last heartbeat,
	// Coordinator or Paxos Propose: the process that claims for it (see
	// SameClaimant).
	claimInc map[uint64]uint64

	// With dynamic membership (election.Config.Dynamic), presence holds
	// the members present, members is its list and terms are owned by
	// ID; sincePresence counts the ticks since this node last broadcast
	// anything (a presence is due after PresenceTicks of them).
	presence      *Presence
	sincePresence int
	keepLeader    bool

	saved   election.HardState // the term part of the hard state last handed to the driver
	out     []protocol.Message
	claimed uint64
	events  []election.Event
}

// NewCore validates cfg and returns a follower with no leader that starts
// from cfg.State: it never accepts a term below the one it accepted before
// and only claims terms above every term it has seen.
func NewCore(cfg election.Config) (*Core, error) {
	members, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	index, _ := slices.BinarySearch(members, cfg.ID)
	var presence *Presence
	if cfg.Dynamic {
		presence = NewPresence(cfg.ID, members, cfg.Timing, 0)
		members = presence.Members()
	}
	c := &Core{
		presence:   presence,
		keepLeader: cfg.KeepLeader,
		id:         cfg.ID,
		members:    members,
		index:      index,
		timing:     cfg.Timing,
		term:       cfg.State.Term,
		maxTerm:    cfg.State.MaxTerm,
		saved:      election.HardState{Term: cfg.State.Term, MaxTerm: cfg.State.MaxTerm},
		gone:       make(map[uint64]absence),
		credit:     TermBurst,
		claimInc:   make(map[uint64]uint64),
		found:      cfg.Found,
		timeout:    cfg.Timing.LeaderTimeoutTicks,
		rank:       cfg.Rank.Ranker(nil),
	}
	c.ranked()
	return c, nil
}

// ranked orders the members by rank after a change of the members.
func (c *Core) ranked() {
	if !c.rank.Rank().IsSpread() {
		c.byRank, c.rankIndex = c.members, c.index
		return
	}
	c.rank.Keep(c.members)
	c.byRank = slices.Clone(c.members)
	c.rank.Sort(c.byRank)
	c.rankIndex = slices.Index(c.byRank, c.id)
}

// Above reports whether member a ranks above member b
// (election.Config.Rank); 0, no member, ranks below every member.
func (c *Core) Above(a, b uint64) bool { return c.rank.Above(a, b) }

// ByRank returns the members, this node included, in increasing rank:
// Members itself when they are ranked by ID. The caller must not modify
// the slice.
func (c *Core) ByRank() []uint64 { return c.byRank }

// Bounds of the learnt leader time-out (see Core.timeout).
const (
	// maxTimeoutFactor bounds the leader time-out to this many times
	// LeaderTimeoutTicks.
	maxTimeoutFactor = election.MaxLeaderTimeoutFactor
	// calmFactor: after calmFactor leader time-outs' worth of ticks of
	// following with no suspicion, a raised time-out is halved.
	calmFactor = 50
)

// FoundLeader is the leader the node found when it started, 0 if none.
func (c *Core) FoundLeader() uint64 { return c.found.Leader }

// FollowFound makes a node that starts follow the leadership it found
// (election.Config.Found), if that leader ranks higher, owns its term
// and its term is not older than this node's nor further above its
// highest term than TermBurst (a member's word, as a message is), and
// reports whether it does. The algorithm then holds no election: it would
// end with that leader.
func (c *Core) FollowFound() bool {
	f := c.found
	if c.left || f.Leader == c.id || c.Above(c.id, f.Leader) && !c.keepLeader || f.Term > c.maxTerm+TermBurst || !c.follow(f.Leader, f.Term) {
		return false
	}
	c.MarkAlive(f.Leader)
	return true
}

// Role is this node's role.
func (c *Core) Role() election.Role { return c.role }

// Leader is the current leader, 0 while undefined.
func (c *Core) Leader() uint64 { return c.leader }

// Term is the term of the last leadership accepted or claimed.
func (c *Core) Term() uint64 { return c.term }

// MaxTerm is the highest term this node has seen.
func (c *Core) MaxTerm() uint64 { return c.maxTerm }

// Left reports whether this node has resigned.
func (c *Core) Left() bool { return c.left }

// Status returns the node's view.
func (c *Core) Status() election.SoftState {
	return election.SoftState{ID: c.id, Leader: c.leader, Term: c.term, Role: c.role}
}

// state is the term part of the node's hard state now.
func (c *Core) state() election.HardState {
	return election.HardState{Term: c.term, MaxTerm: c.maxTerm}
}

// Ready returns and clears the pending output, with the term part of the
// hard state (Term, MaxTerm) if it changed since the last Ready. An
// algorithm with more hard state (Paxos's acceptor) adds it.
func (c *Core) Ready() election.Ready {
	r := election.Ready{Messages: c.out, Claimed: c.claimed, Events: c.events}
	if st := c.state(); st != c.saved {
		c.saved = st
		r.State = &st
	}
	c.out, c.claimed, c.events = nil, 0, nil
	return r
}

// report records an event for the driver.
func (c *Core) report(kind election.EventKind, leader, term uint64) {
	c.events = append(c.events, election.Event{Kind: kind, Leader: leader, Term: term})
}

// Send queues m from this node.
func (c *Core) Send(m protocol.Message) {
	m.V = protocol.Version
	m.From = c.id
	if m.To == 0 {
		c.sincePresence = 0 // every member hears this one
	}
	c.out = append(c.out, m)
}

// NextSeq returns a fresh sequence number for a message that expects an Ack.
func (c *Core) NextSeq() uint64 {
	c.seq++
	return c.seq
}

// Bounds of how far received terms may move a node (see Receive).
const (
	// TermBurst is how far received terms may raise a node's highest
	// term at once: far more than honest elections ever climb in a
	// while (each claim is at most one round of the members above the
	// last; 2^30 is ten million elections of 101 members).
	TermBurst uint64 = 1 << 30
	// TermRate is how much of that the node's credit regains per tick,
	// so that a full burst returns in TermBurst/TermRate = 64 ticks. A
	// member that lies for ever with the highest terms it may send
	// raises a node's terms by TermBurst once and by TermRate a tick
	// after: 2^62 is then 2^38 ticks away, 87 years of 10 ms ticks.
	TermRate uint64 = 1 << 24
)

// raise raises maxTerm to term, a received term, as far as the node's
// credit allows, and reports whether it reached term. The credit is one
// for all senders: honest nodes that pass on what a liar told them must
// not add up to more than the liar could move each node alone, or the
// honest nodes' terms drift apart faster than any of them catches up.
func (c *Core) raise(term uint64) bool {
	if term <= c.maxTerm {
		return true
	}
	if elapsed := c.now - c.creditAt; elapsed >= TermBurst/TermRate {
		c.credit = TermBurst
	} else {
		c.credit = min(TermBurst, c.credit+elapsed*TermRate)
	}
	c.creditAt = c.now
	rise := term - c.maxTerm
	reached := rise <= c.credit
	rise = min(rise, c.credit)
	c.credit -= rise
	c.maxTerm += rise // at most term, so at most protocol.MaxTerm
	return reached
}

// CountTick counts a tick of this node's clock for an algorithm that
// keeps its own leader and follower clocks (Paxos): it only refills the
// term credit. Bully and the ring call Tick instead.
func (c *Core) CountTick() {
	c.now++
	c.tickPresence()
}

// Tick counts a tick of this node's clock, as CountTick does, and
// advances the clock of its role: a leader broadcasts a heartbeat when
// due (see Heartbeat); a follower reports whether its leader (or, while
// undefined, any leader) has been silent too long, in which case the
// silent leader is suspected: it becomes undefined and counts as gone. A
// candidate's clock is its algorithm's.
func (c *Core) Tick() (timedOut bool) {
	c.now++
	c.tickPresence()
	switch c.role {
	case election.Leader:
		c.tickLeader()
	case election.Follower:
		return c.tickFollower()
	}
	return false
}

// Skip advances the clock by n ticks at once, 0 < n, none of which can
// have an effect: n below Due and PresenceDue (election.Skipper). It
// leaves the node as n calls of Tick would: a leader's and a follower's
// silence, a suspicion's age and its end, the calm that lowers a raised
// time-out, and the membership's clock.
func (c *Core) Skip(n int) {
	c.now += uint64(n)
	if c.presence != nil && !c.left {
		c.sincePresence += n
	}
	switch c.role {
	case election.Leader:
		c.silent += n
	case election.Follower:
		c.silent += n
		if c.suspected != 0 {
			// Tick ends the suspicion in the tick its age reaches the
			// time-out, and the age stops there.
			if clear := max(1, c.timeout-c.sinceSuspect); clear <= n {
				c.sinceSuspect += clear
				c.suspected = 0
			} else {
				c.sinceSuspect += n
			}
		}
		if c.leader != 0 && c.timeout > c.timing.LeaderTimeoutTicks {
			c.calm += n
		}
	}
}

// Receive does what every message does to a node before its algorithm
// looks at it: it learns the message's term and that its sender is alive.
// It reports false for messages the algorithm must ignore: those from this
// node itself, those with a term above protocol.MaxTerm (Validate drops
// them; this keeps the ceiling whatever the driver does), everything once
// this node has resigned, and those whose term is further above this
// node's highest term than its credit: a member that lies about terms
// must not exhaust them. Such a message raises the highest term by the
// credit left, so that a node far behind an honest cluster (a long
// partition, a restart without data that learnt nothing) still catches
// up, by TermBurst at once and TermRate a tick after.
func (c *Core) Receive(m protocol.Message) bool { return c.ReceiveLate(m, 0) }

// ReceiveLate is Receive for a message that arrived late ticks after the
// current tick (election.ArrivalStepper: a driver that settles hands over
// what arrived while the machine waited before a deadline's tick): the
// membership counts its sender heard when it arrived, so that the ticks
// the machine is given next do not make a member that spoke meanwhile
// look silent.
func (c *Core) ReceiveLate(m protocol.Message, late int) bool {
	if c.left || m.From == c.id || m.Term > protocol.MaxTerm {
		return false
	}
	if !c.raise(m.Term) {
		return false
	}
	if m.Type == protocol.TypeHeartbeat || m.Type == protocol.TypeCoordinator || m.Type == protocol.TypePropose {
		c.claimInc[m.From] = m.Inc
	}
	// A Resign is a departure, unless it names a successor (a Paxos
	// leader handing over, which stays a member).
	if c.presence != nil && (m.Type != protocol.TypeResign || m.Candidate != 0) {
		// The first broadcast of a process is answered, whatever its
		// type: a newcomer's Election or Prepare, sent beside its
		// presence on another subject, may overtake it, and its
		// receivers then drop the presence as a number already passed
		// (protocol.ReplayGuard's floor).
		joined, answer := c.presence.Heard(m.From, m.Inc, c.now+uint64(max(0, late)), m.To == 0)
		if joined {
			c.membersChanged(election.MemberJoined, m.From)
		}
		if answer {
			c.Send(protocol.Message{Type: protocol.TypePresence, To: m.From, Term: c.maxTerm})
		}
	}
	if m.Type != protocol.TypeResign {
		delete(c.gone, m.From)
		if m.From == c.suspected {
			// The leader timed out was alive: on a loaded machine
			// (101 processes on two cores) its heartbeats wait in
			// queues for longer than the time-out. Wait longer.
			c.suspected = 0
			c.timeout = min(2*c.timeout, maxTimeoutFactor*c.timing.LeaderTimeoutTicks)
			c.calm = 0
		}
	}
	return true
}

// absence is why a peer counts as gone.
type absence int

const (
	// suspected: a message to it went unanswered, or the transport could
	// not reach it. Forgotten when an election starts (ForgetGone).
	suspected absence = iota + 1
	// departed: it resigned, or it led and its heartbeats stopped. Kept
	// until a message from it arrives.
	departed
)

// MarkGone records that a peer cannot be reached, until a message from it
// arrives or the next election starts.
func (c *Core) MarkGone(id uint64) {
	if id != c.id && c.gone[id] != departed {
		c.gone[id] = suspected
	}
}

// MarkDeparted records that a peer has left (it resigned, or it led and
// fell silent), until a message from it arrives.
func (c *Core) MarkDeparted(id uint64) {
	if id != c.id {
		c.gone[id] = departed
	}
}

// ForgetGone forgets which peers were suspected, so that the next messages
// probe them again. A node that never hears from a peer directly (round
// the ring, only its predecessor writes to it) would otherwise skip it for
// ever. Peers that departed stay gone: probing them would only cost a
// time-out.
func (c *Core) ForgetGone() {
	for id, why := range c.gone {
		if why == suspected {
			delete(c.gone, id)
		}
	}
}

// PeerDown records that a peer's connection closed: it counts as departed,
// and if it was this follower's leader, as a leader that fell silent (the
// leader becomes undefined). It reports
// whether it was the leader. The leader's loss is reported as
// LeaderDisconnected.
func (c *Core) PeerDown(id uint64) (leader bool) {
	if c.left || id == c.id {
		return false
	}
	c.MarkDeparted(id)
	c.memberLeft(id)
	if id != c.leader || c.role == election.Leader {
		return false
	}
	c.report(election.LeaderDisconnected, c.leader, c.term)
	c.leader, c.silent = 0, 0
	return true
}

// MarkAlive forgets that a peer was gone, as a message from it does.
func (c *Core) MarkAlive(id uint64) { delete(c.gone, id) }

// IsGone reports whether a peer is known to have left or to be unreachable.
func (c *Core) IsGone(id uint64) bool { return c.gone[id] != 0 }

// HigherAliveCount is how many members that rank higher are not known to
// be gone: this node's place among the live members, counted from the
// top.
func (c *Core) HigherAliveCount() int {
	k := 0
	for _, id := range c.byRank[c.rankIndex+1:] {
		if c.gone[id] == 0 {
			k++
		}
	}
	return k
}

// nextTerm is the smallest term owned by this node above every term seen,
// or 0 if that term would be above protocol.MaxTerm. Every term it reads is
// at most protocol.MaxTerm (2^62), so the sum cannot wrap.
func (c *Core) nextTerm() uint64 {
	n := uint64(len(c.members))
	own := uint64(c.index) + 1
	if c.presence != nil {
		n, own = protocol.MaxMemberID, c.id
	}
	t := c.maxTerm - c.maxTerm%n + own
	if t <= c.maxTerm {
		t += n
	}
	if t > protocol.MaxTerm {
		return 0
	}
	return t
}

// NewBallot returns a term of this node's above every term it has seen, and
// counts it as seen, so that it is stored before it is used and never used
// again; 0 if every such term is above protocol.MaxTerm.
func (c *Core) NewBallot() uint64 {
	b := c.nextTerm()
	if b != 0 {
		c.maxTerm = b
	}
	return b
}

// Lead makes this node leader with term, a ballot of its own that a
// majority accepted (Paxos), and reports whether it does; Ready reports it
// to be announced. It refuses a term this node does not own, one it has
// not counted as seen (NewBallot), and one below its term.
func (c *Core) Lead(term uint64) bool {
	if c.left || term == 0 || c.Owner(term) != c.id || term > c.maxTerm || term < c.term {
		return false
	}
	if c.role != election.Candidate || c.waiting {
		c.report(election.ElectionStarted, 0, 0)
	}
	c.waiting = false
	c.suspected = 0
	c.role, c.leader, c.term, c.silent, c.claimed, c.beats = election.Leader, c.id, term, 0, term, 0
	c.report(election.LeaderChanged, c.id, term)
	return true
}

// Follow accepts leader with term, as learnt from the algorithm's own
// messages (a Paxos leader's renewal), and reports whether it does: it
// refuses a term below this node's term, above protocol.MaxTerm or not
// owned by leader, and a leader that is this node. Unlike Claimed it does
// not challenge a lower leader; that is the algorithm's to decide.
func (c *Core) Follow(leader, term uint64) bool {
	return !c.left && leader != c.id && c.follow(leader, term)
}

// StepDown makes a leader a follower with no leader: its lease ran out,
// or it handed over.
func (c *Core) StepDown() {
	if c.role == election.Leader {
		c.report(election.SteppedDown, c.id, c.term)
	}
	c.role, c.leader, c.silent = election.Follower, 0, 0
}

// Forget makes the leader undefined (it left or fell silent), reporting a
// time-out when it did not leave.
func (c *Core) Forget(timedOut bool) {
	if c.leader != 0 && c.leader != c.id && timedOut {
		c.report(election.LeaderTimedOut, c.leader, c.term)
	}
	c.leader = 0
}

// BecomeCandidate enters an election. With forget, the leader becomes
// undefined (it failed, left, or this node just started); without, a
// leader that is still working is kept while the election runs.
func (c *Core) BecomeCandidate(forget bool) {
	if c.role != election.Candidate || c.waiting {
		c.report(election.ElectionStarted, 0, 0)
	}
	c.role = election.Candidate
	c.waiting = false
	c.silent = 0
	if forget {
		c.leader = 0
	}
}

// Defer makes this node a candidate whose leader failed or left but that
// holds back its own election for a while (a higher node is expected to
// act first). It reports no election, which is reported when the election
// starts (BecomeCandidate or Claim), if it does; unless started, which
// says that the node has just started and entered the election now.
func (c *Core) Defer(started bool) {
	c.role = election.Candidate
	c.waiting = true
	c.silent = 0
	c.leader = 0
	if started {
		c.report(election.ElectionStarted, 0, 0)
	}
}

// Claim makes this node leader. A node that already leads under a term no
// older than any it has seen keeps that term; otherwise it takes a new term
// and Ready reports it to be announced. It returns the term, or 0 if every
// term this node could claim is above protocol.MaxTerm: it then stays as
// it was (a cluster that reaches the ceiling elects no new leader).
func (c *Core) Claim() uint64 {
	if c.role != election.Leader || c.leader != c.id || c.term < c.maxTerm {
		next := c.nextTerm()
		if next == 0 {
			return 0
		}
		if c.role != election.Candidate || c.waiting {
			c.report(election.ElectionStarted, 0, 0) // claimed straight away
		}
		c.waiting = false
		c.term, c.maxTerm, c.claimed = next, next, next
		c.report(election.LeaderChanged, c.id, next)
	}
	c.role, c.leader, c.silent, c.suspected, c.beats = election.Leader, c.id, 0, 0, 0
	return c.term
}

// follow accepts leader with term, and reports whether it does: never a
// term below this node's term (terms never go backwards), above
// protocol.MaxTerm, or not owned by leader.
func (c *Core) follow(leader, term uint64) bool {
	if term < c.term || term > protocol.MaxTerm || c.Owner(term) != leader {
		return false
	}
	switch {
	case leader != c.leader || term != c.term:
		c.report(election.LeaderChanged, leader, term)
		c.arrivals.Reset()
	case c.role == election.Follower && c.silent+c.late > 0:
		// The same leadership heard again: one more gap.
		c.arrivals.Add(c.silent + c.late)
		if c.probed {
			c.report(election.ProbeAnswered, leader, term)
		}
	}
	c.probed = false
	if leader != c.suspected {
		// Another leadership since the suspicion: the suspected leader's
		// messages from now on tell of its return (a pause, a restart),
		// not of a suspicion that was wrong.
		c.suspected = 0
	}
	c.waiting = false
	// Silent from the tick the message arrived in: ticks still due
	// before it (Arrived) count from below zero.
	c.role, c.leader, c.term, c.silent = election.Follower, leader, term, -c.late
	c.maxTerm = max(c.maxTerm, term)
	return true
}

// Verdict is the outcome of a leadership claim.
type Verdict int

// The verdicts.
const (
	// Accepted: the claimant is now this node's leader.
	Accepted Verdict = iota
	// Refreshed: the claim is for the leadership this node last accepted.
	Refreshed
	// Challenged: a lower-ranked node claims a newer term while this
	// node is alive; this node must start an election, since the
	// highest-ranked live member wins.
	Challenged
	// Rejected: the claim is older than this node's term (a Stale reply
	// has been queued), or its claimant does not own its term.
	Rejected
)

// Owner is the member that may claim term, or 0 for term 0.
func (c *Core) Owner(term uint64) uint64 {
	if term == 0 {
		return 0
	}
	if c.presence != nil {
		return (term-1)%protocol.MaxMemberID + 1
	}
	return c.members[(term-1)%uint64(len(c.members))]
}

// Claimed applies the shared rule for a claim that leader leads with term
// (a Coordinator, an elected round or a heartbeat), received from sender,
// broadcast or not (see ReplyStale).
func (c *Core) Claimed(sender, leader, term uint64, broadcast bool) Verdict {
	switch {
	case leader == c.id || c.Owner(term) != leader:
		// Our own claim coming back (the end of the elected round), or a
		// term its claimant does not own: it tells us nothing.
		return Rejected
	case term < c.term:
		c.ReplyStale(sender, broadcast)
		return Rejected
	case c.Above(c.id, leader) && !c.keepLeader:
		// Even under the term this node accepted before (it may have been
		// restored from disk): the highest-ranked live member wins.
		return Challenged
	case term == c.term:
		// The same leadership: the claimant owns the term, so it is the
		// leader we accepted, perhaps suspected since.
		c.follow(leader, term)
		return Refreshed
	}
	c.follow(leader, term)
	return Accepted
}

// ReplyStale tells to that its term is older than this node's. For a
// broadcast (a heartbeat, a Coordinator, an Election), a follower of a
// leader other than to keeps quiet: its leader received the same
// broadcast and replies for them all, so an old leader's heartbeat costs
// one reply instead of one from every node.
func (c *Core) ReplyStale(to uint64, broadcast bool) {
	if broadcast && c.role != election.Leader && c.leader != 0 && c.leader != to {
		return
	}
	c.Send(protocol.Message{Type: protocol.TypeStale, To: to, Term: c.term, Candidate: c.leader})
}

// Staled applies a Stale reply and reports whether this node, a leader,
// must claim again with a newer term: it must when the newer term belongs
// to no leader or to a lower-ranked one (the highest-ranked live member
// wins). When a higher-ranked node leads under the newer term, this node
// steps down and waits to hear from it.
func (c *Core) Staled(m protocol.Message) (reclaim bool) {
	if c.role != election.Leader || m.Term <= c.term {
		return false
	}
	if c.Above(m.Candidate, c.id) {
		c.role, c.leader, c.silent = election.Follower, 0, 0
		return false
	}
	return true
}

// SameClaimant reports whether m comes from the process (incarnation)
// whose heartbeat, Coordinator or Propose this node last heard from m's
// sender, or
// from any if it heard none. A Resign from another process with the same
// ID (a replacement stopped while the leader still runs) is not the
// leader's.
func (c *Core) SameClaimant(m protocol.Message) bool {
	inc, ok := c.claimInc[m.From]
	return !ok || inc == m.Inc
}

// Resigned applies a Resign from a peer and reports whether it was this
// node's leader, in which case the leader is now undefined and the
// algorithm must elect a new one at once. A Resign from another process
// than the one that claims for its sender (SameClaimant) changes nothing.
func (c *Core) Resigned(m protocol.Message) bool {
	if !c.SameClaimant(m) {
		return false
	}
	c.MarkDeparted(m.From)
	c.memberLeft(m.From)
	if m.From != c.leader || m.Term != c.term {
		return false
	}
	c.leader = 0
	return true
}

// Leave queues this node's Resign and makes it ignore every later event.
// The Resign names ballot if it is not 0 (a Paxos leader names the ballot
// whose lease it releases), else the term this node leads with, else the
// highest term it has seen.
func (c *Core) Leave(ballot uint64) {
	if c.left {
		return
	}
	term := ballot
	switch {
	case term != 0:
	case c.role == election.Leader:
		term = c.term
	default:
		term = c.maxTerm
	}
	c.Send(protocol.Message{Type: protocol.TypeResign, Term: term})
	c.role, c.leader, c.left = election.Follower, 0, true
}

// tickLeader advances a leader's clock, broadcasting a heartbeat when due.
func (c *Core) tickLeader() {
	c.silent++
	if c.silent >= c.heartbeatDue() {
		c.Heartbeat()
	}
}

// quiet reports whether a leader's heartbeats are quiet: it has sent
// election.QuietAfter of them since it last claimed, with
// QuietHeartbeatTicks set.
func (c *Core) quiet() bool {
	return c.timing.QuietHeartbeatTicks > 0 && c.beats >= election.QuietAfter
}

// interval is a leader's heartbeat interval now: HeartbeatTicks, and
// QuietHeartbeatTicks once quiet.
func (c *Core) interval() int {
	if c.quiet() {
		return c.timing.QuietHeartbeatTicks
	}
	return c.timing.HeartbeatTicks
}

// heartbeatDue is the silence after which a leader sends its next
// heartbeat: its interval, or once quiet with a grid (QuietGrid), less
// the ticks from the last tick on the grid to the interval's end.
func (c *Core) heartbeatDue() int {
	due := c.interval()
	if g := c.timing.QuietGrid; g > 0 && c.quiet() {
		// The interval ends in tick now-silent+due; on the grid, a tick k
		// has k+QuietPhase divisible by g.
		end := c.now - uint64(c.silent) + uint64(due)
		due -= int((end + uint64(c.timing.QuietPhase)) % uint64(g))
	}
	return due
}

// Heartbeat broadcasts a leader's heartbeat now; the next one is due a
// heartbeat interval later (interval). It does nothing unless this node
// leads.
func (c *Core) Heartbeat() {
	if c.role != election.Leader || c.left {
		return
	}
	c.silent = 0
	c.beats = min(c.beats+1, election.QuietAfter)
	c.Send(protocol.Message{Type: protocol.TypeHeartbeat, Term: c.term})
}

// Limit is the leader time-out now: LeaderTimeoutTicks, raised by what
// the node learnt (the timeout doubled after a suspicion that proved
// wrong, up to maxTimeoutFactor times LeaderTimeoutTicks) and by its
// leader's arrivals (Arrivals.Limit, up to
// election.MaxAdaptiveTimeoutFactor times).
func (c *Core) Limit() int {
	return max(c.timeout, c.arrivals.Limit(c.timing.LeaderTimeoutTicks))
}

// ProbeLead is how many ticks before the leader time-out limit a
// follower probes its silent leader: T (AnswerTicks), the round trip of a
// question and its answer, but never so early that a leader on time
// would be probed (before one heartbeat interval and a tick); 0 for no
// probe.
func ProbeLead(t election.Timing, limit int) int {
	return max(0, min(t.AnswerTicks, limit-t.HeartbeatTicks-1))
}

// AnswerProbe answers a Probe from a follower, if this node leads, with
// a heartbeat now (at most one a tick), and reports whether it did.
func (c *Core) AnswerProbe() bool {
	if c.role != election.Leader || c.left || c.silent == 0 {
		return false
	}
	c.Heartbeat()
	return true
}

// probe asks the leader whether it is alive, once per silence, when the
// silence reaches ProbeLead ticks before the time-out.
func (c *Core) probe(limit int) {
	if c.leader == 0 || c.probed {
		return
	}
	if lead := ProbeLead(c.timing, limit); lead > 0 && c.silent >= limit-lead {
		c.probed = true
		c.SendProbe()
	}
}

// Arrived notes that the message about to be handled arrived in tick
// arrived of this node's clock, which may be later than the ticks given
// so far (a driver that settles at a deadline hands over what a flush
// brought before the deadline's tick): a leader heard in it is silent
// from that tick on, not from the machine's, so the ticks still due
// before it do not count against it. Bully and the ring call it from
// StepAt, and Done after the message.
func (c *Core) Arrived(arrived int) { c.late = max(0, arrived-int(c.now)) }

// Done ends what Arrived noted.
func (c *Core) Done() { c.late = 0 }

// SendProbe asks this node's leader whether it is alive (a Probe for the
// term this node accepted) and reports it (LeaderProbed). An algorithm
// that keeps its own follower clock (Paxos) calls it; Bully and the ring
// probe through Tick.
func (c *Core) SendProbe() {
	if c.leader == 0 || c.leader == c.id || c.left {
		return
	}
	c.Send(protocol.Message{Type: protocol.TypeProbe, To: c.leader, Term: c.term})
	c.report(election.LeaderProbed, c.leader, c.term)
}

// ProbeAnswered reports that the leader this node probed was heard again
// before the time-out (ProbeAnswered), for an algorithm that keeps its
// own follower clock.
func (c *Core) ProbeAnswered() {
	if c.leader != 0 {
		c.report(election.ProbeAnswered, c.leader, c.term)
	}
}

// Resume makes this node leader again with term, the term it led with
// until it stepped down, and reports whether it does: a Paxos leader
// whose lease ran out and that a majority accepted again under the same
// ballot. It is the same leadership: no election is reported, nothing is
// claimed or announced anew, and only LeaderResumed tells. It refuses any
// other term, and a node that has followed another leader since.
func (c *Core) Resume(term uint64) bool {
	if c.left || term == 0 || term != c.term || c.Owner(term) != c.id || (c.leader != 0 && c.leader != c.id) {
		return false
	}
	c.waiting = false
	c.suspected = 0
	c.role, c.leader, c.silent, c.beats = election.Leader, c.id, 0, 0
	c.report(election.LeaderResumed, c.id, term)
	return true
}

// tickFollower advances a follower's clock and reports whether the leader
// (or, while undefined, any leader) has been silent too long. Some ticks
// before that it asks the leader (probe), whose answer, like any message
// from it, ends the silence. The silent leader is then suspected: it
// becomes undefined and counts as gone.
func (c *Core) tickFollower() (timedOut bool) {
	c.silent++
	if c.suspected != 0 {
		c.sinceSuspect++
		if c.sinceSuspect >= c.timeout {
			c.suspected = 0 // it stayed silent: the suspicion was right
		}
	}
	if c.leader != 0 && c.timeout > c.timing.LeaderTimeoutTicks {
		c.calm++
		if c.calm >= calmFactor*c.timing.LeaderTimeoutTicks {
			c.timeout = max(c.timing.LeaderTimeoutTicks, c.timeout/2)
			c.calm = 0
		}
	}
	limit := c.Limit()
	c.probe(limit)
	if c.silent < limit {
		return false
	}
	c.silent, c.probed = 0, false
	if c.leader != 0 {
		c.report(election.LeaderTimedOut, c.leader, c.term)
		c.suspected, c.sinceSuspect = c.leader, 0
		c.MarkDeparted(c.leader)
		c.leader = 0
	}
	return true
}

// Due is how many ticks until Tick can have an effect: a leader's next
// heartbeat, a follower's leader time-out or the lowering of a raised
// one; 1<<30 for a candidate (its clock is its algorithm's) and for a
// node that left.
func (c *Core) Due() int {
	switch {
	case c.left || c.role == election.Candidate:
		return 1 << 30
	case c.role == election.Leader:
		return max(1, c.heartbeatDue()-c.silent)
	}
	limit := c.Limit()
	due := limit - c.silent
	if lead := ProbeLead(c.timing, limit); c.leader != 0 && !c.probed && lead > 0 {
		due = min(due, limit-lead-c.silent)
	}
	if c.leader != 0 && c.timeout > c.timing.LeaderTimeoutTicks {
		due = min(due, calmFactor*c.timing.LeaderTimeoutTicks-c.calm)
	}
	return max(1, due)
}
