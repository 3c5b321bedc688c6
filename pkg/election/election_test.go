package election

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestHardStateVote(t *testing.T) {
	good := []HardState{
		{},
		{Term: 3, MaxTerm: 5, Vote: Vote{Term: 5, For: 2}},
		{Term: 3, MaxTerm: 5, Vote: Vote{Term: 4, For: 9}},
	}
	for _, h := range good {
		if err := h.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", h, err)
		}
	}
	bad := []HardState{
		{Term: 3, MaxTerm: 5, Vote: Vote{Term: 6, For: 2}},
		{Term: 3, MaxTerm: 5, Vote: Vote{Term: 4}},
		{Term: 3, MaxTerm: 5, Vote: Vote{For: 2}},
		{Term: 3, MaxTerm: 5, Proof: strings.Repeat("x", MaxProofSize+1)},
	}
	for _, h := range bad {
		if err := h.Validate(); !errors.Is(err, ErrState) {
			t.Errorf("Validate(%+v) = %v, want %v", h, err, ErrState)
		}
	}
}

func TestHardStateVoteJSON(t *testing.T) {
	// A hard state without a vote is stored as before.
	data, err := json.Marshal(HardState{Term: 1, MaxTerm: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), `{"term":1,"max_term":2}`; got != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
	h := HardState{Term: 1, MaxTerm: 7, Vote: Vote{Term: 7, For: 3}}
	data, err = json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back HardState
	if err := json.Unmarshal(data, &back); err != nil || back != h {
		t.Errorf("round trip of %s: %+v, %v", data, back, err)
	}
}

func TestMemberLiedString(t *testing.T) {
	if got := MemberLied.String(); got != "member_lied" {
		t.Errorf("MemberLied.String() = %q", got)
	}
}
