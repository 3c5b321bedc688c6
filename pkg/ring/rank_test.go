package ring

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/machinetest"
	"github.com/baton-election/baton/pkg/protocol"
)

// TestSpreadRankElects checks that under election.Spread the
// highest-ranked member leads, not the highest ID: of members 2, 4, 9,
// cluster "b" ranks 4 < 9 < 2 and cluster "a" 2 < 9 < 4. Every node
// starts at once, and again after the leader resigns.
func TestSpreadRankElects(t *testing.T) {
	cases := []machinetest.RankCase{
		{Rank: election.ByID(), Lead: 9, After: 4},
		{Rank: election.Spread("b"), Lead: 2, After: 9},
		{Rank: election.Spread("a"), Lead: 4, After: 9},
	}
	machinetest.RankElects(t, members, cases, false, func(id uint64, rank election.Rank) (election.Machine, error) {
		return New(election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members)), Rank: rank})
	})
}

// TestSpreadRankRing checks that under election.Spread the ring is
// ordered by rank: in cluster "a" (2 < 9 < 4) node 4, the highest,
// sends its round to node 2, the lowest (by ID it would send to 9), and
// node 2 forwards a lower-ranked candidate's round as its own.
func TestSpreadRankRing(t *testing.T) {
	for _, c := range []struct {
		rank election.Rank
		to   uint64
	}{{election.ByID(), 9}, {election.Spread("a"), 2}} {
		m, err := New(election.Config{ID: 4, Members: members, Timing: election.DefaultTiming(len(members)), Rank: c.rank})
		if err != nil {
			t.Fatal(err)
		}
		m.Start()
		var sent *protocol.Message
		for i := 0; i < 200 && sent == nil; i++ {
			for _, msg := range m.Ready().Messages {
				if msg.Type == protocol.TypeElection {
					sent = &msg
					break
				}
			}
			m.Tick()
		}
		if sent == nil || sent.To != c.to || sent.Candidate != 4 {
			t.Errorf("rank %v(%s): node 4's round %+v, want one for 4 to %d", c.rank, c.rank.Cluster(), sent, c.to)
		}
	}
	// Node 2 under "b" (4 < 9 < 2), the highest, replaces the round of 9
	// by its own, and sends it on to 4, its successor by rank.
	m, err := New(election.Config{ID: 2, Members: members, Timing: election.DefaultTiming(len(members)), Rank: election.Spread("b")})
	if err != nil {
		t.Fatal(err)
	}
	m.Step(protocol.Message{V: protocol.Version, Type: protocol.TypeElection, From: 9, To: 2, Candidate: 9, Seq: 1})
	var got []protocol.Message
	for _, msg := range m.Ready().Messages {
		if msg.Type == protocol.TypeElection {
			got = append(got, msg)
		}
	}
	if len(got) != 1 || got[0].Candidate != 2 || got[0].To != 4 {
		t.Errorf("node 2 in b on the round of 9: sent %+v, want its own round to 4", got)
	}
}

// Skip leaves a machine as the ticks it stands for.
func TestSkipMatchesTicks(t *testing.T) {
	machinetest.SkipMatchesTicks(t, []uint64{2, 4, 9, 11}, 15, func(id uint64) (election.Machine, error) {
		return New(election.Config{ID: id, Members: []uint64{2, 4, 9, 11}, Timing: election.DefaultTiming(4)})
	})
}

// Skip with quiet heartbeats: a leader's interval changes after
// election.QuietAfter heartbeats.
func TestSkipMatchesTicksQuiet(t *testing.T) {
	machinetest.SkipMatchesTicks(t, []uint64{2, 4, 9, 11}, 8, func(id uint64) (election.Machine, error) {
		timing := election.DefaultTiming(4)
		timing.HeartbeatTicks, timing.QuietHeartbeatTicks, timing.LeaderTimeoutTicks = 3, 12, 30
		timing.LeaseTicks, timing.LeaderLeaseTicks = 0, 0
		return New(election.Config{ID: id, Members: []uint64{2, 4, 9, 11}, Timing: timing})
	})
}
