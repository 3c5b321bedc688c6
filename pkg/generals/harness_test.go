package generals

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The default value of every test (Lamport's RETREAT).
const retreat = "R"

// What a traitor does with one message it could send.
type option int

const (
	sendValue option = iota // send lie.value
	withhold                // send nothing
	sendLate                // send lie.value after the message's round ended
)

type lie struct {
	what  option
	value string
	// second, when not empty, is sent to the same recipient along the same
	// path right after value: an equivocation the recipient must refuse.
	second string
}

// world is one agreement: who is loyal, what the loyal commander issues,
// and every lie of every traitor, keyed by (path, recipient).
type world struct {
	n, m, commander int
	traitor         []bool
	value           string
	lies            map[string]lie
	// forged are messages traitors send that no member accepts (a path
	// that does not end at its sender, repeats a member, …), delivered
	// in the first round.
	forged  []sent
	rng     *rand.Rand // shuffles deliveries when set
	reverse bool       // delivers each batch in reverse order
}

func lieKey(p []int, to int) string { return pathKey(append(slices.Clip(p), to)) }

// lieOf returns what the traitor at p's end sends along p to member to.
func (w *world) lieOf(p []int, to int) lie {
	l, ok := w.lies[lieKey(p, to)]
	if !ok {
		return lie{what: withhold}
	}
	return l
}

// sendable calls fn with every message traitor t can send that a
// receiver would accept: every path of 1 … m+1 distinct members that
// starts at the commander and ends at t, to every member outside it, in
// a fixed order.
func (w *world) sendable(t int, fn func(p []int, to int)) {
	var walk func(p []int)
	walk = func(p []int) {
		if len(p) > w.m+1 {
			return
		}
		if p[len(p)-1] == t {
			for to := range w.n {
				if !slices.Contains(p, to) {
					fn(p, to)
				}
			}
			return
		}
		for id := range w.n {
			if !slices.Contains(p, id) {
				walk(append(slices.Clip(p), id))
			}
		}
	}
	walk([]int{w.commander})
}

type sent struct {
	from int
	msg  Message
	// late marks a traitor's message sent after its round ended.
	late bool
	// second marks a traitor's second message along a path.
	second bool
}

// outcome is what a run produced.
type outcome struct {
	decisions map[int]string // of the loyal members
	messages  int            // sent, by everyone
	// decidedEarly: every loyal member had decided before the first
	// round's end.
	decidedEarly bool
}

// run plays w round by round: the round's messages are delivered (in a
// fixed, reversed or shuffled order, relays included), then every loyal
// member's round ends. It fails the test on any error a loyal message
// causes or a traitor's message should not cause.
func run(t *testing.T, w *world) outcome {
	t.Helper()
	machines := map[int]*Machine{}
	for id := range w.n {
		if w.traitor[id] {
			continue
		}
		mc, err := newMachine(Config{Members: w.n, Commander: w.commander, Self: id, Default: retreat}, w.m)
		if err != nil {
			t.Fatalf("newMachine(%d): %v", id, err)
		}
		machines[id] = mc
	}
	res := outcome{decisions: map[int]string{}}
	var queue, seconds []sent
	if !w.traitor[w.commander] {
		out, err := machines[w.commander].Issue(w.value)
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		for _, m := range out {
			queue = append(queue, sent{from: w.commander, msg: m})
		}
	}
	// Traitors' messages by round (path length).
	traitorMsgs := make([][]sent, w.m+3)
	for id := range w.n {
		if !w.traitor[id] {
			continue
		}
		w.sendable(id, func(p []int, to int) {
			l := w.lieOf(p, to)
			if l.what == withhold {
				return
			}
			round := len(p)
			s := sent{from: id, msg: Message{To: to, Path: slices.Clone(p), Value: l.value}}
			if l.what == sendLate {
				s.late = true
				round++
			}
			traitorMsgs[round] = append(traitorMsgs[round], s)
			if l.second != "" && l.what == sendValue {
				s.msg.Value, s.second = l.second, true
				traitorMsgs[round] = append(traitorMsgs[round], s)
			}
		})
	}
	deliver := func(s sent) {
		t.Helper()
		res.messages++
		mc := machines[s.msg.To]
		if mc == nil {
			return // to a traitor
		}
		out, err := mc.Receive(s.from, s.msg)
		switch {
		case s.late:
			if !errors.Is(err, ErrLate) {
				t.Fatalf("late %+v from %d: err %v, want ErrLate", s.msg, s.from, err)
			}
		case s.second:
			if err != nil && !errors.Is(err, ErrEquivocation) {
				t.Fatalf("second %+v from %d: err %v, want nil or ErrEquivocation", s.msg, s.from, err)
			}
		case err != nil:
			t.Fatalf("%+v from %d: %v", s.msg, s.from, err)
		}
		for _, m := range out {
			queue = append(queue, sent{from: s.msg.To, msg: m})
		}
	}
	for _, s := range w.forged {
		res.messages++
		if mc := machines[s.msg.To]; mc != nil {
			if out, err := mc.Receive(s.from, s.msg); err == nil || out != nil {
				t.Fatalf("forged %+v from %d: got %+v, %v, want nothing and an error", s.msg, s.from, out, err)
			}
		}
	}
	for round := 1; round <= w.m+1; round++ {
		for _, s := range traitorMsgs[round] {
			if s.second {
				seconds = append(seconds, s)
			} else {
				queue = append(queue, s)
			}
		}
		for len(queue) > 0 {
			batch := queue
			queue = nil
			switch {
			case w.rng != nil:
				w.rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			case w.reverse:
				slices.Reverse(batch)
			}
			for _, s := range batch {
				deliver(s)
			}
		}
		for _, s := range seconds {
			deliver(s)
		}
		seconds = nil
		if round == 1 {
			res.decidedEarly = true
			for _, mc := range machines {
				if _, ok := mc.Decision(); !ok {
					res.decidedEarly = false
				}
			}
		}
		for id := range w.n {
			if mc := machines[id]; mc != nil {
				for _, m := range mc.EndRound() {
					queue = append(queue, sent{from: id, msg: m})
				}
			}
		}
	}
	// The last round's late messages, and nothing else: the last round
	// relays nothing.
	for _, s := range traitorMsgs[w.m+2] {
		deliver(s)
	}
	if len(queue) > 0 {
		t.Fatalf("%d messages after the last round, first %+v", len(queue), queue[0])
	}
	for id, mc := range machines {
		v, ok := mc.Decision()
		if !ok {
			t.Fatalf("member %d undecided after %d rounds", id, w.m+1)
		}
		res.decisions[id] = v
	}
	return res
}

// violation returns which of IC1 and IC2 the decisions break, or "".
func (w *world) violation(dec map[int]string) string {
	first, v := -1, ""
	for id := range w.n {
		d, ok := dec[id]
		if !ok || id == w.commander {
			continue
		}
		if !w.traitor[w.commander] && d != w.value {
			return fmt.Sprintf("IC2: loyal commander %d issued %q, loyal lieutenant %d decided %q", w.commander, w.value, id, d)
		}
		if first < 0 {
			first, v = id, d
		} else if d != v {
			return fmt.Sprintf("IC1: loyal lieutenants %d and %d decided %q and %q", first, id, v, d)
		}
	}
	return ""
}

// reference is OM(m) as the paper writes it, recursively, for the lies of
// w: it returns the value each lieutenant decides. A late message counts
// as withheld, since it arrives after its round ended.
func (w *world) reference() map[int]string {
	var lieutenants []int
	for id := range w.n {
		if id != w.commander {
			lieutenants = append(lieutenants, id)
		}
	}
	return w.om(w.m, []int{w.commander}, w.value, lieutenants)
}

// om runs OM(m) whose commander is path's last member, which issues v
// when loyal, among lieutenants.
func (w *world) om(m int, path []int, v string, lieutenants []int) map[int]string {
	cmd := path[len(path)-1]
	// (1) The commander sends its value to every lieutenant.
	received := map[int]string{}
	for _, i := range lieutenants {
		received[i] = v
		if w.traitor[cmd] {
			received[i] = retreat // nothing arrived
			if l := w.lieOf(path, i); l.what == sendValue {
				received[i] = l.value
			}
		}
	}
	if m == 0 {
		// OM(0) (2): each lieutenant uses the value it received, or
		// RETREAT if it received none.
		return received
	}
	// OM(m) (2): each lieutenant j acts as commander in OM(m−1) to send
	// the value it received to the other n−2 lieutenants.
	sub := map[int]map[int]string{}
	for _, j := range lieutenants {
		others := slices.DeleteFunc(slices.Clone(lieutenants), func(i int) bool { return i == j })
		sub[j] = w.om(m-1, append(slices.Clip(path), j), received[j], others)
	}
	// (3) Each lieutenant i uses majority(v_1, …, v_{n−1}): its own
	// received value and what OM(m−1) gave it for each other j.
	decided := map[int]string{}
	for _, i := range lieutenants {
		counts := map[string]int{received[i]: 1}
		for _, j := range lieutenants {
			if j != i {
				counts[sub[j][i]]++
			}
		}
		decided[i] = retreat
		for val, c := range counts {
			if 2*c > len(lieutenants) {
				decided[i] = val
			}
		}
	}
	return decided
}

func (o option) String() string {
	return [...]string{"sends", "withholds", "sends too late"}[o]
}

// describe says who commands, what a loyal commander issues and what each
// traitor tells whom.
func (w *world) describe() string {
	var b strings.Builder
	if w.traitor[w.commander] {
		fmt.Fprintf(&b, "commander %d lies", w.commander)
	} else {
		fmt.Fprintf(&b, "commander %d issues %q", w.commander, w.value)
	}
	for id := range w.n {
		if !w.traitor[id] {
			continue
		}
		fmt.Fprintf(&b, "; traitor %d", id)
		w.sendable(id, func(p []int, to int) {
			l := w.lieOf(p, to)
			fmt.Fprintf(&b, ", %v→%d %v", p, to, l.what)
			if l.what != withhold {
				fmt.Fprintf(&b, " %q", l.value)
			}
		})
	}
	return b.String()
}

// acceptable says whether a member would accept msg from member from:
// the rules of the package doc, written independently of checkPath.
func (w *world) acceptable(from int, msg Message) bool {
	p := msg.Path
	if len(p) == 0 || len(p) > w.m+1 || p[0] != w.commander || p[len(p)-1] != from {
		return false
	}
	if msg.To < 0 || msg.To >= w.n || slices.Contains(p, msg.To) {
		return false
	}
	for i, id := range p {
		if id < 0 || id >= w.n || slices.Index(p, id) != i {
			return false
		}
	}
	return len(msg.Value) <= MaxValueSize
}
