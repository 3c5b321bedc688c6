package bully

import (
	"slices"
	"strconv"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

var members = []uint64{2, 4, 9}

func newNode(t *testing.T, id uint64) *Machine {
	t.Helper()
	m, err := New(election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newFoundNode is newNode for a node that found a leadership as it
// started (election.Config.Found).
func newFoundNode(t *testing.T, id uint64, found election.Leadership) *Machine {
	t.Helper()
	m, err := New(election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members)), Found: found})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func msg(typ protocol.Type, from, to, term uint64) protocol.Message {
	return protocol.Message{V: protocol.Version, Type: typ, From: from, To: to, Term: term}
}

// types lists the types of msgs, with receivers, for compact comparison.
func types(msgs []protocol.Message) []string {
	var out []string
	for _, m := range msgs {
		s := string(m.Type)
		if m.To != 0 {
			s += "→" + strconv.FormatUint(m.To, 10)
		}
		out = append(out, s)
	}
	return out
}

func ticks(m *Machine, n int) election.Ready {
	var all election.Ready
	for range n {
		m.Tick()
		r := m.Ready()
		all.Messages = append(all.Messages, r.Messages...)
		if r.Claimed != 0 {
			all.Claimed = r.Claimed
		}
	}
	return all
}

func TestBully(t *testing.T) {
	T := election.DefaultAnswerTicks
	timeout := election.DefaultLeaderTimeoutTicks
	tests := []struct {
		name string
		rule string
		id   uint64
		// run drives the node after Start and returns what it wants done
		// after the last event.
		run        func(m *Machine) election.Ready
		wantMsgs   []string
		wantRole   election.Role
		wantLeader uint64
		wantClaim  bool
	}{
		{
			name: "start while a lower coordinator works: Election to the higher IDs at once",
			rule: "a node that recovers starts an election at once, even if the coordinator is working: it sends Election to every higher ID",
			id:   4,
			run:  func(m *Machine) election.Ready { return election.Ready{} },
			// Start's output is checked by the driver below.
			wantMsgs: nil, wantRole: election.Candidate,
		},
		{
			name: "no Answer within T: leader",
			rule: "a candidate that gets no Answer within T becomes leader and broadcasts Coordinator",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeHeartbeat, 2, 0, 1)) // a leader works
				m.Ready()
				return ticks(m, T)
			},
			wantMsgs: []string{"coordinator"}, wantRole: election.Leader, wantLeader: 4, wantClaim: true,
		},
		{
			name:     "cold start: no leader heard, wait for the others to start",
			rule:     "refinement: a node that has just started and heard no leader waits the leader time-out before it declares itself",
			id:       4,
			run:      func(m *Machine) election.Ready { return ticks(m, T) },
			wantRole: election.Candidate,
		},
		{
			name:     "cold start: nobody higher within the leader time-out: leader",
			rule:     "a candidate that gets no Answer becomes leader and broadcasts Coordinator",
			id:       4,
			run:      func(m *Machine) election.Ready { return ticks(m, timeout) },
			wantMsgs: []string{"coordinator"}, wantRole: election.Leader, wantLeader: 4, wantClaim: true,
		},
		{
			name: "a higher candidate's Election counts as an Answer",
			rule: "refinement: Election is broadcast; a higher candidate's Election tells what an Answer would",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeElection, 9, 0, 0))
				return ticks(m, 2*T)
			},
			wantRole: election.Candidate,
		},
		{
			name: "Answer: wait for Coordinator, not lead",
			rule: "one that got an Answer waits for a Coordinator",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeAnswer, 9, 4, 0))
				return ticks(m, T)
			},
			wantRole: election.Candidate,
		},
		{
			name: "Answer but no Coordinator: start again",
			rule: "one that got an Answer but no Coordinator within CoordinatorTicks starts again",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeAnswer, 9, 4, 0))
				return ticks(m, election.DefaultTiming(3).CoordinatorTicks)
			},
			wantMsgs: []string{"election"}, wantRole: election.Candidate,
		},
		{
			name: "Election from a lower ID to a leader: Coordinator",
			rule: "a leader answers and re-asserts itself with Coordinator",
			id:   9,
			run: func(m *Machine) election.Ready {
				ticks(m, timeout) // leads
				ticks(m, election.DefaultHeartbeatTicks)
				m.Step(msg(protocol.TypeElection, 2, 0, 0))
				return m.Ready()
			},
			wantMsgs: []string{"coordinator"}, wantRole: election.Leader, wantLeader: 9,
		},
		{
			name: "Election from a lower ID to a leader that re-asserted recently: Answer",
			rule: "refinement: a leader re-asserts at most once per heartbeat interval; in between it answers",
			id:   9,
			run: func(m *Machine) election.Ready {
				ticks(m, timeout) // leads, Coordinator just sent
				m.Step(msg(protocol.TypeElection, 2, 0, 0))
				return m.Ready()
			},
			wantMsgs: []string{"answer→2"}, wantRole: election.Leader, wantLeader: 9,
		},
		{
			name: "Election from a lower ID to a leader with a newer term: claim above it",
			rule: "terms: a leader that sees a newer term claims above it at once",
			id:   9,
			run: func(m *Machine) election.Ready {
				ticks(m, timeout)
				m.Step(msg(protocol.TypeElection, 2, 0, 40))
				return m.Ready()
			},
			wantMsgs: []string{"coordinator"}, wantRole: election.Leader, wantLeader: 9, wantClaim: true,
		},
		{
			name: "Election from a lower ID to a follower of a live higher leader: Answer only",
			rule: "refinement: a follower whose leader is a live higher node answers but holds no election",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				m.Ready()
				m.Step(msg(protocol.TypeElection, 2, 0, 3))
				return m.Ready()
			},
			wantMsgs: []string{"answer→2"}, wantRole: election.Follower, wantLeader: 9,
		},
		{
			name: "Election from a lower ID to a follower without a leader: own election",
			rule: "a node that receives Election from a lower ID holds its own election (its Election answers)",
			id:   4,
			run: func(m *Machine) election.Ready {
				ticks(m, timeout) // leads with term 2
				stale := msg(protocol.TypeStale, 2, 4, 9)
				stale.Candidate = 9
				m.Step(stale) // 9 leads under a newer term: step down, leader undefined
				m.Ready()
				m.Step(msg(protocol.TypeElection, 2, 0, 9))
				return m.Ready()
			},
			wantMsgs: []string{"election"}, wantRole: election.Candidate,
		},
		{
			name: "Election from a higher ID: no Answer",
			rule: "lower IDs do not act on Election",
			id:   2,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeElection, 9, 0, 0))
				return m.Ready()
			},
			wantRole: election.Candidate,
		},
		{
			name: "Coordinator from a higher ID is accepted",
			rule: "a node records the coordinator announced with Coordinator",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				return m.Ready()
			},
			wantRole: election.Follower, wantLeader: 9,
		},
		{
			name: "heartbeats stop: new election, deferred by T per live node above and one",
			rule: "a node that suspects the leader (its heartbeats stopped) holds an election (refinement: deferred by (r+1)·T)",
			id:   2,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				// Asked before it is suspected, T before the time-out.
				if r := ticks(m, election.DefaultLeaderTimeoutTicks-T); !slices.Equal(types(r.Messages), []string{"probe→9"}) {
					return r
				}
				if r := ticks(m, 3*T-1); len(r.Messages) != 0 {
					return r // too early
				}
				return ticks(m, 1)
			},
			wantMsgs: []string{"election"}, wantRole: election.Candidate,
		},
		{
			name: "heartbeats stop: the highest live node waits T for the silent leader, then claims",
			rule: "a candidate with no Answer within T declares itself (the silent leader may still answer)",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				if r := ticks(m, election.DefaultLeaderTimeoutTicks+T-1); !slices.Equal(types(r.Messages), []string{"probe→9", "election"}) {
					return r
				}
				return ticks(m, 1)
			},
			wantMsgs: []string{"coordinator"}, wantRole: election.Leader, wantLeader: 4, wantClaim: true,
		},
		{
			name: "heartbeats stop: a deferred node that hears the new leader holds no election",
			rule: "refinement: every other node defers its Election by T and holds none if a leader was heard",
			id:   2,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				ticks(m, election.DefaultLeaderTimeoutTicks)
				m.Step(msg(protocol.TypeCoordinator, 4, 0, 5))
				r := ticks(m, 2*T)
				m.Step(msg(protocol.TypeHeartbeat, 4, 0, 5))
				r.Messages = append(r.Messages, ticks(m, T).Messages...)
				return r
			},
			wantRole: election.Follower, wantLeader: 4,
		},
		{
			name: "the leader's connection closes: the highest live node claims at once",
			rule: "a node that suspects the leader holds an election (the leader's disconnect counts as its heartbeats having stopped)",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				m.Ready()
				m.PeerDown(9)
				return m.Ready()
			},
			wantMsgs: []string{"election", "coordinator"}, wantRole: election.Leader, wantLeader: 4, wantClaim: true,
		},
		{
			name: "another node's connection closes: nothing happens",
			rule: "only the leader's disconnect counts as its heartbeats having stopped",
			id:   2,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				m.Ready()
				m.PeerDown(4)
				return m.Ready()
			},
			wantRole: election.Follower, wantLeader: 9,
		},
		{
			name: "a follower of a live higher leader is not challenged into an election",
			rule: "refinement: the leader answers a lower node's claim",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				m.Ready()
				m.Step(msg(protocol.TypeCoordinator, 2, 0, 4))
				return m.Ready()
			},
			wantRole: election.Follower, wantLeader: 9,
		},
		{
			name: "leader resigns: next highest leads at once",
			rule: "a node whose leader resigned holds an election; none of its higher members can be alive, so it does not wait T",
			id:   4,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
				m.Ready()
				m.Step(msg(protocol.TypeResign, 9, 0, 3))
				return m.Ready()
			},
			wantMsgs: []string{"election", "coordinator"}, wantRole: election.Leader, wantLeader: 4, wantClaim: true,
		},
		{
			name: "a working lower coordinator is challenged by a recovered higher node",
			rule: "a node that recovers starts an election at once even if the coordinator is working; if its ID is the highest live one it takes over",
			id:   9,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeCoordinator, 4, 0, 2))
				return ticks(m, T)
			},
			wantMsgs: []string{"coordinator"}, wantRole: election.Leader, wantLeader: 9, wantClaim: true,
		},
		{
			name: "a lower leader under the term this node restored is still challenged",
			rule: "the highest live ID wins, even over the leadership it accepted before a restart",
			id:   9,
			run: func(m *Machine) election.Ready {
				m.Step(msg(protocol.TypeHeartbeat, 4, 0, 2))
				return ticks(m, T)
			},
			wantMsgs: []string{"coordinator"}, wantRole: election.Leader, wantLeader: 9, wantClaim: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every case starts from a candidate that has sent its
			// Election: nodes 4 and 9 found node 2 leading as they started
			// (a recovery: they hold their election at once); node 2, the
			// lowest, found no coordinator and holds it after deferring
			// by its rank (3T).
			var start election.Ready
			found := election.Leadership{Leader: 2, Term: 1}
			if tt.id == 2 {
				found = election.Leadership{}
			}
			m := newFoundNode(t, tt.id, found)
			m.Start()
			start = m.Ready()
			if tt.id == 2 {
				if len(start.Messages) != 0 {
					t.Fatalf("Start with no coordinator found: got %v, want no message before the deferral", types(start.Messages))
				}
				start = ticks(m, 3*T)
			}
			if got := types(start.Messages); !slices.Equal(got, []string{"election"}) {
				t.Fatalf("Start (rule: a node that starts holds an election): got %v, want [election]", got)
			}
			r := tt.run(m)
			if got := types(r.Messages); !slices.Equal(got, tt.wantMsgs) {
				t.Errorf("rule %q: messages got %v, want %v", tt.rule, got, tt.wantMsgs)
			}
			st := m.Status()
			if st.Role != tt.wantRole || st.Leader != tt.wantLeader {
				t.Errorf("rule %q: role, leader got %v, %d, want %v, %d", tt.rule, st.Role, st.Leader, tt.wantRole, tt.wantLeader)
			}
			if (r.Claimed != 0) != tt.wantClaim {
				t.Errorf("rule %q: claimed got %d, want a claim: %v", tt.rule, r.Claimed, tt.wantClaim)
			}
			if r.Claimed != 0 && r.Claimed != st.Term {
				t.Errorf("claimed term got %d, want the status term %d", r.Claimed, st.Term)
			}
		})
	}
}

