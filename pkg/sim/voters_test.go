package sim_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/paxos"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

// votersCluster is a Paxos cluster of dynamic membership whose machines
// are given voters (election.Config.Voters), every member of ids an
// initial member; none runs yet.
func votersCluster(t *testing.T, ids, voters []uint64, trace *strings.Builder) *sim.Cluster {
	t.Helper()
	timing := election.DefaultLeaseTiming(len(ids))
	timing.PresenceTicks = 25
	c, err := sim.New(sim.Config{Members: ids, Timing: timing, Leases: true,
		Factory: func(cfg election.Config) (election.Machine, error) {
			cfg.Voters = voters
			return paxos.New(cfg)
		},
		Rand: rand.New(rand.NewPCG(1, 2)), Network: sim.Quiet(sim.TMax), Trace: trace, Dynamic: true, Initial: ids})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// changeVoters asks node id, through its driver, to move the voters.
func changeVoters(c *sim.Cluster, id uint64, voters ...uint64) error {
	return c.Do(id, func(m election.Machine) error { return m.(*paxos.Machine).ChangeVoters(voters) })
}

// until ticks c until ok holds, for at most limit ticks, failing the test
// on an invariant violated or on the limit.
func until(t *testing.T, c *sim.Cluster, limit int, what string, trace *strings.Builder, ok func() bool) {
	t.Helper()
	for range limit {
		if c.Err() != nil {
			t.Fatalf("%v\n%s", c.Err(), tail(trace))
		}
		if ok() {
			return
		}
		c.Tick()
	}
	t.Fatalf("%s: not within %d ticks\n%s", what, limit, tail(trace))
}

// holdAll reports whether every running node of c holds the voters want,
// not joint, and one configuration.
func holdAll(c *sim.Cluster, want ...uint64) bool {
	var first *protocol.Voters
	for _, id := range c.Running() {
		v, ok := c.VotersOf(id)
		if !ok || v.Joint() || !slices.Equal(v.Voters, want) || first != nil && (v.Version != first.Version || v.Ballot != first.Ballot) {
			return false
		}
		first = v
	}
	return first != nil
}

// TestVotersDo: the leader moves the voters through Cluster.Do; the change
// is stored before it is proposed, completes, and reaches every node,
// under the same leader and term. A follower, a paused node and a leader
// with a change under way refuse.
func TestVotersDo(t *testing.T) {
	var trace strings.Builder
	ids := []uint64{1, 2, 3, 4, 5}
	c := votersCluster(t, ids, []uint64{1, 2, 3}, &trace)
	for _, id := range ids {
		c.Start(id)
	}
	bound := sim.ChurnBound(sim.Spec{Leases: true}, election.DefaultLeaseTiming(5))
	until(t, c, bound, "agreement on 5", &trace, func() bool { l, _, ok := c.Agreement(); return ok && l == 5 })
	_, term, _ := c.Agreement()
	if err := changeVoters(c, 4, 3, 4, 5); !errors.Is(err, paxos.ErrNotLeader) {
		t.Fatalf("follower 4 asked to change the voters: %v, want %v", err, paxos.ErrNotLeader)
	}
	if err := changeVoters(c, 5, 3, 4, 5); err != nil {
		t.Fatalf("leader 5 asked to change the voters: %v", err)
	}
	if v, _ := c.VotersOf(5); !v.Joint() || !slices.Equal(v.Next, []uint64{3, 4, 5}) {
		t.Fatalf("leader 5 holds %+v after the change began, want joint to [3 4 5]", v)
	}
	if err := changeVoters(c, 5, 1, 2); !errors.Is(err, paxos.ErrVotersChanging) {
		t.Fatalf("leader 5 asked again while joint: %v, want %v", err, paxos.ErrVotersChanging)
	}
	c.Pause(3)
	if err := changeVoters(c, 3, 1); err == nil {
		t.Fatal("paused node 3 ran a request")
	}
	c.Resume(3)
	until(t, c, bound, "every node holding [3 4 5]", &trace, func() bool { return holdAll(c, 3, 4, 5) })
	if l, tm, ok := c.Agreement(); !ok || l != 5 || tm != term {
		t.Fatalf("after the change: leader %d term %d (agreed %v), want 5 with term %d kept\n%s", l, tm, ok, term, tail(&trace))
	}
}

// TestVotersSuccessor: the leader moves the voters to members that do not
// run yet, so the change stays joint; it crashes; once they run, the next
// leader, the highest running ID, finds the joint configuration and
// completes it.
func TestVotersSuccessor(t *testing.T) {
	var trace strings.Builder
	ids := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	c := votersCluster(t, ids, []uint64{1, 2, 3}, &trace)
	for _, id := range ids[:5] {
		c.Start(id)
	}
	bound := sim.ChurnBound(sim.Spec{Leases: true}, election.DefaultLeaseTiming(5))
	until(t, c, bound, "agreement on 5", &trace, func() bool { l, _, ok := c.Agreement(); return ok && l == 5 })
	if err := changeVoters(c, 5, 6, 7, 8); err != nil {
		t.Fatalf("leader 5 asked to change the voters: %v", err)
	}
	until(t, c, bound, "voters 1, 2 and 3 holding the joint configuration", &trace, func() bool {
		for _, id := range []uint64{1, 2, 3} {
			if v, _ := c.VotersOf(id); !v.Joint() {
				return false
			}
		}
		return true
	})
	c.Crash(5)
	for _, id := range []uint64{6, 7, 8} {
		c.Start(id)
	}
	until(t, c, 2*bound, "agreement on 8 and every node holding [6 7 8]", &trace, func() bool {
		l, _, ok := c.Agreement()
		return ok && l == 8 && holdAll(c, 6, 7, 8)
	})
}

// TestVotersStrandedCandidate: a candidate that does not vote holds a
// joint configuration that no voter learnt (the leader's proposal of it
// reached that candidate alone, and the leader died): the new leader,
// under the older configuration, must still be followed by it, and the
// cluster must end with one configuration. The candidate refuses the
// leader's proposals as stale; it used to answer nothing, as it does not
// vote, and so told nobody of its configuration and followed the dead
// leader for ever. It now answers a stale proposal with a Nack carrying
// its configuration, which the leader adopts and finishes. The Paxos
// churn found it (SIM_CHURN_SEED=27367 of TestChurnPaxos and 26003 of
// TestChurnPaxosKeepLeader; in seed 20928 of TestChurnPaxos only such
// candidates held the newest configuration, and nobody led).
func TestVotersStrandedCandidate(t *testing.T) {
	var trace strings.Builder
	ids := []uint64{1, 2, 3, 4, 5}
	c := votersCluster(t, ids, []uint64{2, 3, 4}, &trace)
	for _, id := range ids {
		c.Start(id)
	}
	bound := sim.ChurnBound(sim.Spec{Leases: true}, election.DefaultLeaseTiming(5))
	until(t, c, bound, "agreement on 5", &trace, func() bool { l, _, ok := c.Agreement(); return ok && l == 5 })
	if err := changeVoters(c, 5, 2, 3, 6); err != nil {
		t.Fatalf("leader 5 asked to change the voters: %v", err)
	}
	c.Partition([]uint64{1, 5}) // its proposal reaches 1 alone
	until(t, c, bound, "1 holding the joint configuration", &trace, func() bool { v, _ := c.VotersOf(1); return v.Joint() })
	c.Crash(5)
	c.Run(sim.TMax + 1)
	c.Heal()
	until(t, c, 2*bound, "agreement on 4 and one configuration", &trace, func() bool {
		l, _, ok := c.Agreement()
		if !ok || l != 4 {
			return false
		}
		v1, _ := c.VotersOf(1)
		v4, _ := c.VotersOf(4)
		return !v1.Joint() && v1.Version == v4.Version && v1.Ballot == v4.Ballot
	})
}

// TestVotersSupersededQuorum: the voters move from 1, 2 and 3 to 4, 5
// and 6 while 3 has not started yet; then 1 loses its disk (one disk, of
// a node that no longer votes). Back without its disk, 1 starts from the
// voters it is configured with, 1, 2 and 3 (version 0), and so does 3,
// which never heard of the change: cut off from the others, the two are a
// majority of those voters, and neither may lead while 6 leads with the
// voters 4, 5 and 6. 3 does. Two of the three old voters are then
// without any state (one lost its disk, one never ran): a majority of the
// old voters without their disks, outside the fault model (fault-model.md,
// membership.md), so this runs only with SIM_KNOWN_BUGS=1.
func TestVotersSupersededQuorum(t *testing.T) {
	if os.Getenv("SIM_KNOWN_BUGS") == "" {
		t.Skip("outside the fault model: set SIM_KNOWN_BUGS=1 to run it")
	}
	var trace strings.Builder
	ids := []uint64{1, 2, 3, 4, 5, 6}
	c := votersCluster(t, ids, []uint64{1, 2, 3}, &trace)
	for _, id := range []uint64{1, 2, 4, 5, 6} {
		c.Start(id)
	}
	bound := sim.ChurnBound(sim.Spec{Leases: true}, election.DefaultLeaseTiming(5))
	until(t, c, bound, "agreement on 6", &trace, func() bool { l, _, ok := c.Agreement(); return ok && l == 6 })
	if err := changeVoters(c, 6, 4, 5, 6); err != nil {
		t.Fatalf("leader 6 asked to change the voters: %v", err)
	}
	until(t, c, bound, "every node holding [4 5 6]", &trace, func() bool { return holdAll(c, 4, 5, 6) })
	c.Crash(1)
	c.WipeDisk(1)
	c.Partition([]uint64{1, 3})
	c.Start(1)
	c.Start(3)
	for range 2 * bound {
		c.Tick()
		if c.Err() != nil {
			t.Fatalf("%v\n%s", c.Err(), tail(&trace))
		}
	}
	if s, _ := c.Status(6); s.Role != election.Leader {
		t.Fatalf("6 no longer leads: %+v\n%s", s, tail(&trace))
	}
}

// TestVotersWipedAcceptor: the voters are 1, 2 and 3, and 3 leads. 3
// pauses for longer than its lease; 2 campaigns, and 1 promises its
// ballot, then crashes before 2's proposal reaches it and comes back
// without its disk (one disk lost, a minority's). 3 resumes, its lease run
// out, and proposes again under its old ballot: 1, which forgot its
// promise, accepts; meanwhile 3, as an acceptor, accepts 2's proposal
// among the copies that waited for it. 2 leads on the acceptances of 2
// and 3, and 3 on those of 3 and 1: two leaders at once. An acceptor that
// lost its disk waited a lease before it promised, but not before it
// accepted; it now waits before either, and remembers the highest ballot
// it hears meanwhile. The Paxos churn found it (SIM_CHURN_SEED=11727 of
// TestChurnPaxos, where no voters changed).
func TestVotersWipedAcceptor(t *testing.T) {
	var trace strings.Builder
	ids := []uint64{1, 2, 3}
	c := votersCluster(t, ids, ids, &trace)
	for _, id := range ids {
		c.Start(id)
	}
	bound := sim.ChurnBound(sim.Spec{Leases: true}, election.DefaultLeaseTiming(3))
	until(t, c, bound, "agreement on 3", &trace, func() bool { l, _, ok := c.Agreement(); return ok && l == 3 })
	c.Pause(3)
	// 1, cut off, promises nothing to 2 until the grants of 1 and 2 to 3
	// have run out: then 2 counts its own promise and needs only 1's.
	c.Partition([]uint64{1})
	c.Run(3 * election.DefaultLeaseTiming(3).LeaseTicks)
	c.Heal()
	promised := false
	c.OnDeliver(func(to uint64, m protocol.Message, _ int) {
		promised = promised || m.Type == protocol.TypePromise && m.From == 1 && to == 2
	})
	until(t, c, bound, "1 promising 2's ballot", &trace, func() bool { return promised })
	c.Crash(1)
	c.Run(sim.TMax + 1) // 2's proposal, sent as the promise arrived, finds it down
	c.WipeDisk(1)
	c.Start(1)
	c.Resume(3)
	for range bound {
		c.Tick()
		if c.Err() != nil {
			t.Fatalf("%v\n%s", c.Err(), tail(&trace))
		}
	}
	if l, _, ok := c.Leading(); !ok {
		t.Fatalf("no agreement on a leader (%d)\n%s", l, tail(&trace))
	}
}
