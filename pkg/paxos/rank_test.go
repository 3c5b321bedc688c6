package paxos

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/machinetest"
)

// TestSpreadRankElects checks that under election.Spread the
// highest-ranked member leads, not the highest ID: of members 2, 4, 6,
// 8, 9, cluster "d" ranks 4 < 9 < 6 < 8 < 2 and cluster "f"
// 2 < 8 < 4 < 9 < 6. Every node starts at once, and the next is elected
// after the leader resigns.
func TestSpreadRankElects(t *testing.T) {
	cases := []machinetest.RankCase{
		{Rank: election.ByID(), Lead: 9, After: 8},
		{Rank: election.Spread("d"), Lead: 2, After: 8},
		{Rank: election.Spread("f"), Lead: 6, After: 9},
	}
	machinetest.RankElects(t, members, cases, true, func(id uint64, rank election.Rank) (election.Machine, error) {
		return New(election.Config{ID: id, Members: members, Timing: timing, Restored: true, Incarnation: machinetest.Incarnation(id), Rank: rank})
	})
}
