package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/membercreds"
)

// issueCreds writes the creds file of member id of cluster, issued by
// authority, in dir, and returns its path.
func issueCreds(t *testing.T, dir string, authority nkeys.KeyPair, cluster string, id uint64) string {
	dir, err := os.MkdirTemp(dir, "creds")
	if err != nil {
		t.Fatal(err)
	}
	t.Helper()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	token, err := membercreds.Issue(authority, cluster, id, pub, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, cluster+"-"+membercreds.CredsFile(id))
	if err := membercreds.WriteCreds(path, token, seed); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCredentialConfiguration: member credentials go with dynamic
// membership and an authority; a credential that is not this node's, or
// not the authority's, exits with status 2 and one line naming the
// variable.
func TestCredentialConfiguration(t *testing.T) {
	t.Chdir(t.TempDir())
	dir := t.TempDir()
	authority, _ := nkeys.CreateAccount()
	authorityPub, _ := authority.PublicKey()
	other, _ := nkeys.CreateAccount()
	mine := issueCreds(t, dir, authority, "default", 3)
	four := issueCreds(t, dir, authority, "default", 4)
	foreign := issueCreds(t, dir, other, "default", 3)
	elsewhere := issueCreds(t, dir, authority, "elsewhere", 3)
	open := filepath.Join(dir, "open.creds")
	if err := os.WriteFile(open, []byte(mustRead(t, mine)), 0o644); err != nil {
		t.Fatal(err)
	}
	k := writeKeys(t, 1, 2, 3)
	configured := writeKeys(t, 1, 2, 4, 5)
	wrongKey := writeKeys(t, 1, 2, 3, 4)
	dyn := func(kv ...string) map[string]string {
		return with(append([]string{"ELECTION_MEMBERSHIP", "dynamic", "NODE_PEERS", "-", "ELECTION_AUTHORITY", authorityPub, "ELECTION_CREDS_FILE", mine}, kv...)...)
	}
	for _, tc := range []struct {
		env  map[string]string
		name string
		says string
	}{
		{dyn("ELECTION_AUTHORITY", "-"), "ELECTION_AUTHORITY", "required with ELECTION_CREDS_FILE"},
		{dyn("ELECTION_CREDS_FILE", "-"), "ELECTION_CREDS_FILE", "required with ELECTION_AUTHORITY"},
		{with("ELECTION_AUTHORITY", authorityPub, "ELECTION_CREDS_FILE", mine), "ELECTION_CREDS_FILE", "credentials are for dynamic membership"},
		{dyn("ELECTION_AUTHORITY", "UABC"), "ELECTION_AUTHORITY", "UABC"},
		{dyn("ELECTION_CREDS_FILE", four), "ELECTION_CREDS_FILE", "the credential of member 4, but NODE_ID is 3"},
		{dyn("ELECTION_CREDS_FILE", foreign), "ELECTION_CREDS_FILE", "not an authority of the cluster"},
		{dyn("ELECTION_CREDS_FILE", elsewhere), "ELECTION_CREDS_FILE", "elsewhere"},
		{dyn("ELECTION_CREDS_FILE", open), "ELECTION_CREDS_FILE", "chmod 600"},
		{dyn("ELECTION_KEY_FILE", k.seeds[3], "ELECTION_KEYS_FILE", k.members), "ELECTION_CREDS_FILE", "not both"},
		{dyn("ELECTION_KEYS_FILE", k.members), "ELECTION_CREDS_FILE", "both only with byzantine and dynamic membership"},
		{dyn("ELECTION_ALGORITHM", "byzantine"), "ELECTION_KEYS_FILE", "required with byzantine and dynamic membership"},
		{dyn("ELECTION_ALGORITHM", "byzantine", "ELECTION_KEYS_FILE", k.members), "ELECTION_KEYS_FILE", "fewer than 4 tolerates no liar"},
		{dyn("ELECTION_ALGORITHM", "byzantine", "ELECTION_KEYS_FILE", wrongKey.members), "ELECTION_KEYS_FILE", "but its credential binds"},
	} {
		t.Run(tc.name+"/"+tc.says, func(t *testing.T) {
			var stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if code := run(ctx, tc.env, &stderr); code != exitConfig {
				t.Fatalf("exit status: got %d, want %d (%s)", code, exitConfig, stderr.String())
			}
			out := stderr.String()
			if strings.Count(out, "\n") != 1 || !strings.Contains(out, tc.name+":") || !strings.Contains(out, tc.says) {
				t.Errorf("stderr: got %q, want one line naming %s and saying %q", out, tc.name, tc.says)
			}
		})
	}
	cfg, err := loadConfig(dyn())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.signer == nil || cfg.signer.Credential() == "" || !cfg.keys.Authority() || !cfg.withCredential() {
		t.Fatalf("valid credential: signer %v, authority keys %t, connects with it %t", cfg.signer, cfg.keys.Authority(), cfg.withCredential())
	}
	// Byzantine with dynamic membership: the members file lists the
	// configured members, beside the credential; this member joins.
	cfg, err = loadConfig(dyn("ELECTION_ALGORITHM", "byzantine", "ELECTION_KEYS_FILE", configured.members))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.memberSet == nil || !slices.Equal(cfg.memberSet.IDs(), []uint64{1, 2, 4, 5}) || !cfg.keys.Authority() {
		t.Fatalf("byzantine with dynamic membership: configured members %v, authority keys %t", cfg.memberSet.IDs(), cfg.keys.Authority())
	}
}
