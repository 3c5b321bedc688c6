package main

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ann(cluster string, leader, term uint64, ms int) protocol.Announcement {
	return protocol.Announcement{Cluster: cluster, Leader: leader, Term: term, Algorithm: protocol.Paxos, At: protocol.Timestamp{Time: at(ms)}}
}

func u64(v uint64) *uint64 { return &v }

func i64(v int64) *int64 { return &v }

// leading is the status of id leading cluster in term, with a lease of
// lease ms (none if 0).
func leading(cluster string, id, term uint64, lease int64) protocol.Status {
	st := protocol.Status{ID: id, Cluster: cluster, Algorithm: protocol.Paxos, Leader: u64(id), Term: term, State: "leader"}
	if lease > 0 {
		st.LeaseRemainingMS = i64(lease)
	}
	return st
}

// following is the status of id following leader in term.
func following(cluster string, id, leader, term uint64) protocol.Status {
	return protocol.Status{ID: id, Cluster: cluster, Algorithm: protocol.Paxos, Leader: u64(leader), Term: term, State: "follower"}
}

func poll(id uint64, run, sentMS, recvMS int, sts ...protocol.Status) Poll {
	return Poll{ID: id, Run: run, Sent: at(sentMS), Recv: at(recvMS), Statuses: sts}
}

// rules are the rules of the violations found.
func rules(c *Checker) []string {
	var out []string
	for _, v := range c.Violations() {
		out = append(out, v.Rule)
	}
	return out
}

func wantRules(t *testing.T, c *Checker, want ...string) {
	t.Helper()
	got := rules(c)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("violations %q, want rules %q", c.Violations(), want)
	}
}

// A clean history: terms that increase, one leader per term, leases one
// after the other, every election led by a leader all name.
func TestCleanHistory(t *testing.T) {
	c := NewChecker(protocol.Paxos, []string{"a", "b"}, 10*time.Millisecond)
	c.Announce(ann("a", 3, 1, 0), at(1))
	c.Announce(ann("b", 3, 1, 0), at(1))
	c.Announce(ann("a", 3, 1, 0), at(2)) // the same, over another connection: not counted
	c.Poll(poll(3, 1, 10, 20, leading("a", 3, 1, 150), leading("b", 3, 1, 150)))
	c.Poll(poll(2, 1, 10, 20, following("a", 2, 3, 1), following("b", 2, 3, 1)))
	c.Poll(poll(1, 1, 10, 20, following("a", 1, 3, 1), following("b", 1, 3, 1)))
	if un := c.Unled([]uint64{1, 2, 3}, at(0)); len(un) != 0 {
		t.Errorf("unled %v, want none", un)
	}
	// 3 dies; 2 leads a, in a higher term, once 3's lease is over.
	c.Announce(ann("a", 2, 2, 400), at(401))
	c.Poll(poll(2, 1, 410, 420, leading("a", 2, 2, 150), following("b", 2, 3, 1)))
	c.Poll(poll(1, 1, 410, 420, following("a", 1, 2, 2), following("b", 1, 3, 1)))
	// 3 comes back (a new run) and takes a over again.
	c.Announce(ann("a", 3, 7, 900), at(901))
	c.Poll(poll(3, 2, 910, 920, leading("a", 3, 7, 150), leading("b", 3, 1, 150)))
	c.Poll(poll(2, 1, 910, 920, following("a", 2, 3, 7), following("b", 2, 3, 1)))
	c.Poll(poll(1, 1, 910, 920, following("a", 1, 3, 7), following("b", 1, 3, 1)))
	if un := c.Unled([]uint64{1, 2, 3}, at(900)); len(un) != 0 {
		t.Errorf("unled %v, want none", un)
	}
	wantRules(t, c)
	if d, r := c.Announcements(); d != 4 || r != 0 {
		t.Errorf("announcements %d, repeats %d; want 4, 0", d, r)
	}
}

func TestTermOfTwoLeaders(t *testing.T) {
	c := NewChecker(protocol.Bully, []string{"a"}, 0)
	c.Announce(ann("a", 3, 5, 0), at(1))
	c.Announce(ann("a", 4, 5, 10), at(11))
	wantRules(t, c, RuleTermOwner)

	// From the polls: a follower naming another leader for an announced term.
	c = NewChecker(protocol.Bully, []string{"a"}, 0)
	c.Announce(ann("a", 3, 5, 0), at(1))
	c.Poll(poll(1, 1, 10, 20, following("a", 1, 4, 5)))
	wantRules(t, c, RuleTermOwner)
}

