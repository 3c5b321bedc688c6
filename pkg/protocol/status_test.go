package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

// The JSON of a Status is the contract's GET /status answer, byte for
// byte, and reads back the same.
func TestStatusJSON(t *testing.T) {
	leader, lease := uint64(5), int64(250)
	for _, c := range []struct {
		st   protocol.Status
		json string
		etag string
	}{
		{
			protocol.Status{ID: 3, Cluster: "default", Algorithm: protocol.Bully, Leader: &leader, Term: 12, State: "follower"},
			`{"id":3,"cluster":"default","algorithm":"bully","leader":5,"term":12,"state":"follower"}`,
			`"5-12-follower"`,
		},
		{
			protocol.Status{ID: 7, Cluster: "web", Algorithm: protocol.Ring, State: "candidate"},
			`{"id":7,"cluster":"web","algorithm":"ring","leader":null,"term":0,"state":"candidate"}`,
			`"null-0-candidate"`,
		},
		{
			protocol.Status{ID: 5, Cluster: "default", Algorithm: protocol.Paxos, Leader: &leader, Term: 12, State: "leader", LeaseRemainingMS: &lease},
			`{"id":5,"cluster":"default","algorithm":"paxos","leader":5,"term":12,"state":"leader","lease_remaining_ms":250}`,
			`"5-12-leader"`,
		},
	} {
		b, err := json.Marshal(c.st)
		if err != nil || string(b) != c.json {
			t.Errorf("Marshal: %s %v, want %s", b, err, c.json)
		}
		var back protocol.Status
		if err := json.Unmarshal([]byte(c.json), &back); err != nil {
			t.Fatalf("Unmarshal %s: %v", c.json, err)
		}
		if b, _ := json.Marshal(back); string(b) != c.json {
			t.Errorf("round trip: %s, want %s", b, c.json)
		}
		if got := c.st.ETag(); got != c.etag {
			t.Errorf("ETag: %s, want %s", got, c.etag)
		}
	}
}
