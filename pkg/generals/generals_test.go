package generals

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Everything a traitor may do with one message in the exhaustive tests:
// any value of {A, B, RETREAT}, nothing, or a message after its round.
var everyLie = []lie{
	{what: sendValue, value: "A"},
	{what: sendValue, value: "B"},
	{what: sendValue, value: retreat},
	{what: withhold},
	{what: sendLate, value: "A"},
}

// The values a loyal commander issues in the exhaustive tests.
var issued = []string{"A", "B", retreat}

// eachLie calls fn once for every way traitor t can fill the messages it
// can send with everyLie, after setting w.lies to it.
func eachLie(w *world, t int, fn func()) {
	type slot struct {
		p  []int
		to int
	}
	var slots []slot
	w.sendable(t, func(p []int, to int) { slots = append(slots, slot{slices.Clone(p), to}) })
	choice := make([]int, len(slots))
	for {
		w.lies = map[string]lie{}
		for i, s := range slots {
			w.lies[lieKey(s.p, s.to)] = everyLie[choice[i]]
		}
		fn()
		i := 0
		for ; i < len(choice); i++ {
			choice[i]++
			if choice[i] < len(everyLie) {
				break
			}
			choice[i] = 0
		}
		if i == len(choice) {
			return
		}
	}
}

// eachCombination calls fn for every agreement among n members running
// OM(m) with at most one traitor: every commander, every traitor (or
// none), every value a loyal commander issues, every lie of the traitor
// (everyLie for each message it can send), each delivered in order and in
// reverse.
func eachCombination(n, m int, fn func(w *world)) {
	for commander := range n {
		for traitor := -1; traitor < n; traitor++ {
			for _, reverse := range []bool{false, true} {
				w := &world{n: n, m: m, commander: commander, traitor: make([]bool, n), reverse: reverse}
				if traitor < 0 {
					for _, v := range issued {
						w.value = v
						fn(w)
					}
					continue
				}
				w.traitor[traitor] = true
				values := issued
				if traitor == commander {
					values = []string{"unused"}
				}
				for _, v := range values {
					w.value = v
					eachLie(w, traitor, func() { fn(w) })
				}
			}
		}
	}
}

// TestOneTraitorAmongFour checks the paper's N ≥ 3f+1 at its smallest,
// N = 4, f = 1, exhaustively: whichever member is the commander, whichever
// member lies (the commander or any lieutenant), whatever it tells each
// member (A, B, RETREAT, nothing, too late), every loyal lieutenant decides
// the same value (IC1), the loyal commander's when it is loyal (IC2), and
// the same value as OM(1) written as the paper's recursion.
func TestOneTraitorAmongFour(t *testing.T) {
	combinations := 0
	eachCombination(4, 1, func(w *world) {
		combinations++
		res := run(t, w)
		if v := w.violation(res.decisions); v != "" {
			t.Fatalf("%s: %s", w.describe(), v)
		}
		ref := w.reference()
		for id, d := range res.decisions {
			if id != w.commander && d != ref[id] {
				t.Fatalf("%s: member %d decided %q, the recursion %q", w.describe(), id, d, ref[id])
			}
		}
	})
	// Per commander and delivery order: 3 values without a traitor,
	// 5^3 lies of a traitor commander, 3 × 3 × 5^2 of a traitor
	// lieutenant.
	if want := 4 * 2 * (3 + 125 + 3*3*25); combinations != want {
		t.Fatalf("checked %d combinations, want %d", combinations, want)
	}
	t.Logf("N = 4, f = 1: IC1 and IC2 hold in all %d combinations", combinations)
}

