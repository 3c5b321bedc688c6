package generals

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestNewRefusesBadConfig(t *testing.T) {
	long := strings.Repeat("x", MaxValueSize+1)
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"no members", Config{}, ErrConfig},
		{"three members", Config{Members: 3, Self: 1}, ErrConfig},
		{"thirteen members", Config{Members: MaxMembers + 1, Self: 1}, ErrConfig},
		{"negative members", Config{Members: -4}, ErrConfig},
		{"commander below", Config{Members: 4, Commander: -1}, ErrConfig},
		{"commander above", Config{Members: 4, Commander: 4}, ErrConfig},
		{"self below", Config{Members: 4, Self: -1}, ErrConfig},
		{"self above", Config{Members: 4, Self: 4}, ErrConfig},
		{"default too large", Config{Members: 4, Self: 1, Default: long}, ErrValueSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); !errors.Is(err, tc.want) {
				t.Fatalf("New(%+v): err %v, want %v", tc.cfg, err, tc.want)
			}
		})
	}
	for _, n := range []int{MinMembers, MaxMembers} {
		if _, err := New(Config{Members: n, Commander: n - 1, Self: 0, Default: strings.Repeat("x", MaxValueSize)}); err != nil {
			t.Errorf("New with %d members: %v", n, err)
		}
	}
}

func TestIssue(t *testing.T) {
	lt, _ := New(Config{Members: 4, Commander: 2, Self: 0})
	if _, err := lt.Issue("A"); !errors.Is(err, ErrNotCommander) {
		t.Errorf("lieutenant's Issue: err %v, want ErrNotCommander", err)
	}
	c, _ := New(Config{Members: 4, Commander: 2, Self: 2})
	if _, err := c.Issue(strings.Repeat("x", MaxValueSize+1)); !errors.Is(err, ErrValueSize) {
		t.Errorf("Issue of a large value: err %v, want ErrValueSize", err)
	}
	if v, ok := c.Decision(); ok {
		t.Errorf("commander decided %q before issuing", v)
	}
	out, err := c.Issue("A")
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	want := []Message{{To: 0, Path: []int{2}, Value: "A"}, {To: 1, Path: []int{2}, Value: "A"}, {To: 3, Path: []int{2}, Value: "A"}}
	if !equalMessages(out, want) {
		t.Errorf("Issue: got %+v, want %+v", out, want)
	}
	if v, ok := c.Decision(); !ok || v != "A" {
		t.Errorf("commander's decision: got %q, %v, want A, true", v, ok)
	}
	if out, err := c.Receive(1, Message{To: 2, Path: []int{2, 1}, Value: "B"}); !errors.Is(err, ErrPath) || out != nil {
		t.Errorf("commander's Receive: got %+v, %v, want nothing, ErrPath", out, err)
	}
	if _, err := c.Issue("B"); !errors.Is(err, ErrIssued) {
		t.Errorf("second Issue: err %v, want ErrIssued", err)
	}
	if out := c.EndRound(); out != nil {
		t.Errorf("commander's EndRound: got %+v, want nothing", out)
	}
}

// TestReceiveRefusesBadInput: member 1 of seven (OM(2), commander 0).
func TestReceiveRefusesBadInput(t *testing.T) {
	long := strings.Repeat("x", MaxValueSize+1)
	for _, tc := range []struct {
		name string
		from int
		msg  Message
		want error
	}{
		{"sender below", -1, Message{To: 1, Path: []int{0}}, ErrMember},
		{"sender above", 7, Message{To: 1, Path: []int{0}}, ErrMember},
		{"another recipient", 0, Message{To: 2, Path: []int{0}}, ErrRecipient},
		{"no path", 0, Message{To: 1}, ErrPath},
		{"path too long", 4, Message{To: 1, Path: []int{0, 2, 3, 4}}, ErrPath},
		{"member below", 2, Message{To: 1, Path: []int{0, -1, 2}}, ErrMember},
		{"member above", 2, Message{To: 1, Path: []int{0, 9, 2}}, ErrMember},
		{"member repeated", 2, Message{To: 1, Path: []int{0, 2, 2}}, ErrPath},
		{"commander repeated", 0, Message{To: 1, Path: []int{0, 3, 0}}, ErrPath},
		{"not from the commander", 2, Message{To: 1, Path: []int{2}}, ErrPath},
		{"through the receiver", 3, Message{To: 1, Path: []int{0, 1, 3}}, ErrPath},
		{"forged for another", 3, Message{To: 1, Path: []int{0, 2}}, ErrSender},
		{"value too large", 0, Message{To: 1, Path: []int{0}, Value: long}, ErrValueSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc, err := New(Config{Members: 7, Commander: 0, Self: 1})
			if err != nil {
				t.Fatal(err)
			}
			out, err := mc.Receive(tc.from, tc.msg)
			if !errors.Is(err, tc.want) || out != nil {
				t.Fatalf("Receive(%d, %+v): got %+v, %v, want nothing, %v", tc.from, tc.msg, out, err, tc.want)
			}
			// Nothing was stored: the valid message is still taken.
			if out, err := mc.Receive(0, Message{To: 1, Path: []int{0}, Value: "A"}); err != nil || len(out) != 5 {
				t.Fatalf("then Receive of the commander's value: %d messages, %v; want 5, nil", len(out), err)
			}
		})
	}
}

