package sim_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

var specs = []sim.Spec{bullySpec, ringSpec, paxosSpec}

// members of the scenario cluster: not contiguous, not sorted.
var members = []uint64{7, 3, 12, 5, 9}

// newCluster starts every member of a reliable cluster whose delays are
// within t_max, tracing into trace.
func newCluster(t *testing.T, spec sim.Spec, ids []uint64, trace *strings.Builder) *sim.Cluster {
	t.Helper()
	c, err := sim.New(sim.Config{
		Members: ids,
		Timing:  election.DefaultTiming(len(ids)),
		Factory: spec.Factory,
		Leases:  spec.Leases,
		Rand:    rand.New(rand.NewPCG(1, 2)),
		Network: sim.Quiet(sim.TMax),
		Trace:   trace,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
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
			t.Fatalf("%v\ntrace:\n%s", c.Err(), tail(trace))
		}
		if leader, term, ok := c.Agreement(); ok {
			return leader, term, ticks
		}
		c.Tick()
	}
	t.Fatalf("no agreement within %d ticks\ntrace:\n%s", limit, tail(trace))
	return 0, 0, 0
}

// tail is the end of a trace, which is where a failure shows.
func tail(trace *strings.Builder) string {
	lines := strings.Split(trace.String(), "\n")
	if len(lines) > 300 {
		lines = lines[len(lines)-300:]
	}
	return strings.Join(lines, "\n")
}

// settle runs c for long enough that every time-out fires again, and checks
// that the agreement holds throughout.
func settle(t *testing.T, c *sim.Cluster, leader, term uint64, trace *strings.Builder) {
	t.Helper()
	timing := election.DefaultTiming(len(c.Members()))
	for range 2 * (timing.LeaderTimeoutTicks + timing.CoordinatorTicks) {
		c.Tick()
		got, gotTerm, ok := c.Agreement()
		if c.Err() != nil || !ok || got != leader || gotTerm != term {
			t.Fatalf("agreement lost at tick %d: got leader %d term %d (agreed %v, err %v), want leader %d term %d\ntrace:\n%s",
				c.Now(), got, gotTerm, ok, c.Err(), leader, term, tail(trace))
		}
	}
}

func bound(spec sim.Spec, n int) int { return sim.Bound(spec, n, election.DefaultTiming(n)) }

// Rule (every algorithm): the highest live ID wins; a node that starts
// holds an election at once.
func TestScenarioColdStart(t *testing.T) {
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, s, members, &trace)
			leader, term, _ := agree(t, c, bound(s, 5), &trace)
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
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, s, members, &trace)
			_, term, _ := agree(t, c, bound(s, 5), &trace)
			c.Crash(12)
			leader, term2, _ := agree(t, c, bound(s, 5), &trace)
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
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, s, members, &trace)
			agree(t, c, bound(s, 5), &trace)
			c.Crash(12)
			_, term, _ := agree(t, c, bound(s, 5), &trace)
			c.Start(12)
			leader, term2, _ := agree(t, c, bound(s, 5), &trace)
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
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, s, members, &trace)
			_, term, _ := agree(t, c, bound(s, 5), &trace)
			c.Resign(12)
			timeout := election.DefaultTiming(len(members)).LeaderTimeoutTicks
			leader, term2, ticks := agree(t, c, bound(s, 5), &trace)
			if leader != 9 || term2 <= term {
				t.Fatalf("after the resignation: got leader %d term %d, want leader 9 with a term above %d", leader, term2, term)
			}
			if ticks >= timeout {
				t.Fatalf("took over after %d ticks, want fewer than the leader time-out of %d\ntrace:\n%s", ticks, timeout, tail(&trace))
			}
			settle(t, c, leader, term2, &trace)
		})
	}
}

