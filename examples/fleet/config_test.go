package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
)

// host is a hostname function that answers name.
func host(name string) func() (string, error) {
	return func() (string, error) { return name, nil }
}

// noHost is a hostname function that fails.
func noHost() (string, error) { return "", errors.New("no hostname") }

// IDs derived from hostnames: fixed by the formula (a change would move
// every replica's ID at an upgrade), always 1 to 65536, and spread as
// uniformly as a random choice would be.
func TestIDFromHostname(t *testing.T) {
	for _, tc := range []struct {
		host string
		want uint64
	}{
		// FNV-1a 32 of "" is 0x811c9dc5: 0x811c ^ 0x9dc5 = 0x1cd9, plus 1.
		{"", 0x1cd9 + 1},
		// FNV-1a 32 of "a" is 0xe40c292c: 0xe40c ^ 0x292c = 0xcd20, plus 1.
		{"a", 0xcd20 + 1},
	} {
		if got := IDFromHostname(tc.host); got != tc.want {
			t.Errorf("IDFromHostname(%q) = %d, want %d", tc.host, got, tc.want)
		}
	}

	// 20000 hostnames of the shapes Compose (container IDs) and
	// Kubernetes (Deployment pods) give: every ID in range, and about as
	// many pairs sharing an ID as with IDs drawn at random,
	// n(n-1)/2/65536 ≈ 3052 (a standard deviation is about 55).
	const n = 20000
	seen := make(map[uint64]int, n)
	pairs := 0
	for i := range n {
		name := fmt.Sprintf("%012x", uint64(i)*0x9e3779b97f4a7c15>>16)
		if i%2 == 1 {
			name = fmt.Sprintf("fleet-6d5f8c7b9-%05d", i)
		}
		id := IDFromHostname(name)
		if !protocol.DynamicMember(id) {
			t.Fatalf("IDFromHostname(%q) = %d, outside 1..%d", name, id, protocol.MaxMemberID)
		}
		pairs += seen[id]
		seen[id]++
	}
	expected := float64(n) * (n - 1) / 2 / 65536
	if math.Abs(float64(pairs)-expected) > 6*math.Sqrt(expected) {
		t.Errorf("%d hostnames: %d pairs share an ID, want about %.0f", n, pairs, expected)
	}
}

// The defaults: no variable is needed but NATS_URL's default, the ID comes
// from the hostname, and the data directory is a temporary one of the
// cluster and ID.
func TestLoadConfigDefaults(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cfg, err := loadConfig(map[string]string{}, host("fleet-3"))
	if err != nil {
		t.Fatal(err)
	}
	id := IDFromHostname("fleet-3")
	if cfg.id != id || cfg.idSource != "hostname fleet-3" {
		t.Errorf("ID %d from %q, want %d from the hostname", cfg.id, cfg.idSource, id)
	}
	if cfg.Cluster != "fleet" || cfg.Algorithm != "bully" || cfg.HTTPAddr != ":8080" || cfg.KeepLeader {
		t.Errorf("defaults: %+v", cfg)
	}
	if want := filepath.Join(tmp, "baton-fleet", "fleet", fmt.Sprintf("node-%d", id)); cfg.DataDir != want {
		t.Errorf("data directory %q, want %q", cfg.DataDir, want)
	}
	if info, err := os.Stat(cfg.DataDir); err != nil || !info.IsDir() {
		t.Errorf("data directory not created: %v", err)
	}
	if len(cfg.urls) != 1 || cfg.urls[0] != "nats://127.0.0.1:4222" {
		t.Errorf("NATS URLs %v", cfg.urls)
	}
	if cfg.signer != nil || cfg.keys != nil {
		t.Error("signed without a credential")
	}
}

