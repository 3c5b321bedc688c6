// Package election defines what an election algorithm exposes to the code
// that drives it (the node runtime in production, the simulator in tests):
// the Machine interface, the events it takes and the Ready it returns, its
// soft and hard state, its configuration and its timing. The machines are
// in packages of their own (bully, ring, paxos, byzantine); the rules
// that Bully, the ring and Paxos share (terms, leader tracking, failure
// suspicion) are in pkg/internal/core.
//
// Algorithms are pure state machines. They import neither NATS nor time,
// start no goroutines and do no I/O: the driver feeds them events (Start,
// Tick, Step, Unreachable, Resign) and collects what they want done with
// Ready.
//
// # Terms
//
// Every leadership has a term. Terms are partitioned among the members, so
// that no two different nodes can ever claim the same term, whatever the
// network does. Under Bully, the ring and Paxos, the member at index i of
// the membership sorted in increasing order only ever claims terms t with
// t mod n == (i+1) mod n, where n is the number of members; it claims the
// smallest such term that is larger than every term it has seen, and every
// message carries a term, so a new leader's term is larger than its
// predecessor's whenever the two heard of each other. Under byzantine,
// term t has one designated leader, index (t−1) mod n of the membership
// sorted in decreasing rank (see Ranking members), and a member enters a
// term only on proof (see package byzantine).
//
// A node accepts a leader only with a term at least as large as the one it
// accepted before. Under Bully and the ring it answers an older term with
// a Stale message that tells the sender the newer term, so a leader that
// missed an election (a restarted node, the far side of a healed
// partition) catches up at once.
//
// # Ranking members
//
// Wherever an algorithm asks which of two members is the higher (who
// should lead, who answers or defers to whom, which candidate a ring
// round carries on, which member a byzantine term designates), it
// compares their ranks under Config.Rank. ByID, the zero Rank, ranks by
// ID: the highest live ID leads, as it always has. Spread(cluster) ranks
// by rendezvous hashing of the election's name and the member
// (SpreadScore: the first 8 bytes, big-endian, of
// SHA-256(cluster || 0x00 || ID as 8 bytes big-endian), ties broken by
// the higher ID), so that over many elections the leaders spread evenly
// over the members, and a member that joins takes over only the
// elections where it ranks first. Either way the order is total and the
// same at every member configured alike. Terms stay partitioned by ID
// (above): ranks decide who leads, never who owns a term, except under
// byzantine, where a term's designated leader is its leader.
//
// # What is not guaranteed
//
// Bully and the ring use no quorums. Nodes on both sides of a network
// partition each elect a leader; the two leaders have different terms, and
// the side that reconnects converges on the highest-ranked live member
// with a term larger than both. Applications that must not act on a stale
// leader fence with terms. Paxos and byzantine elect only with a quorum (a
// majority of promises; the signed votes of ⌈(n+f+1)/2⌉ members), so a
// side of a partition without one elects nobody.
package election

import (
	"errors"
	"fmt"
	"slices"

	"github.com/baton-election/baton/pkg/protocol"
)

// Role is a node's part in the election.
type Role int

// The roles.
const (
	// Follower: not in an election; the leader may be known or undefined.
	Follower Role = iota
	// Candidate: taking part in an election (Bully: waiting for Answer or
	// Coordinator; ring: participating).
	Candidate
	// Leader: this node leads.
	Leader
)

