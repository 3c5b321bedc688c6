package paxos

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// TestSpreadRankElects checks that under election.Spread the
// highest-ranked member leads, not the highest ID: of members 2, 4, 6,
// 8, 9, cluster "d" ranks 4 < 9 < 6 < 8 < 2 and cluster "f"
// 2 < 8 < 4 < 9 < 6. Every node starts at once, and the next is elected
// after the leader resigns.
func TestSpreadRankElects(t *testing.T) {
	for _, c := range []struct {
		rank        election.Rank
		lead, after uint64
	}{{election.ByID(), 9, 8}, {election.Spread("d"), 2, 8}, {election.Spread("f"), 6, 9}} {
		ms := map[uint64]*Machine{}
		for _, id := range members {
			m, err := New(election.Config{ID: id, Members: members, Timing: timing, Restored: true, Incarnation: 100 + id, Rank: c.rank})
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
// (a broadcast to every other machine), stamped with their sender's
// incarnation, until none is left.
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
			msg.Inc = 100 + msg.From // as the runtime stamps it
			for _, id := range members {
				if id != msg.From && (msg.To == 0 || msg.To == id) {
					ms[id].Step(msg)
				}
			}
		}
	}
}
