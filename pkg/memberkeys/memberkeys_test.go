package memberkeys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// The files made are what a node reads: each seed, private, is the key the
// members file lists for its member, and the directory holds nothing else.
func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bully")
	made, err := Generate(dir, "bully", protocol.Bully, []uint64{3, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	read, err := Read(dir)
	if err != nil || !slices.Equal(read.IDs(), []uint64{1, 2, 3}) {
		t.Fatalf("Read: %v, %v", read.IDs(), err)
	}
	for _, id := range []uint64{1, 2, 3} {
		path := filepath.Join(dir, SeedFile(id))
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("seed of %d: %v, %v; want mode 0600", id, fi, err)
		}
		kp, err := signing.ReadSeedFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := signing.NewSigner(id, kp)
		if err != nil {
			t.Fatal(err)
		}
		if err := read.Check([]uint64{1, 2, 3}, s); err != nil {
			t.Errorf("member %d: %v", id, err)
		}
		if got, _ := made.PublicKey(id); got != s.PublicKey() {
			t.Errorf("member %d: Generate returned %s, the seed is %s", id, got, s.PublicKey())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("%d files in %s, want 3 seeds and %s", len(entries), dir, MembersFile)
	}
	data, _ := os.ReadFile(filepath.Join(dir, MembersFile))
	if lines := strings.Split(string(data), "\n"); len(lines) != 7 || !strings.HasPrefix(lines[0], "# ") ||
		lines[1] != "#: cluster bully" || lines[2] != "#: algorithm bully" || !strings.HasPrefix(lines[3], "3 U") {
		t.Errorf("%s: %q; want a comment, the statements of the cluster and its algorithm, then the members in the order given", MembersFile, data)
	}
	if made.Cluster() != "bully" || made.Algorithm() != protocol.Bully || read.Cluster() != "bully" || read.Algorithm() != protocol.Bully {
		t.Errorf("keys state cluster %q, algorithm %q (read back: %q, %q); want bully, bully", made.Cluster(), made.Algorithm(), read.Cluster(), read.Algorithm())
	}
}

// Generate writes nothing if any file it would write is there: the
// members file or one seed.
func TestGenerateNeverOverwrites(t *testing.T) {
	for _, existing := range []string{MembersFile, SeedFile(2)} {
		dir := t.TempDir()
		path := filepath.Join(dir, existing)
		os.WriteFile(path, []byte("old\n"), 0o600)
		if _, err := Generate(dir, "bully", protocol.Bully, []uint64{1, 2}); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s there: %v; want ErrExists naming it", existing, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%s there: %d files after the refusal, want 1", existing, len(entries))
		}
		if data, _ := os.ReadFile(path); string(data) != "old\n" {
			t.Errorf("%s changed: %q", existing, data)
		}
	}
}

func TestGenerateBadIDs(t *testing.T) {
	for _, ids := range [][]uint64{nil, {1, 1}, {0}, make([]uint64, signing.MaxMemberKeys+1)} {
		dir := filepath.Join(t.TempDir(), "keys")
		if _, err := Generate(dir, "bully", protocol.Bully, ids); err == nil {
			t.Errorf("Generate(%d IDs %v…): no error", len(ids), ids[:min(len(ids), 2)])
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Generate(%d IDs): made the directory (%v)", len(ids), err)
		}
	}
}

// Ensure makes keys once and reads them back after; keys of other members
// are an error, not replaced.
func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	first, made, err := Ensure(dir, "bully", protocol.Bully, []uint64{1, 2, 3})
	if err != nil || !made {
		t.Fatalf("first Ensure: made %v, %v; want new keys", made, err)
	}
	again, made, err := Ensure(dir, "bully", protocol.Bully, []uint64{1, 2, 3})
	if err != nil || made {
		t.Fatalf("second Ensure: made %v, %v; want the keys read", made, err)
	}
	for _, id := range []uint64{1, 2, 3} {
		a, _ := first.PublicKey(id)
		b, _ := again.PublicKey(id)
		if a != b || a == "" {
			t.Errorf("member %d: %q, then %q; want the same key", id, a, b)
		}
	}
	if _, _, err := Ensure(dir, "bully", protocol.Bully, []uint64{1, 2, 3, 4}); !errors.Is(err, signing.ErrKeys) || !strings.Contains(err.Error(), "no key for member 4") {
		t.Errorf("Ensure with a new member: %v; want the mismatch", err)
	}
	os.WriteFile(filepath.Join(dir, MembersFile), []byte("1 nope\n"), 0o644)
	if _, _, err := Ensure(dir, "bully", protocol.Bully, []uint64{1}); !errors.Is(err, signing.ErrKeys) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("Ensure over a bad file: %v; want its error", err)
	}
}