// TestRelayAndCopies: a lieutenant relays what it receives along a path
// of fewer than m+1 members to every member outside the path, in order;
// a copy changes nothing; another value along the same path is refused
// and the first stays.
func TestRelayAndCopies(t *testing.T) {
	mc, _ := New(Config{Members: 7, Commander: 0, Self: 1})
	out, err := mc.Receive(3, Message{To: 1, Path: []int{0, 3}, Value: "B"})
	if err != nil {
		t.Fatal(err)
	}
	var want []Message
	for _, to := range []int{2, 4, 5, 6} {
		want = append(want, Message{To: to, Path: []int{0, 3, 1}, Value: "B"})
	}
	if !equalMessages(out, want) {
		t.Errorf("relays: got %+v, want %+v", out, want)
	}
	if out, err := mc.Receive(3, Message{To: 1, Path: []int{0, 3}, Value: "B"}); err != nil || out != nil {
		t.Errorf("copy: got %+v, %v, want nothing, nil", out, err)
	}
	if out, err := mc.Receive(3, Message{To: 1, Path: []int{0, 3}, Value: "C"}); !errors.Is(err, ErrEquivocation) || out != nil {
		t.Errorf("another value: got %+v, %v, want nothing, ErrEquivocation", out, err)
	}
	// A path of m+1 members is not relayed.
	if out, err := mc.Receive(4, Message{To: 1, Path: []int{0, 3, 4}, Value: "B"}); err != nil || out != nil {
		t.Errorf("last round: got %+v, %v, want nothing, nil", out, err)
	}
	// Each relay has a path of its own, not the caller's.
	path := []int{0, 2}
	out, err = mc.Receive(2, Message{To: 1, Path: path, Value: "A"})
	if err != nil || len(out) != 4 {
		t.Fatalf("Receive: %d messages, %v; want 4, nil", len(out), err)
	}
	path[1] = 5
	out[0].Path[2] = 6
	for i, m := range out[1:] {
		if !slices.Equal(m.Path, []int{0, 2, 1}) {
			t.Errorf("relay %d: path %v, want [0 2 1]", i+1, m.Path)
		}
	}
}

// TestDeadlines: the paper's lieutenants relay what they receive; a
// member that receives nothing relays the default at each round's end,
// decides the default after the last, and refuses what comes late.
func TestDeadlines(t *testing.T) {
	mc, _ := New(Config{Members: 4, Commander: 0, Self: 1, Default: "retreat"})
	if mc.Rounds() != 2 {
		t.Fatalf("Rounds: got %d, want 2", mc.Rounds())
	}
	want := []Message{{To: 2, Path: []int{0, 1}, Value: "retreat"}, {To: 3, Path: []int{0, 1}, Value: "retreat"}}
	if out := mc.EndRound(); !equalMessages(out, want) {
		t.Errorf("first EndRound: got %+v, want %+v", out, want)
	}
	if _, ok := mc.Decision(); ok {
		t.Fatal("decided after one of two rounds")
	}
	if _, err := mc.Receive(0, Message{To: 1, Path: []int{0}, Value: "A"}); !errors.Is(err, ErrLate) {
		t.Errorf("commander's value after the first round: err %v, want ErrLate", err)
	}
	// Round 2 still takes its messages.
	if _, err := mc.Receive(2, Message{To: 1, Path: []int{0, 2}, Value: "A"}); err != nil {
		t.Fatal(err)
	}
	if out := mc.EndRound(); out != nil {
		t.Errorf("last EndRound: got %+v, want nothing", out)
	}
	// Votes: retreat (none from the commander), A (from 2), retreat (none
	// from 3): retreat.
	if v, ok := mc.Decision(); !ok || v != "retreat" {
		t.Errorf("decision: got %q, %v, want retreat, true", v, ok)
	}
	if _, err := mc.Receive(3, Message{To: 1, Path: []int{0, 3}, Value: "A"}); !errors.Is(err, ErrLate) {
		t.Errorf("after the last round: err %v, want ErrLate", err)
	}
	if out := mc.EndRound(); out != nil {
		t.Errorf("EndRound after the last: got %+v, want nothing", out)
	}
	if v, _ := mc.Decision(); v != "retreat" {
		t.Errorf("decision changed to %q", v)
	}
}

// TestMajority: more than half, else the default.
func TestMajority(t *testing.T) {
	for _, tc := range []struct {
		votes []string
		want  string
	}{
		{[]string{"A"}, "A"},
		{[]string{"A", "B", "A"}, "A"},
		{[]string{"B", "A", "A"}, "A"},
		{[]string{"A", "B"}, "R"},
		{[]string{"A", "B", "C"}, "R"},
		{[]string{"A", "A", "B", "B"}, "R"},
		{[]string{"A", "B", "B", "B"}, "B"},
		{[]string{"R", "R", "A"}, "R"},
	} {
		if got := majority(tc.votes, "R"); got != tc.want {
			t.Errorf("majority(%q): got %q, want %q", tc.votes, got, tc.want)
		}
	}
}

func TestFaults(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 0, 3: 0, 4: 1, 6: 1, 7: 2, 10: 3, 12: 3, 13: 4} {
		if got := Faults(n); got != want {
			t.Errorf("Faults(%d): got %d, want %d", n, got, want)
		}
	}
}

func equalMessages(a, b []Message) bool {
	return slices.EqualFunc(a, b, func(x, y Message) bool {
		return x.To == y.To && x.Value == y.Value && slices.Equal(x.Path, y.Path)
	})
}
