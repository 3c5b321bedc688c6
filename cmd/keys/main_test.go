package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
)

// TestGenerate: the command writes the keys of its -peers in -out
// (memberkeys.Generate, whose tests check the files), and a second run
// overwrites nothing.
func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var stderr bytes.Buffer
	if code := run([]string{"-out", dir, "-cluster", "prod", "-algorithm", "paxos", "-peers", "1,2,3"}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	keys, err := protocol.ReadMemberKeysFile(filepath.Join(dir, memberkeys.MembersFile))
	if err != nil || !slices.Equal(keys.IDs(), []uint64{1, 2, 3}) {
		t.Fatalf("members: %v, %v; want 1, 2, 3", keys.IDs(), err)
	}
	if keys.Cluster() != "prod" || keys.Algorithm() != protocol.Paxos {
		t.Errorf("members.keys states cluster %q, algorithm %q; want prod, paxos", keys.Cluster(), keys.Algorithm())
	}
	for _, id := range keys.IDs() {
		if _, err := protocol.ReadSeedFile(filepath.Join(dir, memberkeys.SeedFile(id))); err != nil {
			t.Errorf("member %d: %v", id, err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, memberkeys.MembersFile))
	stderr.Reset()
	if code := run([]string{"-out", dir, "-cluster", "prod", "-algorithm", "paxos", "-peers", "4"}, &stderr); code != 1 || !strings.Contains(stderr.String(), "never overwritten") {
		t.Errorf("second run: exit %d, %q; want 1 and a refusal", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, memberkeys.SeedFile(4))); err == nil {
		t.Error("the refused run wrote node-4.seed")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, memberkeys.MembersFile)); !bytes.Equal(before, after) {
		t.Error("the refused run changed members.keys")
	}
}

func TestBadFlags(t *testing.T) {
	ok := []string{"-cluster", "prod", "-algorithm", "bully"}
	for _, args := range [][]string{
		append([]string{"-peers", "1,2"}, ok...),
		append([]string{"-out", t.TempDir()}, ok...),
		append([]string{"-out", t.TempDir(), "-peers", "1,x"}, ok...),
		append([]string{"-out", t.TempDir(), "-peers", "1,1"}, ok...),
		append([]string{"-out", t.TempDir(), "-peers", "0"}, ok...),
		{"-out", t.TempDir(), "-peers", "1,2", "-algorithm", "bully"},
		{"-out", t.TempDir(), "-peers", "1,2", "-cluster", "a.b", "-algorithm", "bully"},
		{"-out", t.TempDir(), "-peers", "1,2", "-cluster", "prod"},
		{"-out", t.TempDir(), "-peers", "1,2", "-cluster", "prod", "-algorithm", "raft"},
	} {
		var stderr bytes.Buffer
		if code := run(args, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, %q; want 2 and a line", args, code, stderr.String())
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-h"}, &stderr); code != 0 || !bytes.Contains(stderr.Bytes(), []byte("-peers")) {
		t.Errorf("-h: exit %d, %q; want 0 and the usage", code, stderr.String())
	}
}