// Terms: a higher node that starts without knowing the current term is
// told it by a Stale reply to its Election, and claims above it.
func TestBullyRestartLearnsTerm(t *testing.T) {
	low := newNode(t, 4)
	low.Start()
	low.Step(msg(protocol.TypeCoordinator, 9, 0, 6))
	low.Ready()
	low.Step(msg(protocol.TypeElection, 9, 0, 0))
	r := low.Ready()
	if got := types(r.Messages); !slices.Equal(got, []string{"stale→9"}) || r.Messages[0].Term != 6 {
		t.Fatalf("reply to a restarted higher node: got %v, want [stale→9] with term 6", r.Messages)
	}
	high := newNode(t, 9)
	high.Start()
	high.Ready()
	high.Step(r.Messages[0])
	got := ticks(high, election.DefaultLeaderTimeoutTicks)
	if got.Claimed <= 6 {
		t.Errorf("claim after the Stale reply: got term %d, want above 6", got.Claimed)
	}
}

// A node that starts and finds a live leader with a higher ID follows it
// without an election; one that finds a lower leader holds one at once;
// one that finds none defers it by its rank (TestBullyColdStart).
func TestBullyStartFollowsFoundLeader(t *testing.T) {
	for _, tc := range []struct {
		name       string
		id         uint64
		found      election.Leadership
		wantMsgs   []string
		wantLeader uint64
	}{
		{"a higher leader", 4, election.Leadership{Leader: 9, Term: 6}, nil, 9},
		{"a lower leader", 9, election.Leadership{Leader: 4, Term: 5}, []string{"election"}, 0},
		{"none: it defers by its rank", 4, election.Leadership{}, nil, 0},
		{"a leader that does not own its term", 4, election.Leadership{Leader: 9, Term: 5}, []string{"election"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(election.Config{ID: tc.id, Members: members, Timing: election.DefaultTiming(len(members)), Found: tc.found})
			if err != nil {
				t.Fatal(err)
			}
			m.Start()
			r := m.Ready()
			if got := types(r.Messages); !slices.Equal(got, tc.wantMsgs) {
				t.Errorf("messages: got %v, want %v", got, tc.wantMsgs)
			}
			if st := m.Status(); st.Leader != tc.wantLeader || (tc.wantLeader != 0 && (st.Role != election.Follower || st.Term != tc.found.Term)) {
				t.Errorf("status: got %+v, want leader %d", st, tc.wantLeader)
			}
		})
	}
}