func TestLeaderTermsGoBack(t *testing.T) {
	c := NewChecker(protocol.Ring, []string{"a"}, 0)
	c.Announce(ann("a", 3, 9, 0), at(1))
	c.Announce(ann("a", 3, 7, 500), at(501)) // after a restart, a lower term
	wantRules(t, c, RuleLeaderTerms)

	// Heard out of order, the order of their times counts.
	c = NewChecker(protocol.Ring, []string{"a"}, 0)
	c.Announce(ann("a", 3, 9, 500), at(501))
	c.Announce(ann("a", 3, 7, 0), at(502))
	wantRules(t, c)
	c.Announce(ann("a", 3, 10, 100), at(503)) // made before term 9
	wantRules(t, c, RuleLeaderTerms)

	// The same term again with another time is a repeat, not a violation.
	c = NewChecker(protocol.Ring, []string{"a"}, 0)
	c.Announce(ann("a", 3, 9, 0), at(1))
	c.Announce(ann("a", 3, 9, 100), at(101))
	wantRules(t, c)
	if d, r := c.Announcements(); d != 1 || r != 1 {
		t.Errorf("announcements %d, repeats %d; want 1, 1", d, r)
	}
}

func TestViewTermGoesBack(t *testing.T) {
	c := NewChecker(protocol.Bully, []string{"a"}, 0)
	c.Poll(poll(1, 1, 0, 10, following("a", 1, 3, 5)))
	c.Poll(poll(1, 1, 300, 310, following("a", 1, 3, 4)))
	wantRules(t, c, RuleViewTerm)

	// Across runs of the process it is the announcements that count.
	c = NewChecker(protocol.Bully, []string{"a"}, 0)
	c.Poll(poll(1, 1, 0, 10, following("a", 1, 3, 5)))
	c.Poll(poll(1, 2, 300, 310, protocol.Status{ID: 1, Cluster: "a", State: "follower"}))
	wantRules(t, c)
}

func TestLeasesOverlap(t *testing.T) {
	c := NewChecker(protocol.Paxos, []string{"a"}, 10*time.Millisecond)
	c.Poll(poll(3, 1, 0, 10, leading("a", 3, 1, 180)))    // [10, 170]
	c.Poll(poll(2, 1, 100, 110, leading("a", 2, 2, 150))) // [110, 240]
	wantRules(t, c, RuleLeases)

	// One after the other, or within the slack and the poll's time: no overlap.
	c = NewChecker(protocol.Paxos, []string{"a"}, 10*time.Millisecond)
	c.Poll(poll(3, 1, 0, 10, leading("a", 3, 1, 180)))    // [10, 170]
	c.Poll(poll(2, 1, 160, 175, leading("a", 2, 2, 150))) // [175, 300]
	c.Poll(poll(3, 1, 0, 100, leading("a", 3, 1, 150)))   // [100, 140]: the request took long
	wantRules(t, c)

	// A leader hands over to a higher node before its lease ends.
	c = NewChecker(protocol.Paxos, []string{"a"}, 10*time.Millisecond)
	c.Poll(poll(2, 1, 0, 10, leading("a", 2, 1, 180)))    // [10, 170]
	c.Poll(poll(3, 1, 100, 110, leading("a", 3, 2, 150))) // [110, 240]
	wantRules(t, c)

	// And to any node when it leaves (SIGTERM), its leases cut there.
	c = NewChecker(protocol.Paxos, []string{"a"}, 10*time.Millisecond)
	c.Poll(poll(3, 1, 0, 10, leading("a", 3, 1, 180))) // [10, 170]
	c.Resigned(3, at(50))                              // [10, 50]
	c.Poll(poll(2, 1, 100, 110, leading("a", 2, 2, 150)))
	wantRules(t, c)
	c.Poll(poll(3, 1, 40, 60, leading("a", 3, 1, 180))) // sent before the SIGTERM: [60, 50], empty
	wantRules(t, c)

	// Without leases (Bully), two leaders at once are not checked.
	c = NewChecker(protocol.Bully, []string{"a"}, 10*time.Millisecond)
	c.Poll(poll(3, 1, 0, 10, leading("a", 3, 1, 0)))
	c.Poll(poll(2, 1, 0, 10, leading("a", 2, 2, 0)))
	wantRules(t, c)
}

