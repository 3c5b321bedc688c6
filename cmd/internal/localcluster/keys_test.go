package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

func TestKnowsMemberKeys(t *testing.T) {
	dir := t.TempDir()
	with, without := filepath.Join(dir, "with"), filepath.Join(dir, "without")
	os.WriteFile(with, []byte("\x00env:\"ELECTION_KEY_FILE\"\x00"), 0o755)
	os.WriteFile(without, []byte("\x00env:\"ELECTION_SECRET\"\x00"), 0o755)
	if ok, err := KnowsMemberKeys(with); !ok || err != nil {
		t.Errorf("a binary naming ELECTION_KEY_FILE: %v, %v", ok, err)
	}
	if ok, err := KnowsMemberKeys(without); ok || err != nil {
		t.Errorf("a binary without: %v, %v", ok, err)
	}
	if _, err := KnowsMemberKeys(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing binary: no error")
	}
}

// Keys made once are read back the next time, and each node's environment
// names its own seed.
func TestMakeMemberKeys(t *testing.T) {
	dir := t.TempDir()
	first, err := MakeMemberKeys(dir, "bully", protocol.Bully, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	again, err := MakeMemberKeys(dir, "bully", protocol.Bully, []uint64{1, 2, 3})
	if err != nil || !slices.Equal(first.IDs(), again.IDs()) {
		t.Fatalf("second MakeMemberKeys: %v, %v; want the keys of the first", again, err)
	}
	for _, id := range first.IDs() {
		a, _ := first.PublicKey(id)
		if b, _ := again.PublicKey(id); a != b {
			t.Errorf("member %d: %s, then %s; want the same key", id, a, b)
		}
	}
	if first.Cluster() != "bully" || first.Algorithm() != protocol.Bully || again.Cluster() != "bully" || again.Algorithm() != protocol.Bully {
		t.Errorf("keys state cluster %q, algorithm %q, then %q, %q; want bully, bully", first.Cluster(), first.Algorithm(), again.Cluster(), again.Algorithm())
	}
	if _, err := MakeMemberKeys(dir, "bully", protocol.Paxos, []uint64{1, 2, 3}); err == nil {
		t.Error("MakeMemberKeys for another algorithm than the keys': no error")
	}
	if _, err := MakeMemberKeys(dir, "bully", protocol.Bully, []uint64{1, 2}); err == nil {
		t.Error("MakeMemberKeys for other members than the keys': no error")
	}
	env := MemberEnv(dir, 2)
	want := []string{"ELECTION_KEY_FILE=" + filepath.Join(dir, "node-2.seed"), "ELECTION_KEYS_FILE=" + filepath.Join(dir, "members.keys")}
	if !slices.Equal(env, want) {
		t.Errorf("MemberEnv: %v, want %v", env, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "node-2.seed")); err != nil {
		t.Errorf("node 2's seed: %v", err)
	}
}
