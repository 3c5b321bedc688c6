package protocol

import (
	"testing"

	"github.com/baton-election/baton/pkg/certify"
)

// Steady tells a quiet cluster's traffic from an election's.
func TestSteady(t *testing.T) {
	for _, tc := range []struct {
		m    Message
		want bool
	}{
		{Message{Type: TypeHeartbeat}, true},
		{Message{Type: TypeElection}, false},
		{Message{Type: TypeCoordinator}, false},
		{Message{Type: TypePropose, Candidate: 3}, true},
		{Message{Type: TypePropose}, false},
		{Message{Type: TypeAccepted, Candidate: 3}, true},
		{Message{Type: TypePrepare}, false},
		{Message{Type: TypeBzPropose, Cert: &certify.Certificate{}}, true},
		{Message{Type: TypeBzPropose}, false}, // a round before the certificate
		{Message{Type: TypeBzAck}, true},
		{Message{Type: TypeBzVote}, false},
		{Message{Type: TypeBzTimeout}, false},
	} {
		if got := Steady(tc.m); got != tc.want {
			t.Errorf("Steady(%s, candidate %d, cert %v) = %v, want %v", tc.m.Type, tc.m.Candidate, tc.m.Cert != nil, got, tc.want)
		}
	}
}