func TestNotHealing(t *testing.T) {
	c := NewChecker(protocol.Bully, []string{"a", "b", "c", "d"}, 0)
	live := []uint64{1, 2}
	c.Poll(poll(1, 1, 100, 110, following("a", 1, 2, 3), following("b", 1, 3, 4), following("c", 1, 2, 3), following("d", 1, 2, 3)))
	c.Poll(poll(2, 1, 100, 110, leading("a", 2, 3, 0), following("b", 2, 3, 4), following("c", 2, 2, 3), protocol.Status{ID: 2, Cluster: "d", State: "candidate", Term: 3}))
	un := c.Unled(live, at(50))
	var got []string
	for _, u := range un {
		got = append(got, u.Cluster+": "+u.Why)
	}
	want := []string{
		"b: every live node names 3 (term 4), which is not live",
		"c: every live node names 2 (term 3), which reports follower",
		"d: node 2 knows no leader (term 3, candidate)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("unled:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Polls sent before the fault do not count.
	if un := c.Unled(live, at(101)); len(un) != 4 || !strings.HasPrefix(un[0].Why, "no status of node 1") {
		t.Errorf("unled since after the polls: %v, want all four without a status", un)
	}
	c.HealFailed(at(30000), "kill node 3", 30*time.Second, un)
	wantRules(t, c, RuleHeal)
	if text := c.Violations()[0].Text; !strings.Contains(text, "3 elections not led again within 30s") {
		t.Errorf("violation %q", text)
	}
}

func TestLeadersInTermOrder(t *testing.T) {
	// A report of leading in a lower term, asked after a report of
	// leading in a higher term was answered: whatever the leases said.
	c := NewChecker(protocol.Paxos, []string{"a"}, 10*time.Millisecond)
	c.Poll(poll(2, 1, 0, 10, leading("a", 2, 7, 0)))
	c.Poll(poll(3, 1, 20, 30, leading("a", 3, 5, 0)))
	wantRules(t, c, RuleLeaderOrder)

	// The polls overlap in time: either could have come first.
	c = NewChecker(protocol.Paxos, []string{"a"}, 10*time.Millisecond)
	c.Poll(poll(2, 1, 0, 30, leading("a", 2, 7, 0)))
	c.Poll(poll(3, 1, 20, 40, leading("a", 3, 5, 0)))
	wantRules(t, c)

	// Long after: remembered as the settled term.
	c.Poll(poll(2, 1, 0, 30, leading("a", 2, 9, 0)))
	c.Poll(poll(1, 1, 20000, 20010, leading("a", 1, 8, 0)))
	wantRules(t, c, RuleLeaderOrder)

	// Bully and the ring may have an old leader for a moment.
	c = NewChecker(protocol.Bully, []string{"a"}, 0)
	c.Poll(poll(2, 1, 0, 10, leading("a", 2, 7, 0)))
	c.Poll(poll(3, 1, 20, 30, leading("a", 3, 5, 0)))
	wantRules(t, c)
}

// With several elections the nodes rank the members of each by
// rendezvous hashing: a hand-over goes to the node that ranks higher in
// that election, whatever its ID.
func TestLeasesHandOverBySpreadRank(t *testing.T) {
	// An election where member 4 outranks member 6, and one where 6
	// outranks 4.
	var up, down string
	for i := 0; up == "" || down == ""; i++ {
		name := fmt.Sprintf("soak-%d", i)
		if election.Spread(name).Above(4, 6) {
			up = cmp.Or(up, name)
		} else {
			down = cmp.Or(down, name)
		}
	}
	names := []string{up, down}
	for _, tc := range []struct {
		cluster string
		want    []string
	}{
		{up, nil},                    // 6 hands over to 4, which ranks higher
		{down, []string{RuleLeases}}, // 4 ranks lower: no hand-over
	} {
		c := NewChecker(protocol.Paxos, names, 10*time.Millisecond)
		c.Poll(poll(6, 1, 0, 10, leading(tc.cluster, 6, 1, 180)))    // [10, 170]
		c.Poll(poll(4, 1, 100, 110, leading(tc.cluster, 4, 2, 150))) // [110, 240]
		wantRules(t, c, tc.want...)
	}
}
