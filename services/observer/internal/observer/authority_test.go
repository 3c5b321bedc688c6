package observer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// TestLoadAuthority: a <cluster>.authority file of OBSERVER_KEYS_DIR
// gives a cluster with member credentials, checked with the authority's
// keys alone; with a members file beside it, a byzantine cluster with
// dynamic membership.
func TestLoadAuthority(t *testing.T) {
	account, _ := nkeys.CreateAccount()
	public, _ := account.PublicKey()
	signing, _ := nkeys.CreateAccount()
	signingPublic, _ := signing.PublicKey()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("orders.authority", public+"\n"+signingPublic+"\n")
	got, err := LoadKeys(dir)
	if err != nil || !got["orders"].Authority() || got["orders"].Cluster() != "orders" {
		t.Fatalf("LoadKeys = %v, %v; want authority keys of orders", got, err)
	}
	// Both files: a byzantine cluster with dynamic membership, whose
	// .keys file lists the configured members.
	write("orders.keys", "")
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "orders.keys") {
		t.Fatalf("LoadKeys(an empty members file beside the authority) = %v, want an error naming the file", err)
	}
	var list strings.Builder
	for id := 1; id <= 4; id++ {
		user, _ := nkeys.CreateUser()
		userPublic, _ := user.PublicKey()
		fmt.Fprintf(&list, "%d %s\n", id, userPublic)
	}
	write("orders.keys", list.String())
	got, err = LoadKeys(dir)
	if err != nil || !got["orders"].Authority() || got["orders"].MemberSets() == nil || len(got["orders"].MemberSets().Latest().Members) != 4 {
		t.Fatalf("LoadKeys(authority and members file) = %v, %v; want authority keys that follow a member set of 4", got, err)
	}
	os.Remove(filepath.Join(dir, "orders.keys"))
	write("orders.authority", "UABC\n")
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "OBSERVER_KEYS_DIR: orders.authority") {
		t.Fatalf("LoadKeys(bad key) = %v, want an error naming the variable and the file", err)
	}
}

// A keys file named after a list of clusters, as ELECTION_CLUSTERS gives
// it, holds each one's keys; a cluster in two files, a list that does not
// read, or a cluster stated in a list's file is refused.
func TestLoadKeysOfAList(t *testing.T) {
	_, keys := batontest.MemberKeys(t, 1, 2, 3)
	var lines strings.Builder
	lines.WriteString(signing.StatementPrefix + " algorithm paxos\n")
	for _, id := range keys.IDs() {
		public, _ := keys.PublicKey(id)
		fmt.Fprintf(&lines, "%d %s\n", id, public)
	}
	write := func(dir, name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	write(dir, "shard-{0..9}.keys", lines.String())
	write(dir, "other.keys", lines.String())
	got, err := LoadKeys(dir)
	if err != nil || len(got) != 11 {
		t.Fatalf("LoadKeys: %d clusters, %v; want 11", len(got), err)
	}
	if k := got["shard-7"]; k == nil || k.Cluster() != "shard-7" || k.Algorithm() != protocol.Paxos || k.Len() != 3 {
		t.Fatalf("shard-7's keys: %+v", k)
	}
	for name, bad := range map[string][2]string{
		"twice":      {"shard-{5..12}.keys", lines.String()},
		"unreadable": {"shard-{9..1}.keys", lines.String()},
		"stated":     {"s-{0..1}.keys", signing.StatementPrefix + " cluster s-0\n" + lines.String()},
	} {
		d := t.TempDir()
		write(d, "shard-{0..9}.keys", lines.String())
		write(d, bad[0], bad[1])
		if _, err := LoadKeys(d); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s: LoadKeys = %v, want an error naming %s", name, err, bad[0])
		}
	}
}
