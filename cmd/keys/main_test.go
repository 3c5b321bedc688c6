package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// TestGenerate: the command writes the keys of its -peers in -out
// (memberkeys.Generate, whose tests check the files), and a second run
// overwrites nothing.
func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var stderr bytes.Buffer
	if code := run([]string{"-out", dir, "-cluster", "prod", "-algorithm", "paxos", "-peers", "1,2,3"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	keys, err := signing.ReadMemberKeysFile(filepath.Join(dir, memberkeys.MembersFile))
	if err != nil || !slices.Equal(keys.IDs(), []uint64{1, 2, 3}) {
		t.Fatalf("members: %v, %v; want 1, 2, 3", keys.IDs(), err)
	}
	if keys.Cluster() != "prod" || keys.Algorithm() != protocol.Paxos {
		t.Errorf("members.keys states cluster %q, algorithm %q; want prod, paxos", keys.Cluster(), keys.Algorithm())
	}
	for _, id := range keys.IDs() {
		if _, err := signing.ReadSeedFile(filepath.Join(dir, memberkeys.SeedFile(id))); err != nil {
			t.Errorf("member %d: %v", id, err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, memberkeys.MembersFile))
	stderr.Reset()
	if code := run([]string{"-out", dir, "-cluster", "prod", "-algorithm", "paxos", "-peers", "4"}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "never overwritten") {
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
		if code := run(args, io.Discard, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, %q; want 2 and a line", args, code, stderr.String())
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-h"}, io.Discard, &stderr); code != 0 || !bytes.Contains(stderr.Bytes(), []byte("-peers")) {
		t.Errorf("-h: exit %d, %q; want 0 and the usage", code, stderr.String())
	}
}

// TestAuthority: -authority new writes the cluster's authority, prints its
// public key, and a second run overwrites nothing.
func TestAuthority(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-out", dir, "-cluster", "prod", "-authority", "new"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	seedPath, publicPath := filepath.Join(dir, membercreds.AuthoritySeedFile), filepath.Join(dir, membercreds.AuthorityFile)
	kp, err := readAuthority(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	public, _ := kp.PublicKey()
	if published, _ := os.ReadFile(publicPath); string(published) != public+"\n" || stdout.String() != public+"\n" {
		t.Errorf("authority.pub %q, stdout %q; want %s, one line each", published, stdout.String(), public)
	}
	if _, err := membercreds.ParseAuthorities(strings.TrimSpace(stdout.String())); err != nil {
		t.Error(err)
	}
	for path, want := range map[string]os.FileMode{seedPath: 0o600, publicPath: 0o644} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %04o", path, fi, err, want)
		}
	}
	before, _ := os.ReadFile(seedPath)
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"-out", dir, "-cluster", "prod", "-authority", "new"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "never overwritten") || stdout.Len() != 0 {
		t.Errorf("second run: exit %d, %q, %q; want 1 and a refusal", code, stdout.String(), stderr.String())
	}
	if after, _ := os.ReadFile(seedPath); !bytes.Equal(before, after) {
		t.Error("the refused run changed authority.seed")
	}
}

// TestIssue: -issue writes a credentials file per member, each with its
// own key, which readers accept with the authority's public key only; a
// second run overwrites nothing.
func TestIssue(t *testing.T) {
	dir := t.TempDir()
	if code := run([]string{"-out", dir, "-cluster", "prod", "-authority", "new"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("authority: exit %d", code)
	}
	seedPath := filepath.Join(dir, membercreds.AuthoritySeedFile)
	published, _ := os.ReadFile(filepath.Join(dir, membercreds.AuthorityFile))
	authorities, err := membercreds.ParseAuthorities(strings.TrimSpace(string(published)))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "members")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-out", out, "-cluster", "Prod", "-authority", seedPath, "-issue", "7,8,65536", "-expires", "720h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stdout.String() != string(published) {
		t.Errorf("stdout %q; want the authority's public key %q", stdout.String(), published)
	}
	keys := map[string]bool{}
	for _, id := range []uint64{7, 8, membercreds.MaxID} {
		path := filepath.Join(out, membercreds.CredsFile(id))
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want mode 0600", path, fi, err)
		}
		token, kp, err := membercreds.ReadCreds(path)
		if err != nil {
			t.Fatal(err)
		}
		cred, err := membercreds.Verify(token, authorities, "Prod", time.Now())
		if err != nil || cred.ID != id {
			t.Fatalf("%s: %+v, %v; want member %d", path, cred, err, id)
		}
		if left := time.Until(cred.Expires); left < 719*time.Hour || left > 720*time.Hour {
			t.Errorf("%s expires in %v; want 720h", path, left)
		}
		if _, err := membercreds.Verify(token, authorities, "Prod", time.Now().Add(721*time.Hour)); err == nil {
			t.Errorf("%s is valid after 721h", path)
		}
		if _, err := membercreds.Verify(token, authorities, "prod", time.Now()); err == nil {
			t.Errorf("%s is valid for cluster prod", path)
		}
		public, _ := kp.PublicKey()
		keys[public] = true
	}
	if len(keys) != 3 {
		t.Errorf("%d distinct user keys; want one per member", len(keys))
	}
	before, _ := os.ReadFile(filepath.Join(out, membercreds.CredsFile(8)))
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"-out", out, "-cluster", "Prod", "-authority", seedPath, "-issue", "9,8"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "never overwritten") {
		t.Errorf("second run: exit %d, %q; want 1 and a refusal", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, membercreds.CredsFile(9))); err == nil {
		t.Error("the refused run wrote node-9.creds")
	}
	if after, _ := os.ReadFile(filepath.Join(out, membercreds.CredsFile(8))); !bytes.Equal(before, after) {
		t.Error("the refused run changed node-8.creds")
	}
	// Never expiring without -expires.
	if code := run([]string{"-out", out, "-cluster", "Prod", "-authority", seedPath, "-issue", "9"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("-issue 9: exit %d", code)
	}
	token, _, err := membercreds.ReadCreds(filepath.Join(out, membercreds.CredsFile(9)))
	if cred, verr := membercreds.Verify(token, authorities, "Prod", time.Now()); err != nil || verr != nil || !cred.Expires.IsZero() {
		t.Errorf("node-9.creds: %+v, %v, %v; want valid for ever", cred, err, verr)
	}
}

