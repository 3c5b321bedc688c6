package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// The kinds of fault, each made at random, one at a time: what each
// does is in makeFault.
const (
	faultKill  = "kill"  // SIGKILL a node, start it again later with its data
	faultPause = "pause" // SIGSTOP a node for a while, then SIGCONT
	faultTerm  = "term"  // SIGTERM a node (it hands over), start it again later
	faultJoin  = "join"  // a new member (the next ID) starts
	faultLeave = "leave" // a member that is not a voter leaves for good (SIGTERM)
	faultNATS  = "nats"  // a NATS server of the three stops, then starts again
)

// faultKinds is every kind, in the order of the summary.
var faultKinds = []string{faultKill, faultPause, faultTerm, faultJoin, faultLeave, faultNATS}

// The random times of the faults (drawn from the seed).
const (
	downMin   = 1 * time.Second // a node killed or stopped stays down
	downMax   = 5 * time.Second
	pauseMin  = 500 * time.Millisecond // a paused node stays paused
	pauseMax  = 6 * time.Second        // beyond 4 presence intervals: it is dropped
	natsMin   = 500 * time.Millisecond // a NATS server stays down
	natsMax   = 4 * time.Second
	topChance = 0.5 // the chance that a node fault hits the highest live ID, which leads every election
)

// between draws a duration in [lo, hi].
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// runFaults makes faults until -duration has passed or ctx ends.
func (s *soak) runFaults(ctx context.Context) {
	end := time.Now().Add(s.o.duration)
	n := 0
	for {
		gap := between(s.rng, s.o.gapMin, s.o.gapMax)
		if time.Now().Add(gap).After(end) {
			break
		}
		select {
		case <-ctx.Done():
			s.logf("interrupted: no more faults")
			return
		case <-time.After(gap):
		}
		n++
		s.makeFault(ctx, n)
	}
	s.logf("%v of faults over: %d made", s.o.duration, n)
}

// present are the members that take part (not gone), sorted by ID.
func (s *soak) present() []*member {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*member
	for _, m := range s.members {
		m.mu.Lock()
		gone := m.gone
		m.mu.Unlock()
		if !gone {
			out = append(out, m)
		}
	}
	return out
}

// pickNode draws the node a fault hits: the highest ID (the leader of
// every election) with chance topChance, else any member.
func (s *soak) pickNode(ms []*member) *member {
	if s.rng.Float64() < topChance {
		return ms[len(ms)-1]
	}
	return ms[s.rng.IntN(len(ms))]
}

// kinds are the faults that may be made now: a member joins while there
// are fewer than processes+2, one leaves while there are more than
// processes-2 (and at least 4), never a voter.
func (s *soak) kinds(ms []*member) []string {
	kinds := []string{faultKill, faultPause, faultTerm, faultNATS}
	if len(ms) < s.o.processes+2 {
		kinds = append(kinds, faultJoin)
	}
	if len(ms) > max(s.o.processes-2, 3) && ms[len(ms)-1].id > uint64(len(voters)) {
		kinds = append(kinds, faultLeave)
	}
	slices.SortFunc(kinds, func(a, b string) int { return slices.Index(faultKinds, a) - slices.Index(faultKinds, b) })
	return kinds
}