// A node that declared itself for want of an Answer, and hears from a
// higher node within the leader time-out, waits twice as long for Answers
// (and defers by that much) from then on; one that hears from a higher
// node later does not.
func TestBullyAnswerWaitLearnsDelays(t *testing.T) {
	T := election.DefaultAnswerTicks
	timeout := election.DefaultLeaderTimeoutTicks
	// claimAlone starts node 2 and lets it declare itself: 4 and 9 are
	// silent.
	claimAlone := func() *Machine {
		m := newNode(t, 2)
		m.Start()
		m.Ready()
		if r := ticks(m, timeout); r.Claimed == 0 {
			t.Fatalf("node 2 alone did not declare itself within the leader time-out")
		}
		return m
	}
	// failoverWait follows 9 at a newer term, then counts the ticks from
	// 9's Resign to node 2's claim: it defers for itself and for 4 (alive
	// as far as it knows), then waits for Answers: three waits.
	failoverWait := func(m *Machine) int {
		m.Step(msg(protocol.TypeCoordinator, 9, 0, m.Status().Term+2))
		m.Ready()
		m.Step(msg(protocol.TypeResign, 9, 0, m.Status().Term))
		m.Ready()
		for i := 1; i <= 20*timeout; i++ {
			if r := ticks(m, 1); r.Claimed != 0 {
				return i
			}
		}
		t.Fatal("no claim")
		return 0
	}

	m := claimAlone()
	m.Step(msg(protocol.TypeElection, 9, 0, 0)) // 9 was alive: its Answer came late
	m.Ready()
	if got := failoverWait(m); got != 3*2*T {
		t.Errorf("after hearing from a higher node at once: claimed %d ticks after the resign, want %d (three waits of 2T)", got, 3*2*T)
	}

	m = claimAlone()
	ticks(m, timeout) // long after the claim: 9 started since
	m.Step(msg(protocol.TypeElection, 9, 0, 0))
	m.Ready()
	if got := failoverWait(m); got != 3*T {
		t.Errorf("after a higher node that started later: claimed %d ticks after the resign, want %d (three waits of T)", got, 3*T)
	}
}