// NODE_ID, when set, wins over the hostname, which is then not asked.
func TestLoadConfigNodeID(t *testing.T) {
	cfg, err := loadConfig(map[string]string{
		"NODE_ID": "65536", "ELECTION_DATA": t.TempDir(), "ELECTION_ALGORITHM": "ring",
		"ELECTION_KEEP_LEADER": "true", "NATS_URL": "nats://a:4222, nats://b:4222",
		"NATS_USER": "node", "NATS_PASSWORD": "pw",
	}, noHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.id != 65536 || cfg.idSource != "NODE_ID" || cfg.Algorithm != "ring" || !cfg.KeepLeader || len(cfg.urls) != 2 {
		t.Errorf("got %+v", cfg)
	}
}

// NODE_ID_FROM=ordinal: the number that ends the hostname, plus 1.
func TestIDFromOrdinal(t *testing.T) {
	for _, tc := range []struct {
		host string
		want uint64
	}{{"fleet-0", 1}, {"fleet-41", 42}, {"my-fleet-65535", 65536}} {
		if got, err := IDFromOrdinal(tc.host); err != nil || got != tc.want {
			t.Errorf("IDFromOrdinal(%q) = %d, %v; want %d", tc.host, got, err, tc.want)
		}
	}
	for _, h := range []string{"fleet", "fleet-", "fleet-x", "fleet-65536", "fleet-1a"} {
		if id, err := IDFromOrdinal(h); err == nil {
			t.Errorf("IDFromOrdinal(%q) = %d, want an error", h, id)
		}
	}
	cfg, err := loadConfig(map[string]string{"NODE_ID_FROM": "ordinal", "ELECTION_DATA": t.TempDir()}, host("fleet-2"))
	if err != nil || cfg.id != 3 || cfg.idSource != "ordinal fleet-2" {
		t.Errorf("NODE_ID_FROM=ordinal on fleet-2: ID %d from %q (%v), want 3", cfg.id, cfg.idSource, err)
	}
}

// Every bad variable: one line that starts with its name.
func TestLoadConfigErrors(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env      map[string]string
		hostname func() (string, error)
		name     string
	}{
		{map[string]string{"NODE_ID": "0"}, noHost, "NODE_ID"},
		{map[string]string{"NODE_ID": "65537"}, noHost, "NODE_ID"},
		{map[string]string{"NODE_ID": "seven"}, noHost, "NODE_ID"},
		{map[string]string{}, noHost, "NODE_ID"},
		{map[string]string{}, host(""), "NODE_ID"},
		{map[string]string{"ELECTION_ALGORITHM": "paxos"}, host("h"), "ELECTION_ALGORITHM"},
		{map[string]string{"ELECTION_ALGORITHM": "byzantine"}, host("h"), "ELECTION_ALGORITHM"},
		{map[string]string{"ELECTION_ALGORITHM": "raft"}, host("h"), "ELECTION_ALGORITHM"},
		{map[string]string{"ELECTION_CLUSTER": "a.b"}, host("h"), "ELECTION_CLUSTER"},
		{map[string]string{"NATS_URL": "http://x:4222"}, host("h"), "NATS_URL"},
		{map[string]string{"NATS_URL": "nats://a:4222,"}, host("h"), "NATS_URL"},
		{map[string]string{"NATS_USER": "node"}, host("h"), "NATS_PASSWORD"},
		{map[string]string{"NATS_PASSWORD": "pw"}, host("h"), "NATS_USER"},
		{map[string]string{"NATS_CREDS": filepath.Join(data, "missing.creds")}, host("h"), "NATS_CREDS"},
		{map[string]string{"HTTP_ADDR": "8080"}, host("h"), "HTTP_ADDR"},
		{map[string]string{"ELECTION_DATA": filepath.Join(file, "sub")}, host("h"), "ELECTION_DATA"},
		{map[string]string{"ELECTION_KEEP_LEADER": "maybe"}, host("h"), "ELECTION_KEEP_LEADER"},
		{map[string]string{"FLEET_WORK_INTERVAL": "0s"}, host("h"), "FLEET_WORK_INTERVAL"},
		{map[string]string{"FLEET_WORK_INTERVAL": "often"}, host("h"), "FLEET_WORK_INTERVAL"},
		{map[string]string{"LOG_LEVEL": "loud"}, host("h"), "LOG_LEVEL"},
		{map[string]string{"NODE_ID_FROM": "uuid"}, host("h"), "NODE_ID_FROM"},
		{map[string]string{"NODE_ID_FROM": "ordinal"}, host("fleet"), "NODE_ID_FROM"},
		{map[string]string{"ELECTION_CREDS_FILE": file}, host("h"), "ELECTION_AUTHORITY"},
		{map[string]string{"ELECTION_AUTHORITY": "A"}, host("h"), "ELECTION_CREDS_FILE"},
	} {
		if _, ok := tc.env["ELECTION_DATA"]; !ok {
			tc.env["ELECTION_DATA"] = data
		}
		_, err := loadConfig(tc.env, tc.hostname)
		if err == nil {
			t.Errorf("%v: no error, want one naming %s", tc.env, tc.name)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, tc.name+": ") || strings.Contains(msg, "\n") {
			t.Errorf("%v: %q, want one line naming %s", tc.env, msg, tc.name)
		}
	}
}

// issue makes an authority and issues member id's credential of cluster
// into dir; it returns the file and the authority's public key.
func issue(t *testing.T, dir, cluster string, id uint64) (string, string) {
	t.Helper()
	authority, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	public, _ := authority.PublicKey()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	userPublic, _ := user.PublicKey()
	token, err := membercreds.Issue(authority, cluster, id, userPublic, 0)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	path := filepath.Join(dir, membercreds.CredsFile(id))
	if err := membercreds.WriteCreds(path, token, seed); err != nil {
		t.Fatal(err)
	}
	return path, public
}

