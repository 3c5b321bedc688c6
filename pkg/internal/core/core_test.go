package core

import (
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// members of the tests: node 4 is at index 1 of 3.
var testMembers = []uint64{9, 4, 2}

func newTestCore(t *testing.T, id uint64) *Core {
	t.Helper()
	c, err := NewCore(election.Config{ID: id, Members: testMembers, Timing: election.DefaultTiming(len(testMembers))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Terms (package doc): the member at index i only claims terms t with
// t mod n == (i+1) mod n, the smallest such above every term seen.
func TestNextTerm(t *testing.T) {
	tests := []struct {
		id      uint64
		maxTerm uint64
		want    uint64
	}{
		{2, 0, 1}, {4, 0, 2}, {9, 0, 3},
		{2, 1, 4}, {4, 1, 2}, {9, 1, 3},
		{2, 3, 4}, {4, 3, 5}, {9, 3, 6},
		{4, 5, 8}, {9, 100, 102}, {2, 102, 103},
	}
	for _, tt := range tests {
		c := newTestCore(t, tt.id)
		c.maxTerm = tt.maxTerm
		got := c.nextTerm()
		if got != tt.want {
			t.Errorf("node %d after term %d: nextTerm got %d, want %d", tt.id, tt.maxTerm, got, tt.want)
		}
		if owner := c.Owner(got); owner != tt.id {
			t.Errorf("node %d: Owner(%d) got %d, want %d", tt.id, got, owner, tt.id)
		}
	}
}

// Terms: no two members own the same term.
func TestOwnerPartitionsTerms(t *testing.T) {
	c := newTestCore(t, 4)
	if got := c.Owner(0); got != 0 {
		t.Errorf("Owner(0): got %d, want 0", got)
	}
	want := []uint64{2, 4, 9}
	for term := uint64(1); term <= 30; term++ {
		if got := c.Owner(term); got != want[(term-1)%3] {
			t.Errorf("Owner(%d): got %d, want %d", term, got, want[(term-1)%3])
		}
	}
}

// Terms: a node accepts a leader only with a term at least as large as
// the one it accepted before and answers an older term with Stale; the
// highest live ID wins, so a lower claimant is challenged.
func TestClaimed(t *testing.T) {
	tests := []struct {
		name           string
		term           uint64 // term this node (4) accepted before
		leader         uint64
		claimLeader    uint64
		claimTerm      uint64
		want           Verdict
		wantStale      bool
		wantLeader     uint64
		wantTerm       uint64
		wantFollowRole bool
		broadcast      bool
		role           election.Role
	}{
		{name: "higher claimant, newer term", term: 2, leader: 4, claimLeader: 9, claimTerm: 3, want: Accepted, wantLeader: 9, wantTerm: 3, wantFollowRole: true},
		{name: "same leadership again", term: 3, leader: 9, claimLeader: 9, claimTerm: 3, want: Refreshed, wantLeader: 9, wantTerm: 3, wantFollowRole: true},
		{name: "older term", term: 6, leader: 9, claimLeader: 9, claimTerm: 3, want: Rejected, wantStale: true, wantLeader: 9, wantTerm: 6},
		{name: "lower claimant, newer term", term: 3, leader: 9, claimLeader: 2, claimTerm: 4, want: Challenged, wantLeader: 9, wantTerm: 3},
		{name: "claimant does not own the term", term: 0, claimLeader: 9, claimTerm: 4, want: Rejected},
		{name: "own claim coming back", term: 2, leader: 4, claimLeader: 4, claimTerm: 2, want: Rejected, wantLeader: 4, wantTerm: 2},
		// A broadcast claim with an older term reaches the leader too,
		// which alone replies.
		{name: "older term broadcast, follower of another live leader", term: 6, leader: 8, claimLeader: 9, claimTerm: 3, broadcast: true, want: Rejected, wantLeader: 8, wantTerm: 6},
		{name: "older term broadcast by its own leader (restarted)", term: 6, leader: 9, claimLeader: 9, claimTerm: 3, broadcast: true, want: Rejected, wantStale: true, wantLeader: 9, wantTerm: 6},
		{name: "older term broadcast, no leader", term: 6, claimLeader: 9, claimTerm: 3, broadcast: true, want: Rejected, wantStale: true, wantTerm: 6},
		{name: "older term broadcast, to the leader", term: 6, leader: 4, role: election.Leader, claimLeader: 9, claimTerm: 3, broadcast: true, want: Rejected, wantStale: true, wantLeader: 4, wantTerm: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCore(t, 4)
			c.term, c.maxTerm, c.leader, c.role = tt.term, tt.term, tt.leader, tt.role
			got := c.Claimed(tt.claimLeader, tt.claimLeader, tt.claimTerm, tt.broadcast)
			if got != tt.want {
				t.Errorf("verdict: got %v, want %v", got, tt.want)
			}
			if c.Leader() != tt.wantLeader || c.Term() != tt.wantTerm {
				t.Errorf("leader, term: got %d, %d, want %d, %d", c.Leader(), c.Term(), tt.wantLeader, tt.wantTerm)
			}
			if tt.wantFollowRole && c.Role() != election.Follower {
				t.Errorf("role: got %v, want follower", c.Role())
			}
			msgs := c.Ready().Messages
			stale := len(msgs) == 1 && msgs[0].Type == protocol.TypeStale && msgs[0].To == tt.claimLeader && msgs[0].Term == tt.term
			if stale != tt.wantStale {
				t.Errorf("Stale reply: got %v, want %v", msgs, tt.wantStale)
			}
		})
	}
}

// Terms: a leader that learns a newer term from a Stale reply claims again
// unless a higher node leads under it; then it steps down.
func TestStaled(t *testing.T) {
	tests := []struct {
		name        string
		staleTerm   uint64
		staleLeader uint64
		wantReclaim bool
		wantRole    election.Role
		wantLeader  uint64
	}{
		{name: "newer term, no leader", staleTerm: 7, wantReclaim: true, wantRole: election.Leader, wantLeader: 4},
		{name: "newer term, lower leader", staleTerm: 7, staleLeader: 2, wantReclaim: true, wantRole: election.Leader, wantLeader: 4},
		{name: "newer term, higher leader", staleTerm: 9, staleLeader: 9, wantRole: election.Follower, wantLeader: 0},
		{name: "not newer", staleTerm: 5, staleLeader: 9, wantRole: election.Leader, wantLeader: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCore(t, 4)
			c.maxTerm = 4
			if term := c.Claim(); term != 5 {
				t.Fatalf("claim: got term %d, want 5", term)
			}
			c.Receive(protocol.Message{Type: protocol.TypeStale, From: 2, To: 4, Term: tt.staleTerm, Candidate: tt.staleLeader})
			got := c.Staled(protocol.Message{Type: protocol.TypeStale, From: 2, To: 4, Term: tt.staleTerm, Candidate: tt.staleLeader})
			if got != tt.wantReclaim {
				t.Errorf("reclaim: got %v, want %v", got, tt.wantReclaim)
			}
			if c.Role() != tt.wantRole || c.Leader() != tt.wantLeader {
				t.Errorf("role, leader: got %v, %d, want %v, %d", c.Role(), c.Leader(), tt.wantRole, tt.wantLeader)
			}
			if got {
				if term := c.Claim(); term <= tt.staleTerm || c.Owner(term) != 4 {
					t.Errorf("reclaim: got term %d, want one of node 4's above %d", term, tt.staleTerm)
				}
			}
		})
	}
}

// Resign: a node whose leader resigned elects a new one at once; a Resign
// from anyone else only marks its sender gone.
func TestResigned(t *testing.T) {
	tests := []struct {
		name       string
		from, term uint64
		want       bool
		wantLeader uint64
	}{
		{name: "our leader", from: 9, term: 3, want: true, wantLeader: 0},
		{name: "another node", from: 2, term: 3, want: false, wantLeader: 9},
		{name: "our leader, another term", from: 9, term: 6, want: false, wantLeader: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCore(t, 4)
			c.Claimed(9, 9, 3, false)
			got := c.Resigned(protocol.Message{Type: protocol.TypeResign, From: tt.from, Term: tt.term})
			if got != tt.want || c.Leader() != tt.wantLeader {
				t.Errorf("got %v leader %d, want %v leader %d", got, c.Leader(), tt.want, tt.wantLeader)
			}
			if !c.IsGone(tt.from) {
				t.Errorf("IsGone(%d): got false, want true", tt.from)
			}
		})
	}
}

// A leader re-asserting under the newest term keeps it; one that has seen
// a newer term takes a new one.
func TestClaimKeepsCurrentTerm(t *testing.T) {
	c := newTestCore(t, 9)
	first := c.Claim()
	if c.Ready().Claimed != first {
		t.Fatalf("first claim: want it announced")
	}
	if again := c.Claim(); again != first || c.Ready().Claimed != 0 {
		t.Errorf("re-assert: got term %d, want %d and no new announcement", again, first)
	}
	c.Receive(protocol.Message{Type: protocol.TypeElection, From: 2, Term: first + 5})
	if next := c.Claim(); next <= first+5 {
		t.Errorf("after a newer term: got %d, want above %d", next, first+5)
	}
}

// Terms are bounded: no claim goes above protocol.MaxTerm, and a node
// whose next term would be above it does not claim at all.
func TestClaimNeverWraps(t *testing.T) {
	// Received terms cannot bring a node there (TestTermJumpsBounded);
	// a stored state can.
	atTerm := func(id, max uint64) *Core {
		c, err := NewCore(election.Config{ID: id, Members: testMembers, Timing: election.DefaultTiming(len(testMembers)),
			State: election.HardState{MaxTerm: max}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := atTerm(9, protocol.MaxTerm-2) // owns terms 3, 6, 9, ...
	if got := c.nextTerm(); got != 0 && got > protocol.MaxTerm {
		t.Fatalf("nextTerm after %d: got %d, above the ceiling", protocol.MaxTerm-2, got)
	}
	c = atTerm(9, protocol.MaxTerm)
	if got := c.Claim(); got != 0 {
		t.Errorf("claim after the ceiling: got term %d, want no claim (0)", got)
	}
	if rd := c.Ready(); rd.Claimed != 0 || c.Role() == election.Leader {
		t.Errorf("after a refused claim: claimed %d, role %v; want nothing claimed, not leader", rd.Claimed, c.Role())
	}
	// A term above the ceiling is ignored even if a driver let it through.
	c = newTestCore(t, 4)
	if c.Receive(protocol.Message{Type: protocol.TypeHeartbeat, From: 9, Term: 1<<64 - 1}) {
		t.Errorf("Receive accepted a term above the ceiling")
	}
	if c.MaxTerm() != 0 {
		t.Errorf("max term: got %d, want 0", c.MaxTerm())
	}
}

// Terms survive restarts: a node restored from its hard state claims above
// everything it saw, and refuses (with a Stale reply) a leader whose term
// is below the one it accepted before.
func TestRestoredState(t *testing.T) {
	c, err := NewCore(election.Config{ID: 4, Members: testMembers, Timing: election.DefaultTiming(3),
		State: election.HardState{Term: 7, MaxTerm: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Claimed(9, 9, 6, false); v != Rejected {
		t.Errorf("claim of term 6 after restoring term 7: got %v, want Rejected", v)
	}
	if msgs := c.Ready().Messages; len(msgs) != 1 || msgs[0].Type != protocol.TypeStale {
		t.Errorf("want a Stale reply, got %v", msgs)
	}
	if got := c.Claim(); got <= 10 || c.Owner(got) != 4 {
		t.Errorf("claim after restoring max term 10: got %d, want one of node 4's above 10", got)
	}
	for _, bad := range []election.HardState{{Term: 5, MaxTerm: 4}, {MaxTerm: protocol.MaxTerm + 1}} {
		if _, err := NewCore(election.Config{ID: 4, Members: testMembers, Timing: election.DefaultTiming(3), State: bad}); err == nil {
			t.Errorf("NewCore with state %+v: got no error", bad)
		}
	}
}

// The driver must store the hard state before it sends: Ready carries it
// exactly when it changed.
func TestReadyCarriesChangedState(t *testing.T) {
	c := newTestCore(t, 4)
	if rd := c.Ready(); rd.State != nil {
		t.Fatalf("nothing happened: got state %+v, want none", *rd.State)
	}
	c.Receive(protocol.Message{Type: protocol.TypeElection, From: 2, Term: 5})
	rd := c.Ready()
	if rd.State == nil || *rd.State != (election.HardState{MaxTerm: 5}) {
		t.Fatalf("after seeing term 5: got state %v, want max term 5", rd.State)
	}
	if rd := c.Ready(); rd.State != nil {
		t.Errorf("unchanged: got state %+v, want none", *rd.State)
	}
	term := c.Claim()
	rd = c.Ready()
	if rd.State == nil || rd.State.Term != term || rd.State.MaxTerm != term || rd.Claimed != term {
		t.Errorf("after claiming %d: got state %v, claimed %d", term, rd.State, rd.Claimed)
	}
}

// The machine says what happened: an election started, a new leadership,
// a leader that timed out.
func TestEvents(t *testing.T) {
	c := newTestCore(t, 4)
	c.Claimed(9, 9, 3, false)
	want := []election.Event{{Kind: election.LeaderChanged, Leader: 9, Term: 3}}
	if got := c.Ready().Events; !slices.Equal(got, want) {
		t.Errorf("follow: got %v, want %v", got, want)
	}
	for range c.timing.LeaderTimeoutTicks {
		c.tickFollower()
	}
	c.BecomeCandidate(true)
	term := c.Claim()
	want = []election.Event{
		{Kind: election.LeaderProbed, Leader: 9, Term: 3},
		{Kind: election.LeaderTimedOut, Leader: 9, Term: 3},
		{Kind: election.ElectionStarted},
		{Kind: election.LeaderChanged, Leader: 4, Term: term},
	}
	if got := c.Ready().Events; !slices.Equal(got, want) {
		t.Errorf("time-out and claim: got %v, want %v", got, want)
	}
}

// A deferred candidate has not started an election: it is reported only
// when its election starts, or when it claims at once.
func TestDeferReportsNoElection(t *testing.T) {
	c := newTestCore(t, 4)
	c.Claimed(9, 9, 3, false)
	c.Ready()
	c.Defer(false)
	if c.Role() != election.Candidate || c.Leader() != 0 {
		t.Fatalf("deferred: role %v leader %d, want a candidate with no leader", c.Role(), c.Leader())
	}
	if got := c.Ready().Events; len(got) != 0 {
		t.Errorf("Defer: got events %v, want none", got)
	}
	c.BecomeCandidate(true)
	if got, want := c.Ready().Events, []election.Event{{Kind: election.ElectionStarted}}; !slices.Equal(got, want) {
		t.Errorf("election after deferring: got %v, want %v", got, want)
	}
	c.Defer(false)
	term := c.Claim()
	want := []election.Event{{Kind: election.ElectionStarted}, {Kind: election.LeaderChanged, Leader: 4, Term: term}}
	if got := c.Ready().Events; !slices.Equal(got, want) {
		t.Errorf("claim after deferring: got %v, want %v", got, want)
	}
}

// The leader time-out learns the delays: a leader timed out that proves to
// have been alive doubles it, up to MaxLeaderTimeoutFactor times the
// configured one; one that stays silent does not; a long calm halves it
// back.
func TestLeaderTimeoutLearnsDelays(t *testing.T) {
	base := election.DefaultLeaderTimeoutTicks
	heartbeat := func(c *Core, term uint64) {
		c.Receive(protocol.Message{V: protocol.Version, Type: protocol.TypeHeartbeat, From: 9, Term: term})
		c.Claimed(9, 9, term, true)
	}
	// timeOut ticks c until its leader time-out fires and returns how many
	// ticks that took.
	timeOut := func(c *Core) int {
		for i := 1; i <= 10*base; i++ {
			if c.tickFollower() {
				return i
			}
		}
		t.Fatal("no time-out")
		return 0
	}
	c := newTestCore(t, 4)
	heartbeat(c, 3)
	if got := timeOut(c); got != base {
		t.Fatalf("first time-out after %d ticks, want %d", got, base)
	}
	for i, want := range []int{2 * base, 4 * base, 4 * base} {
		heartbeat(c, 3) // it was alive after all
		if got := timeOut(c); got != want {
			t.Errorf("time-out %d after a wrong suspicion: after %d ticks, want %d", i+2, got, want)
		}
	}

	// A leader that stays silent past the time-out was rightly suspected:
	// its later return does not raise the time-out.
	c = newTestCore(t, 4)
	heartbeat(c, 3)
	timeOut(c)
	for range base {
		c.tickFollower()
	}
	heartbeat(c, 3)
	if got := timeOut(c); got != base {
		t.Errorf("after a right suspicion: time-out after %d ticks, want %d", got, base)
	}

	// Following calmly for calmFactor time-outs halves a raised one.
	c = newTestCore(t, 4)
	heartbeat(c, 3)
	timeOut(c)
	heartbeat(c, 3)
	if c.timeout != 2*base {
		t.Fatalf("raised time-out %d, want %d", c.timeout, 2*base)
	}
	for range calmFactor * base / election.DefaultHeartbeatTicks {
		for range election.DefaultHeartbeatTicks {
			c.tickFollower()
		}
		heartbeat(c, 3)
	}
	if c.timeout != base {
		t.Errorf("after a calm: time-out %d, want %d", c.timeout, base)
	}
}

// A leader that returns after another took over (it was paused, or
// restarted) does not raise the time-out: its silence was real.
func TestLeaderTimeoutNotRaisedByAReturn(t *testing.T) {
	base := election.DefaultLeaderTimeoutTicks
	c := newTestCore(t, 2)
	c.Receive(protocol.Message{V: protocol.Version, Type: protocol.TypeHeartbeat, From: 9, Term: 3})
	c.Claimed(9, 9, 3, true)
	for !c.tickFollower() {
	}
	// 4 takes over, then 9 comes back.
	c.Receive(protocol.Message{V: protocol.Version, Type: protocol.TypeCoordinator, From: 4, Term: 5})
	c.Claimed(4, 4, 5, true)
	c.Receive(protocol.Message{V: protocol.Version, Type: protocol.TypeHeartbeat, From: 9, Term: 3})
	if c.timeout != base {
		t.Errorf("after a paused leader's return: time-out %d, want %d", c.timeout, base)
	}
}

// A member that lies as itself cannot exhaust the terms: the six messages
// of a member at the term ceiling (an Election, a Coordinator and a heartbeat at 2^62, twice)
// raise a node's highest term by TermBurst, not to the ceiling, so it can
// still claim; a liar that goes on raises it by TermRate a tick.
func TestTermJumpsBounded(t *testing.T) {
	c := newTestCore(t, 9)
	for range 2 {
		for _, typ := range []protocol.Type{protocol.TypeElection, protocol.TypeCoordinator, protocol.TypeHeartbeat} {
			if c.Receive(protocol.Message{Type: typ, From: 4, Term: protocol.MaxTerm}) {
				t.Errorf("%s at the ceiling from one sender: accepted", typ)
			}
		}
	}
	if got := c.MaxTerm(); got != TermBurst {
		t.Fatalf("highest term after six lies: got %d, want %d", got, TermBurst)
	}
	if got := c.Claim(); got == 0 || got <= TermBurst {
		t.Fatalf("claim after six lies: got %d, want a term above %d", got, TermBurst)
	}
	for range 100 {
		c.CountTick()
		c.Receive(protocol.Message{Type: protocol.TypeHeartbeat, From: 4, Term: protocol.MaxTerm})
	}
	if got, limit := c.MaxTerm(), TermBurst+100*TermRate+uint64(len(testMembers)); got > limit {
		t.Errorf("highest term after 100 ticks of lies: got %d, want at most %d", got, limit)
	}
}

// The credit refills: an honest node far behind (a long partition, a
// restart that learnt nothing, a liar that spent its credit) still
// catches up, at TermRate a tick. Terms never go backwards.
func TestTermJumpsCatchUp(t *testing.T) {
	c := newTestCore(t, 4)
	c.Receive(protocol.Message{Type: protocol.TypeHeartbeat, From: 2, Term: protocol.MaxTerm})
	high := 3*TermBurst + 9 // owned by 9
	last := c.MaxTerm()
	for tick := 0; ; tick++ {
		if tick > int(3*TermBurst/TermRate)+1 {
			t.Fatalf("no catch-up to term %d after %d ticks: highest %d", high, tick, c.MaxTerm())
		}
		if c.Receive(protocol.Message{Type: protocol.TypeHeartbeat, From: 9, Term: high}) {
			break
		}
		if c.MaxTerm() < last {
			t.Fatalf("highest term went back from %d to %d", last, c.MaxTerm())
		}
		last = c.MaxTerm()
		c.CountTick()
	}
	if v := c.Claimed(9, 9, high, true); v != Accepted {
		t.Errorf("claim of %d after catching up: verdict %v, want Accepted", high, v)
	}
	if c.Leader() != 9 || c.Term() != high {
		t.Errorf("after catching up: leader %d term %d, want 9 and %d", c.Leader(), c.Term(), high)
	}
}

// A leadership found at start whose term is further above the node's
// highest term than TermBurst is not followed: it is a member's word, as
// a message is, and following it would move the node's terms to it.
func TestFollowFoundBounded(t *testing.T) {
	// Members 2, 4, 9: 9 owns the multiples of 3.
	for _, tc := range []struct {
		term uint64
		want bool
	}{{TermBurst - TermBurst%3, true}, {protocol.MaxTerm - protocol.MaxTerm%3, false}} {
		c, err := NewCore(election.Config{ID: 2, Members: testMembers, Timing: election.DefaultTiming(len(testMembers)),
			Found: election.Leadership{Leader: 9, Term: tc.term}})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.FollowFound(); got != tc.want {
			t.Errorf("found term %d from highest term 0: followed %v, want %v", tc.term, got, tc.want)
		}
		if !tc.want && c.MaxTerm() != 0 {
			t.Errorf("found term %d not followed: highest term %d, want 0", tc.term, c.MaxTerm())
		}
	}
}

// Follow is a transition that keeps the rules whoever calls it: a node's
// term never goes backwards, and it follows only a leader that owns its
// term (terms: package doc).
func TestFollowKeepsTermsForward(t *testing.T) {
	c := newTestCore(t, 4)
	if !c.Follow(9, 3) { // members 2, 4, 9: node 9 owns 3, 6, 9, …
		t.Fatalf("follow 9 under its term 3: refused")
	}
	c.Ready()
	for _, tc := range []struct {
		name         string
		leader, term uint64
	}{
		{"a term below the accepted one", 2, 1},
		{"a term its leader does not own", 2, 6},
		{"this node itself", 4, 5},
		{"a term above protocol.MaxTerm", 9, protocol.MaxTerm + 1},
	} {
		if c.Follow(tc.leader, tc.term) {
			t.Errorf("%s (%d under %d): followed", tc.name, tc.leader, tc.term)
		}
		if c.Leader() != 9 || c.Term() != 3 || c.MaxTerm() != 3 {
			t.Errorf("%s: leader %d term %d max %d, want 9, 3, 3", tc.name, c.Leader(), c.Term(), c.MaxTerm())
		}
	}
	if got := c.Ready(); got.State != nil || len(got.Events) != 0 {
		t.Errorf("refused follows: got state %v events %v, want nothing", got.State, got.Events)
	}
	if !c.Follow(2, 4) || c.Leader() != 2 || c.Term() != 4 {
		t.Errorf("follow 2 under its term 4: leader %d term %d", c.Leader(), c.Term())
	}
}

// Lead takes only a term that this node owns and has counted as seen
// (NewBallot), so that it is stored before it is announced, and never one
// below the term it accepted.
func TestLeadTakesOnlyItsNewBallot(t *testing.T) {
	c := newTestCore(t, 4)
	c.Claimed(9, 9, 3, false)
	c.Ready()
	if c.Lead(5) { // node 4's, but not taken with NewBallot
		t.Errorf("Lead(5) without NewBallot: led")
	}
	if c.Lead(2) || c.Lead(6) {
		t.Errorf("Lead of a lower term or of another node's term: led")
	}
	b := c.NewBallot()
	if b != 5 {
		t.Fatalf("NewBallot: got %d, want 5", b)
	}
	if rd := c.Ready(); rd.State == nil || rd.State.MaxTerm != b {
		t.Fatalf("NewBallot must be stored before use: state %v", rd.State)
	}
	if !c.Lead(b) || c.Role() != election.Leader || c.Term() != b {
		t.Fatalf("Lead(%d): role %v term %d", b, c.Role(), c.Term())
	}
	if rd := c.Ready(); rd.Claimed != b || rd.State == nil || rd.State.Term != b {
		t.Errorf("Lead(%d): claimed %d, state %v", b, rd.Claimed, rd.State)
	}
}

// A node that starts and defers reports the election it has entered
// (Defer(true)); Tick moves only the leader's and the follower's clocks.
func TestDeferStartedAndTickByRole(t *testing.T) {
	c := newTestCore(t, 4)
	c.Defer(true)
	if got, want := c.Ready().Events, []election.Event{{Kind: election.ElectionStarted}}; !slices.Equal(got, want) {
		t.Errorf("Defer(true): got %v, want %v", got, want)
	}
	if c.Due() != 1<<30 {
		t.Errorf("candidate: Due %d, want 1<<30", c.Due())
	}
	for range 10 * c.timing.LeaderTimeoutTicks {
		if c.Tick() {
			t.Fatalf("a candidate's Tick timed out")
		}
	}
	if rd := c.Ready(); len(rd.Messages) != 0 || len(rd.Events) != 0 {
		t.Fatalf("a candidate's Ticks: got %v, want nothing", rd)
	}
	c.Claim()
	c.Ready()
	if c.Due() != c.timing.HeartbeatTicks {
		t.Errorf("leader: Due %d, want %d", c.Due(), c.timing.HeartbeatTicks)
	}
	for range c.timing.HeartbeatTicks {
		c.Tick()
	}
	if got := c.Ready().Messages; len(got) != 1 || got[0].Type != protocol.TypeHeartbeat {
		t.Errorf("a leader's Ticks: got %v, want one heartbeat", got)
	}
}

// Leave's Resign names the ballot given, else the term led, else the
// highest term seen.
func TestLeaveNamesItsTerm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lead   bool
		ballot uint64
		want   uint64
	}{
		{"a follower", false, 0, 7},
		{"a leader", true, 0, 5},
		{"a ballot", true, 8, 8},
	} {
		c := newTestCore(t, 4)
		if tc.lead {
			c.Claim() // term 2
			c.Receive(protocol.Message{Type: protocol.TypeElection, From: 2, Term: 3})
			c.Claim() // term 5
		}
		c.Receive(protocol.Message{Type: protocol.TypeElection, From: 9, Term: 7})
		c.Ready()
		c.Leave(tc.ballot)
		got := c.Ready().Messages
		if len(got) != 1 || got[0].Type != protocol.TypeResign || got[0].Term != tc.want {
			t.Errorf("%s: got %v, want a Resign of term %d", tc.name, got, tc.want)
		}
		if !c.Left() || c.Follow(9, 9) {
			t.Errorf("%s: after Leave, left %v and it still follows", tc.name, c.Left())
		}
	}
}

// Ranks (election.Config.Rank): under Spread, who is higher is by rank,
// not ID, in every rule; who owns a term is still by ID. In cluster "b"
// the members 9, 4, 2 rank 4 < 9 < 2; in cluster "a", 2 < 9 < 4.
func TestSpreadRank(t *testing.T) {
	newCore := func(cluster string) *Core {
		t.Helper()
		c, err := NewCore(election.Config{ID: 4, Members: testMembers, Timing: election.DefaultTiming(3), Rank: election.Spread(cluster)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	b := newCore("b")
	if got := b.ByRank(); !slices.Equal(got, []uint64{4, 9, 2}) {
		t.Errorf("members by rank in b: %v, want [4 9 2]", got)
	}
	if k := b.HigherAliveCount(); k != 2 {
		t.Errorf("higher members of 4 in b: %d, want 2", k)
	}
	b.MarkGone(2)
	if k := b.HigherAliveCount(); k != 1 {
		t.Errorf("higher live members of 4 in b with 2 gone: %d, want 1", k)
	}
	if !b.Above(2, 9) || !b.Above(9, 4) || b.Above(4, 2) || !b.Above(4, 0) || b.Above(0, 4) {
		t.Error("Above disagrees with the rank of b")
	}
	// Node 2, the lowest ID but the highest rank, claims term 4 (its own,
	// by ID): accepted.
	if v := b.Claimed(2, 2, 4, true); v != Accepted || b.Leader() != 2 {
		t.Errorf("claim of 2 at 4 in b: %v, leader %d, want accepted", v, b.Leader())
	}
	a := newCore("a")
	if k := a.HigherAliveCount(); k != 0 {
		t.Errorf("higher members of 4 in a: %d, want 0", k)
	}
	// Node 9, the highest ID, ranks below 4 in a: its claim is challenged.
	if v := a.Claimed(9, 9, 3, true); v != Challenged {
		t.Errorf("claim of 9 at 3 in a: %v, want challenged", v)
	}
	// A Stale naming a higher-ranked leader makes a leader step down; one
	// naming a lower-ranked one makes it claim again.
	for _, c := range []struct {
		cluster string
		leader  uint64
		reclaim bool
	}{{"b", 2, false}, {"b", 9, false}, {"a", 9, true}, {"a", 2, true}} {
		n := newCore(c.cluster)
		n.maxTerm = 4
		n.Claim()
		if got := n.Staled(protocol.Message{Type: protocol.TypeStale, From: 2, To: 4, Term: 9, Candidate: c.leader}); got != c.reclaim {
			t.Errorf("%s: Stale naming %d: reclaim %v, want %v", c.cluster, c.leader, got, c.reclaim)
		}
	}
	// A node that starts follows a found leader that ranks higher only.
	for _, c := range []struct {
		cluster string
		found   election.Leadership
		follow  bool
	}{{"b", election.Leadership{Leader: 2, Term: 4}, true}, {"a", election.Leadership{Leader: 9, Term: 3}, false}} {
		n, err := NewCore(election.Config{ID: 4, Members: testMembers, Timing: election.DefaultTiming(3), Rank: election.Spread(c.cluster), Found: c.found})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.FollowFound(); got != c.follow {
			t.Errorf("%s: found %+v: follow %v, want %v", c.cluster, c.found, got, c.follow)
		}
	}
}
