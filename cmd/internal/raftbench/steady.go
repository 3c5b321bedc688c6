package raftbench

import (
	"context"
	"fmt"
	"time"
)

// MaxSteady bounds the quiet window of MeasureSteady.
const MaxSteady = time.Hour

// Steady is what a cluster showed over a quiet window in which no peer
// failed: every change is spurious.
type Steady struct {
	N        int
	Timeouts string
	// Moves counts the leadership moving: a peer naming a leader other
	// than the last one any peer named.
	Moves int
	// Lost counts a peer ceasing to name a leader (it lost the leader,
	// or began an election), once per peer and occasion.
	Lost int
}

// changeCount counts Steady's changes from the peers' leader lines, in
// the order they arrived; the first leader named is the baseline.
type changeCount struct {
	current     string
	moves, lost int
}

func (c *changeCount) add(leader string) {
	switch {
	case leader == "" || leader == "-":
		c.lost++
	case c.current == "":
		c.current = leader
	case leader != c.current:
		c.moves++
		c.current = leader
	}
}

// MeasureSteady starts a cluster of cfg.N raftpeer processes (cfg.Rounds
// is not used), waits until they agree, calls ready, then counts the
// leader changes for d. A peer that exits is an error: the changes would
// not be spurious.
func MeasureSteady(ctx context.Context, cfg Config, d time.Duration, ready func()) (res Steady, err error) {
	if cfg.Rounds == 0 {
		cfg.Rounds = 1
	}
	if err := cfg.validate(); err != nil {
		return Steady{}, err
	}
	if d <= 0 || d > MaxSteady {
		return Steady{}, fmt.Errorf("%w: steady window %s: want above 0, at most %s", ErrConfig, d, MaxSteady)
	}
	res = Steady{N: cfg.N, Timeouts: cfg.Timeouts}
	c, leader, stop, err := launch(ctx, cfg)
	defer stop()
	if err != nil {
		return res, err
	}
	count := changeCount{current: leader}
	if ready != nil {
		ready()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		ev, ok, err := c.next(ctx, timer.C)
		if err != nil {
			return res, fmt.Errorf("raftbench: steady state: %w", err)
		}
		if !ok {
			res.Moves, res.Lost = count.moves, count.lost
			return res, nil
		}
		if err := c.handle(ev); err != nil {
			return res, fmt.Errorf("%w (steady state)", err)
		}
		if ev.kind == evLeader && ev.proc == c.peers[ev.proc.peer].proc {
			count.add(ev.leader)
		}
	}
}