// A node that starts and finds no coordinator (a cluster starting) acts as
// after a failure: the highest member claims after T, a lower one defers
// its Election by T for itself and for each higher member, and holds none
// if it hears a leader meanwhile.
func TestBullyColdStart(t *testing.T) {
	T := election.DefaultAnswerTicks
	top := newNode(t, 9)
	top.Start()
	if r := top.Ready(); len(r.Messages) != 0 {
		t.Errorf("the highest member at start: got %v, want nothing before T", types(r.Messages))
	}
	if r := ticks(top, T); r.Claimed == 0 || !slices.Equal(types(r.Messages), []string{"election", "coordinator"}) {
		t.Errorf("the highest member after T: got %v (claimed %d), want its Election and a claim", types(r.Messages), r.Claimed)
	}

	low := newNode(t, 2) // 4 and 9 above it
	low.Start()
	low.Ready()
	if r := ticks(low, 3*T-1); len(r.Messages) != 0 {
		t.Errorf("node 2 before 3T: got %v, want nothing", types(r.Messages))
	}
	if r := ticks(low, 1); !slices.Equal(types(r.Messages), []string{"election"}) {
		t.Errorf("node 2 at 3T: got %v, want its Election", types(r.Messages))
	}

	quiet := newNode(t, 2)
	quiet.Start()
	quiet.Ready()
	ticks(quiet, T)
	quiet.Step(msg(protocol.TypeCoordinator, 9, 0, 6))
	if r := ticks(quiet, 3*T-1); len(r.Messages) != 0 {
		t.Errorf("node 2 that heard 9 lead while deferring: got %v, want no election", types(r.Messages))
	}
	if st := quiet.Status(); st.Leader != 9 || st.Role != election.Follower {
		t.Errorf("node 2 that heard 9 lead: status %+v, want a follower of 9", st)
	}
}