// makeFault makes fault number n, and waits for the elections to be led
// again after each of its steps.
func (s *soak) makeFault(ctx context.Context, n int) {
	ms := s.present()
	kinds := s.kinds(ms)
	kind := kinds[s.rng.IntN(len(kinds))]
	s.mu.Lock()
	s.faults[kind]++
	s.mu.Unlock()
	switch kind {
	case faultKill, faultTerm:
		m := s.pickNode(ms)
		down := between(s.rng, downMin, downMax)
		p, _ := m.current()
		step := "SIGKILL"
		at := time.Now()
		if kind == faultKill {
			p.kill()
		} else {
			s.resigned(m.id, at)
			took, killed := p.stop(stopGrace)
			step = fmt.Sprintf("SIGTERM (exited in %v)", took.Round(time.Millisecond))
			if killed {
				step = fmt.Sprintf("SIGTERM (not exited within %v: killed)", stopGrace)
			}
		}
		s.heal(n, kind, fmt.Sprintf("%s node %d", step, m.id), at)
		s.sleep(ctx, down)
		at = time.Now()
		if err := s.restart(m); err != nil {
			s.logf("fault %d: restart node %d: %v", n, m.id, err)
			return
		}
		s.heal(n, kind+"/restart", fmt.Sprintf("node %d started again after %v down", m.id, down), at)
	case faultPause:
		m := s.pickNode(ms)
		pause := between(s.rng, pauseMin, pauseMax)
		at := time.Now()
		if err := m.setPaused(true); err != nil {
			s.logf("fault %d: pause node %d: %v", n, m.id, err)
			return
		}
		s.heal(n, kind, fmt.Sprintf("SIGSTOP node %d", m.id), at)
		s.sleep(ctx, time.Until(at.Add(pause)))
		at = time.Now()
		if err := m.setPaused(false); err != nil {
			s.logf("fault %d: resume node %d: %v", n, m.id, err)
			return
		}
		s.heal(n, kind+"/resume", fmt.Sprintf("SIGCONT node %d after %v", m.id, time.Since(at.Add(-pause)).Round(time.Millisecond)), at)
	case faultJoin:
		at := time.Now()
		m, err := s.addMember()
		if err != nil {
			s.logf("fault %d: join: %v", n, err)
			return
		}
		s.heal(n, kind, fmt.Sprintf("node %d joins", m.id), at)
	case faultLeave:
		var leavers []*member
		for _, m := range ms {
			if !slices.Contains(voters, m.id) {
				leavers = append(leavers, m)
			}
		}
		m := s.pickNode(leavers)
		m.mu.Lock()
		m.gone = true
		m.mu.Unlock()
		p, _ := m.current()
		at := time.Now()
		s.resigned(m.id, at)
		took, killed := p.stop(stopGrace)
		what := fmt.Sprintf("node %d leaves for good (SIGTERM, exited in %v)", m.id, took.Round(time.Millisecond))
		if killed {
			what = fmt.Sprintf("node %d leaves for good (SIGTERM, not exited within %v: killed)", m.id, stopGrace)
		}
		s.heal(n, kind, what, at)
	case faultNATS:
		srv := s.nats[s.rng.IntN(len(s.nats))]
		down := between(s.rng, natsMin, natsMax)
		at := time.Now()
		srv.proc.stop(stopGrace)
		s.heal(n, kind, fmt.Sprintf("NATS server %d stopped", srv.index), at)
		s.sleep(ctx, down)
		at = time.Now()
		if err := srv.start(); err != nil {
			s.mu.Lock()
			s.check.Add(Violation{At: time.Now(), Rule: RuleProcess, Text: fmt.Sprintf("NATS server %d did not start again: %v", srv.index, err)})
			s.mu.Unlock()
			s.logf("fault %d: %v", n, err)
			return
		}
		s.heal(n, kind+"/restart", fmt.Sprintf("NATS server %d started again after %v down", srv.index, down), at)
	}
}

// resigned tells the checker that node id is asked to leave at at.
func (s *soak) resigned(id uint64, at time.Time) {
	s.mu.Lock()
	s.check.Resigned(id, at)
	s.mu.Unlock()
}

// restart starts m again (same ID, data and port).
func (s *soak) restart(m *member) error {
	if err := m.start(); err != nil {
		return err
	}
	s.watchExit(m)
	return nil
}

// heal waits until every election is led again after a step of fault n
// made at at, and prints it.
func (s *soak) heal(n int, step, what string, at time.Time) {
	took, ok := s.waitLed(fmt.Sprintf("fault %d (%s)", n, what), at, s.o.heal)
	if !ok {
		return
	}
	s.record(step, took)
	s.mu.Lock()
	times := slices.Clone(s.heals[step])
	s.mu.Unlock()
	slices.Sort(times)
	s.logf("fault %d %s: %s; led again in %v (%s: p50 %v, max %v over %d)", n, step, what, took.Round(time.Millisecond),
		step, percentile(times, 50).Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), len(times))
}

// sleep waits d; it returns early (for the fault to finish) if ctx ends.
func (s *soak) sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// percentile is the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted)+99)/100 - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
