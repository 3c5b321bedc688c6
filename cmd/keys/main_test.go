package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

// TestGenerate: the files written are what a node's configuration reads,
// the seeds are private, and a second run overwrites nothing.
func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var stderr bytes.Buffer
	if code := run([]string{"-out", dir, "-peers", "1,2,3"}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	keys, err := protocol.ReadMemberKeysFile(filepath.Join(dir, MembersFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2, 3} {
		path := filepath.Join(dir, SeedFile(id))
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, info.Mode().Perm())
		}
		kp, err := protocol.ReadSeedFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := protocol.NewSigner(id, kp)
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Check([]uint64{1, 2, 3}, s); err != nil {
			t.Errorf("member %d: %v", id, err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, MembersFile))
	stderr.Reset()
	if code := run([]string{"-out", dir, "-peers", "4"}, &stderr); code != 1 || !strings.Contains(stderr.String(), "never overwritten") {
		t.Errorf("second run: exit %d, %q; want 1 and a refusal", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, SeedFile(4))); err == nil {
		t.Error("the refused run wrote node-4.seed")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, MembersFile)); !bytes.Equal(before, after) {
		t.Error("the refused run changed members.keys")
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-peers", "1,2"},
		{"-out", t.TempDir()},
		{"-out", t.TempDir(), "-peers", "1,x"},
		{"-out", t.TempDir(), "-peers", "1,1"},
		{"-out", t.TempDir(), "-peers", "0"},
	} {
		var stderr bytes.Buffer
		if code := run(args, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, %q; want 2 and a line", args, code, stderr.String())
		}
	}
}
