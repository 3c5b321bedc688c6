package observer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
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
