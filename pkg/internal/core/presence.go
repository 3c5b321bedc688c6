package core

import (
	"slices"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Presence is the membership of a node with dynamic membership: the
// members it counts as present, itself included. A member joins when a
// message of it arrives and leaves when it resigns, when its connection
// closes, or when nothing came from it for the member time-out
// (election.MemberTimeoutFactor presence intervals). It is pure: the
// caller passes its clock.
type Presence struct {
	self    uint64
	limit   uint64 // the member time-out, in ticks
	heard   map[uint64]presenceOf
	members []uint64 // sorted, self included; replaced on each change
	// next is the earliest tick at which a member may time out; 0 when
	// no member is counted.
	next uint64
}

// presenceOf is what a node knows of a present member: when it last
// heard it, the incarnation it heard last, and whether it answered that
// incarnation's presence broadcast.
type presenceOf struct {
	at       uint64
	inc      uint64
	answered bool
}

// NewPresence returns the membership of node self, which counts known
// (the members known at start, self included or not) as present from
// tick now.
func NewPresence(self uint64, known []uint64, t election.Timing, now uint64) *Presence {
	p := &Presence{
		self:  self,
		limit: uint64(election.MemberTimeoutFactor * t.PresenceTicks),
		heard: make(map[uint64]presenceOf),
	}
	for _, id := range known {
		if id != self && len(p.heard) < election.MaxDynamicMembers-1 {
			p.heard[id] = presenceOf{at: now}
		}
	}
	p.rebuild()
	if len(p.heard) > 0 {
		p.next = now + p.limit
	}
	return p
}

// Members returns the present members, self included, sorted. The slice
// is replaced, never changed, when members join or leave.
func (p *Presence) Members() []uint64 { return p.members }

// Present reports whether id counts as present.
func (p *Presence) Present(id uint64) bool {
	_, ok := p.heard[id]
	return ok || id == p.self
}

// Heard records a message of member id's incarnation inc that arrived in
// tick now (one that arrived earlier but is handed over later does not
// move it back).
// It reports whether id joined (it was not present), and, for a
// broadcast, whether this node must answer it with its presence: the
// first broadcast of each incarnation is answered, so that a member that
// joins, or restarts, learns who is present at once. A member heard
// while MaxDynamicMembers are present is not counted.
func (p *Presence) Heard(id, inc, now uint64, broadcast bool) (joined, answer bool) {
	if id == p.self || id == 0 {
		return false, false
	}
	m, ok := p.heard[id]
	if !ok && len(p.heard) >= election.MaxDynamicMembers-1 {
		return false, false
	}
	if m.inc != inc {
		m.inc, m.answered = inc, false
	}
	m.at = max(m.at, now) // a message handed over late may come before one that arrived earlier
	if broadcast && !m.answered {
		m.answered, answer = true, true
	}
	p.heard[id] = m
	if p.next == 0 {
		p.next = now + p.limit
	}
	if !ok {
		p.rebuild()
	}
	return !ok, answer
}

// Left records that member id left and reports whether it was present.
func (p *Presence) Left(id uint64) bool {
	if _, ok := p.heard[id]; !ok {
		return false
	}
	delete(p.heard, id)
	p.rebuild()
	return true
}

// Expire removes the members not heard for the member time-out as of
// tick now, and returns them in increasing order.
func (p *Presence) Expire(now uint64) []uint64 {
	if p.next == 0 || now < p.next {
		return nil
	}
	var gone []uint64
	p.next = 0
	for id, m := range p.heard {
		switch due := m.at + p.limit; {
		case now >= due:
			gone = append(gone, id)
			delete(p.heard, id)
		case p.next == 0 || due < p.next:
			p.next = due
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		p.rebuild()
	}
	return gone
}

// Due is how many ticks from now until a member may time out; 1<<30
// when none is counted.
func (p *Presence) Due(now uint64) int {
	if p.next == 0 {
		return 1 << 30
	}
	if p.next <= now {
		return 1
	}
	return int(min(p.next-now, 1<<30))
}

// rebuild replaces the sorted member list after a change.
func (p *Presence) rebuild() {
	members := make([]uint64, 0, len(p.heard)+1)
	members = append(members, p.self)
	for id := range p.heard {
		members = append(members, id)
	}
	slices.Sort(members)
	p.members = members
	if len(p.heard) == 0 {
		p.next = 0
	}
}

// Dynamic reports whether the membership is dynamic.
func (c *Core) Dynamic() bool { return c.presence != nil }

// KeepLeader reports whether, with dynamic membership, the current
// leader is kept until it leaves (election.Config.KeepLeader).
func (c *Core) KeepLeader() bool { return c.keepLeader }

// Members returns the members, this node included, sorted: the
// configured ones, or with dynamic membership those present. The caller
// must not modify the slice.
func (c *Core) Members() []uint64 { return c.members }

// Announce broadcasts, with dynamic membership, that this node is
// present: a node that starts does so at once, so that the others count
// it and answer with their own presence.
func (c *Core) Announce() {
	if c.presence != nil && !c.left {
		c.Send(protocol.Message{Type: protocol.TypePresence, Term: c.maxTerm})
	}
}

// tickPresence advances the membership's clock (c.now has been counted):
// members not heard for the member time-out leave, and a node that has
// broadcast nothing for a presence interval says it is present.
func (c *Core) tickPresence() {
	if c.presence == nil || c.left {
		return
	}
	for _, id := range c.presence.Expire(c.now) {
		c.membersChanged(election.MemberLeft, id)
	}
	c.sincePresence++
	if c.sincePresence >= c.timing.PresenceTicks {
		c.Announce()
	}
}

// PresenceDue is how many ticks until the membership's clock can have an
// effect (a presence to broadcast, a member to time out); 1<<30 without
// dynamic membership.
func (c *Core) PresenceDue() int {
	if c.presence == nil || c.left {
		return 1 << 30
	}
	return max(1, min(c.timing.PresenceTicks-c.sincePresence, c.presence.Due(c.now)))
}

// MemberLeft records, with dynamic membership, that member id left (it
// resigned: a Paxos node's own Resign handling calls it).
func (c *Core) MemberLeft(id uint64) { c.memberLeft(id) }

// memberLeft records, with dynamic membership, that member id left.
func (c *Core) memberLeft(id uint64) {
	if c.presence != nil && c.presence.Left(id) {
		c.membersChanged(election.MemberLeft, id)
	}
}

// membersChanged takes the new member list and reports the change.
func (c *Core) membersChanged(kind election.EventKind, id uint64) {
	c.members = c.presence.Members()
	c.index, _ = slices.BinarySearch(c.members, c.id)
	c.ranked()
	c.events = append(c.events, election.Event{Kind: kind, Member: id})
}

// CoordinatorTicks is how long a candidate that was answered waits for
// the winner's claim, and how long a Paxos ballot may stall before the
// candidate starts another: Timing.CoordinatorTicks, and with dynamic
// membership at least (n+1)·T for the n members present now, as
// election.DefaultTiming gives a static cluster of n.
func (c *Core) CoordinatorTicks() int {
	if c.presence == nil {
		return c.timing.CoordinatorTicks
	}
	return max(c.timing.CoordinatorTicks, (len(c.members)+1)*c.timing.AnswerTicks)
}

// AskReclaim is for a node that keeps the leader (KeepLeader) and
// cannot follow the leader it found as it started because its own term,
// from its disk, is above the found one: it asks that leader to claim
// again above it (a Stale, on which a leader claims above the newer
// term) instead of holding an election that it would win by its ID. It
// reports whether it asked.
func (c *Core) AskReclaim() bool {
	f := c.found
	if !c.keepLeader || c.left || f.Leader == 0 || f.Leader == c.id || f.Term >= c.term {
		return false
	}
	c.Send(protocol.Message{Type: protocol.TypeStale, To: f.Leader, Term: c.term})
	return true
}
