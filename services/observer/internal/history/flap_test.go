package history

import (
	"slices"
	"testing"
	"time"
)

// flags returns which leaderships of c are flaps, in order.
func flags(c *Cluster) []bool {
	out := make([]bool, len(c.Leaderships))
	for i := range c.Leaderships {
		out[i] = c.Flap(i)
	}
	return out
}

// A flap is a leadership that the leader before it took back less than
// FlapWindow after it started: A, then B, then A again within a second
// of B's start. A slow change, a change to a third node, a new term of
// the same leader and a takeback at exactly the window are not; in a
// chain A→B→A→B each short leadership between two of the other node is.
func TestFlapMarksALeadershipReversedWithinASecond(t *testing.T) {
	const a, b, c = 5, 4, 3
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	for _, tc := range []struct {
		name    string
		leaders []uint64  // one leadership per term, from term 1
		starts  []float64 // seconds after t0
		want    []bool
	}{
		{"flap", []uint64{a, b, a}, []float64{0, 10, 10.3}, []bool{false, true, false}},
		{"slow change back", []uint64{a, b, a}, []float64{0, 10, 11.5}, []bool{false, false, false}},
		{"back at exactly the window", []uint64{a, b, a}, []float64{0, 10, 11}, []bool{false, false, false}},
		{"chain A→B→A→B", []uint64{a, b, a, b}, []float64{0, 10, 10.3, 10.6}, []bool{false, true, true, false}},
		{"on to a third node", []uint64{a, b, c}, []float64{0, 10, 10.3}, []bool{false, false, false}},
		{"same leader, new terms", []uint64{a, a, a}, []float64{0, 10, 10.3}, []bool{false, false, false}},
		{"B twice between A", []uint64{a, b, b, a}, []float64{0, 10, 10.2, 10.3}, []bool{false, false, false, false}},
		{"the latest is not yet", []uint64{a, b}, []float64{0, 10}, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := &Cluster{}
			for i, l := range tc.leaders {
				cl.Apply(leaderRec(uint64(i+1), l, sec(tc.starts[i])))
			}
			if got := flags(cl); !slices.Equal(got, tc.want) {
				t.Errorf("flaps = %v, want %v", got, tc.want)
			}
			want := 0
			for _, f := range tc.want {
				if f {
					want++
				}
			}
			if got := cl.Flaps(); got != want {
				t.Errorf("Flaps() = %d, want %d", got, want)
			}
		})
	}
}

// The leadership that reverses a flap names it (NewFlaps), once. A term
// recorded out of order (a lower term announced after a higher one) names
// the leadership it makes a flap, itself included, names none that was
// one already, and the count follows a flap it undoes.
func TestNewFlapsAndOutOfOrderTerms(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// In order: 5, then 4, then 5 again 0.3 s later.
	c := &Cluster{}
	c.Apply(leaderRec(1, 5, 0), leaderRec(2, 4, ms(10000)))
	if got := c.NewFlaps(1); len(got) != 0 {
		t.Errorf("NewFlaps of 4 after 5 = %v, want none", got)
	}
	c.Apply(leaderRec(3, 5, ms(10300)))
	if got := c.NewFlaps(2); !slices.Equal(got, []int{1}) || c.Flaps() != 1 {
		t.Errorf("NewFlaps of 5 back = %v, Flaps = %d; want [1] (term 2), 1", got, c.Flaps())
	}

	for _, tc := range []struct {
		name     string
		first    []Record // recorded in this order
		late     Record   // then this lower term
		newFlaps []int
		want     []bool
	}{
		{"late, a flap itself", []Record{leaderRec(1, 5, 0), leaderRec(3, 5, ms(10200))}, leaderRec(2, 4, ms(10000)),
			[]int{1}, []bool{false, true, false}},
		{"late, reverses the one before", []Record{leaderRec(1, 5, 0), leaderRec(2, 4, ms(10000)), leaderRec(4, 3, ms(20000))}, leaderRec(3, 5, ms(10300)),
			[]int{1}, []bool{false, true, false, false}},
		{"late, the flap was one already", []Record{leaderRec(1, 5, 0), leaderRec(2, 4, ms(10000)), leaderRec(4, 5, ms(10300))}, leaderRec(3, 5, ms(10200)),
			nil, []bool{false, true, false, false}},
		{"late, undoes a flap", []Record{leaderRec(1, 5, 0), leaderRec(3, 4, ms(10000)), leaderRec(4, 5, ms(10500))}, leaderRec(2, 3, ms(9800)),
			nil, []bool{false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{}
			c.Apply(tc.first...)
			c.Apply(tc.late)
			i, _ := c.Index(tc.late.Term)
			if got := c.NewFlaps(i); !slices.Equal(got, tc.newFlaps) {
				t.Errorf("NewFlaps of the late term = %v, want %v", got, tc.newFlaps)
			}
			want := 0
			for _, f := range tc.want {
				if f {
					want++
				}
			}
			if got := flags(c); !slices.Equal(got, tc.want) || c.Flaps() != want {
				t.Errorf("flaps = %v (%d), want %v (%d)", got, c.Flaps(), tc.want, want)
			}
		})
	}
}

// The flaps survive a reopen and a compaction, which keeps the flaps it
// keeps and drops the count of the others.
func TestFlapsAfterReopenAndCompaction(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nodes 5, 4, 5, 4, 5 every 0.3 s, then 3 a minute later: terms 2, 3
	// and 4 are flaps.
	var recs []Record
	for term, leader := range []uint64{5, 4, 5, 4, 5} {
		recs = append(recs, leaderRec(uint64(term+1), leader, 10*time.Second+time.Duration(term)*300*time.Millisecond))
	}
	recs = append(recs, leaderRec(6, 3, time.Minute))
	if _, err := s.Apply("a", recs...); err != nil {
		t.Fatal(err)
	}
	want := []bool{false, true, true, true, false, false}
	c, _ := s.Cluster("a")
	if got := flags(c); !slices.Equal(got, want) || c.Flaps() != 3 {
		t.Errorf("flaps = %v (%d), want %v (3)", got, c.Flaps(), want)
	}
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ = s.Cluster("a")
	if got := flags(c); !slices.Equal(got, want) || c.Flaps() != 3 {
		t.Errorf("reopened: flaps = %v (%d), want %v (3)", got, c.Flaps(), want)
	}
	// Keep terms 3 to 6: term 3 is the first held, with no leadership
	// before it, so it is no longer one.
	if _, err := s.Compact("a", 4); err != nil {
		t.Fatal(err)
	}
	c, _ = s.Cluster("a")
	if got, want := flags(c), []bool{false, true, false, false}; !slices.Equal(got, want) || c.Flaps() != 1 {
		t.Errorf("compacted: flaps = %v (%d), want %v (1)", got, c.Flaps(), want)
	}
}
