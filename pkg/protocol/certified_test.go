package protocol

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
)

// sig is a signature of the right size; Validate does not check it.
var sig = bytes.Repeat([]byte{7}, certify.SignatureSize)

func signed(s certify.Statement) *certify.SignedStatement {
	return &certify.SignedStatement{Statement: s, Signature: sig}
}

func certOf(term, leader uint64, signers ...uint64) *certify.Certificate {
	c := &certify.Certificate{Cluster: "c", Term: term, Leader: leader}
	for _, m := range signers {
		c.Votes = append(c.Votes, certify.MemberSignature{Member: m, Signature: sig})
	}
	return c
}

func tcOf(term uint64, signers ...uint64) *certify.TimeoutCertificate {
	c := &certify.TimeoutCertificate{Cluster: "c", Term: term}
	for _, m := range signers {
		c.Timeouts = append(c.Timeouts, certify.MemberSignature{Member: m, Signature: sig})
	}
	return c
}

func validCertified() []Message {
	return []Message{
		{Type: TypeBzPropose, From: 8, Term: 1, Seq: 1},
		{Type: TypeBzPropose, From: 8, Term: 4, Seq: 2, TC: tcOf(3, 1, 2, 3, 5)},
		{Type: TypeBzPropose, From: 8, Term: 4, Seq: 3, Cert: certOf(4, 8, 1, 2, 8, 5)},
		{Type: TypeBzVote, From: 2, Term: 4, Seq: 3, Statement: signed(certify.Vote("c", 2, 4, 8))},
		{Type: TypeBzAck, From: 2, To: 8, Term: 4, Seq: 3},
		{Type: TypeBzTimeout, From: 2, Term: 4, Statement: signed(certify.Timeout("c", 2, 6)), TC: tcOf(3, 1, 2, 3)},
		{Type: TypeBzHello, From: 3, Term: 0},
		{Type: TypeBzStatus, From: 2, To: 3, Term: 4, Candidate: 8, Cert: certOf(4, 8, 1, 2, 5, 8)},
		{Type: TypeBzEvidence, From: 2, Evidence: &certify.Evidence{
			First:  *signed(certify.Vote("c", 5, 4, 8)),
			Second: *signed(certify.Vote("c", 5, 4, 3)),
		}},
	}
}

func TestCertifiedRoundTrip(t *testing.T) {
	for _, m := range validCertified() {
		if err := Validate(m, members); err != nil {
			t.Errorf("Validate(%v) = %v, want nil", m, err)
		}
		data, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(%v): %v", m, err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("Decode(%s): %v", data, err)
		}
		want := m
		want.V = Version
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip: got %+v, want %+v", got, want)
		}
	}
}