// TestThreeGeneralsCounterexample searches every lie of one traitor among
// three members running OM(1) and finds one that breaks IC1 or IC2: one
// traitor needs four members, hence N ≥ 3f+1 in the paper.
func TestThreeGeneralsCounterexample(t *testing.T) {
	if _, err := New(Config{Members: 3, Commander: 0, Self: 1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with 3 members: err %v, want ErrConfig", err)
	}
	combinations, broken := 0, 0
	var example string
	eachCombination(3, 1, func(w *world) {
		combinations++
		res := run(t, w)
		v := w.violation(res.decisions)
		if v == "" {
			return
		}
		broken++
		if example == "" {
			example = fmt.Sprintf("%s; %s", w.describe(), v)
		}
	})
	if broken == 0 {
		t.Fatalf("no counterexample in %d combinations at N = 3, f = 1", combinations)
	}
	t.Logf("N = 3, f = 1: %d of %d combinations break IC1 or IC2, e.g. %s", broken, combinations, example)
}

// TestRandomTraitors checks IC1 and IC2 at N = 7 (f = 2) and N = 10
// (f = 3) with f traitors, chosen at random like the commander and its
// value, telling random lies (values, nothing, too late, two values along
// one path, messages no member accepts), and compares each loyal lieutenant's decision with the
// paper's recursion given the same lies. Deliveries are shuffled.
func TestRandomTraitors(t *testing.T) {
	for _, tc := range []struct{ n, seeds int }{{7, 400}, {10, 200}} {
		t.Run(fmt.Sprintf("N=%d", tc.n), func(t *testing.T) {
			f := Faults(tc.n)
			for seed := range uint64(tc.seeds) {
				rng := rand.New(rand.NewPCG(seed, uint64(tc.n)))
				w := randomWorld(tc.n, f, rng)
				res := run(t, w)
				if v := w.violation(res.decisions); v != "" {
					t.Fatalf("seed %d: commander %d, traitors %v: %s", seed, w.commander, w.traitor, v)
				}
				ref := w.reference()
				for id, d := range res.decisions {
					if id != w.commander && d != ref[id] {
						t.Fatalf("seed %d: member %d decided %q, the recursion %q", seed, id, d, ref[id])
					}
				}
			}
		})
	}
}

// randomWorld returns n members with f random traitors and random lies.
func randomWorld(n, f int, rng *rand.Rand) *world {
	values := []string{"A", "B", "C", retreat}
	w := &world{n: n, m: f, commander: rng.IntN(n), traitor: make([]bool, n),
		value: values[rng.IntN(len(values))], lies: map[string]lie{}, rng: rng}
	for _, id := range rng.Perm(n)[:f] {
		w.traitor[id] = true
	}
	// Some traitors mostly tell everybody the same thing, others lie at
	// random: a bias per traitor.
	for id := range n {
		if !w.traitor[id] {
			continue
		}
		favourite, honesty := values[rng.IntN(len(values))], rng.Float64()
		w.sendable(id, func(p []int, to int) {
			var l lie
			switch r := rng.Float64(); {
			case r < honesty:
				l = lie{what: sendValue, value: favourite}
			case r < honesty+(1-honesty)/2:
				l = lie{what: sendValue, value: values[rng.IntN(len(values))]}
			default:
				l = lie{what: []option{withhold, sendLate}[rng.IntN(2)], value: values[rng.IntN(len(values))]}
			}
			if l.what == sendValue && rng.IntN(10) == 0 {
				l.second = values[rng.IntN(len(values))]
			}
			w.lies[lieKey(p, to)] = l
		})
		// Messages no member may accept: paths of random members (out of
		// range, repeated, not the commander's, not ending at the
		// traitor), values too large.
		for range 20 {
			path := make([]int, 1+rng.IntN(w.m+2))
			for i := range path {
				path[i] = rng.IntN(n+2) - 1
			}
			if rng.IntN(2) == 0 {
				path[0] = w.commander
			}
			if rng.IntN(2) == 0 {
				path[len(path)-1] = id
			}
			msg := Message{To: rng.IntN(n), Path: path, Value: values[rng.IntN(len(values))]}
			if rng.IntN(10) == 0 {
				msg.Value = strings.Repeat("x", MaxValueSize+1)
			}
			if !w.acceptable(id, msg) {
				w.forged = append(w.forged, sent{from: id, msg: msg})
			}
		}
	}
	return w
}

// TestMessageCounts checks the table of the package doc: with every member
// loyal, OM(⌊(N−1)/3⌋) sends MessageCount messages, and every lieutenant
// decides as soon as its last message arrives, before any round ends.
func TestMessageCounts(t *testing.T) {
	want := map[int]int{4: 9, 5: 16, 6: 25, 7: 156, 8: 259, 9: 400, 10: 3609, 11: 5860, 12: 9031}
	for n := MinMembers; n <= MaxMembers; n++ {
		if got := MessageCount(n, Faults(n)); got != want[n] {
			t.Errorf("MessageCount(%d, %d) = %d, want %d", n, Faults(n), got, want[n])
		}
		w := &world{n: n, m: Faults(n), commander: n - 1, traitor: make([]bool, n), value: "go"}
		res := run(t, w)
		if res.messages != want[n] {
			t.Errorf("N = %d: %d messages sent, want %d", n, res.messages, want[n])
		}
		if !res.decidedEarly {
			t.Errorf("N = %d: not every lieutenant decided before the first round's end", n)
		}
		t.Logf("N = %2d, m = %d: %5d messages", n, Faults(n), res.messages)
	}
	if got, want := MessageCount(13, 4), 108384; got != want {
		t.Errorf("MessageCount(13, 4) = %d, want %d", got, want)
	}
}
