package protocol_test

import (
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

func TestPresence(t *testing.T) {
	cred := strings.Repeat("x", 2000)
	tests := []struct {
		name   string
		m      protocol.Message
		reason protocol.Reason // "" when valid
	}{
		{"broadcast", protocol.Message{Type: protocol.TypePresence, From: 7, Term: 3}, ""},
		{"answer", protocol.Message{Type: protocol.TypePresence, From: 7, To: 9}, ""},
		{"with a credential", protocol.Message{Type: protocol.TypePresence, From: 7, Cred: cred}, ""},
		{"highest ID", protocol.Message{Type: protocol.TypePresence, From: protocol.MaxMemberID}, ""},
		{"ID above the bound", protocol.Message{Type: protocol.TypePresence, From: protocol.MaxMemberID + 1}, protocol.ReasonNotMember},
		{"with a candidate", protocol.Message{Type: protocol.TypePresence, From: 7, Candidate: 8}, protocol.ReasonInvalidField},
		{"credential too long", protocol.Message{Type: protocol.TypePresence, From: 7, Cred: strings.Repeat("x", protocol.MaxCredential+1)}, protocol.ReasonInvalidField},
		{"credential on a heartbeat", protocol.Message{Type: protocol.TypeHeartbeat, From: 7, Term: 1, Cred: "x"}, protocol.ReasonInvalidField},
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

func TestPresenceSize(t *testing.T) {
	big := protocol.Message{V: protocol.Version, Type: protocol.TypePresence, From: 7, Cred: strings.Repeat("x", protocol.MaxCredential)}
	data, _ := protocol.Encode(big)
	if len(data) <= protocol.MaxPayload {
		t.Fatalf("test needs a presence above MaxPayload, got %d bytes", len(data))
	}
	if _, err := protocol.Decode(data); err != nil {
		t.Fatalf("a presence of %d bytes: %v", len(data), err)
	}
	hb := protocol.Message{Type: protocol.TypeHeartbeat, From: 7, Term: 1, Cred: strings.Repeat("x", protocol.MaxCredential)}
	data, _ = protocol.Encode(hb)
	if _, err := protocol.Decode(data); protocol.ReasonOf(err) != protocol.ReasonOversized {
		t.Fatalf("a heartbeat of %d bytes: %v, want oversized", len(data), err)
	}
	pad := protocol.Message{Type: protocol.TypePresence, From: 7, Cred: strings.Repeat("x", protocol.MaxPresencePayload)}
	data, _ = protocol.Encode(pad)
	if _, err := protocol.Decode(data); protocol.ReasonOf(err) != protocol.ReasonOversized {
		t.Fatalf("a presence of %d bytes: %v, want oversized", len(data), err)
	}
}

func reasonOrEmpty(err error) protocol.Reason {
	if err == nil {
		return ""
	}
	return protocol.ReasonOf(err)
}
