package machinetest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// SkipMatchesTicks checks that a machine's Skip (election.Skipper)
// leaves it as the ticks it stands for would: two clusters of ids, built
// alike by build, run the same random schedule for each seed (waits of
// up to 300 ticks, lost messages, members muted for a while, down and
// leaving, restarts),
// one given every tick, the other Skip for ticks below Due (all of them,
// or a random part); after
// every wait each machine of the one must equal its twin of the other,
// and they must send the same.
func SkipMatchesTicks(t *testing.T, ids []uint64, seeds int, build func(id uint64) (election.Machine, error)) {
	t.Helper()
	for seed := range seeds {
		if err := skipRun(ids, uint64(seed), build); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func skipRun(ids []uint64, seed uint64, build func(id uint64) (election.Machine, error)) error {
	r := rand.New(rand.NewPCG(seed, 7))
	split := rand.New(rand.NewPCG(seed, 8)) // how the skips are cut
	ticked, skipped := map[uint64]election.Machine{}, map[uint64]election.Machine{}
	start := func(id uint64) error {
		for _, ms := range []map[uint64]election.Machine{ticked, skipped} {
			m, err := build(id)
			if err != nil {
				return err
			}
			m.Start()
			ms[id] = m
		}
		return nil
	}
	for _, id := range ids {
		if err := start(id); err != nil {
			return err
		}
	}
	skips := 0
	var mute uint64 // a member whose messages are lost, for a while
	for step := range 400 {
		if r.IntN(15) == 0 {
			mute = 0
			if r.IntN(2) == 0 {
				mute = ids[r.IntN(len(ids))]
			}
		}
		// The same messages, lost alike.
		outA, outB := readyAll(ticked, ids), readyAll(skipped, ids)
		if !reflect.DeepEqual(outA, outB) {
			return fmt.Errorf("step %d: sent %v by ticks, %v with skips", step, outA, outB)
		}
		for _, msg := range outA {
			if msg.From == mute || r.IntN(10) == 0 {
				continue // lost
			}
			for _, id := range ids {
				if id != msg.From && (msg.To == 0 || msg.To == id) {
					ticked[id].Step(msg)
					skipped[id].Step(msg)
				}
			}
		}
		switch k := r.IntN(40); {
		case k == 0: // a member down, as its connection closes
			down, to := ids[r.IntN(len(ids))], ids[r.IntN(len(ids))]
			ticked[to].PeerDown(down)
			skipped[to].PeerDown(down)
		case k == 1: // one restarts
			if err := start(ids[r.IntN(len(ids))]); err != nil {
				return err
			}
		case k == 2: // one leaves cleanly, and comes back later
			id := ids[r.IntN(len(ids))]
			ticked[id].Resign()
			skipped[id].Resign()
		}
		wait := 1 + r.IntN(300)
		if r.IntN(3) == 0 {
			wait = 1 + r.IntN(5)
		}
		for _, id := range ids {
			for range wait {
				ticked[id].Tick()
			}
			m := skipped[id]
			s, ok := m.(election.Skipper)
			if !ok {
				return fmt.Errorf("%T does not implement election.Skipper", m)
			}
			for left := wait; left > 0; {
				if n := min(left, m.Due()-1); n > 0 {
					if split.IntN(2) == 0 {
						n = 1 + split.IntN(n) // not always up to the deadline
					}
					s.Skip(n)
					left -= n
					skips++
					continue
				}
				m.Tick()
				left--
			}
			if !reflect.DeepEqual(ticked[id], m) {
				return fmt.Errorf("step %d: member %d after %d ticks differs:\nticked  %+v\nskipped %+v", step, id, wait, ticked[id], m)
			}
		}
	}
	if skips == 0 {
		return fmt.Errorf("nothing was skipped")
	}
	return nil
}

// readyAll is what the machines of ids want sent, in order.
func readyAll(ms map[uint64]election.Machine, ids []uint64) []protocol.Message {
	var out []protocol.Message
	for _, id := range ids {
		out = append(out, ms[id].Ready().Messages...)
	}
	return out
}