// String returns the role as used in /status: follower, candidate, leader.
func (r Role) String() string {
	switch r {
	case Follower:
		return "follower"
	case Candidate:
		return "candidate"
	case Leader:
		return "leader"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// SoftState is a node's view of the election: who leads, in which term,
// its own role. Unlike HardState it is not stored: the machine rebuilds
// it after a restart. The node's answer on /status, built from it and
// the node's configuration, is protocol.Status.
type SoftState struct {
	ID uint64
	// Leader is the leader this node follows or is, 0 while undefined.
	Leader uint64
	// Term is the term of the last leadership this node accepted or
	// claimed, 0 before any.
	Term uint64
	Role Role
	// LeaseUntil is, for a leader that holds a lease (Paxos), the tick of
	// its own clock (counted from Start) at which the lease ends: at and
	// after it, the node must not act as leader. 0 for algorithms without
	// leases.
	LeaseUntil int
}

// HardState is what a node must keep on stable storage: it is restored
// from there when the node restarts (Config.State), so that no term it
// claimed or accepted is ever claimed again or undercut.
type HardState struct {
	// Term is the term of the last leadership the node accepted or claimed.
	Term uint64 `json:"term"`
	// MaxTerm is the highest term the node has seen anywhere; a node only
	// claims terms above it.
	MaxTerm uint64 `json:"max_term"`
	// Acceptor is a Paxos acceptor's state; zero for the other algorithms.
	Acceptor AcceptorState `json:"acceptor,omitzero"`
	// Vote is the last vote a byzantine member cast; zero for the other
	// algorithms. It is stored before the vote is sent, so that a member
	// never votes twice in one term, even across a restart.
	Vote Vote `json:"vote,omitzero"`
	// Proof is, for the byzantine algorithm, the proof of Term (its
	// encoding is the algorithm's: the certificate of Term or the
	// time-out certificate of the term before), so that a member that
	// restarts can still show others why it is in Term. At most
	// MaxProofSize bytes; empty for the other algorithms.
	Proof string `json:"proof,omitempty"`
	// Voters is, for Paxos with dynamic membership, the newest voter
	// configuration the node adopted (as an acceptor, before it answers
	// under it; as a leader, before it proposes it); nil until it adopts
	// one other than Config.Voters.
	Voters *protocol.Voters `json:"voters,omitempty"`
}

// MaxProofSize bounds HardState.Proof.
const MaxProofSize = 64 << 10

// Vote is a member's vote: for leader For in Term.
type Vote struct {
	Term uint64 `json:"term,omitempty"`
	For  uint64 `json:"for,omitempty"`
}

// AcceptorState is what a Paxos acceptor must not forget: the ballot it
// promised, and the last proposal it accepted, which granted its proposer
// a lease (how long ago is not kept: a restarted acceptor that accepted a
// proposal waits a whole lease before it promises anything).
type AcceptorState struct {
	// Promised is the highest ballot promised: no lower ballot is accepted.
	Promised uint64 `json:"promised,omitempty"`
	// Accepted is the ballot of the last proposal accepted, Value the
	// leader it named.
	Accepted uint64 `json:"accepted,omitempty"`
	Value    uint64 `json:"value,omitempty"`
}

// Validate checks a hard state read from storage or learned from others.
func (h HardState) Validate() error {
	a := h.Acceptor
	switch {
	case h.MaxTerm > protocol.MaxTerm:
		return fmt.Errorf("%w: max term %d above the ceiling %d", ErrState, h.MaxTerm, protocol.MaxTerm)
	case h.Term > h.MaxTerm:
		return fmt.Errorf("%w: term %d above max term %d", ErrState, h.Term, h.MaxTerm)
	case a.Promised > h.MaxTerm || a.Accepted > a.Promised:
		return fmt.Errorf("%w: acceptor %+v inconsistent with max term %d", ErrState, a, h.MaxTerm)
	case (a.Accepted == 0) != (a.Value == 0):
		return fmt.Errorf("%w: accepted ballot %d with value %d", ErrState, a.Accepted, a.Value)
	case h.Vote.Term > h.MaxTerm:
		return fmt.Errorf("%w: vote in term %d above max term %d", ErrState, h.Vote.Term, h.MaxTerm)
	case (h.Vote.Term == 0) != (h.Vote.For == 0):
		return fmt.Errorf("%w: vote in term %d for %d", ErrState, h.Vote.Term, h.Vote.For)
	case len(h.Proof) > MaxProofSize:
		return fmt.Errorf("%w: proof of %d bytes, at most %d", ErrState, len(h.Proof), MaxProofSize)
	}
	if h.Voters != nil {
		if err := h.Voters.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrState, err)
		}
	}
	return nil
}

