package sim_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

var algorithms = []struct {
	name    string
	factory sim.Factory
}{
	{"bully", bullyFactory},
	{"ring", ringFactory},
}

// members of the scenario cluster: not contiguous, not sorted.
var members = []uint64{7, 3, 12, 5, 9}

// newCluster starts every member of a reliable cluster whose delays are
// within t_max, tracing into trace.
func newCluster(t *testing.T, factory sim.Factory, trace *strings.Builder) *sim.Cluster {
	t.Helper()
	c, err := sim.New(sim.Config{
		Members: members,
		Timing:  election.DefaultTiming(len(members)),
		Factory: factory,
		Rand:    rand.New(rand.NewPCG(1, 2)),
		Network: sim.Quiet(sim.TMax),
		Trace:   trace,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range members {
		c.Start(id)
	}
	return c
}

// agree runs c until it agrees on a leader, for at most limit ticks, and
// returns the leader, its term and how many ticks it took.
func agree(t *testing.T, c *sim.Cluster, limit int, trace *strings.Builder) (leader, term uint64, ticks int) {
	t.Helper()
	for ticks = 0; ticks <= limit; ticks++ {
		if c.Err() != nil {
			t.Fatalf("%v\ntrace:\n%s", c.Err(), trace)
		}
		if leader, term, ok := c.Agreement(); ok {
			return leader, term, ticks
		}
		c.Tick()
	}
	t.Fatalf("no agreement within %d ticks\ntrace:\n%s", limit, trace)
	return 0, 0, 0
}

// settle runs c for long enough that every time-out fires again, and checks
// that the agreement holds throughout.
func settle(t *testing.T, c *sim.Cluster, leader, term uint64, trace *strings.Builder) {
	t.Helper()
	timing := election.DefaultTiming(len(members))
	for range 2 * (timing.LeaderTimeoutTicks + timing.CoordinatorTicks) {
		c.Tick()
		got, gotTerm, ok := c.Agreement()
		if c.Err() != nil || !ok || got != leader || gotTerm != term {
			t.Fatalf("agreement lost at tick %d: got leader %d term %d (agreed %v, err %v), want leader %d term %d\ntrace:\n%s",
				c.Now(), got, gotTerm, ok, c.Err(), leader, term, trace)
		}
	}
}

func bound() int { return sim.Bound(election.DefaultTiming(len(members))) }

// Rule (both algorithms): the highest live ID wins; a node that starts
// holds an election at once.
func TestScenarioColdStart(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, a.factory, &trace)
			leader, term, _ := agree(t, c, bound(), &trace)
			if leader != 12 {
				t.Fatalf("leader: got %d, want 12", leader)
			}
			settle(t, c, leader, term, &trace)
		})
	}
}

// Rule: followers suspect a leader whose heartbeats stop and elect the
// next highest live ID, with a newer term.
func TestScenarioLeaderCrash(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, a.factory, &trace)
			_, term, _ := agree(t, c, bound(), &trace)
			c.Crash(12)
			leader, term2, _ := agree(t, c, bound(), &trace)
			if leader != 9 || term2 <= term {
				t.Fatalf("after the crash: got leader %d term %d, want leader 9 with a term above %d", leader, term2, term)
			}
			settle(t, c, leader, term2, &trace)
		})
	}
}

// Rule: a node that recovers, or a replacement with the same ID, starts an
// election at once even if the coordinator is working; if its ID is the
// highest live one it takes over.
func TestScenarioHighestRestarts(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, a.factory, &trace)
			agree(t, c, bound(), &trace)
			c.Crash(12)
			_, term, _ := agree(t, c, bound(), &trace)
			c.Start(12)
			leader, term2, _ := agree(t, c, bound(), &trace)
			if leader != 12 || term2 <= term {
				t.Fatalf("after the restart: got leader %d term %d, want leader 12 with a term above %d", leader, term2, term)
			}
			settle(t, c, leader, term2, &trace)
		})
	}
}

// Rule: a node whose leader resigned elects a new one at once, so the next
// highest takes over before any node could have timed out.
func TestScenarioResign(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, a.factory, &trace)
			_, term, _ := agree(t, c, bound(), &trace)
			c.Resign(12)
			timeout := election.DefaultTiming(len(members)).LeaderTimeoutTicks
			leader, term2, ticks := agree(t, c, bound(), &trace)
			if leader != 9 || term2 <= term {
				t.Fatalf("after the resignation: got leader %d term %d, want leader 9 with a term above %d", leader, term2, term)
			}
			if ticks >= timeout {
				t.Fatalf("took over after %d ticks, want fewer than the leader time-out of %d\ntrace:\n%s", ticks, timeout, &trace)
			}
			settle(t, c, leader, term2, &trace)
		})
	}
}

// Package election, "What is not guaranteed": both sides of a partition
// elect a leader; once it heals the cluster converges on the highest live
// ID with a term larger than both sides'.
func TestScenarioPartitionHeals(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, a.factory, &trace)
			_, term, _ := agree(t, c, bound(), &trace)
			c.Partition([]uint64{3, 5, 7}, []uint64{9, 12})
			c.Run(bound())
			minority, _ := c.Status(7)
			if minority.Leader != 7 || minority.Term <= term {
				t.Fatalf("minority side: got leader %d term %d, want leader 7 with a term above %d", minority.Leader, minority.Term, term)
			}
			c.Heal()
			leader, term2, _ := agree(t, c, bound(), &trace)
			if leader != 12 || term2 <= minority.Term {
				t.Fatalf("after healing: got leader %d term %d, want leader 12 with a term above %d", leader, term2, minority.Term)
			}
			settle(t, c, leader, term2, &trace)
		})
	}
}

// A broken machine must be caught: the invariants are not vacuous.
func TestInvariantCaught(t *testing.T) {
	liar := func(cfg election.Config) (election.Machine, error) { return &liar{id: cfg.ID}, nil }
	c, err := sim.New(sim.Config{Members: members, Timing: election.DefaultTiming(5), Factory: liar, Rand: rand.New(rand.NewPCG(1, 2)), Network: sim.Quiet(sim.TMax)})
	if err != nil {
		t.Fatal(err)
	}
	c.Start(3)
	c.Start(5)
	if c.Err() == nil {
		t.Fatalf("two nodes claiming term 1: got no violation, want one")
	}
}

// liar claims term 1 whatever its ID.
type liar struct {
	id      uint64
	claimed uint64
}

func (l *liar) Start()                { l.claimed = 1 }
func (l *liar) Tick()                 {}
func (l *liar) Due() int              { return 1 }
func (l *liar) Step(protocol.Message) {}
func (l *liar) Unreachable(uint64)    {}
func (l *liar) Resign()               {}
func (l *liar) Ready() election.Ready {
	r := election.Ready{Claimed: l.claimed}
	l.claimed = 0
	return r
}
func (l *liar) Status() election.Status {
	return election.Status{ID: l.id, Leader: l.id, Term: 1, Role: election.Leader}
}
