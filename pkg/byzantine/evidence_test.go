package byzantine

import (
	"testing"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// newTestMachine returns member id of n, started.
func newTestMachine(t *testing.T, n int, id uint64) *Machine {
	t.Helper()
	k := keysFor(t, n)
	var ids []uint64
	for i := uint64(1); i <= uint64(n); i++ {
		ids = append(ids, i)
	}
	m, err := New(Config{
		Config:  election.Config{ID: id, Members: ids, Timing: election.DefaultLeaseTiming(n), Restored: true},
		Cluster: testCluster, Signer: k.signers[id], Keys: k.keys,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	m.Ready()
	return m
}

func signedVote(t *testing.T, n int, member, term, leader uint64) *certify.SignedStatement {
	t.Helper()
	ss, err := certify.Sign(keysFor(t, n).signers[member], certify.Vote(testCluster, member, term, leader))
	if err != nil {
		t.Fatal(err)
	}
	return &ss
}

func TestEquivocationConvicts(t *testing.T) {
	m := newTestMachine(t, 4, 1)
	m.Step(protocol.Message{Type: protocol.TypeBzVote, From: 3, Term: 1, Seq: 1, Statement: signedVote(t, 4, 3, 1, 4)})
	if r := m.Ready(); len(r.Events) != 0 {
		t.Fatalf("one vote: events %v", r.Events)
	}
	m.Step(protocol.Message{Type: protocol.TypeBzVote, From: 3, Term: 1, Seq: 1, Statement: signedVote(t, 4, 3, 1, 2)})
	r := m.Ready()
	var lied bool
	for _, e := range r.Events {
		lied = lied || e.Kind == election.MemberLied && e.Member == 3
	}
	if !lied {
		t.Fatalf("two votes of 3 in term 1: events %v, want MemberLied of 3", r.Events)
	}
	var ev *certify.Evidence
	for _, msg := range r.Messages {
		if msg.Type == protocol.TypeBzEvidence {
			ev = msg.Evidence
		}
	}
	if ev == nil || certify.VerifyEvidence(keysFor(t, 4).keys, *ev) != nil {
		t.Fatalf("no valid evidence broadcast: %v", r.Messages)
	}
	if got := m.Liars(); len(got) != 1 || got[0] != 3 {
		t.Errorf("Liars() = %v, want [3]", got)
	}
	// Another member convicts on the evidence alone.
	other := newTestMachine(t, 4, 2)
	other.Step(protocol.Message{Type: protocol.TypeBzEvidence, From: 1, Evidence: ev})
	if got := other.Liars(); len(got) != 1 || got[0] != 3 {
		t.Errorf("after evidence: Liars() = %v, want [3]", got)
	}
}

// Order evidence (two signed relays of one member along one path with
// different values) proves a lie about an order, not about the election:
// an honest member whose orders service restarted without its state can
// be made to sign such a pair, and a liar could then have it ignored by
// every member and the quorums made to need the liar. The machine
// convicts on vote evidence only.
func TestRelayEvidenceConvictsNobody(t *testing.T) {
	k := keysFor(t, 4)
	relay := func(value string) certify.SignedStatement {
		ss, err := certify.Sign(k.signers[3], certify.Relay(testCluster, 1, 1, []uint64{4, 3}, []byte(value)))
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	ev := certify.Evidence{First: relay("attack"), Second: relay("retreat")}
	if err := certify.VerifyEvidence(k.keys, ev); err != nil {
		t.Fatalf("the relays are no evidence: %v", err)
	}
	m := newTestMachine(t, 4, 2)
	// The liar, member 1, wraps the evidence in a message of its own.
	m.Step(protocol.Message{Type: protocol.TypeBzEvidence, From: 1, Evidence: &ev})
	r := m.Ready()
	for _, e := range r.Events {
		if e.Kind == election.MemberLied {
			t.Errorf("relay evidence: event %v; want no conviction", e)
		}
	}
	for _, msg := range r.Messages {
		if msg.Type == protocol.TypeBzEvidence {
			t.Errorf("relay evidence passed on: %+v", msg)
		}
	}
	if got := m.Liars(); len(got) != 0 {
		t.Errorf("Liars() = %v; want none", got)
	}
}