func TestAuthorityBadFlags(t *testing.T) {
	dir := t.TempDir()
	if code := run([]string{"-out", dir, "-cluster", "prod", "-authority", "new"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("authority: exit %d", code)
	}
	seed := filepath.Join(dir, membercreds.AuthoritySeedFile)
	userSeed := filepath.Join(dir, "user.seed")
	if _, err := memberkeys.Generate(filepath.Join(dir, "keys"), "prod", protocol.Paxos, []uint64{1}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "keys", memberkeys.SeedFile(1)), userSeed); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"-out", []string{"-cluster", "prod", "-authority", "new"}},
		{"-cluster", []string{"-out", out, "-authority", "new"}},
		{"-cluster", []string{"-out", out, "-cluster", "a.b", "-authority", seed, "-issue", "1"}},
		{"-peers", []string{"-out", out, "-cluster", "prod", "-authority", "new", "-peers", "1,2"}},
		{"-algorithm", []string{"-out", out, "-cluster", "prod", "-authority", seed, "-issue", "1", "-algorithm", "paxos"}},
		{"-authority", []string{"-out", out, "-cluster", "prod", "-issue", "1"}},
		{"-authority", []string{"-out", out, "-cluster", "prod", "-issue", "1", "-authority", ""}},
		{"-authority", []string{"-out", out, "-cluster", "prod", "-expires", "1h"}},
		{"-issue", []string{"-out", out, "-cluster", "prod", "-authority", "new", "-issue", "1"}},
		{"-expires", []string{"-out", out, "-cluster", "prod", "-authority", "new", "-expires", "1h"}},
		{"-issue", []string{"-out", out, "-cluster", "prod", "-authority", seed}},
		{"-issue", []string{"-out", out, "-cluster", "prod", "-authority", seed, "-issue", ""}},
		{"-issue", []string{"-out", out, "-cluster", "prod", "-authority", seed, "-issue", "0"}},
		{"-issue", []string{"-out", out, "-cluster", "prod", "-authority", seed, "-issue", "1,x"}},
		{"-issue", []string{"-out", out, "-cluster", "prod", "-authority", seed, "-issue", "1,1"}},
		{"-issue", []string{"-out", out, "-cluster", "prod", "-authority", seed, "-issue", "65537"}},
		{"-expires", []string{"-out", out, "-cluster", "prod", "-authority", seed, "-issue", "1", "-expires", "-1h"}},
		{"-authority", []string{"-out", out, "-cluster", "prod", "-authority", filepath.Join(dir, "missing.seed"), "-issue", "1"}},
		{"-authority", []string{"-out", out, "-cluster", "prod", "-authority", userSeed, "-issue", "1"}},
		{"-authority", []string{"-out", out, "-cluster", "prod", "-authority", filepath.Join(dir, membercreds.AuthorityFile), "-issue", "1"}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if lines := strings.Count(stderr.String(), "\n"); code != 2 || lines != 1 || !strings.HasPrefix(stderr.String(), "keys: "+tc.flag+":") {
			t.Errorf("%v: exit %d, %q; want 2 and one line naming %s", tc.args, code, stderr.String(), tc.flag)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q", tc.args, stdout.String())
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("bad flags wrote %d files", len(entries))
	}
}
