package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var members = []uint64{1, 2, 3, 5, 8}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	msgs := []Message{
		{Type: TypeElection, From: 2, Term: 7},
		{Type: TypeElection, From: 2, To: 3, Term: 7, Candidate: 8, Seq: 4, Hops: 2},
		{Type: TypeAnswer, From: 5, To: 2, Term: 10},
		{Type: TypeCoordinator, From: 8, Term: 10},
		{Type: TypeElected, From: 1, To: 2, Candidate: 8, Term: 10, Seq: 9},
		{Type: TypeAck, From: 2, To: 1, Seq: 9},
		{Type: TypeHeartbeat, From: 8, Term: 10},
		{Type: TypeResign, From: 8, Term: 10},
		{Type: TypeStale, From: 3, To: 8, Term: 15, Candidate: 5},
		{Type: TypeHeartbeat, From: 8, Term: MaxTerm, Inc: 1 << 60, N: 3, TS: 1_700_000_000_000},
		{Type: TypePrepare, From: 8, Term: 13},
		{Type: TypePromise, From: 2, To: 8, Term: 13, Prior: 10, Candidate: 5},
		{Type: TypePropose, From: 8, Term: 13, Seq: 4, Candidate: 8},
		{Type: TypeAccepted, From: 2, To: 8, Term: 13, Seq: 4},
		{Type: TypeNack, From: 2, To: 3, Term: 13, Candidate: 8, Wait: 17},
	}
	for _, m := range msgs {
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
		if err := Validate(got, members); err != nil {
			t.Errorf("Validate(%v) = %v, want nil", got, err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    Reason
	}{
		{"empty", ``, ReasonMalformed},
		{"not json", `hello`, ReasonMalformed},
		{"array", `[1,2]`, ReasonInvalidField},
		{"truncated", `{"v":2,"type":"election"`, ReasonMalformed},
		{"trailing data", `{"v":2,"type":"election","from":1} {}`, ReasonMalformed},
		{"wrong field type", `{"v":2,"type":"election","from":"one"}`, ReasonInvalidField},
		{"negative id", `{"v":2,"type":"election","from":-1}`, ReasonInvalidField},
		{"float term", `{"v":2,"type":"heartbeat","from":1,"term":1.5}`, ReasonInvalidField},
		{"unknown field", `{"v":2,"type":"election","from":1,"admin":true}`, ReasonMalformed},
		{"no version", `{"type":"election","from":1}`, ReasonVersion},
		{"old version", `{"v":1,"type":"election","from":1}`, ReasonVersion},
		{"future version", `{"v":3,"type":"election","from":1}`, ReasonVersion},
		{"unknown type", `{"v":2,"type":"promote","from":1}`, ReasonUnknownType},
		{"missing type", `{"v":2,"from":1}`, ReasonUnknownType},
		{"oversized", `{"v":2,"type":"election","from":1,"pad":"` + strings.Repeat("x", MaxPayload) + `"}`, ReasonOversized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.payload))
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Decode(%q) error = %v, want a *ValidationError", tt.payload, err)
			}
			if verr.Reason != tt.want {
				t.Errorf("Decode(%q) reason = %s, want %s (%v)", tt.payload, verr.Reason, tt.want, err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		want Reason
	}{
		{"sender not a member", Message{Type: TypeElection, From: 4}, ReasonNotMember},
		{"sender zero", Message{Type: TypeElection}, ReasonNotMember},
		{"receiver not a member", Message{Type: TypeAnswer, From: 1, To: 9}, ReasonNotMember},
		{"candidate not a member", Message{Type: TypeElection, From: 1, To: 2, Candidate: 9}, ReasonNotMember},
		{"to itself", Message{Type: TypeAnswer, From: 2, To: 2}, ReasonInvalidField},
		{"negative hops", Message{Type: TypeElection, From: 1, To: 2, Candidate: 2, Hops: -1}, ReasonInvalidField},
		{"hops above the bound", Message{Type: TypeElection, From: 1, To: 2, Candidate: 2, Hops: MaxHops + 1}, ReasonInvalidField},
		// Terms are bounded: a term above the ceiling is invalid, so that
		// claiming the next term can never wrap round.
		{"term above the ceiling", Message{Type: TypeElection, From: 1, Term: MaxTerm + 1}, ReasonInvalidField},
		{"largest term", Message{Type: TypeHeartbeat, From: 1, Term: 1<<64 - 1}, ReasonInvalidField},
		{"coordinator without term", Message{Type: TypeCoordinator, From: 8}, ReasonInvalidField},
		{"heartbeat addressed", Message{Type: TypeHeartbeat, From: 8, To: 1, Term: 5}, ReasonInvalidField},
		{"resign addressed", Message{Type: TypeResign, From: 8, To: 1, Term: 5}, ReasonInvalidField},
		{"answer broadcast", Message{Type: TypeAnswer, From: 5, Term: 5}, ReasonInvalidField},
		{"ack broadcast", Message{Type: TypeAck, From: 5, Seq: 1}, ReasonInvalidField},
		{"elected without candidate", Message{Type: TypeElected, From: 1, To: 2, Term: 5}, ReasonInvalidField},
		{"ring election without candidate", Message{Type: TypeElection, From: 1, To: 2}, ReasonInvalidField},
		{"bully election with candidate", Message{Type: TypeElection, From: 1, Candidate: 2}, ReasonInvalidField},
		{"prepare addressed", Message{Type: TypePrepare, From: 1, To: 2, Term: 3}, ReasonInvalidField},
		{"prepare without a ballot", Message{Type: TypePrepare, From: 1}, ReasonInvalidField},
		{"propose naming another leader", Message{Type: TypePropose, From: 1, Term: 3, Candidate: 2}, ReasonInvalidField},
		{"promise broadcast", Message{Type: TypePromise, From: 1, Term: 3}, ReasonInvalidField},
		{"promise of a prior ballot above", Message{Type: TypePromise, From: 1, To: 2, Term: 3, Prior: 4}, ReasonInvalidField},
		{"accepted without a ballot", Message{Type: TypeAccepted, From: 1, To: 2}, ReasonInvalidField},
		{"nack waiting too long", Message{Type: TypeNack, From: 1, To: 2, Term: 3, Wait: MaxWait + 1}, ReasonInvalidField},
		{"negative wait", Message{Type: TypeNack, From: 1, To: 2, Term: 3, Wait: -1}, ReasonInvalidField},
		{"wait on another type", Message{Type: TypeAccepted, From: 1, To: 2, Term: 3, Wait: 2}, ReasonInvalidField},
		{"prior on another type", Message{Type: TypeNack, From: 1, To: 2, Term: 3, Prior: 2}, ReasonInvalidField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.msg.V = Version
			err := Validate(tt.msg, members)
			if got := ReasonOf(err); err == nil || got != tt.want {
				t.Errorf("Validate(%v) = %v, want reason %s", tt.msg, err, tt.want)
			}
		})
	}
}