// Generate and Ensure state both the cluster and its algorithm, and
// refuse to write a file that would state neither.
func TestGenerateNeedsTheClusterAndAlgorithm(t *testing.T) {
	for _, tc := range []struct {
		cluster   string
		algorithm protocol.Algorithm
	}{{"", protocol.Bully}, {"a.b", protocol.Bully}, {"bully", ""}, {"bully", "raft"}} {
		dir := filepath.Join(t.TempDir(), "keys")
		if _, err := Generate(dir, tc.cluster, tc.algorithm, []uint64{1}); err == nil {
			t.Errorf("Generate(cluster %q, algorithm %q): no error", tc.cluster, tc.algorithm)
		}
		if _, _, err := Ensure(dir, tc.cluster, tc.algorithm, []uint64{1}); err == nil {
			t.Errorf("Ensure(cluster %q, algorithm %q): no error", tc.cluster, tc.algorithm)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cluster %q, algorithm %q: made the directory (%v)", tc.cluster, tc.algorithm, err)
		}
	}
}

// Ensure adds the statements a members file written before them lacks,
// keeping its keys and mode; a file that states another cluster or
// algorithm is an error, and is left as it is.
func TestEnsureStatesAnOlderFile(t *testing.T) {
	dir := t.TempDir()
	keys, _, err := Ensure(dir, "prod", protocol.Paxos, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, MembersFile)
	var old strings.Builder
	old.WriteString("# written before files stated their cluster\n")
	for _, id := range keys.IDs() {
		public, _ := keys.PublicKey(id)
		fmt.Fprintf(&old, "%d %s\n", id, public)
	}
	for _, tc := range []struct{ name, prefix string }{
		{"neither", ""},
		{"the cluster only", "#: cluster prod\n"},
		{"the algorithm only", "#: algorithm paxos\n"},
	} {
		if err := os.WriteFile(path, []byte(tc.prefix+old.String()), 0o640); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, 0o640)
		got, made, err := Ensure(dir, "prod", protocol.Paxos, []uint64{1, 2, 3})
		if err != nil || made || got.Cluster() != "prod" || got.Algorithm() != protocol.Paxos {
			t.Fatalf("%s: Ensure = %v, made %v, %v; want the keys read, stating prod and paxos", tc.name, got, made, err)
		}
		read, err := Read(dir)
		if err != nil || read.Cluster() != "prod" || read.Algorithm() != protocol.Paxos || !slices.Equal(read.IDs(), keys.IDs()) {
			t.Fatalf("%s: the file read back: %v, %v; want the same members, stating prod and paxos", tc.name, read, err)
		}
		for _, id := range keys.IDs() {
			a, _ := keys.PublicKey(id)
			b, _ := read.PublicKey(id)
			if a != b {
				t.Errorf("%s: member %d: key %s became %s", tc.name, id, a, b)
			}
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v, %v; want the file's 0640 kept", tc.name, fi.Mode().Perm(), err)
		}
	}
	before, _ := os.ReadFile(path)
	for _, tc := range []struct {
		cluster   string
		algorithm protocol.Algorithm
		says      string
	}{{"staging", protocol.Paxos, `"prod"`}, {"prod", protocol.Byzantine, `"paxos"`}} {
		if _, _, err := Ensure(dir, tc.cluster, tc.algorithm, []uint64{1, 2, 3}); !errors.Is(err, signing.ErrKeys) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Ensure(%s, %s) over a file stating prod, paxos: %v; want an error saying %s", tc.cluster, tc.algorithm, err, tc.says)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the refused Ensure changed the file: %q, was %q", after, before)
	}
}

func TestParseIDs(t *testing.T) {
	if ids, err := ParseIDs(" 3,1 ,2"); err != nil || !slices.Equal(ids, []uint64{3, 1, 2}) {
		t.Errorf("ParseIDs: %v, %v; want [3 1 2]", ids, err)
	}
	many := strings.Repeat("1,", signing.MaxMemberKeys)
	for _, tc := range []struct{ in, want string }{
		{"", "no member IDs"},
		{"1,x", `"x" is not`},
		{"1,,2", `"" is not`},
		{"0", `"0" is not`},
		{"-1", `"-1" is not`},
		{"2,1,2", "2 appears twice"},
		{many[:len(many)-1], "1 appears twice"},
	} {
		if _, err := ParseIDs(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseIDs(%.20q): %v; want an error with %q", tc.in, err, tc.want)
		}
	}
	var b strings.Builder
	for id := 1; id <= signing.MaxMemberKeys+1; id++ {
		fmt.Fprintf(&b, ",%d", id)
	}
	if _, err := ParseIDs(b.String()[1:]); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("ParseIDs(%d IDs): %v; want refused", signing.MaxMemberKeys+1, err)
	}
}

// WriteFile replaces a file whole, with the mode asked for, and names the
// package in its errors.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "accounts.conf")
	for _, content := range []string{"first\n", "second\n"} {
		if err := WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Fatalf("content %q, want %q", got, content)
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", info.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%d files in the directory, want only %s", len(entries), path)
	}
	err = WriteFile(filepath.Join(dir, "missing", "accounts.conf"), []byte("x"), 0o644)
	if err == nil || !strings.HasPrefix(err.Error(), "memberkeys: ") {
		t.Errorf("write into a missing directory: %v, want a memberkeys error", err)
	}
}