// A Resign from another process with the leader's ID (a replacement
// stopped while the leader runs: another incarnation than the one whose
// Coordinator and heartbeats this node follows) does not end the
// leadership; the leader's own Resign does.
func TestBullyResignOfAnotherIncarnation(t *testing.T) {
	m := newNode(t, 4)
	c := msg(protocol.TypeCoordinator, 9, 0, 3)
	c.Inc = 5
	m.Step(c)
	m.Ready()
	r := msg(protocol.TypeResign, 9, 0, 3)
	r.Inc = 6
	m.Step(r)
	if rd := m.Ready(); len(rd.Messages) != 0 || m.Status().Leader != 9 {
		t.Fatalf("after a Resign of another process of 9: sent %v, leader %d; want nothing sent and 9 still leading", types(rd.Messages), m.Status().Leader)
	}
	r.Inc = 5
	m.Step(r)
	if rd := m.Ready(); m.Status().Leader != 4 || !slices.Contains(types(rd.Messages), "coordinator") {
		t.Errorf("after 9's own Resign: sent %v, leader %d; want 4 to claim", types(rd.Messages), m.Status().Leader)
	}
}

// A leader that was only late (a busy host) answers the Election of the
// follower that timed it out, and re-asserts itself in its own term: the
// follower follows it again in that term, and no term is claimed.
func TestSilentLeaderThatAnswersKeepsItsTerm(t *testing.T) {
	T := election.DefaultAnswerTicks
	f := newNode(t, 4)
	f.Start()
	f.Ready()
	f.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
	f.Ready()
	r := ticks(f, election.DefaultLeaderTimeoutTicks)
	if got := types(r.Messages); !slices.Equal(got, []string{"probe→9", "election"}) {
		t.Fatalf("after the time-out: sent %v, want the probe, then an Election", got)
	}
	l := newNode(t, 9)
	l.Start()
	l.Ready()
	l.Step(msg(protocol.TypeCoordinator, 4, 0, 2))
	ticks(l, T+1)
	if st := l.Status(); st.Role != election.Leader {
		t.Fatalf("the leader: status %+v", st)
	}
	term := l.Status().Term
	e := r.Messages[1]
	e.Term = term
	f2 := newNode(t, 4)
	f2.Start()
	f2.Ready()
	f2.Step(msg(protocol.TypeCoordinator, 9, 0, term))
	f2.Ready()
	ticks(f2, election.DefaultLeaderTimeoutTicks)
	ticks(l, election.DefaultHeartbeatTicks)
	l.Step(e)
	ans := l.Ready()
	if ans.Claimed != 0 || l.Status().Term != term {
		t.Fatalf("the late leader answering: claimed %d, term %d; want its term %d kept", ans.Claimed, l.Status().Term, term)
	}
	for _, m := range ans.Messages {
		f2.Step(m)
	}
	got := ticks(f2, 2*T)
	if st := f2.Status(); st.Leader != 9 || st.Term != term || st.Role != election.Follower || got.Claimed != 0 {
		t.Errorf("the follower after the answer: status %+v, claimed %d; want a follower of 9 in term %d", st, got.Claimed, term)
	}
}