// EventKind names something that happened to a node.
type EventKind int

// The events a machine reports.
const (
	// ElectionStarted: the node entered an election (it became a candidate,
	// or claimed a new term straight away).
	ElectionStarted EventKind = iota + 1
	// LeaderTimedOut: the node's leader (Leader, Term) fell silent for the
	// leader time-out and is now suspected.
	LeaderTimedOut
	// LeaderChanged: the node accepted or claimed a new leadership (Leader,
	// Term).
	LeaderChanged
	// SteppedDown: the node stopped leading (Leader, Term): its lease ran
	// out, or it handed over to a higher node.
	SteppedDown
	// LeaderDisconnected: the node's leader (Leader, Term) was reported
	// down (its connection closed, see Machine.PeerDown) and is no longer
	// followed.
	LeaderDisconnected
	// MemberLied: the node holds proof (two contradicting statements
	// signed by Member) that Member lied; it ignores Member from then on.
	MemberLied
	// LeaderProbed: the node has not heard its leader (Leader, Term) for
	// a while and asked it (protocol.TypeProbe) before suspecting it.
	LeaderProbed
	// ProbeAnswered: the leader (Leader, Term) the node probed was heard
	// again before the leader time-out: nobody is suspected.
	ProbeAnswered
	// LeaderResumed: the node leads again in the term it led before it
	// stepped down (Leader, Term): a Paxos leader whose lease ran out and
	// that a majority accepted again under the same ballot. Not a new
	// leadership: nothing is claimed or announced anew.
	LeaderResumed
	// MemberJoined: with dynamic membership, Member is present (a message
	// of a member the node did not count as present arrived).
	MemberJoined
	// MemberLeft: with dynamic membership, Member is no longer present:
	// it resigned, its connection closed, or nothing came from it for
	// the member time-out (Timing.PresenceTicks·MemberTimeoutFactor).
	MemberLeft
	// MemberAdded: a change of the member set that adds Member became
	// final (the byzantine algorithm's member sets that change); the
	// node uses the new set from the next term it enters.
	MemberAdded
	// MemberRemoved: a change of the member set that removes Member
	// became final.
	MemberRemoved
)

