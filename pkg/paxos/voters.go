package paxos

import (
	"errors"
	"fmt"
	"slices"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Voters that change (dynamic membership). The voters are a
// configuration (protocol.Voters) that every proposal carries and that
// changes through the protocol itself, in two steps, as joint consensus
// does:
//
//  1. The leader, asked to move from the voters O to N (ChangeVoters),
//     adopts the joint configuration J = {O, next N}, one version up,
//     and proposes it with its renewals. A round under J counts only
//     when a majority of O and a majority of N accepted it.
//  2. Once a round under J has been accepted so, J is chosen, and the
//     leader adopts {N}, one more version up, and proposes it; a
//     majority of N then decides. A leader that finds itself under a
//     joint configuration, whoever started it, does the same.
//
// A node adopts every configuration newer than its own that a message
// carries (higher version, or the same version under a higher ballot),
// and stores it before it answers under it. A Promise carries the
// acceptor's configuration, so a candidate counts its promises under
// the newest one they report. An acceptor also refuses a Prepare or a
// Propose that carries an older configuration than its own, with a Nack
// carrying its own, so that the proposer learns it at once.
//
// Why there are never two leaders across a change: a leader's lease
// rests on the grants of a quorum of the configuration its round was
// proposed under. A candidate needs the promises of a quorum of its own
// configuration, and every configuration a candidate may hold shares an
// acceptor with every quorum that chose a newer one: J was chosen by
// majorities of O and of N, and {N} by a majority of N. A candidate
// still under O meets an acceptor of O that adopted J and refuses it; a
// candidate under J meets an acceptor of N that adopted {N}; so a
// candidate can only count promises under the newest chosen
// configuration (or the joint one that leads to it), whose quorums
// share an acceptor with the quorum that holds the leader's grant, and
// that acceptor promises nothing while the grant may be valid. A leader
// adopts a configuration from the promises of its Phase 1, so a change
// chosen under an earlier leader is carried on, never replaced by
// another of the same version; and a leader whose ballot is older than
// the one a configuration was chosen under has its proposals refused
// for their ballot.

// Errors of ChangeVoters.
var (
	ErrNotDynamic           = errors.New("paxos: the voters change only with dynamic membership")
	ErrNotLeader      error = refusal("paxos: only the leader changes the voters")
	ErrVotersChanging error = refusal("paxos: a change of the voters is under way")
)

// refusal is an error of ChangeVoters that another node or a later
// request may not meet: it matches election.ErrVotersRefused.
type refusal string

func (r refusal) Error() string { return string(r) }

func (r refusal) Is(target error) bool { return target == election.ErrVotersRefused }

// startVoters is the voter configuration a node of dynamic membership
// starts with: the one it stored, if newer than the configured voters
// (version 0), else those.
func startVoters(cfg election.Config) (*protocol.Voters, error) {
	if len(cfg.Voters) == 0 {
		return nil, errNoVoters
	}
	v0 := &protocol.Voters{Voters: slices.Sorted(slices.Values(cfg.Voters))}
	if err := v0.Validate(); err != nil {
		return nil, fmt.Errorf("paxos: %w", err)
	}
	if cfg.State.Voters.Newer(v0) {
		return cfg.State.Voters, nil
	}
	return v0, nil
}

// Voters is the voter configuration this node holds: nil with a static
// membership.
func (m *Machine) Voters() *protocol.Voters { return m.cfg }

// adopt takes c, a configuration a message carried, if it is newer than
// this node's; the next Ready stores it.
func (m *Machine) adopt(c *protocol.Voters) {
	if m.cfg == nil || !c.Newer(m.cfg) {
		return
	}
	m.cfg = clone(c)
}

// stale reports whether c, the configuration a Prepare or a Propose
// carries, is older than this node's: the acceptor refuses it.
func (m *Machine) stale(c *protocol.Voters) bool {
	return m.cfg != nil && m.cfg.Newer(c)
}

// ChangeVoters starts moving the voters to voters (IDs of dynamic
// membership, 1 to protocol.MaxVoters of them). Only a leader that
// holds its lease does, and only when no change is under way; the
// change is done when its renewals under the new voters are accepted by
// a majority of them (Voters then shows them, not joint).
func (m *Machine) ChangeVoters(voters []uint64) error {
	switch {
	case m.cfg == nil:
		return ErrNotDynamic
	case m.c.Left() || m.phase != leading || m.resuming:
		return ErrNotLeader
	case m.cfg.Joint():
		return ErrVotersChanging
	}
	if len(voters) == 0 {
		return errors.New("paxos: no voters")
	}
	next := slices.Sorted(slices.Values(voters))
	target := &protocol.Voters{Version: m.cfg.Version + 1, Ballot: m.ballot, Voters: m.cfg.Voters, Next: next}
	if err := target.Validate(); err != nil {
		return fmt.Errorf("paxos: %w", err)
	}
	if slices.Equal(next, m.cfg.Voters) {
		return nil
	}
	m.cfg = target
	m.propose() // at once: the change rides on the renewals
	return nil
}

// chosen moves a leader on once a round under its joint configuration
// was accepted by a quorum of it: the joint configuration is chosen, and
// the leader proposes the new voters alone.
func (m *Machine) chosen(c *protocol.Voters) {
	if c == nil || !c.Joint() || c != m.cfg || m.phase != leading {
		return
	}
	m.cfg = &protocol.Voters{Version: c.Version + 1, Ballot: m.ballot, Voters: c.Next}
	m.propose()
}

func clone(c *protocol.Voters) *protocol.Voters {
	d := *c
	d.Voters = slices.Clone(c.Voters)
	d.Next = slices.Clone(c.Next)
	return &d
}
