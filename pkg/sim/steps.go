package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
)

// A random run (RunSeed, RunHostile, RunByzantine, RunChurn,
// RunByzantineChurn) is a chain of named steps on one run: each step is a
// small method that does one thing to the cluster (start it, disturb it
// for a phase, settle the network, wait for the agreement, check what the
// run cost) and returns the first violation, which ends the run. The
// steps every scenario shares are here; each scenario's own are beside
// its runner.

// run is one random run under way: the cluster, the seed's random source,
// the trace, and what every tick does besides the cluster's own.
type run struct {
	c     *Cluster
	rng   *rand.Rand
	trace io.Writer
	// before, if not nil, runs before every tick (the lies of a
	// scenario's liars); its error ends the run.
	before func() error
}

// chain runs steps in order until one fails, and returns its error.
func chain(steps ...func() error) error {
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// logf writes one line of the run's own to the trace, with the tick.
func (r *run) logf(format string, args ...any) {
	if r.trace != nil {
		fmt.Fprintf(r.trace, "%5d  %s\n", r.c.Now(), fmt.Sprintf(format, args...))
	}
}

// tick lets one tick pass (after r.before) and returns the first
// invariant violated so far.
func (r *run) tick() error {
	if r.before != nil {
		if err := r.before(); err != nil {
			return err
		}
	}
	r.c.Tick()
	return r.c.Err()
}

// phase runs ticks until tick end: each is preceded by disturb (the
// faults of the phase; nil: none) and followed by after (nil: nothing).
func (r *run) phase(end int, disturb func() error, after func()) error {
	for r.c.Now() < end {
		if disturb != nil {
			if err := disturb(); err != nil {
				return err
			}
		}
		if err := r.tick(); err != nil {
			return err
		}
		if after != nil {
			after()
		}
	}
	return nil
}

// settleNetwork heals every partition and makes the network reliable with
// delays within TMax, keeping how the transport reports peers that are
// gone (Unreachable, Events) from fault.
func (r *run) settleNetwork(fault Network) error {
	r.c.Heal()
	return r.c.SetNetwork(Network{MinDelay: 1, MaxDelay: TMax, Unreachable: fault.Unreachable, Events: fault.Events})
}

// bringUp resumes every paused node of ids and starts those that never
// started (started[i] false); each crashed one restarts or stays down at
// random, and then, in a random order, nodes that are down start until
// at least need of ids run.
func (r *run) bringUp(ids []uint64, started []bool, need int) {
	up := 0
	for i, id := range ids {
		r.c.Resume(id)
		if !started[i] || (!r.c.Up(id) && r.rng.IntN(2) == 0) {
			r.c.Start(id)
		}
		if r.c.Up(id) {
			up++
		}
	}
	for _, i := range r.rng.Perm(len(ids)) {
		if up >= need {
			break
		}
		if id := ids[i]; !r.c.Up(id) {
			r.c.Start(id)
			up++
		}
	}
}

// restartOne restarts, in a third of the runs, one running node of ids
// (from its disk) within a leader time-out, and reports whether it did.
func (r *run) restartOne(ids []uint64, leaderTimeout int) (bool, error) {
	if r.rng.IntN(3) != 0 {
		return false, nil
	}
	for range r.rng.IntN(leaderTimeout) {
		if err := r.tick(); err != nil {
			return false, err
		}
	}
	var running []uint64
	for _, id := range ids {
		if r.c.Up(id) {
			running = append(running, id)
		}
	}
	r.c.Start(running[r.rng.IntN(len(running))])
	return true, nil
}

// goal is the agreement a run waits for after its last disturbance.
type goal struct {
	// from is the tick of the last disturbance; the cluster must agree
	// within bound ticks of it, and keep agreeing until end.
	from, bound, end int
	// hold, if positive, ends the wait once the agreement has held that
	// many ticks (before end).
	hold int
	// agreed says whether the cluster agrees now.
	agreed func() bool
	// onAgree, if not nil, runs each time an agreement begins.
	onAgree func()
	// check, if not nil, checks what must hold after every tick of the
	// wait besides the invariants.
	check func() error
	// missing and after say, in a liveness violation, what was missing
	// and what began the wait.
	missing, after string
}

// await ticks until the agreement of a has held to its end, and returns the
// ticks from a.from to the beginning of the agreement that lasted, or
// the first violation: an invariant, or no agreement within the bound.
func (r *run) await(a goal) (int, error) {
	since := -1
	for r.c.Now() < a.end {
		if err := r.tick(); err != nil {
			return 0, err
		}
		if a.check != nil {
			if err := a.check(); err != nil {
				r.logf("VIOLATION %v", err)
				return 0, err
			}
		}
		ok := a.agreed()
		switch {
		case ok && since < 0:
			since = r.c.Now()
			if a.onAgree != nil {
				a.onAgree()
			}
		case !ok:
			since = -1
		}
		if since < 0 && r.c.Now() >= a.from+a.bound {
			err := fmt.Errorf("sim: liveness violated: %s %d ticks after %s (tick %d): %s",
				a.missing, r.c.Now()-a.from, a.after, r.c.Now(), r.c.describe())
			r.logf("VIOLATION %v", err)
			return 0, err
		}
		if a.hold > 0 && since >= 0 && r.c.Now()-since >= a.hold {
			break
		}
	}
	return since - a.from, nil
}

// highest waits, as await, for the agreement on the highest running ID
// (Cluster.Agreement), who naming the running nodes it is about in a
// liveness violation ("live", "honest") and after what began the wait;
// then the agreed term must be at least every term a running node
// claimed before.
func (r *run) highest(from, bound, end int, who, after string, onAgree func()) (int, error) {
	converged, err := r.await(goal{from: from, bound: bound, end: end, onAgree: onAgree,
		agreed:  func() bool { _, _, ok := r.c.Agreement(); return ok },
		missing: "no agreement on the highest " + who + " " + r.c.highestName(), after: after})
	if err != nil {
		return 0, err
	}
	_, term, _ := r.c.Agreement()
	return converged, r.termKept(term)
}

// termKept checks that term, the term the cluster agrees on, is at least
// every term a running node claimed before (its disk keeps them).
func (r *run) termKept(term uint64) error {
	if term < r.c.MaxClaimedByRunning() {
		return fmt.Errorf("%w: the cluster agreed on term %d, below term %d claimed before by a node that runs", ErrInvariant, term, r.c.MaxClaimedByRunning())
	}
	return nil
}
