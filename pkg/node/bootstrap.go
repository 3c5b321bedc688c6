package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/core"
	"github.com/baton-election/baton/pkg/protocol"
)

// TermSource is what a starting node can ask its cluster: the live
// leader's answer to a query, and the last announcement kept by a stream.
// natstransport.Cluster asks over NATS; the in-memory network's endpoints
// ask each other.
type TermSource interface {
	Leader(ctx context.Context) (protocol.Announcement, error)
	LastAnnounced(ctx context.Context) (protocol.Announcement, error)
}

// Learned is what a node learns of its cluster as it starts.
type Learned struct {
	// Leader and Term are the live leader that answered the query and its
	// term, zero if none answered.
	Leader, Term uint64
	// Last is the term of the last announcement kept by a stream, 0 if
	// none.
	Last uint64
}

// MaxTerm is the highest term learned.
func (l Learned) MaxTerm() uint64 { return max(l.Term, l.Last) }

// Bounded is l without what lies above limit: a leader whose term is above
// it is forgotten, a last announced term above it is cut to it.
func (l Learned) Bounded(limit uint64) Learned {
	if l.Term > limit {
		l.Leader, l.Term = 0, 0
	}
	l.Last = min(l.Last, limit)
	return l
}

// Learn asks src for the current leader and for the last announcement,
// both at once, within timeout. What is not known by then is zero, and
// the error says why.
func Learn(ctx context.Context, src TermSource, timeout time.Duration) (Learned, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		a   protocol.Announcement
		err error
	}
	fromStream := make(chan result, 1)
	go func() {
		a, err := src.LastAnnounced(ctx)
		if err != nil {
			err = fmt.Errorf("no last announcement from a stream: %w", err)
			a = protocol.Announcement{}
		}
		fromStream <- result{a, err}
	}()
	a, err := src.Leader(ctx)
	if err != nil {
		err = fmt.Errorf("no answer from a leader: %w", err)
		a = protocol.Announcement{}
	}
	s := <-fromStream
	return Learned{Leader: a.Leader, Term: a.Term, Last: s.a.Term}, errors.Join(err, s.err)
}

// Start is what a node's machine starts from.
type Start struct {
	// State is the hard state, with what the cluster said.
	State election.HardState
	// Incarnation is the new process's incarnation, taken at At on the
	// wall clock.
	Incarnation uint64
	At          time.Time
	// Found is the live leader to follow, zero if none (or this node).
	Found election.Leadership
}

// Bootstrap combines the stored state (saved, with the incarnation of the
// process that wrote it) and what the cluster said into what node id's
// machine starts from at now. What the cluster says moves the terms no
// further than one member's messages may (core.TermBurst): an
// announcement or an answer is a member's word too, and one near the
// ceiling would leave this node no term to claim. It catches up from the
// messages if it is behind. The incarnation is the time in nanoseconds,
// and above the stored one whatever the clock says.
func Bootstrap(saved election.HardState, savedIncarnation uint64, learned Learned, id uint64, now time.Time) Start {
	learned = learned.Bounded(saved.MaxTerm + core.TermBurst)
	st := Start{State: saved, At: now}
	st.State.MaxTerm = max(saved.MaxTerm, learned.MaxTerm())
	st.Incarnation = max(uint64(now.UnixNano()), savedIncarnation+1)
	if learned.Leader != id {
		st.Found = election.Leadership{Leader: learned.Leader, Term: learned.Term}
	}
	return st
}
