package observer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

// TestLoadAuthority: a <cluster>.authority file of OBSERVER_KEYS_DIR
// gives a cluster with member credentials, checked with the authority's
// keys alone; a cluster has one file or the other.
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
	write("orders.keys", "")
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "one or the other") {
		t.Fatalf("LoadKeys(both files) = %v, want a refusal", err)
	}
	os.Remove(filepath.Join(dir, "orders.keys"))
	write("orders.authority", "UABC\n")
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "OBSERVER_KEYS_DIR: orders.authority") {
		t.Fatalf("LoadKeys(bad key) = %v, want an error naming the variable and the file", err)
	}
}
