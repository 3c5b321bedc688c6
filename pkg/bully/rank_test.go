package bully

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// TestSpreadRankElects checks that under election.Spread the
// highest-ranked member leads, not the highest ID: of members 2, 4, 9,
// cluster "b" ranks 4 < 9 < 2 and cluster "a" 2 < 9 < 4. Every node
// starts at once, and again after the leader resigns.
func TestSpreadRankElects(t *testing.T) {
	for _, c := range []struct {
		rank        election.Rank
		lead, after uint64
	}{{election.ByID(), 9, 4}, {election.Spread("b"), 2, 9}, {election.Spread("a"), 4, 9}} {
		ms := map[uint64]*Machine{}
		for _, id := range members {
			m, err := New(election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members)), Rank: c.rank})
			if err != nil {
				t.Fatal(err)
			}
			ms[id] = m
		}
		for _, id := range members {
			ms[id].Start()
		}
		for range 200 {
			deliver(ms)
			for _, id := range members {
				ms[id].Tick()
			}
		}
		deliver(ms)
		for _, id := range members {
			if st := ms[id].Status(); st.Leader != c.lead {
				t.Errorf("rank %v(%s): node %d follows %d, want %d", c.rank, c.rank.Cluster(), id, st.Leader, c.lead)
			}
		}
		ms[c.lead].Resign()
		deliver(ms)
		for range 200 {
			deliver(ms)
			for _, id := range members {
				ms[id].Tick()
			}
		}
		for _, id := range members {
			if st := ms[id].Status(); id != c.lead && st.Leader != c.after {
				t.Errorf("rank %v(%s): after %d resigned node %d follows %d, want %d", c.rank, c.rank.Cluster(), c.lead, id, st.Leader, c.after)
			}
		}
	}
}

// deliver hands every message the machines want sent to its receivers
// (a broadcast to every other machine), until none is left.
func deliver(ms map[uint64]*Machine) {
	for range 100 {
		var out []protocol.Message
		for _, id := range members {
			out = append(out, ms[id].Ready().Messages...)
		}
		if len(out) == 0 {
			return
		}
		for _, msg := range out {
			for _, id := range members {
				if id != msg.From && (msg.To == 0 || msg.To == id) {
					ms[id].Step(msg)
				}
			}
		}
	}
}