func TestReasonOfForeignError(t *testing.T) {
	if got := ReasonOf(errors.New("boom")); got != ReasonMalformed {
		t.Errorf("ReasonOf(plain error) = %s, want %s", got, ReasonMalformed)
	}
}

// FuzzDecode checks that no payload crashes decoding or validation, and
// that whatever decodes and validates survives a round trip unchanged.
func FuzzDecode(f *testing.F) {
	seeds := []string{
		`{"v":2,"type":"election","from":2,"term":7}`,
		`{"v":2,"type":"election","from":2,"to":3,"term":7,"candidate":8,"seq":4,"hops":2}`,
		`{"v":2,"type":"answer","from":5,"to":2,"term":10}`,
		`{"v":2,"type":"coordinator","from":8,"term":10}`,
		`{"v":2,"type":"elected","from":1,"to":2,"candidate":8,"term":10,"seq":9}`,
		`{"v":2,"type":"ack","from":2,"to":1,"seq":9}`,
		`{"v":2,"type":"heartbeat","from":8,"term":10}`,
		`{"v":2,"type":"resign","from":8,"term":10}`,
		`{"v":2,"type":"stale","from":3,"to":8,"term":15,"candidate":5}`,
		`{"v":2,"type":"heartbeat","from":8,"term":1e400}`,
		`{"v":2,"type":"\u0000","from":8}`,
		`{}`, `null`, `[]`, `"x"`, ``,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Decode error %v is not a *ValidationError", err)
			}
			return
		}
		if Validate(m, members) != nil {
			return
		}
		again, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", m, err)
		}
		back, err := Decode(again)
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip of %+v: got %+v, %v", m, back, err)
		}
	})
}
