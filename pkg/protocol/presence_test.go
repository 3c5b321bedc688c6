package protocol_test

import (
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

func TestPresence(t *testing.T) {
	tests := []struct {
		name   string
		m      protocol.Message
		reason protocol.Reason // "" when valid
	}{
		{"broadcast", protocol.Message{Type: protocol.TypePresence, From: 7, Term: 3}, ""},
		{"answer", protocol.Message{Type: protocol.TypePresence, From: 7, To: 9}, ""},
		{"highest ID", protocol.Message{Type: protocol.TypePresence, From: protocol.MaxMemberID}, ""},
		{"ID above the bound", protocol.Message{Type: protocol.TypePresence, From: protocol.MaxMemberID + 1}, protocol.ReasonNotMember},
		{"addressed above the bound", protocol.Message{Type: protocol.TypePresence, From: 7, To: protocol.MaxMemberID + 1}, protocol.ReasonNotMember},
		{"with a candidate", protocol.Message{Type: protocol.TypePresence, From: 7, Candidate: 8}, protocol.ReasonInvalidField},
		{"with a round", protocol.Message{Type: protocol.TypePresence, From: 7, Seq: 8}, protocol.ReasonInvalidField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := protocol.Encode(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			m, err := protocol.Decode(data)
			if err == nil {
				err = protocol.ValidateFor(m, protocol.DynamicMember)
			}
			if got := reasonOrEmpty(err); got != tt.reason {
				t.Fatalf("reason %q, want %q (err %v)", got, tt.reason, err)
			}
		})
	}
}

func reasonOrEmpty(err error) protocol.Reason {
	if err == nil {
		return ""
	}
	return protocol.ReasonOf(err)
}