// A node that started and heard no leader waits ColdStartTicks, if set,
// before it leads, not the leader time-out.
func TestBullyColdStartTicks(t *testing.T) {
	for _, cold := range []int{0, 100} {
		timing := election.DefaultTiming(len(members))
		timing.ColdStartTicks = cold
		m, err := New(election.Config{ID: 2, Members: members, Timing: timing})
		if err != nil {
			t.Fatal(err)
		}
		m.Start()
		m.Ready()
		wait := cold
		if cold == 0 {
			wait = timing.LeaderTimeoutTicks
		}
		if r := ticks(m, wait-1); r.Claimed != 0 {
			t.Errorf("cold start %d: claimed term %d before %d ticks", cold, r.Claimed, wait)
		}
		if r := ticks(m, 2*timing.AnswerTicks); r.Claimed == 0 {
			t.Errorf("cold start %d: no claim %d ticks after %d ticks", cold, 2*timing.AnswerTicks, wait)
		}
	}
	bad := election.DefaultTiming(len(members))
	bad.ColdStartTicks = -1
	if _, err := New(election.Config{ID: 2, Members: members, Timing: bad}); err == nil {
		t.Error("a negative cold start was accepted")
	}
}

// leaderWith returns node 9 of members with timing, leading.
func leaderWith(t *testing.T, timing election.Timing) *Machine {
	t.Helper()
	m, err := New(election.Config{ID: 9, Members: members, Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	m.Ready()
	if r := ticks(m, 2*timing.AnswerTicks); r.Claimed == 0 {
		t.Fatalf("node 9 did not lead: %+v", m.Status())
	}
	return m
}

// Reassert makes a leader broadcast its heartbeat at once, and a
// follower nothing.
func TestBullyReassert(t *testing.T) {
	timing := election.DefaultTiming(len(members))
	timing.HeartbeatTicks, timing.LeaderTimeoutTicks, timing.LeaseTicks, timing.LeaderLeaseTicks = 1000, 2000, 0, 0
	leader := leaderWith(t, timing)
	ticks(leader, 5)
	leader.Reassert()
	if r := leader.Ready(); !slices.Equal(types(r.Messages), []string{"heartbeat"}) || r.Messages[0].Term != leader.Status().Term {
		t.Errorf("a leader's Reassert: got %v, want its heartbeat in its term", r.Messages)
	}
	follower := newNode(t, 2)
	follower.Start()
	follower.Ready()
	follower.Step(msg(protocol.TypeCoordinator, 9, 0, 3))
	follower.Ready()
	follower.Reassert()
	if r := follower.Ready(); len(r.Messages) != 0 {
		t.Errorf("a follower's Reassert: got %v, want nothing", types(r.Messages))
	}
}

// With heartbeats further apart than the coordinator wait, a leader
// still re-asserts itself to a lower Election once per coordinator wait:
// the candidate it answered would otherwise wait a whole heartbeat
// interval for its Coordinator, electing again and again.
func TestBullyReassertsWithinTheCoordinatorWait(t *testing.T) {
	timing := election.DefaultTiming(len(members))
	timing.HeartbeatTicks, timing.LeaderTimeoutTicks, timing.LeaseTicks, timing.LeaderLeaseTicks = 1000, 2000, 0, 0
	leader := leaderWith(t, timing)
	term := leader.Status().Term
	leader.Step(msg(protocol.TypeElection, 2, 9, term))
	if r := leader.Ready(); !slices.Equal(types(r.Messages), []string{"answer→2"}) {
		t.Errorf("an Election just after the claim: got %v, want an Answer", types(r.Messages))
	}
	ticks(leader, timing.CoordinatorTicks)
	leader.Step(msg(protocol.TypeElection, 2, 9, term))
	if r := leader.Ready(); !slices.Contains(types(r.Messages), "coordinator") {
		t.Errorf("an Election a coordinator wait after the claim: got %v, want a Coordinator", types(r.Messages))
	}
}

// A leader sends election.QuietAfter heartbeats every HeartbeatTicks
// after it claims, then one every QuietHeartbeatTicks.
func TestBullyQuietHeartbeats(t *testing.T) {
	timing := election.DefaultTiming(len(members))
	timing.HeartbeatTicks, timing.QuietHeartbeatTicks, timing.LeaderTimeoutTicks = 3, 12, 30
	timing.LeaseTicks, timing.LeaderLeaseTicks = 0, 0
	leader := leaderWith(t, timing)
	count := func(r election.Ready) int {
		n := 0
		for _, m := range r.Messages {
			if m.Type == protocol.TypeHeartbeat {
				n++
			}
		}
		return n
	}
	// leaderWith ticked a few times after the claim; start from a
	// heartbeat.
	for leader.Due() != timing.HeartbeatTicks && leader.Due() != timing.QuietHeartbeatTicks {
		ticks(leader, 1)
	}
	if got := count(ticks(leader, 12*timing.QuietHeartbeatTicks)); got >= election.QuietAfter+12 || got < 12 {
		t.Errorf("%d heartbeats in %d ticks, want fewer than %d", got, 12*timing.QuietHeartbeatTicks, election.QuietAfter+12)
	}
	if got := count(ticks(leader, 4*timing.QuietHeartbeatTicks)); got != 4 {
		t.Errorf("quiet: %d heartbeats in %d ticks, want 4", got, 4*timing.QuietHeartbeatTicks)
	}
	if d := leader.Due(); d > timing.QuietHeartbeatTicks {
		t.Errorf("quiet: next heartbeat in %d ticks, above %d", d, timing.QuietHeartbeatTicks)
	}
	// A claim (a lower Election with a newer term) makes them frequent again.
	leader.Step(msg(protocol.TypeElection, 2, 9, leader.Status().Term+3))
	leader.Ready()
	if got := count(ticks(leader, 4*timing.HeartbeatTicks)); got != 4 {
		t.Errorf("after a new claim: %d heartbeats in %d ticks, want 4", got, 4*timing.HeartbeatTicks)
	}
}

// With a grid (QuietGrid), a quiet leader sends each heartbeat in the
// last tick on the grid before its interval ends, and Due says when.
func TestBullyQuietHeartbeatsOnTheGrid(t *testing.T) {
	timing := election.DefaultTiming(len(members))
	timing.HeartbeatTicks, timing.QuietHeartbeatTicks, timing.LeaderTimeoutTicks = 3, 13, 30
	timing.QuietGrid, timing.QuietPhase = 4, 1
	timing.LeaseTicks, timing.LeaderLeaseTicks = 0, 0
	leader := leaderWith(t, timing)
	tick := 2 * timing.AnswerTicks // leaderWith's
	var beats []int                // the ticks of the heartbeats
	due := leader.Due()
	for len(beats) < election.QuietAfter+8 {
		leader.Tick()
		tick++
		due--
		sent := slices.Contains(types(leader.Ready().Messages), "heartbeat")
		if sent != (due == 0) {
			t.Fatalf("tick %d: heartbeat %v, but Due said %d more ticks", tick, sent, due)
		}
		if sent {
			beats = append(beats, tick)
			due = leader.Due()
		}
	}
	quiet := beats[election.QuietAfter-1:] // from the last frequent one
	for i, k := range quiet[1:] {
		if (k+timing.QuietPhase)%timing.QuietGrid != 0 {
			t.Errorf("quiet heartbeat at tick %d, off the grid (phase %d, every %d)", k, timing.QuietPhase, timing.QuietGrid)
		}
		if gap := k - quiet[i]; gap > timing.QuietHeartbeatTicks || gap <= timing.QuietHeartbeatTicks-timing.QuietGrid {
			t.Errorf("quiet heartbeats at ticks %d and %d: %d apart, want %d to %d", quiet[i], k, gap,
				timing.QuietHeartbeatTicks-timing.QuietGrid+1, timing.QuietHeartbeatTicks)
		}
	}
	bad := timing
	bad.QuietGrid = 7
	if _, err := New(election.Config{ID: 9, Members: members, Timing: bad}); err == nil {
		t.Error("a grid above half the quiet interval was accepted")
	}
}
