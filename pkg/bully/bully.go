// Package bully implements the Bully election algorithm as a pure state
// machine (see package election for the interface, terms and guarantees).
//
// The rules, from the reference notes:
//
//   - A node that suspects the leader (its heartbeats stopped), that starts
//     or restarts, or whose leader resigned, holds an election: it sends
//     Election to every higher ID (a broadcast; lower IDs do not act on it).
//   - A node that receives Election from a lower ID answers with Answer and
//     holds its own election, unless it already is in one. A leader answers
//     and re-asserts itself with Coordinator.
//   - A candidate that gets no Answer within T = 2·t_max + t_process (the
//     AnswerTicks of election.Timing) becomes leader and broadcasts
//     Coordinator. One that got an Answer but no Coordinator within
//     CoordinatorTicks starts again.
//   - A node that recovers, or a replacement with the same ID, starts an
//     election at once even if the coordinator is working; if its ID is the
//     highest live one it takes over.
//
// Two refinements keep failover fast without changing the outcome: a
// candidate none of whose higher members can be alive (each resigned, or
// was the leader whose heartbeats stopped) does not wait T for Answers that
// cannot come; and a node that has just started always waits T, so that it
// hears the cluster's current term before it claims a newer one.
package bully

import (
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Machine is one node running Bully. It implements election.Machine.
type Machine struct {
	c        *election.Core
	answered bool // a higher node answered our current election
	wait     int  // ticks left in the candidate's current wait
}

var _ election.Machine = (*Machine)(nil)

// New returns a node that has not started yet.
func New(cfg election.Config) (*Machine, error) {
	c, err := election.NewCore(cfg)
	if err != nil {
		return nil, err
	}
	return &Machine{c: c}, nil
}

// Start holds an election at once, as a recovered node must.
func (m *Machine) Start() {
	if !m.c.Left() {
		m.elect(true, true)
	}
}

// Tick advances the node's clock.
func (m *Machine) Tick() {
	if m.c.Left() {
		return
	}
	switch m.c.Role() {
	case election.Leader:
		m.c.TickLeader()
	case election.Follower:
		if m.c.TickFollower() {
			m.elect(false, true)
		}
	case election.Candidate:
		m.wait--
		if m.wait > 0 {
			return
		}
		if m.answered {
			// Answered, but no Coordinator came: start again.
			m.elect(false, true)
		} else {
			// Nobody higher answered within T.
			m.lead()
		}
	}
}

// Step handles a message.
func (m *Machine) Step(msg protocol.Message) {
	if !m.c.Receive(msg) {
		return
	}
	id := m.c.ID()
	switch msg.Type {
	case protocol.TypeElection:
		if msg.From > id {
			// A higher node's election: it needs no Answer, but it may
			// have just started and not know the current term.
			if msg.Term < m.c.Term() {
				m.c.ReplyStale(msg.From)
			}
			return
		}
		m.c.Send(protocol.Message{Type: protocol.TypeAnswer, To: msg.From, Term: m.c.MaxTerm()})
		switch m.c.Role() {
		case election.Leader:
			m.lead()
		case election.Follower:
			m.elect(false, false)
		}
	case protocol.TypeAnswer:
		if m.c.Role() == election.Candidate && msg.From > id {
			m.answered = true
			m.wait = m.c.Timing().CoordinatorTicks
		}
	case protocol.TypeCoordinator, protocol.TypeHeartbeat:
		if m.c.Claimed(msg.From, msg.From, msg.Term) == election.Challenged && m.c.Role() != election.Candidate {
			m.elect(false, true)
		}
	case protocol.TypeResign:
		if m.c.Resigned(msg) {
			m.elect(false, true)
		}
	case protocol.TypeStale:
		if m.c.Staled(msg) {
			m.lead()
		}
	}
}

// Unreachable records that a peer cannot be reached.
func (m *Machine) Unreachable(id uint64) {
	if !m.c.Left() {
		m.c.MarkGone(id)
	}
}

// Resign leaves the cluster cleanly.
func (m *Machine) Resign() { m.c.Leave() }

// Ready returns and clears what the node wants done.
func (m *Machine) Ready() election.Ready { return m.c.Ready() }

// Status returns the node's view.
func (m *Machine) Status() election.Status { return m.c.Status() }

// elect holds an election: Election to every higher ID, then wait for an
// Answer. fresh marks a node that has just started; forget, one whose
// leader failed or left.
func (m *Machine) elect(fresh, forget bool) {
	m.c.BecomeCandidate(forget)
	m.answered = false
	m.wait = m.c.Timing().AnswerTicks
	m.c.Send(protocol.Message{Type: protocol.TypeElection, Term: m.c.MaxTerm()})
	if !fresh && !m.c.HigherAlive() {
		m.lead()
	}
}

// lead makes this node leader (or re-asserts it) and broadcasts Coordinator.
func (m *Machine) lead() {
	term := m.c.Claim()
	m.answered = false
	m.c.Send(protocol.Message{Type: protocol.TypeCoordinator, Term: term})
}