// Bully and the ring (package election, "What is not guaranteed"): both
// sides of a partition elect a leader. Paxos: the side without a majority
// has none, the leader on it included, once its lease ends. Once the
// partition heals, the cluster converges on the highest live ID with a
// term larger than both sides'.
func TestScenarioPartitionHeals(t *testing.T) {
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, s, members, &trace)
			_, term, _ := agree(t, c, bound(s, 5), &trace)
			c.Partition([]uint64{3, 5, 7}, []uint64{9, 12})
			c.Run(bound(s, 5))
			majority, _ := c.Status(7)
			if majority.Leader != 7 || majority.Term <= term {
				t.Fatalf("side {3,5,7}: got leader %d term %d, want leader 7 with a term above %d", majority.Leader, majority.Term, term)
			}
			if s.Leases {
				for _, id := range []uint64{9, 12} {
					if st, _ := c.Status(id); st.Role == election.Leader || st.Leader != 0 {
						t.Fatalf("side {9,12} has no majority: node %d got %v leader %d, want no leader", id, st.Role, st.Leader)
					}
				}
			}
			c.Heal()
			leader, term2, _ := agree(t, c, bound(s, 5), &trace)
			if leader != 12 || term2 <= majority.Term {
				t.Fatalf("after healing: got leader %d term %d, want leader 12 with a term above %d", leader, term2, majority.Term)
			}
			settle(t, c, leader, term2, &trace)
		})
	}
}

// Terms survive restarts: every node crashes at once and starts again
// from its disk; the cluster agrees on a term above every term claimed.
func TestScenarioWholeClusterRestart(t *testing.T) {
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, s, members, &trace)
			agree(t, c, bound(s, 5), &trace)
			for range 3 {
				for _, id := range members {
					c.Crash(id)
				}
				for _, id := range members {
					c.Start(id)
				}
				leader, term, _ := agree(t, c, bound(s, 5), &trace)
				if leader != 12 || term < c.MaxClaimed() {
					t.Fatalf("after a restart of every node: got leader %d term %d, want 12 with the highest term claimed, %d", leader, term, c.MaxClaimed())
				}
			}
		})
	}
}

// A node that comes back without its disk (a new container) learns the
// term from the last announcement (the stream) and claims above every
// term claimed before, even with every other node down.
func TestScenarioFreshNodeLearnsFromStream(t *testing.T) {
	for _, s := range []sim.Spec{bullySpec, ringSpec} { // Paxos needs a majority
		t.Run(s.Name, func(t *testing.T) {
			var trace strings.Builder
			c := newCluster(t, s, members, &trace)
			agree(t, c, bound(s, 5), &trace)
			c.Crash(12)
			agree(t, c, bound(s, 5), &trace)
			for _, id := range members {
				c.Crash(id)
			}
			c.WipeDisk(3)
			c.Start(3)
			leader, term, _ := agree(t, c, bound(s, 5), &trace)
			if leader != 3 || term <= c.MaxClaimed()-1 && term != c.MaxClaimed() {
				t.Fatalf("fresh node 3 alone: got leader %d term %d, want 3 with a term above every term claimed (%d)", leader, term, c.MaxClaimed())
			}
		})
	}
}

// Paxos leases: a leader paused for longer than its lease is replaced only
// once its lease has ended (the cluster checks at every step that no two
// nodes report leader at once); when it resumes it steps down before
// anything else and the highest live ID takes over again.
func TestScenarioPaxosPause(t *testing.T) {
	var trace strings.Builder
	c := newCluster(t, paxosSpec, members, &trace)
	_, term, _ := agree(t, c, bound(paxosSpec, 5), &trace)
	c.Pause(12)
	timing := election.DefaultTiming(len(members))
	c.Run(3 * timing.LeaseTicks)
	if st, _ := c.Status(9); st.Role != election.Leader || st.Term <= term {
		t.Fatalf("while 12 is paused: node 9 got %v term %d, want leader above %d\n%s", st.Role, st.Term, term, tail(&trace))
	}
	c.Resume(12)
	leader, term2, _ := agree(t, c, bound(paxosSpec, 5), &trace)
	if leader != 12 || term2 <= term {
		t.Fatalf("after resuming: got leader %d term %d, want 12 above %d", leader, term2, term)
	}
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
}