// String names the event kind for logs.
func (k EventKind) String() string {
	switch k {
	case ElectionStarted:
		return "election_started"
	case LeaderTimedOut:
		return "leader_timed_out"
	case LeaderChanged:
		return "leader_changed"
	case SteppedDown:
		return "stepped_down"
	case LeaderDisconnected:
		return "leader_disconnected"
	case MemberLied:
		return "member_lied"
	case LeaderProbed:
		return "leader_probed"
	case ProbeAnswered:
		return "probe_answered"
	case LeaderResumed:
		return "leader_resumed"
	case MemberJoined:
		return "member_joined"
	case MemberLeft:
		return "member_left"
	case MemberAdded:
		return "member_added"
	case MemberRemoved:
		return "member_removed"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// Event is one thing that happened to a node, for its logs and metrics.
type Event struct {
	Kind EventKind
	// Leader and Term name the leadership the event is about (zero for
	// ElectionStarted).
	Leader, Term uint64
	// Member is the member a MemberLied event convicts, or the member a
	// MemberJoined, MemberLeft, MemberAdded or MemberRemoved event is
	// about; 0 otherwise.
	Member uint64
}

// Ready is what a machine asks its driver to do after an event, in this
// order: store State, then send Messages and announce Claimed.
type Ready struct {
	// State, when not nil, is the node's new hard state. It must be on
	// stable storage before any of Messages is sent, Claimed announced or
	// the new status shown: a node that crashes and restarts from it never
	// claims or accepts a term below one it acted on.
	State *HardState
	// Messages are to be sent in order. A message with To == 0 goes to
	// every other member.
	Messages []protocol.Message
	// Claimed is non-zero when this node has just become leader with a new
	// term: the driver announces it on the leader subject.
	Claimed uint64
	// Events are what happened since the last Ready, in order.
	Events []Event
}

// Machine is an election algorithm for one node.
type Machine interface {
	// Start begins the node's life: it starts an election at once, since a
	// node that (re)joins must not trust what it knew before.
	Start()
	// Tick advances the node's clock by one tick.
	Tick()
	// Due is how many ticks from now the next Tick can have an effect: a
	// driver with nothing else to do may sleep that long and then Tick that
	// many times. It is at least 1.
	Due() int
	// Step hands the node a message. Messages must have passed
	// protocol.Validate; messages from the node itself are ignored.
	Step(m protocol.Message)
	// Unreachable tells the node that a peer cannot be reached now (a
	// message to it found nobody listening).
	Unreachable(id uint64)
	// PeerDown tells the node that a peer's connection has closed (its
	// process died or left): for the node's leader, that counts as its
	// heartbeats having stopped.
	PeerDown(id uint64)
	// Resign makes the node leave cleanly: it tells the others, which elect
	// a new leader at once if it led. The machine ignores every later event.
	Resign()
	// Ready returns and clears what the node wants done.
	Ready() Ready
	// Status returns the node's view of the election.
	Status() SoftState
}

// Membership is implemented by a machine that can run with dynamic
// membership (Config.Dynamic).
type Membership interface {
	// Members returns the members the node counts as present, itself
	// included, sorted. The caller must not modify the slice; the
	// machine replaces it, never changes it, when members join or leave.
	Members() []uint64
}

// Skipper is implemented by a machine that can be given, at once, ticks
// that cannot have an effect: a driver that slept until the machine's
// deadline then costs one call, not one per tick slept.
type Skipper interface {
	// Skip advances the machine's clock by n ticks, 0 < n < Due(): it
	// leaves the machine as n calls of Tick would have, which would have
	// sent, reported and stored nothing.
	Skip(n int)
}

// Reasserter is implemented by a machine whose leader can claim again at
// once, out of its heartbeat schedule.
type Reasserter interface {
	// Reassert makes a leader broadcast its heartbeat now; anything else
	// does nothing. The runtime calls it when a member may have missed
	// the leader's claims: its process beats again after it was found
	// silent or its connection closed, it is heard for the first time, or
	// this process's own connection came back. With heartbeats far apart
	// (election.Timing of a process with many elections), the member
	// learns who leads at once rather than at the next heartbeat.
	Reassert()
}

// ArrivalStepper is implemented by a machine whose safety depends on when a
// message really arrived, not only on the order of events: a Paxos
// acceptor counts the lease it grants from the arrival of the Propose.
//
// A driver may hand a machine a message before ticks that fell due before
// the message arrived: the runtime does so when it settles at a deadline
// (what a flush brought is handled before the deadline's tick, so that a
// leader heard there is not timed out at once). It then calls StepAt with
// arrived, the tick of the node's clock (counted as SoftState.LeaseUntil is)
// in which the message arrived; the machine uses the later of arrived and
// its own tick for what must be measured from the arrival, and its own
// tick for the rest. Step(m) is StepAt(m, the machine's current tick).
type ArrivalStepper interface {
	StepAt(m protocol.Message, arrived int)
}

// ErrVotersRefused is matched (errors.Is) by a machine's refusal to change
// its voters now that another node or a later request may not meet: this
// node does not lead, or a change is under way. The runtime answers it
// with a conflict, not a bad request.
var ErrVotersRefused = errors.New("election: the voters cannot change now")

// StepAt hands m to machine, arrived in tick arrived of the node's clock,
// with StepAt if machine implements ArrivalStepper, else with Step.
func StepAt(machine Machine, m protocol.Message, arrived int) {
	if a, ok := machine.(ArrivalStepper); ok {
		a.StepAt(m, arrived)
		return
	}
	machine.Step(m)
}

// Timing holds an algorithm's time-outs, in ticks.
type Timing struct {
	// HeartbeatTicks is how often a leader broadcasts a heartbeat.
	HeartbeatTicks int
	// QuietHeartbeatTicks, if not zero, is how often a leader broadcasts
	// a heartbeat once it has sent QuietAfter of them since it last
	// claimed: a leadership that holds goes quiet, and one just claimed,
	// whose claim a member may have missed, is repeated often. Bully and
	// the ring use it; algorithms whose heartbeats renew leases do not
	// allow it.
	QuietHeartbeatTicks int
	// QuietGrid, if not zero, aligns a quiet leader's heartbeats (those
	// every QuietHeartbeatTicks) on a grid: each is sent in the last tick
	// k, no later than its interval's end, where k + QuietPhase is a
	// multiple of QuietGrid, so that two are between QuietHeartbeatTicks
	// - QuietGrid + 1 and QuietHeartbeatTicks ticks apart. The elections
	// of one process whose ticks share the grid's phase (node.Group) send
	// their quiet heartbeats in the same ticks, which leave together in
	// one batch. At most half QuietHeartbeatTicks.
	QuietGrid, QuietPhase int
	// LeaderTimeoutTicks is how long a follower waits without hearing its
	// leader (or any leader, while undefined) before it starts an election.
	LeaderTimeoutTicks int
	// ColdStartTicks is how long a Bully node that has just started, and
	// found and heard no leader, waits for one before it leads: the others
	// may still be starting. LeaderTimeoutTicks if zero.
	ColdStartTicks int
	// AnswerTicks is T = 2·t_max + t_process: how long a Bully candidate
	// waits for an Answer, and how long the ring waits for an Ack before it
	// skips a successor.
	AnswerTicks int
	// CoordinatorTicks is how long a Bully candidate that got an Answer
	// waits for a Coordinator, and how long a ring participant waits for
	// the elected round, before it starts again.
	CoordinatorTicks int
	// LeaseTicks is how long a Paxos acceptor holds the lease it grants by
	// accepting a proposal, counted on its own clock from when the
	// proposal arrived. Only Paxos uses it.
	LeaseTicks int
	// LeaderLeaseTicks is how long a Paxos leader counts on that lease,
	// counted on its own clock from when it sent the proposal: short enough
	// (LeaderLease) that it ends, in real time, before any acceptor's grant
	// does, whatever the clocks' rates within the drift bound.
	LeaderLeaseTicks int
	// PresenceTicks is, with dynamic membership, how often a member that
	// has broadcast nothing else says it is present. A member heard from
	// for no message for MemberTimeoutFactor times as long is no longer
	// counted as present. Only dynamic membership uses it.
	PresenceTicks int
}

// QuietAfter is how many heartbeats a leader sends every HeartbeatTicks
// after it claimed before it sends them every QuietHeartbeatTicks.
const QuietAfter = 10

// MemberTimeoutFactor: with dynamic membership, a member from which no
// message arrived for this many presence intervals has left (it hangs,
// or its departure was missed).
const MemberTimeoutFactor = 4

// DefaultPresenceTicks is the default presence interval: 1 s in ticks of
// 10 ms. A member that dies or leaves is seen gone at once (its
// connection closes, or it resigns); the interval bounds how long a hung
// member that does not lead stays counted, 4 s with the default.
const DefaultPresenceTicks = 100

// MaxDynamicMembers bounds how many members a node of a cluster with
// dynamic membership counts as present: a member heard beyond it is
// not counted until another leaves.
const MaxDynamicMembers = 1024

// MaxLeaderTimeoutFactor bounds how far Bully and the ring raise their
// leader time-out when a leader they timed out proves to have been alive:
// to this many times LeaderTimeoutTicks. A cluster whose nodes raised it
// replaces a failed leader that much later.
const MaxLeaderTimeoutFactor = 4

// MaxAdaptiveTimeoutFactor bounds how far a follower raises its leader
// time-out after the arrivals of its leader's messages (the spread of the
// last gaps and the longest recent one): to this many times
// LeaderTimeoutTicks, 3.2 s with the defaults. On a quiet host the
// arrivals keep the time-out at LeaderTimeoutTicks; on a host that
// stalls for seconds at a time, a hung leader is replaced after at most
// this bound (and T), instead of a live one being replaced at every
// stall.
const MaxAdaptiveTimeoutFactor = 16

// StaleTicks is how many ticks old a message a driver catching up after a
// stall may still send: those the machine produced for earlier ticks are
// out of date, and dropped.
const StaleTicks = 3

// DefaultLeaseTicks is the default Paxos lease of clusters of up to 25
// members: 200 ms in ticks of 10 ms (DefaultLease gives larger clusters
// more).
const DefaultLeaseTicks = 20

// DefaultLease is the default Paxos lease, in ticks, for a cluster of n
// members: DefaultLeaseTicks, or 0.8 tick (8 ms) per member above 25
// members. A leader renews its lease with a broadcast whose acceptances,
// one from each member, must reach it from a majority within the lease:
// on a machine shared by 101 nodes that takes several hundred
// milliseconds, and with 200 ms leaders lost their lease as soon as they
// won it.
func DefaultLease(n int) int { return max(DefaultLeaseTicks, n*4/5) }

// DefaultMaxDrift is the default bound on how much the rate of any node's
// clock may differ from real time: 5%, far above what clocks drift by
// (tens of parts per million), so that only the bound, not the clocks, can
// be wrong.
const DefaultMaxDrift = 0.05

// LeaderLease is the Paxos leader's share of a lease of lease ticks when
// clock rates may differ from real time by up to drift (a fraction): with
// a leader clock that runs slow by drift and an acceptor clock that runs
// fast by drift, L_leader/(1-drift) <= L_acceptor/(1+drift), less one tick
// for the leader's clock being read in whole ticks. At most 0 means the
// lease is too short for that drift.
func LeaderLease(lease int, drift float64) int {
	return int(float64(lease)*(1-drift)/(1+drift)) - 1
}

// Config configures one node's machine.
type Config struct {
	// ID is this node's ID; it must be one of Members.
	ID uint64
	// Members are the IDs of every member, this node included, in any
	// order. Every member must be configured with the same set.
	Members []uint64
	Timing  Timing
	// State is the hard state the node restarts from: what it stored
	// before it stopped, raised by what it has learned since (the term of
	// the last announcement kept by the cluster). The zero value is a node
	// that never ran.
	State HardState
	// Restored tells that State was read from this node's own stable
	// storage, written by an earlier run; false for a node whose storage
	// is new (it may be a replacement that lost it), which therefore
	// cannot know what it promised or granted before.
	Restored bool
	// Incarnation identifies this run of the node, as its messages carry
	// it (protocol.Message.Inc): Paxos tells a leader from another process
	// with its ID by it. Zero when unknown.
	Incarnation uint64
	// Dynamic makes the membership dynamic: the members are those present,
	// as their messages show (protocol.TypePresence), and Members lists
	// only those known at start (at least ID). Terms are partitioned by
	// ID (protocol.MaxMemberID) instead of by position in Members, so that
	// they stay unique whoever joins or leaves. Every ID must be
	// protocol.DynamicMember.
	Dynamic bool
	// Voters are, with Dynamic and Paxos, the members whose acceptors
	// form the quorums (a majority of them decides); every other member
	// is a candidate that may lead but does not vote. They need not be
	// present, nor include ID. Empty without Dynamic: every member votes.
	Voters []uint64
	// KeepLeader, with Dynamic, makes a node that joins follow the leader
	// it finds whatever their ranks, and a follower never challenge a
	// lower leader: the leader is kept until it leaves, and then the
	// highest-ranked present member leads. Without it a node that joins
	// ranked above the leader takes over, as a node that recovers does.
	KeepLeader bool
	// Rank orders the members in the election (see Ranking members in
	// the package doc): the zero value ranks by ID. Every member must be
	// configured with the same Rank. Where the comments of this package
	// and of the algorithms speak of a higher or the highest member, they
	// mean by this rank.
	Rank Rank
	// Found is the leadership the node found when it started: the answer
	// of the cluster's leader to a query (the runtime asks before it
	// starts the machine), so a leader that was alive a moment ago. Zero
	// if none answered. A node that ranks lower follows it at once: the
	// election it would hold would end with that leader (the
	// highest-ranked live member wins), at the cost of a broadcast and of
	// an answer from every higher node.
	Found Leadership
}

// Leadership is a leader and the term it leads under.
type Leadership struct {
	Leader, Term uint64
}

// Errors of Config.Validate and HardState.Validate.
var (
	ErrMembers = errors.New("election: invalid members")
	ErrTiming  = errors.New("election: invalid timing")
	ErrState   = errors.New("election: invalid hard state")
)

// Validate checks a configuration and returns the sorted membership.
func (c Config) Validate() ([]uint64, error) {
	if len(c.Members) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMembers)
	}
	members := slices.Clone(c.Members)
	slices.Sort(members)
	for i, id := range members {
		if id == 0 {
			return nil, fmt.Errorf("%w: IDs must be positive", ErrMembers)
		}
		if i > 0 && members[i-1] == id {
			return nil, fmt.Errorf("%w: %d appears twice", ErrMembers, id)
		}
	}
	if _, ok := slices.BinarySearch(members, c.ID); !ok {
		return nil, fmt.Errorf("%w: own ID %d is not a member", ErrMembers, c.ID)
	}
	if c.Dynamic {
		if last := members[len(members)-1]; !protocol.DynamicMember(last) {
			return nil, fmt.Errorf("%w: ID %d above %d, the largest of dynamic membership", ErrMembers, last, protocol.MaxMemberID)
		}
		if len(members) > MaxDynamicMembers {
			return nil, fmt.Errorf("%w: %d members, at most %d", ErrMembers, len(members), MaxDynamicMembers)
		}
		if c.Timing.PresenceTicks < 1 {
			return nil, fmt.Errorf("%w: the presence interval must be at least one tick: %+v", ErrTiming, c.Timing)
		}
		if err := validVoters(c.Voters); err != nil {
			return nil, err
		}
	} else if c.KeepLeader || len(c.Voters) > 0 {
		return nil, fmt.Errorf("%w: voters and keeping the leader need dynamic membership", ErrMembers)
	}
	t := c.Timing
	switch {
	case t.HeartbeatTicks < 1, t.LeaderTimeoutTicks < 1, t.AnswerTicks < 1, t.CoordinatorTicks < 1:
		return nil, fmt.Errorf("%w: every time-out must be at least one tick: %+v", ErrTiming, t)
	case t.LeaderTimeoutTicks <= t.HeartbeatTicks:
		return nil, fmt.Errorf("%w: leader time-out (%d ticks) must exceed the heartbeat interval (%d ticks)", ErrTiming, t.LeaderTimeoutTicks, t.HeartbeatTicks)
	case t.ColdStartTicks < 0:
		return nil, fmt.Errorf("%w: negative cold start: %+v", ErrTiming, t)
	case t.QuietHeartbeatTicks != 0 && (t.QuietHeartbeatTicks < t.HeartbeatTicks || t.LeaderTimeoutTicks <= t.QuietHeartbeatTicks):
		return nil, fmt.Errorf("%w: the quiet heartbeat interval (%d ticks) must be at least the heartbeat interval (%d) and below the leader time-out (%d)", ErrTiming, t.QuietHeartbeatTicks, t.HeartbeatTicks, t.LeaderTimeoutTicks)
	case t.QuietGrid < 0 || t.QuietPhase < 0 || t.QuietGrid > 0 && 2*t.QuietGrid > t.QuietHeartbeatTicks:
		return nil, fmt.Errorf("%w: the quiet heartbeats' grid (%d ticks, phase %d) must be at most half their interval (%d)", ErrTiming, t.QuietGrid, t.QuietPhase, t.QuietHeartbeatTicks)
	case t.LeaseTicks < 0 || t.LeaderLeaseTicks < 0:
		return nil, fmt.Errorf("%w: negative lease: %+v", ErrTiming, t)
	case t.LeaseTicks > 0 && (t.LeaderLeaseTicks >= t.LeaseTicks || t.LeaderLeaseTicks <= t.HeartbeatTicks):
		return nil, fmt.Errorf("%w: the leader's lease (%d ticks) must be shorter than the acceptors' (%d) and longer than the heartbeat interval (%d)", ErrTiming, t.LeaderLeaseTicks, t.LeaseTicks, t.HeartbeatTicks)
	}
	if err := c.State.Validate(); err != nil {
		return nil, err
	}
	return members, nil
}

