package natsnode_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// nodeConfig is the configuration of node id of members, running Bully,
// that is never run.
func nodeConfig(t *testing.T, id uint64, members []uint64) node.Config {
	return node.Config{Cluster: "c", Algorithm: protocol.Bully, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Election: election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members))}}
}

// A node takes its key and the members' keys both or neither, and only
// its own key as listed for its ID.
func TestMemberKeysConfig(t *testing.T) {
	nc := batontest.Connect(t, batontest.StartNATS(t))
	members := []uint64{1, 2, 3}
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
			_, err := natsnode.New(nc, natsnode.Config{Node: nodeConfig(t, 2, members), Signer: tc.signer, Keys: tc.keys})
			if !errors.Is(err, node.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrConfig saying %q", err, tc.want)
			}
		})
	}
	if _, err := natsnode.New(nc, natsnode.Config{Node: nodeConfig(t, 2, members), Signer: signers[2], Keys: keys}); err != nil {
		t.Errorf("valid keys: %v", err)
	}
	byzantine := nodeConfig(t, 2, members)
	byzantine.Algorithm = protocol.Byzantine
	if _, err := natsnode.New(nc, natsnode.Config{Node: byzantine}); !errors.Is(err, node.ErrConfig) {
		t.Errorf("byzantine without keys: %v, want ErrConfig", err)
	}
}

// A node takes the connection events modes it knows, and no other; it
// needs a connection, and limits that are not negative.
func TestNATSConfig(t *testing.T) {
	nc := batontest.Connect(t, batontest.StartNATS(t))
	for name, cfg := range map[string]natsnode.Config{
		"connection events mode \"on\"": {Node: nodeConfig(t, 1, []uint64{1}), ConnectionEvents: "on"},
		"negative message age":          {Node: nodeConfig(t, 1, []uint64{1}), MaxMessageAge: -1},
		"negative pending limit":        {Node: nodeConfig(t, 1, []uint64{1}), PendingMsgs: -1},
	} {
		if _, err := natsnode.New(nc, cfg); !errors.Is(err, node.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := natsnode.New(nil, natsnode.Config{Node: nodeConfig(t, 1, []uint64{1})}); !errors.Is(err, node.ErrConfig) {
		t.Errorf("no connection: %v, want ErrConfig", err)
	}
	for _, events := range []string{"", node.ConnectionEventsAuto, node.ConnectionEventsOff} {
		if _, err := natsnode.New(nc, natsnode.Config{Node: nodeConfig(t, 1, []uint64{1}), ConnectionEvents: events}); err != nil {
			t.Errorf("connection events %q: %v", events, err)
		}
	}
}
