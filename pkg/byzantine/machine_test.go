package byzantine

import (
	"errors"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

func testConfig(t *testing.T, n int, id uint64) Config {
	k := keysFor(t, n)
	var ids []uint64
	for i := uint64(1); i <= uint64(n); i++ {
		ids = append(ids, i)
	}
	return Config{
		Config:  election.Config{ID: id, Members: ids, Timing: election.DefaultLeaseTiming(n), Restored: true},
		Cluster: testCluster, Signer: k.signers[id], Keys: k.keys,
	}
}

func TestNewRejects(t *testing.T) {
	bad := map[string]func(c *Config){
		"no signer":         func(c *Config) { c.Signer = nil },
		"no keys":           func(c *Config) { c.Keys = nil },
		"another's signer":  func(c *Config) { c.Signer = keysFor(t, 4).signers[2] },
		"keys of 7 for 4":   func(c *Config) { c.Keys = keysFor(t, 7).keys },
		"no lease":          func(c *Config) { c.Timing.LeaseTicks, c.Timing.LeaderLeaseTicks = 0, 0 },
		"bad cluster":       func(c *Config) { c.Cluster = "a.b" },
		"not a member":      func(c *Config) { c.ID = 9 },
		"vote without term": func(c *Config) { c.State = election.HardState{Vote: election.Vote{For: 4}} },
		"key of non-member": func(c *Config) { c.Members = []uint64{1, 2, 3, 5} },
	}
	for name, spoil := range bad {
		c := testConfig(t, 4, 1)
		spoil(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v, want %v", name, err, ErrConfig)
		}
	}
	if _, err := New(testConfig(t, 4, 1)); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestVoteStoredBeforeSent(t *testing.T) {
	m := newTestMachine(t, 4, 3)
	m.Step(protocol.Message{Type: protocol.TypeBzPropose, From: 4, Term: 1, Seq: 1})
	r := m.Ready()
	if r.State == nil || r.State.Vote != (election.Vote{Term: 1, For: 4}) {
		t.Fatalf("state %+v, want the vote for 4 in term 1 stored", r.State)
	}
	var sent bool
	for _, msg := range r.Messages {
		if msg.Type == protocol.TypeBzVote {
			sent = msg.Statement.Statement.Leader == 4 && msg.Statement.Verify(keysFor(t, 4).keys) == nil
		}
	}
	if !sent {
		t.Fatalf("no signed vote for 4 in %v", r.Messages)
	}
	// A proposal from a member that does not lead term 1 gets nothing.
	m.Step(protocol.Message{Type: protocol.TypeBzPropose, From: 2, Term: 1, Seq: 2})
	if r := m.Ready(); r.State != nil || len(r.Messages) != 0 {
		t.Errorf("proposal of a member that does not lead the term: %+v", r)
	}
}

func TestRestartedMemberKeepsItsVote(t *testing.T) {
	c := testConfig(t, 4, 3)
	c.State = election.HardState{Term: 2, MaxTerm: 2, Vote: election.Vote{Term: 2, For: 3}}
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	m.Ready()
	for range c.Timing.LeaseTicks + 2 {
		m.Tick()
	}
	m.Ready()
	// Term 2 is led by 3 (4, 3, 2, 1): a proposal of 4 in term 2 is
	// refused whatever it carries, and the member re-votes only for 3.
	m.Step(protocol.Message{Type: protocol.TypeBzPropose, From: 4, Term: 2, Seq: 1})
	for _, msg := range m.Ready().Messages {
		if msg.Type == protocol.TypeBzVote && msg.Statement.Statement.Leader != 3 {
			t.Fatalf("restarted member voted for %d in term 2 after voting for 3", msg.Statement.Statement.Leader)
		}
	}
	if st := m.Status(); st.Term != 2 {
		t.Errorf("term %d after restart, want 2", st.Term)
	}
}

func TestLiarCannotMoveTerms(t *testing.T) {
	m := newTestMachine(t, 4, 1)
	liar := keysFor(t, 4).signers[2]
	sign := func(s certify.Statement) certify.SignedStatement {
		ss, err := certify.Sign(liar, s)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	for _, term := range []uint64{1, 2, 5, protocol.MaxTerm - 1} {
		to := sign(certify.Timeout(testCluster, 2, term))
		m.Step(protocol.Message{Type: protocol.TypeBzTimeout, From: 2, Term: 1, Statement: &to})
	}
	// A proposal near the ceiling, justified by its own time-out only.
	t1 := sign(certify.Timeout(testCluster, 2, protocol.MaxTerm-3))
	tc, err := certify.NewTimeoutCertificate([]certify.SignedStatement{t1})
	if err != nil {
		t.Fatal(err)
	}
	high := protocol.MaxTerm - 2 // led by member 2 of 4
	m.Step(protocol.Message{Type: protocol.TypeBzPropose, From: Designated([]uint64{4, 3, 2, 1}, high), Term: high, Seq: 1, TC: &tc})
	if st := m.Status(); st.Term != 1 {
		t.Errorf("term %d after one liar's time-outs and claims, want 1", st.Term)
	}
	for _, msg := range m.Ready().Messages {
		if msg.Type == protocol.TypeBzTimeout && msg.Statement.Statement.Term != 1 {
			// f+1 = 2 time-outs of term 1 (the liar's and its own) may make
			// it give up term 1, never anything the liar alone named.
			t.Errorf("member gave up term %d on one liar's word", msg.Statement.Statement.Term)
		}
	}
}

func TestNextTermOf(t *testing.T) {
	m := newTestMachine(t, 4, 1)
	desc := []uint64{4, 3, 2, 1}
	for _, c := range desc {
		for term := uint64(1); term < 20; term++ {
			next := m.nextTermOf(c, term)
			if next <= term || next > term+4 || Designated(desc, next) != c {
				t.Errorf("nextTermOf(%d, %d) = %d", c, term, next)
			}
		}
	}
	if got := m.nextTermOf(4, protocol.MaxTerm); got != 0 {
		t.Errorf("nextTermOf at the ceiling = %d, want 0", got)
	}
}

func TestRestartedLeaderGivesUpItsTerm(t *testing.T) {
	c := testConfig(t, 4, 4)
	c.State = election.HardState{Term: 5, MaxTerm: 5, Vote: election.Vote{Term: 5, For: 4}}
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	var gaveUp bool
	for range 3 * c.Timing.LeaderTimeoutTicks {
		for _, msg := range m.Ready().Messages {
			switch msg.Type {
			case protocol.TypeBzPropose:
				t.Fatalf("restarted leader proposes again in its term %d", msg.Term)
			case protocol.TypeBzTimeout:
				gaveUp = gaveUp || msg.Statement.Statement.Term == 5
			}
		}
		m.Tick()
	}
	if !gaveUp {
		t.Errorf("restarted leader did not give up its term 5")
	}
}
