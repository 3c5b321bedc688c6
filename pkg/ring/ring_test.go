package ring

import (
	"slices"
	"strconv"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// The ring: 2 → 4 → 9 → 2.
var members = []uint64{9, 2, 4}

func newNode(t *testing.T, id uint64) *Machine {
	t.Helper()
	m, err := New(election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// show renders messages as type→to:candidate, ignoring acks.
func show(msgs []protocol.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Type == protocol.TypeAck {
			continue
		}
		s := string(m.Type)
		if m.To != 0 {
			s += "→" + strconv.FormatUint(m.To, 10)
		}
		if m.Candidate != 0 {
			s += ":" + strconv.FormatUint(m.Candidate, 10)
		}
		out = append(out, s)
	}
	return out
}

func electionMsg(from, to, cand, seq uint64) protocol.Message {
	return protocol.Message{V: protocol.Version, Type: protocol.TypeElection, From: from, To: to, Candidate: cand, Seq: seq}
}

func elected(from, to, cand, term, seq uint64) protocol.Message {
	return protocol.Message{V: protocol.Version, Type: protocol.TypeElected, From: from, To: to, Candidate: cand, Term: term, Seq: seq}
}

func TestRing(t *testing.T) {
	tests := []struct {
		name       string
		rule       string
		id         uint64
		start      bool
		steps      []protocol.Message
		ticks      int
		then       []protocol.Message // after the ticks
		down       uint64             // a peer whose connection closes, after the steps
		wantMsgs   []string           // after the last event
		wantRole   election.Role
		wantLeader uint64
		wantClaim  bool
	}{
		{
			name: "initiator sends its own ID", id: 4, start: true,
			rule:     "an initiator marks itself participating and sends Election carrying its own ID to its successor",
			wantMsgs: []string{"election→9:4"}, wantRole: election.Candidate,
		},
		{
			name: "non-participant forwards the larger ID", id: 4,
			rule:     "a non-participant that receives Election forwards the larger of its own ID and the received one",
			steps:    []protocol.Message{electionMsg(2, 4, 2, 1)},
			wantMsgs: []string{"election→9:4"}, wantRole: election.Candidate,
		},
		{
			name: "non-participant forwards a larger candidate", id: 4,
			rule:     "a non-participant that receives Election forwards the larger of its own ID and the received one",
			steps:    []protocol.Message{electionMsg(2, 4, 9, 1)},
			wantMsgs: []string{"election→9:9"}, wantRole: election.Candidate,
		},
		{
			name: "participant drops a smaller ID", id: 4, start: true,
			rule:     "a participant drops a smaller ID",
			steps:    []protocol.Message{electionMsg(2, 4, 2, 1)},
			wantMsgs: nil, wantRole: election.Candidate,
		},
		{
			name: "participant forwards a larger ID", id: 4, start: true,
			rule:     "a participant forwards a larger ID",
			steps:    []protocol.Message{electionMsg(2, 4, 9, 1)},
			wantMsgs: []string{"election→9:9"}, wantRole: election.Candidate,
		},
		{
			name: "participant forwards each round once", id: 4, start: true,
			rule:     "a participant passes each round on once (package doc, Copies)",
			steps:    []protocol.Message{electionMsg(2, 4, 9, 1), electionMsg(2, 4, 9, 1)},
			wantMsgs: nil, wantRole: election.Candidate,
		},
		{
			name: "own ID back: leader, Elected round", id: 9, start: true,
			rule:     "when its own ID comes back it knows it is leader, becomes non-participating and sends Elected round the ring",
			steps:    []protocol.Message{electionMsg(4, 9, 9, 1)},
			wantMsgs: []string{"heartbeat", "elected→2:9"}, wantRole: election.Leader, wantLeader: 9, wantClaim: true,
		},
		{
			name: "Elected is recorded and forwarded", id: 2,
			rule:     "every node that receives Elected records the leader, becomes non-participating and forwards it",
			steps:    []protocol.Message{elected(9, 2, 9, 3, 1)},
			wantMsgs: []string{"elected→4:9"}, wantRole: election.Follower, wantLeader: 9,
		},
		{
			name: "Elected is forwarded once", id: 2,
			rule:     "a node passes each leadership on once (package doc, Copies)",
			steps:    []protocol.Message{elected(9, 2, 9, 3, 1), elected(9, 2, 9, 3, 1)},
			wantMsgs: nil, wantRole: election.Follower, wantLeader: 9,
		},
		{
			name: "Elected stops at the leader", id: 9, start: true,
			rule:     "every node forwards Elected unless it is the leader",
			steps:    []protocol.Message{electionMsg(4, 9, 9, 1), elected(4, 9, 9, 3, 2)},
			wantMsgs: nil, wantRole: election.Leader, wantLeader: 9,
		},
		{
			name: "dead successor skipped", id: 4, start: true,
			rule:     "dead successors are skipped (no Ack within AnswerTicks)",
			ticks:    election.DefaultAnswerTicks,
			wantMsgs: []string{"election→2:4"}, wantRole: election.Candidate,
		},
		{
			name: "leader re-asserts with a heartbeat", id: 9, start: true,
			rule:     "a leader that receives Election for a lower candidate re-asserts itself (package doc, Copies)",
			steps:    []protocol.Message{electionMsg(4, 9, 9, 1), {V: protocol.Version, Type: protocol.TypeAck, From: 2, To: 9, Seq: 2, Candidate: 9}},
			ticks:    election.DefaultHeartbeatTicks,
			then:     []protocol.Message{electionMsg(4, 9, 4, 7)},
			wantMsgs: []string{"heartbeat"}, wantRole: election.Leader, wantLeader: 9,
		},
		{
			name: "leader re-asserts at most once per heartbeat interval", id: 9, start: true,
			rule:     "package doc, Re-assertion: in between, its periodic heartbeats say the same",
			steps:    []protocol.Message{electionMsg(4, 9, 9, 1), electionMsg(4, 9, 4, 7)},
			wantMsgs: nil, wantRole: election.Leader, wantLeader: 9,
		},
		{
			name: "no Elected: start again", id: 4, start: true,
			rule:  "a participant that sees no Elected within CoordinatorTicks starts again",
			steps: []protocol.Message{{V: protocol.Version, Type: protocol.TypeAck, From: 9, To: 4, Seq: 1, Candidate: 4}},
			ticks: election.DefaultTiming(len(members)).CoordinatorTicks,
			// The first attempt was acknowledged, so the successor is tried again.
			wantMsgs: []string{"election→9:4"}, wantRole: election.Candidate,
		},
		{
			name: "leader resigns: the highest live node initiates at once", id: 4,
			rule:     "every node whose leader resigned initiates (package doc, One round after a failure)",
			steps:    []protocol.Message{elected(2, 4, 9, 3, 1), {V: protocol.Version, Type: protocol.TypeResign, From: 9, Term: 3}},
			wantMsgs: []string{"election→2:4"}, wantRole: election.Candidate,
		},
		{
			name: "the leader's connection closes: the highest live node initiates at once", id: 4,
			rule:     "followers suspect a leader whose heartbeats stop and initiate (its disconnect counts as that)",
			steps:    []protocol.Message{elected(2, 4, 9, 3, 1)},
			down:     9,
			wantMsgs: []string{"election→2:4"}, wantRole: election.Candidate,
		},
		{
			name: "leader resigns: the others initiate after a round's time", id: 2,
			rule:     "every node whose leader resigned initiates (package doc, One round after a failure: deferred by CoordinatorTicks)",
			steps:    []protocol.Message{elected(9, 2, 9, 3, 1), {V: protocol.Version, Type: protocol.TypeResign, From: 9, Term: 3}},
			ticks:    election.DefaultTiming(len(members)).CoordinatorTicks,
			wantMsgs: []string{"election→4:2"}, wantRole: election.Candidate,
		},
		{
			name: "leader resigns: nothing before a round's time", id: 2,
			rule:     "package doc, One round after a failure: a node that is not the highest live one waits as long as a round may take",
			steps:    []protocol.Message{elected(9, 2, 9, 3, 1), {V: protocol.Version, Type: protocol.TypeResign, From: 9, Term: 3}},
			ticks:    election.DefaultTiming(len(members)).CoordinatorTicks - 1,
			wantMsgs: nil, wantRole: election.Candidate,
		},
		{
			name: "leader resigns: a deferred node that a round reaches participates", id: 2,
			rule:     "a non-participant that receives Election forwards the larger ID and becomes participating",
			steps:    []protocol.Message{elected(9, 2, 9, 3, 1), {V: protocol.Version, Type: protocol.TypeResign, From: 9, Term: 3}, electionMsg(4, 2, 4, 1)},
			ticks:    2 * election.DefaultAnswerTicks,
			wantMsgs: nil, wantRole: election.Candidate,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newNode(t, tt.id)
			if tt.start {
				m.Start()
			}
			for _, s := range tt.steps {
				m.Ready()
				m.Step(s)
			}
			if tt.down != 0 {
				m.Ready()
				m.PeerDown(tt.down)
			}
			for range tt.ticks {
				m.Ready()
				m.Tick()
			}
			for _, s := range tt.then {
				m.Ready()
				m.Step(s)
			}
			r := m.Ready()
			if got := show(r.Messages); !slices.Equal(got, tt.wantMsgs) {
				t.Errorf("rule %q: messages got %v, want %v", tt.rule, got, tt.wantMsgs)
			}
			st := m.Status()
			if st.Role != tt.wantRole || st.Leader != tt.wantLeader {
				t.Errorf("rule %q: role, leader got %v, %d, want %v, %d", tt.rule, st.Role, st.Leader, tt.wantRole, tt.wantLeader)
			}
			if (r.Claimed != 0) != tt.wantClaim {
				t.Errorf("rule %q: claimed got %d, want a claim: %v", tt.rule, r.Claimed, tt.wantClaim)
			}
		})
	}
}

// A node that starts and finds a live leader with a higher ID follows it
// without a round.
func TestRingStartFollowsFoundLeader(t *testing.T) {
	m, err := New(election.Config{ID: 4, Members: members, Timing: election.DefaultTiming(len(members)),
		Found: election.Leadership{Leader: 9, Term: 6}})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	if got := show(m.Ready().Messages); len(got) != 0 {
		t.Errorf("messages: got %v, want none", got)
	}
	if st := m.Status(); st.Leader != 9 || st.Term != 6 || st.Role != election.Follower {
		t.Errorf("status: got %+v, want a follower of 9 at term 6", st)
	}
}

// A successor skipped for want of an Ack that turns out to have been alive
// is waited for twice as long the next time, up to the leader time-out and
// a third of CoordinatorTicks.
func TestRingAckWaitLearnsDelays(t *testing.T) {
	T := election.DefaultAnswerTicks
	big := []uint64{2, 4, 9, 11, 12, 13, 14, 15, 16} // CoordinatorTicks 50: the cap is 16
	m, err := New(election.Config{ID: 2, Members: big, Timing: election.DefaultTiming(len(big))})
	if err != nil {
		t.Fatal(err)
	}
	m.Start() // its successor is 4
	m.Ready()
	// skipAfter counts the ticks until node 2 gives up on 4 and sends the
	// round to 9 instead, which acknowledges at once.
	skipAfter := func() int {
		for i := 1; i <= 10*election.DefaultLeaderTimeoutTicks; i++ {
			m.Tick()
			for _, msg := range m.Ready().Messages {
				if msg.Type == protocol.TypeElection && msg.To == 9 {
					m.Step(protocol.Message{V: protocol.Version, Type: protocol.TypeAck, From: 9, To: 2, Candidate: msg.Candidate, Seq: msg.Seq})
					m.Ready()
					return i
				}
			}
		}
		t.Fatal("4 never skipped")
		return 0
	}
	lateAck := func() {
		m.Step(protocol.Message{V: protocol.Version, Type: protocol.TypeAck, From: 4, To: 2, Candidate: 2, Seq: 1})
		m.Ready()
		m.initiate() // a new round of its own
		m.Ready()
	}
	for i, want := range []int{T, 2 * T, 3*T + 1, 3*T + 1} {
		if got := skipAfter(); got != want {
			t.Errorf("skip %d: after %d ticks, want %d", i+1, got, want)
		}
		lateAck()
	}
}

// Due tells when the next tick can have an effect: a node deferring its
// round after its leader resigned sleeps until the deferral ends.
func TestRingDue(t *testing.T) {
	m, err := New(election.Config{ID: 2, Members: members, Timing: election.DefaultTiming(len(members)),
		Found: election.Leadership{Leader: 9, Term: 3}})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	m.Ready()
	m.Step(protocol.Message{V: protocol.Version, Type: protocol.TypeResign, From: 9, Term: 3})
	m.Ready()
	due := m.Due()
	if want := election.DefaultTiming(len(members)).CoordinatorTicks; due != want {
		t.Errorf("Due of a node deferring after a resign: got %d, want %d", due, want)
	}
	if r := ticks(m, due-1); len(show(r.Messages)) != 0 {
		t.Errorf("before Due: %v", show(r.Messages))
	}
	if r := ticks(m, 1); len(show(r.Messages)) == 0 {
		t.Error("at Due: nothing sent, want the deferred round")
	}
}

func ticks(m *Machine, n int) election.Ready {
	var all election.Ready
	for range n {
		m.Tick()
		r := m.Ready()
		all.Messages = append(all.Messages, r.Messages...)
	}
	return all
}

// The highest follower of a leader that only fell silent sends its round
// to the leader first, its successor, and waits T for its Ack: a late
// leader acknowledges and re-asserts itself in its own term, and the
// follower follows it again without a new term. A leader that does not
// acknowledge is skipped after T, and the round goes on without it.
func TestSilentLeaderGetsTheRoundFirst(t *testing.T) {
	T := election.DefaultAnswerTicks
	follower := func(term uint64) *Machine {
		m, err := New(election.Config{ID: 4, Members: members, Timing: election.DefaultTiming(len(members)),
			Found: election.Leadership{Leader: 9, Term: term}})
		if err != nil {
			t.Fatal(err)
		}
		m.Start()
		m.Ready()
		return m
	}
	f := follower(3) // 4's successor is 9
	r := ticks(f, election.DefaultLeaderTimeoutTicks)
	got := show(r.Messages)
	if len(got) == 0 || got[len(got)-1] != "election→9:4" {
		t.Fatalf("after the time-out: sent %v, want the round to the silent leader 9", got)
	}
	round := r.Messages[len(r.Messages)-1]

	// The late leader acknowledges, and re-asserts itself with a
	// heartbeat in its term.
	l := newNode(t, 9)
	l.Start()
	l.Ready()
	ticks(l, election.DefaultTiming(len(members)).CoordinatorTicks+1)
	if st := l.Status(); st.Role != election.Leader {
		t.Fatalf("the leader: status %+v", st)
	}
	term := l.Status().Term
	ticks(l, election.DefaultHeartbeatTicks)
	round.Term = term
	l.Step(round)
	ans := l.Ready()
	if ans.Claimed != 0 || l.Status().Term != term {
		t.Fatalf("the late leader: claimed %d, term %d; want its term %d kept", ans.Claimed, l.Status().Term, term)
	}
	f2 := follower(term)
	ticks(f2, election.DefaultLeaderTimeoutTicks)
	for _, m := range ans.Messages {
		if m.To == 0 || m.To == 4 {
			f2.Step(m)
		}
	}
	after := ticks(f2, 2*T)
	if st := f2.Status(); st.Leader != 9 || st.Term != term || st.Role != election.Follower || after.Claimed != 0 {
		t.Errorf("the follower after the Ack and heartbeat: status %+v, claimed %d; want a follower of 9 in term %d", st, after.Claimed, term)
	}

	// A hung leader: skipped after T, the round goes on to 2.
	r = ticks(f, T)
	if got := show(r.Messages); !slices.Contains(got, "election→2:4") {
		t.Errorf("no Ack from 9 within T: sent %v, want the round to 2", got)
	}
	// The leader, stopped, resumes later: that teaches nothing about the
	// wait for its Acks, which stays T (doubled, it would lengthen every
	// later round through it, and the next failover).
	ticks(f, 10*election.DefaultLeaderTimeoutTicks)
	f.Step(protocol.Message{V: protocol.Version, Type: protocol.TypeHeartbeat, From: 9, Term: term + 3})
	f.Ready()
	if w := f.waitFor(9); w != T {
		t.Errorf("after the skipped leader was heard again: waits %d ticks for its Ack, want T = %d", w, T)
	}
}