// The default timing, in ticks of 10 ms: a heartbeat every 100 ms, a
// leader suspected after 200 ms of silence, and T = 2·t_max + t_process
// with a largest transmission time t_max of 2 ticks and a largest
// processing time t_process of 1 tick. A Paxos leader renews its lease
// every 50 ms instead (DefaultRenewalTicks): its lease must outlast a
// renewal that comes late. (A heartbeat every 50 ms cost each idle
// follower twice the CPU, about 0.8% of a core here, for a failure
// detection that the time-out, not the heartbeat interval, bounds.)
const (
	DefaultHeartbeatTicks     = 10
	DefaultRenewalTicks       = 5
	DefaultLeaderTimeoutTicks = 20
	DefaultAnswerTicks        = 5
)

// DefaultLeaseTiming is DefaultTiming for an algorithm with leases
// (Paxos): its heartbeats are lease renewals, every DefaultRenewalTicks.
func DefaultLeaseTiming(n int) Timing {
	t := DefaultTiming(n)
	t.HeartbeatTicks = DefaultRenewalTicks
	return t
}

// DefaultTiming is the timing for a cluster of n members. CoordinatorTicks
// is (n+1)·T: long enough for a ring message to pass every member, skipping
// each dead one after T, and for a Bully election to run its course.
func DefaultTiming(n int) Timing {
	return Timing{
		HeartbeatTicks:     DefaultHeartbeatTicks,
		LeaderTimeoutTicks: DefaultLeaderTimeoutTicks,
		AnswerTicks:        DefaultAnswerTicks,
		CoordinatorTicks:   (max(n, 1) + 1) * DefaultAnswerTicks,
		LeaseTicks:         DefaultLease(n),
		LeaderLeaseTicks:   LeaderLease(DefaultLease(n), DefaultMaxDrift),
		PresenceTicks:      DefaultPresenceTicks,
	}
}

// validVoters checks a voter set of dynamic membership: IDs of
// protocol.DynamicMember, each once, at most MaxVoters of them.
func validVoters(voters []uint64) error {
	if len(voters) > MaxVoters {
		return fmt.Errorf("%w: %d voters, at most %d", ErrMembers, len(voters), MaxVoters)
	}
	sorted := slices.Clone(voters)
	slices.Sort(sorted)
	for i, id := range sorted {
		if !protocol.DynamicMember(id) {
			return fmt.Errorf("%w: voter %d outside 1..%d", ErrMembers, id, protocol.MaxMemberID)
		}
		if i > 0 && sorted[i-1] == id {
			return fmt.Errorf("%w: voter %d appears twice", ErrMembers, id)
		}
	}
	return nil
}

// MaxVoters bounds the voters of a dynamic Paxos cluster: every renewal
// waits for a majority of them, and carries them.
const MaxVoters = protocol.MaxVoters
