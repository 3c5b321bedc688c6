// Package machinetest holds what the algorithms' tests share: running
// machines on an instant network, to check whom they elect.
package machinetest

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// RankCase is one rank and whom it elects: Lead first, After once Lead
// has resigned.
type RankCase struct {
	Rank        election.Rank
	Lead, After uint64
}

// Incarnation is the incarnation Deliver stamps on member id's messages
// when asked to, as the runtime stamps them.
func Incarnation(id uint64) uint64 { return 100 + id }

// RankElects checks, for each case, that machines of ids built by build
// with the case's rank, started at once on an instant network, all
// follow Lead, and after Lead resigns, After. stamp stamps each message
// with its sender's Incarnation.
func RankElects(t *testing.T, ids []uint64, cases []RankCase, stamp bool, build func(id uint64, rank election.Rank) (election.Machine, error)) {
	t.Helper()
	for _, c := range cases {
		ms := map[uint64]election.Machine{}
		for _, id := range ids {
			m, err := build(id, c.Rank)
			if err != nil {
				t.Fatal(err)
			}
			ms[id] = m
		}
		for _, id := range ids {
			ms[id].Start()
		}
		run(ms, ids, stamp)
		for _, id := range ids {
			if st := ms[id].Status(); st.Leader != c.Lead {
				t.Errorf("rank %v(%s): node %d follows %d, want %d", c.Rank, c.Rank.Cluster(), id, st.Leader, c.Lead)
			}
		}
		ms[c.Lead].Resign()
		Deliver(ms, ids, stamp)
		run(ms, ids, stamp)
		for _, id := range ids {
			if st := ms[id].Status(); id != c.Lead && st.Leader != c.After {
				t.Errorf("rank %v(%s): after %d resigned node %d follows %d, want %d", c.Rank, c.Rank.Cluster(), c.Lead, id, st.Leader, c.After)
			}
		}
	}
}

// run gives every machine 200 ticks, delivering what they send between.
func run(ms map[uint64]election.Machine, ids []uint64, stamp bool) {
	for range 200 {
		Deliver(ms, ids, stamp)
		for _, id := range ids {
			ms[id].Tick()
		}
	}
	Deliver(ms, ids, stamp)
}

// Deliver hands every message the machines of ids want sent to its
// receivers (a broadcast to every other machine), until none is left or
// after 100 rounds.
func Deliver(ms map[uint64]election.Machine, ids []uint64, stamp bool) {
	for range 100 {
		var out []protocol.Message
		for _, id := range ids {
			out = append(out, ms[id].Ready().Messages...)
		}
		if len(out) == 0 {
			return
		}
		for _, msg := range out {
			if stamp {
				msg.Inc = Incarnation(msg.From)
			}
			for _, id := range ids {
				if id != msg.From && (msg.To == 0 || msg.To == id) {
					ms[id].Step(msg)
				}
			}
		}
	}
}