func TestCertifiedRejects(t *testing.T) {
	vote := signed(certify.Vote("c", 2, 4, 8))
	tests := []struct {
		name string
		m    Message
	}{
		{"statement on a heartbeat", Message{Type: TypeHeartbeat, From: 8, Term: 1, Statement: vote}},
		{"cert on a paxos propose", Message{Type: TypePropose, From: 8, Term: 4, Cert: certOf(4, 8, 1, 2, 5)}},
		{"propose to one", Message{Type: TypeBzPropose, From: 8, To: 2, Term: 1, Seq: 1}},
		{"propose without a round", Message{Type: TypeBzPropose, From: 8, Term: 1}},
		{"propose with another's cert", Message{Type: TypeBzPropose, From: 8, Term: 4, Seq: 1, Cert: certOf(4, 5, 1, 2, 5)}},
		{"cert of another term", Message{Type: TypeBzPropose, From: 8, Term: 5, Seq: 1, Cert: certOf(4, 8, 1, 2, 5)}},
		{"tc of the same term", Message{Type: TypeBzPropose, From: 8, Term: 4, Seq: 1, TC: tcOf(4, 1, 2)}},
		{"tc on term 1", Message{Type: TypeBzPropose, From: 8, Term: 1, Seq: 1, TC: tcOf(0, 1, 2)}},
		{"cert signed by a non-member", Message{Type: TypeBzPropose, From: 8, Term: 4, Seq: 1, Cert: certOf(4, 8, 1, 2, 4)}},
		{"cert signed twice", Message{Type: TypeBzPropose, From: 8, Term: 4, Seq: 1, Cert: certOf(4, 8, 1, 2, 2)}},
		{"cert short signature", Message{Type: TypeBzPropose, From: 8, Term: 4, Seq: 1, Cert: &certify.Certificate{Cluster: "c", Term: 4, Leader: 8,
			Votes: []certify.MemberSignature{{Member: 1, Signature: sig[:10]}}}}},
		{"cert bad cluster", Message{Type: TypeBzPropose, From: 8, Term: 4, Seq: 1, Cert: &certify.Certificate{Cluster: "a.b", Term: 4, Leader: 8,
			Votes: []certify.MemberSignature{{Member: 1, Signature: sig}}}}},
		{"vote without statement", Message{Type: TypeBzVote, From: 2, Term: 4, Seq: 1}},
		{"vote of another member", Message{Type: TypeBzVote, From: 3, Term: 4, Seq: 1, Statement: vote}},
		{"vote of another term", Message{Type: TypeBzVote, From: 2, Term: 5, Seq: 1, Statement: vote}},
		{"vote for a non-member", Message{Type: TypeBzVote, From: 2, Term: 4, Seq: 1, Statement: signed(certify.Vote("c", 2, 4, 9))}},
		{"time-out in a vote", Message{Type: TypeBzVote, From: 2, Term: 4, Seq: 1, Statement: signed(certify.Timeout("c", 2, 4))}},
		{"vote in a time-out", Message{Type: TypeBzTimeout, From: 2, Term: 4, Statement: vote}},
		{"time-out above the ceiling", Message{Type: TypeBzTimeout, From: 2, Term: 4, Statement: signed(certify.Timeout("c", 2, MaxTerm+1))}},
		{"short statement signature", Message{Type: TypeBzTimeout, From: 2, Term: 4, Statement: &certify.SignedStatement{Statement: certify.Timeout("c", 2, 4), Signature: sig[:3]}}},
		{"ack broadcast", Message{Type: TypeBzAck, From: 2, Term: 4, Seq: 1}},
		{"status broadcast", Message{Type: TypeBzStatus, From: 2, Term: 4}},
		{"candidate on a hello", Message{Type: TypeBzHello, From: 2, Candidate: 8}},
		{"round on a hello", Message{Type: TypeBzHello, From: 2, Seq: 3}},
		{"evidence missing", Message{Type: TypeBzEvidence, From: 2}},
		{"evidence that proves nothing", Message{Type: TypeBzEvidence, From: 2, Evidence: &certify.Evidence{First: *vote, Second: *vote}}},
	}
	for _, tc := range tests {
		if err := Validate(tc.m, members); err == nil {
			t.Errorf("%s: Validate(%v) = nil, want an error", tc.name, tc.m)
		}
	}
}

func TestCertifiedPayloadBound(t *testing.T) {
	big := Message{Type: TypeBzPropose, From: 8, Term: 4, Seq: 1, Cert: certOf(4, 8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)}
	data, err := Encode(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) <= MaxPayload {
		t.Fatalf("test message of %d bytes does not exceed MaxPayload", len(data))
	}
	if _, err := Decode(data); err != nil {
		t.Errorf("Decode of a %d-byte certified message: %v", len(data), err)
	}
	// Other types keep the old bound, even with a certified field.
	other := strings.Replace(string(data), `"bz_propose"`, `"heartbeat"`, 1)
	if _, err := Decode([]byte(other)); ReasonOf(err) != ReasonOversized {
		t.Errorf("Decode of a %d-byte heartbeat: %v, want %s", len(other), err, ReasonOversized)
	}
	huge := `{"v":2,"type":"bz_hello","from":1,"pad":"` + strings.Repeat("x", MaxCertifiedPayload) + `"}`
	if _, err := Decode([]byte(huge)); ReasonOf(err) != ReasonOversized {
		t.Errorf("Decode of %d bytes: %v, want %s", len(huge), err, ReasonOversized)
	}
}
