package election

import (
	"fmt"
	"slices"
	"testing"
)

// TestSpreadPinned pins the scores and the order of Spread for one
// cluster name, so that a client in another language can check its own
// implementation against them (docs/algorithms.md, "Ranking members").
func TestSpreadPinned(t *testing.T) {
	scores := map[uint64]uint64{
		1: 0x157ddef894fa3afd,
		2: 0x894a0e3c9ae96233,
		3: 0xfbcb086ec6fcfced,
		8: 0xbccace4200e0b4a7,
	}
	for id, want := range scores {
		if got := SpreadScore("baton", id); got != want {
			t.Errorf("SpreadScore(baton, %d) = %#016x, want %#016x", id, got, want)
		}
		if got := Spread("baton").Score(id); got != want {
			t.Errorf("Spread(baton).Score(%d) = %#016x, want %#016x", id, got, want)
		}
	}
	ids := []uint64{8, 7, 6, 5, 4, 3, 2, 1}
	Spread("baton").Sort(ids)
	// Increasing rank: 3 ranks first and leads.
	if want := []uint64{1, 5, 2, 7, 4, 8, 6, 3}; !slices.Equal(ids, want) {
		t.Errorf("members 1..8 of cluster baton in increasing rank: %v, want %v", ids, want)
	}
	if got := Spread("baton").Highest([]uint64{1, 2, 3, 4, 5, 6, 7, 8}); got != 3 {
		t.Errorf("highest of 1..8 in cluster baton: %d, want 3", got)
	}
}

// TestRankOrder checks that both ranks are total orders, repeatable,
// with 0 below every member, and that a Ranker agrees with its Rank
// whether or not it keeps the scores asked for.
func TestRankOrder(t *testing.T) {
	ids := []uint64{0, 1, 2, 3, 7, 8, 100, 1 << 40, 1<<62 - 1}
	for _, r := range []Rank{{}, ByID(), Spread("a"), Spread("b"), Spread("")} {
		kept := r.Ranker(ids[1:5])
		for _, a := range ids {
			if r.Above(a, a) {
				t.Errorf("%v(%q): %d above itself", r, r.Cluster(), a)
			}
			if a != 0 && (!r.Above(a, 0) || r.Above(0, a)) {
				t.Errorf("%v(%q): %d not above 0", r, r.Cluster(), a)
			}
			for _, b := range ids {
				if a != b && r.Above(a, b) == r.Above(b, a) {
					t.Errorf("%v(%q): %d and %d not ordered", r, r.Cluster(), a, b)
				}
				if kept.Above(a, b) != r.Above(a, b) {
					t.Errorf("%v(%q): the ranker orders %d and %d otherwise", r, r.Cluster(), a, b)
				}
				for _, c := range ids {
					if r.Above(a, b) && r.Above(b, c) && !r.Above(a, c) {
						t.Errorf("%v(%q): %d > %d > %d but not %d > %d", r, r.Cluster(), a, b, c, a, c)
					}
				}
			}
		}
		if !r.IsSpread() {
			if !r.Above(8, 7) || r.String() != "id" {
				t.Errorf("rank by ID %v: 8 not above 7", r)
			}
		}
	}
	// A tie of scores goes to the higher ID.
	if !above(5, 4, 9, 9) || above(4, 5, 9, 9) || !above(4, 5, 10, 9) {
		t.Error("ties are not broken by the higher ID")
	}
	x, alsoX := Spread("x"), Spread("x")
	if x != alsoX || x == Spread("y") || Spread("") == ByID() {
		t.Error("ranks do not compare as values")
	}
}

// TestSpreadEven checks that Spread spreads the leaders of many
// elections evenly over the members, and that a member that joins takes
// over only the elections where it ranks first.
func TestSpreadEven(t *testing.T) {
	members := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	joined := append(slices.Clone(members), 9)
	count := map[uint64]int{}
	took := 0
	for i := range 256 {
		r := Spread(fmt.Sprintf("shard-%d", i))
		before, after := r.Highest(members), r.Highest(joined)
		count[before]++
		switch {
		case after == 9:
			took++
			for _, id := range members {
				if !r.Above(9, id) {
					t.Errorf("shard-%d: 9 leads but ranks below %d", i, id)
				}
			}
		case after != before:
			t.Errorf("shard-%d: the leader moved from %d to %d when 9 joined", i, before, after)
		}
		// The others keep their order.
		a, b := slices.Clone(members), slices.DeleteFunc(slices.Clone(joined), func(id uint64) bool { return id == 9 })
		r.Sort(a)
		r.Sort(b)
		if !slices.Equal(a, b) {
			t.Errorf("shard-%d: the order of the others changed", i)
		}
	}
	for _, id := range members {
		if n := count[id]; n < 20 || n > 44 {
			t.Errorf("member %d leads %d of 256 elections, want 20 to 44 (%v)", id, n, count)
		}
	}
	if took < 14 || took > 44 {
		t.Errorf("member 9 took over %d of 256 elections, want about 28", took)
	}
	t.Logf("leaders of 256 elections over 8 members: %v; member 9 took %d", count, took)
}

func TestParseRank(t *testing.T) {
	for _, c := range []struct {
		name string
		want Rank
	}{{"", ByID()}, {"id", ByID()}, {"spread", Spread("c")}} {
		got, err := ParseRank(c.name, "c")
		if err != nil || got != c.want {
			t.Errorf("ParseRank(%q) = %v, %v, want %v", c.name, got, err, c.want)
		}
	}
	if _, err := ParseRank("ID", "c"); err == nil {
		t.Error("ParseRank(ID) succeeded")
	}
	if Spread("c").String() != "spread" || Spread("c").Cluster() != "c" {
		t.Error("Spread(c) names itself wrong")
	}
}

func TestConfigRank(t *testing.T) {
	for _, r := range []Rank{ByID(), Spread("c")} {
		cfg := Config{ID: 1, Members: []uint64{1, 2, 3}, Timing: DefaultTiming(3), Rank: r}
		if _, err := cfg.Validate(); err != nil {
			t.Errorf("Validate with rank %v: %v", r, err)
		}
	}
}

func BenchmarkRankerAbove(b *testing.B) {
	ids := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	k := Spread("bench").Ranker(ids)
	for i := range b.N {
		k.Above(ids[i%8], ids[(i+3)%8])
	}
}
