package bully

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/machinetest"
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

// Skip leaves a machine as the ticks it stands for.
func TestSkipMatchesTicks(t *testing.T) {
	machinetest.SkipMatchesTicks(t, members, 15, func(id uint64) (election.Machine, error) {
		return New(election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members))})
	})
}

// Skip with dynamic membership: the presence clock skips too.
func TestSkipMatchesTicksDynamic(t *testing.T) {
	machinetest.SkipMatchesTicks(t, []uint64{3, 5, 8}, 8, func(id uint64) (election.Machine, error) {
		timing := election.DefaultTiming(3)
		timing.PresenceTicks = 30
		return New(election.Config{ID: id, Members: []uint64{3, 5, 8}, Timing: timing, Dynamic: true})
	})
}

// Skip with quiet heartbeats and a cold start of its own: a leader's
// interval changes after election.QuietAfter heartbeats.
func TestSkipMatchesTicksQuiet(t *testing.T) {
	machinetest.SkipMatchesTicks(t, members, 8, func(id uint64) (election.Machine, error) {
		timing := election.DefaultTiming(len(members))
		timing.HeartbeatTicks, timing.QuietHeartbeatTicks, timing.LeaderTimeoutTicks, timing.ColdStartTicks = 3, 12, 30, 15
		timing.LeaseTicks, timing.LeaderLeaseTicks = 0, 0
		return New(election.Config{ID: id, Members: members, Timing: timing})
	})
}