// With a member credential the replica signs, and its ID is the
// credential's unless NODE_ID says the same; the hostname is not asked.
func TestLoadConfigCredential(t *testing.T) {
	dir := t.TempDir()
	creds, authority := issue(t, dir, "fleet", 42)
	env := func(extra ...string) map[string]string {
		m := map[string]string{"ELECTION_CREDS_FILE": creds, "ELECTION_AUTHORITY": authority, "ELECTION_DATA": dir}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	cfg, err := loadConfig(env(), noHost)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.id != 42 || cfg.idSource != "credential" || cfg.signer == nil || cfg.keys == nil || cfg.signer.ID() != 42 {
		t.Errorf("got ID %d from %q, signer %v", cfg.id, cfg.idSource, cfg.signer)
	}
	if _, err := loadConfig(env("NODE_ID", "42"), noHost); err != nil {
		t.Errorf("NODE_ID equal to the credential's: %v", err)
	}
	for _, tc := range []struct {
		env  map[string]string
		name string
	}{
		{env("NODE_ID", "43"), "ELECTION_CREDS_FILE"},
		{env("ELECTION_CLUSTER", "other"), "ELECTION_CREDS_FILE"},
		{env("ELECTION_AUTHORITY", "not-a-key"), "ELECTION_AUTHORITY"},
	} {
		if _, err := loadConfig(tc.env, noHost); err == nil || !strings.HasPrefix(err.Error(), tc.name+": ") {
			t.Errorf("%v: %v, want an error naming %s", tc.env, err, tc.name)
		}
	}
	if err := os.Chmod(creds, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(env(), noHost); err == nil || !strings.HasPrefix(err.Error(), "ELECTION_CREDS_FILE: ") {
		t.Errorf("a credential others may read: %v, want an error naming ELECTION_CREDS_FILE", err)
	}
}

// A replica given the authority's seed issues itself a credential for the
// ID of its hostname, which the authority's key alone checks.
func TestLoadConfigIssuer(t *testing.T) {
	dir := t.TempDir()
	authority, _ := nkeys.CreateAccount()
	public, _ := authority.PublicKey()
	seed, _ := authority.Seed()
	seedFile := filepath.Join(dir, "authority.seed")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(extra ...string) map[string]string {
		m := map[string]string{"FLEET_ISSUER_SEED_FILE": seedFile, "ELECTION_DATA": dir}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	cfg, err := loadConfig(env(), host("fleet-7c9f"))
	if err != nil {
		t.Fatal(err)
	}
	want := IDFromHostname("fleet-7c9f")
	if cfg.id != want || cfg.signer == nil || cfg.signer.Credential() == "" || cfg.Authority != public {
		t.Fatalf("got ID %d (want %d), signer %v, authority %q", cfg.id, want, cfg.signer, cfg.Authority)
	}
	cred, err := membercreds.Verify(cfg.signer.Credential(), []string{public}, "fleet", time.Now())
	if err != nil || cred.ID != want || cred.UserKey != cfg.signer.PublicKey() || cred.Expires.IsZero() {
		t.Fatalf("issued credential: %+v, %v", cred, err)
	}
	other, _ := nkeys.CreateAccount()
	otherPublic, _ := other.PublicKey()
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()
	userFile := filepath.Join(dir, "user.seed")
	if err := os.WriteFile(userFile, userSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		name string
	}{
		{env("ELECTION_AUTHORITY", otherPublic), "FLEET_ISSUER_SEED_FILE"},
		{env("ELECTION_CREDS_FILE", seedFile), "FLEET_ISSUER_SEED_FILE"},
		{env("FLEET_ISSUED_FOR", "0s"), "FLEET_ISSUED_FOR"},
		{env("FLEET_ISSUER_SEED_FILE", userFile), "FLEET_ISSUER_SEED_FILE"},
		{env("FLEET_ISSUER_SEED_FILE", filepath.Join(dir, "none")), "FLEET_ISSUER_SEED_FILE"},
	} {
		if _, err := loadConfig(tc.env, host("fleet-7c9f")); err == nil || !strings.HasPrefix(err.Error(), tc.name+": ") {
			t.Errorf("%v: %v, want an error naming %s", tc.env, err, tc.name)
		}
	}
	if err := os.Chmod(seedFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(env(), host("fleet-7c9f")); err == nil || !strings.HasPrefix(err.Error(), "FLEET_ISSUER_SEED_FILE: ") {
		t.Errorf("a seed others may read: %v, want an error naming FLEET_ISSUER_SEED_FILE", err)
	}
}
