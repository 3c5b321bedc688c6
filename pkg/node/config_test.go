package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// TestMemberKeysConfig: a node takes its key and the members' keys both
// or neither, and only its own key as listed for its ID.
func TestMemberKeysConfig(t *testing.T) {
	members := []uint64{1, 2, 3}
	conn := endpoint(2)
	signers, keys := batontest.MemberKeys(t, members...)
	_, twoOnly := batontest.MemberKeys(t, 1, 2)
	for _, tc := range []struct {
		name   string
		signer *signing.Signer
		keys   *signing.MemberKeys
		want   string
	}{
		{"key without the members' keys", signers[2], nil, "needs the members' keys"},
		{"members' keys without a key", nil, keys, "needs the members' keys"},
		{"another member's key", signers[3], keys, "the key is member 3's, this node is 2"},
		{"a stranger's key under its ID", batontest.NewSigner(t, 2), keys, "member 2 is listed with"},
		{"a member without a key", signers[2], twoOnly, "no key for member 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTestNode(conn, conn, Config{
				Cluster: "c", Algorithm: protocol.Bully, Election: electionConfig(2, members),
				DataDir: t.TempDir(), Signer: tc.signer, Keys: tc.keys,
			})
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrConfig saying %q", err, tc.want)
			}
		})
	}
	if _, err := newTestNode(conn, conn, Config{
		Cluster: "c", Algorithm: protocol.Bully, Election: electionConfig(2, members),
		DataDir: t.TempDir(), Signer: signers[2], Keys: keys,
	}); err != nil {
		t.Errorf("valid keys: %v", err)
	}
}

// A node takes the connection events modes it knows, and no other.
func TestConnectionEventsMode(t *testing.T) {
	conn := endpoint(1)
	_, err := newTestNode(conn, conn, Config{Cluster: "c", Algorithm: protocol.Bully, Election: electionConfig(1, []uint64{1}), DataDir: t.TempDir(), ConnectionEvents: "on"})
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("connection events mode \"on\": %v, want ErrConfig", err)
	}
}

// A spread rank is its election's: one computed for another name would
// rank the members otherwise than the other members of the election.
func TestRankOfAnotherElection(t *testing.T) {
	cfg := Config{Cluster: "shard-1", Algorithm: protocol.Bully, DataDir: t.TempDir(), Logger: testLogger(),
		Election: election.Config{ID: 1, Members: []uint64{1, 2}, Timing: testTiming, Rank: election.Spread("shard-2")}}
	if _, err := newTestNode(endpoint(1), endpoint(1), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("spread rank of another election: %v", err)
	}
	cfg.Election.Rank = election.Spread("shard-1")
	if _, err := newTestNode(endpoint(1), endpoint(1), cfg); err != nil {
		t.Fatalf("spread rank of its election: %v", err)
	}
}