// The exclusivity check of leases is not vacuous: when the leader's clock
// runs at half speed, far outside the drift bound the lease allows for,
// its lease outlives the grants it rests on, the other side elects a
// leader meanwhile, and the cluster reports two leaders at once.
func TestScenarioPaxosOverlapCaught(t *testing.T) {
	timing := election.DefaultTiming(len(members))
	var trace strings.Builder
	c, err := sim.New(sim.Config{
		Members: members, Timing: timing, Factory: paxosSpec.Factory, Leases: true,
		Rates: map[uint64]int64{12: 500_000}, Rand: rand.New(rand.NewPCG(1, 2)), Network: sim.Quiet(sim.TMax), Trace: &trace,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range members {
		c.Start(id)
	}
	agree(t, c, bound(paxosSpec, 5), &trace)
	c.Partition([]uint64{12})
	c.Run(5 * timing.LeaseTicks)
	if c.Err() == nil {
		t.Fatalf("a leader lease three times the grants: got no violation, want two leaders at once")
	}
}

// Messages per election, at 5, 25 and 101 members, on a quiet network:
// each scenario within the bound the package doc states (MessageBound for
// an election of the whole cluster, StartBound for one node starting).
func TestScenarioMessages(t *testing.T) {
	type scenario struct {
		name  string
		limit func(s sim.Spec, n int) int
		run   func(c *sim.Cluster, ids []uint64)
	}
	scenarios := []scenario{
		{"cold start", sim.MessageBound, func(c *sim.Cluster, ids []uint64) {}},
		{"crash of the leader", sim.MessageBound, func(c *sim.Cluster, ids []uint64) { c.Crash(ids[len(ids)-1]) }},
		{"resignation of the leader", sim.MessageBound, func(c *sim.Cluster, ids []uint64) { c.Resign(ids[len(ids)-1]) }},
		{"restart of the lowest ID", sim.StartBound, func(c *sim.Cluster, ids []uint64) { c.Start(ids[0]) }},
		{"restart of the highest ID", sim.StartBound, func(c *sim.Cluster, ids []uint64) { c.Start(ids[len(ids)-1]) }},
	}
	var report strings.Builder
	for _, n := range []int{5, 25, 101} {
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = uint64(i + 1)
		}
		for _, s := range specs {
			for _, sc := range scenarios {
				var trace strings.Builder
				var c *sim.Cluster
				pub0, del0 := 0, 0
				if sc.name == "cold start" {
					c = newCluster(t, s, ids, &trace)
				} else {
					c = newCluster(t, s, ids, &trace)
					_, term, _ := agree(t, c, bound(s, n), &trace)
					settle(t, c, ids[n-1], term, &trace)
					pub0, del0 = c.Messages()
					sc.run(c, ids)
				}
				agree(t, c, bound(s, n), &trace)
				pub, del := c.Messages()
				pub, del = pub-pub0, del-del0
				limit := sc.limit(s, n)
				fmt.Fprintf(&report, "%-6s n=%-3d %-26s %6d messages (%7d deliveries), bound %6d\n", s.Name, n, sc.name, pub, del, limit)
				if pub > limit {
					t.Errorf("%s, %d members, %s: %d messages, above the stated bound %d", s.Name, n, sc.name, pub, limit)
				}
			}
		}
	}
	t.Logf("messages per election, publications (a broadcast counts once):\n%s", report.String())
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
	// A node claiming the same term again after a restart is caught too.
	c, err = sim.New(sim.Config{Members: members, Timing: election.DefaultTiming(5), Factory: liar, Rand: rand.New(rand.NewPCG(1, 2)), Network: sim.Quiet(sim.TMax)})
	if err != nil {
		t.Fatal(err)
	}
	c.Start(3)
	c.Start(3)
	if c.Err() == nil || !strings.Contains(c.Err().Error(), "claimed twice") {
		t.Fatalf("one node claiming term 1 in two incarnations: got %v, want a violation", c.Err())
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
func (l *liar) PeerDown(uint64)       {}
func (l *liar) Resign()               {}
func (l *liar) Ready() election.Ready {
	r := election.Ready{Claimed: l.claimed}
	l.claimed = 0
	return r
}
func (l *liar) Status() election.SoftState {
	return election.SoftState{ID: l.id, Leader: l.id, Term: 1, Role: election.Leader}
}
