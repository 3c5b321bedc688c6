package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/signing"
)

// minimal sets only the required variables.
var minimal = map[string]string{"NODE_ID": "3", "NODE_PEERS": "1,2,3,4,5"}

// valid is a valid environment that, should a test run the service by
// mistake, listens on a random port and finds no NATS.
var valid = map[string]string{"NODE_ID": "3", "NODE_PEERS": "1,2,3,4,5", "HTTP_ADDR": "127.0.0.1:0", "NATS_URL": "nats://127.0.0.1:1"}

// with returns valid changed by kv pairs; an empty value "-" unsets.
func with(kv ...string) map[string]string {
	env := maps.Clone(valid)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "-" {
			delete(env, kv[i])
		} else {
			env[kv[i]] = kv[i+1]
		}
	}
	return env
}

// TestInvalidConfiguration: a missing or invalid variable exits with status
// 2 and one line on stderr that names it.
func TestInvalidConfiguration(t *testing.T) {
	t.Chdir(t.TempDir()) // the default ELECTION_DATA is relative
	for _, tc := range []struct {
		env  map[string]string
		name string // the variable the line must name
		says string // and what it must say
	}{
		{with("NODE_ID", "-"), "NODE_ID", "not set"},
		{with("NODE_ID", ""), "NODE_ID", "empty"},
		{with("NODE_ID", "three"), "NODE_ID", `"three" is not a positive integer`},
		{with("NODE_ID", "-3"), "NODE_ID", "not a positive integer"},
		{with("NODE_ID", "0"), "NODE_ID", "positive"},
		{with("NODE_PEERS", "-"), "NODE_PEERS", "not set"},
		{with("NODE_PEERS", "1,2"), "NODE_PEERS", "does not contain NODE_ID 3"},
		{with("NODE_PEERS", "1,2,3,2"), "NODE_PEERS", "2 appears twice"},
		{with("NODE_PEERS", "1,x,3"), "NODE_PEERS", `"x" is not a positive integer`},
		{with("NODE_PEERS", "1,,3"), "NODE_PEERS", "not a positive integer"},
		{with("ELECTION_ALGORITHM", "raft"), "ELECTION_ALGORITHM", "raft"},
		{with("ELECTION_ALGORITHM", "byzantine"), "ELECTION_ALGORITHM", "needs member keys"},
		{with("ELECTION_ALGORITHM", "paxos", "ELECTION_LEASE", "-1s"), "ELECTION_LEASE", "positive"},
		{with("ELECTION_ALGORITHM", "paxos", "ELECTION_LEASE", "60ms"), "ELECTION_LEASE", "raise it"},
		{with("ELECTION_MAX_DRIFT", "lots"), "ELECTION_MAX_DRIFT", "not a number"},
		{with("ELECTION_MAX_DRIFT", "0.5"), "ELECTION_MAX_DRIFT", "fraction"},
		{with("ELECTION_MAX_DRIFT", "-0.1"), "ELECTION_MAX_DRIFT", "fraction"},
		{with("ELECTION_CLUSTER", "a.b"), "ELECTION_CLUSTER", "[A-Za-z0-9_-]+"},
		{with("HTTP_ADDR", "8080"), "HTTP_ADDR", "host:port"},
		{with("NATS_URL", "nats://a:4222,http://b:80"), "NATS_URL", "scheme"},
		{with("NATS_URL", "nats://a:4222,,nats://b:4222"), "NATS_URL", "empty"},
		{with("ELECTION_TICK", "often"), "ELECTION_TICK", "not a duration"},
		{with("ELECTION_TICK", "0s"), "ELECTION_TICK", "positive"},
		{with("ELECTION_HEARTBEAT_INTERVAL", "1ms"), "ELECTION_HEARTBEAT_INTERVAL", "shorter than one tick"},
		{with("ELECTION_LEADER_TIMEOUT", "50ms"), "ELECTION_LEADER_TIMEOUT", "must exceed ELECTION_HEARTBEAT_INTERVAL"},
		{with("ELECTION_LEADER_TIMEOUT", "-1s"), "ELECTION_LEADER_TIMEOUT", "shorter than one tick"},
		{with("ELECTION_T_MAX", "0s"), "ELECTION_T_MAX", "positive"},
		{with("ELECTION_T_MAX", "1ms", "ELECTION_T_PROCESS", "1ms"), "ELECTION_T_MAX", "shorter than one tick"},
		{with("ELECTION_T_PROCESS", "-1ms"), "ELECTION_T_PROCESS", "negative"},
		{with("ELECTION_COORDINATOR_TIMEOUT", "20ms"), "ELECTION_COORDINATOR_TIMEOUT", "shorter than T"},
		{with("NATS_USER", "alice"), "NATS_PASSWORD", "required with NATS_USER"},
		{with("NATS_PASSWORD", "pw"), "NATS_USER", "required"},
		{with("NATS_USER", "alice", "NATS_PASSWORD", "pw", "NATS_TOKEN", "t"), "NATS_TOKEN", "cannot be combined"},
		{with("NATS_CREDS", "/nonexistent/node.creds"), "NATS_CREDS", "cannot read"},
		{with("NATS_TLS_CA", "/nonexistent/ca.pem"), "NATS_TLS_CA", "cannot read"},
		{with("NATS_TLS_CERT", "/nonexistent/cert.pem"), "NATS_TLS_KEY", "required with NATS_TLS_CERT"},
		{with("ELECTION_MAX_MESSAGE_AGE", "0s"), "ELECTION_MAX_MESSAGE_AGE", "positive"},
		{with("ELECTION_MAX_MESSAGE_AGE", "soon"), "ELECTION_MAX_MESSAGE_AGE", "not a duration"},
		{with("ELECTION_CONNECTION_EVENTS", "on"), "ELECTION_CONNECTION_EVENTS", "not auto or off"},
		{with("ELECTION_DATA", "/proc/baton"), "ELECTION_DATA", "cannot create"},
		{with("LOG_LEVEL", "loud"), "LOG_LEVEL", "loud"},
		{with("LOG_FORMAT", "xml"), "LOG_FORMAT", "xml"},
	} {
		t.Run(tc.name+"/"+tc.says, func(t *testing.T) {
			var stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a valid configuration would stop at once
			if code := run(ctx, tc.env, &stderr); code != exitConfig {
				t.Fatalf("exit status: got %d, want %d", code, exitConfig)
			}
			out := stderr.String()
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
				t.Errorf("stderr: got %q, want exactly one line", out)
			}
			if !strings.Contains(out, tc.name+":") || !strings.Contains(out, tc.says) {
				t.Errorf("stderr: got %q, want it to name %s and say %q", out, tc.name, tc.says)
			}
		})
	}
}

// TestDefaults: the defaults give a 10 ms tick, a heartbeat every 5 ticks,
// a leader time-out of 20 ticks, T = 2·20ms + 10ms = 5 ticks and a
// coordinator time-out of (n+1)·T.
func TestDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	cfg, err := loadConfig(minimal)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.timing.LeaseTicks != 0 {
		t.Errorf("lease for bully: got %d ticks, want none", cfg.timing.LeaseTicks)
	}
	paxos, err := loadConfig(with("ELECTION_ALGORITHM", "paxos"))
	if err != nil {
		t.Fatal(err)
	}
	// A lease of 200 ms is 20 ticks for the acceptors; the leader counts on
	// 20·0.95/1.05 = 18.09, less a tick: 17.
	if paxos.timing.LeaseTicks != 20 || paxos.timing.LeaderLeaseTicks != 17 {
		t.Errorf("paxos lease: got %d and %d ticks, want 20 and 17", paxos.timing.LeaseTicks, paxos.timing.LeaderLeaseTicks)
	}
	if cfg.DataDir != "baton-data/default/node-3" || cfg.MaxMessageAge != 2*time.Second {
		t.Errorf("data directory, message age: got %q, %v; want baton-data/default/node-3, 2s", cfg.DataDir, cfg.MaxMessageAge)
	}
	if info, err := os.Stat(cfg.DataDir); err != nil || !info.IsDir() {
		t.Errorf("data directory: not created: %v", err)
	}
	want := election.Timing{HeartbeatTicks: 10, LeaderTimeoutTicks: 20, AnswerTicks: 5, CoordinatorTicks: 30}
	if cfg.timing != want {
		t.Errorf("timing: got %+v, want %+v", cfg.timing, want)
	}
	// Paxos leaders renew their lease twice as often as the others beat.
	if paxos.timing.HeartbeatTicks != 5 {
		t.Errorf("paxos heartbeat: got %d ticks, want 5", paxos.timing.HeartbeatTicks)
	}
	if got := strings.Join(cfg.urls, ","); got != "nats://127.0.0.1:4222" {
		t.Errorf("urls: got %s", got)
	}
	if cfg.Algorithm != "bully" || cfg.Cluster != "default" || cfg.HTTPAddr != ":8080" || cfg.LogLevel != "info" {
		t.Errorf("defaults: got %+v", cfg)
	}

	cfg, err = loadConfig(with("NATS_URL", "nats://a:4222, tls://b:4443", "NODE_PEERS", " 5, 3 ,1",
		"ELECTION_TICK", "20ms", "ELECTION_HEARTBEAT_INTERVAL", "50ms", "ELECTION_LEADER_TIMEOUT", "210ms",
		"ELECTION_COORDINATOR_TIMEOUT", "1s"))
	if err != nil {
		t.Fatal(err)
	}
	// Heartbeats round down, time-outs up.
	want = election.Timing{HeartbeatTicks: 2, LeaderTimeoutTicks: 11, AnswerTicks: 3, CoordinatorTicks: 50}
	if cfg.timing != want {
		t.Errorf("timing: got %+v, want %+v", cfg.timing, want)
	}
	if len(cfg.urls) != 2 || cfg.urls[1] != "tls://b:4443" {
		t.Errorf("urls: got %q", cfg.urls)
	}
}

// keyFiles are a cluster's key files, written by writeKeys.
type keyFiles struct {
	seeds   map[uint64]string // ELECTION_KEY_FILE by member
	members string            // ELECTION_KEYS_FILE
	parsed  *signing.MemberKeys
}

// writeKeys writes a seed file per member and the members file, as
// cmd/keys does.
func writeKeys(t *testing.T, members ...uint64) keyFiles {
	t.Helper()
	dir := t.TempDir()
	k := keyFiles{seeds: make(map[uint64]string), members: filepath.Join(dir, "members.keys")}
	var list strings.Builder
	for _, id := range members {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		public, _ := kp.PublicKey()
		k.seeds[id] = filepath.Join(dir, fmt.Sprintf("node-%d.seed", id))
		if err := os.WriteFile(k.seeds[id], append(seed, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&list, "%d %s\n", id, public)
	}
	if err := os.WriteFile(k.members, []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if k.parsed, err = signing.ReadMemberKeysFile(k.members); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyConfiguration: member key files that do not fit the node's
// configuration exit with status 2 and one line naming the variable and,
// for the members file, the line at fault; the shared secret is refused
// with a pointer to the docs.
func TestKeyConfiguration(t *testing.T) {
	t.Chdir(t.TempDir())
	k := writeKeys(t, 1, 2, 3, 4, 5)
	small := writeKeys(t, 1, 2, 3)
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	members, err := os.ReadFile(k.members)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(members)), "\n")
	withKeys := func(kv ...string) map[string]string {
		return with(append([]string{"ELECTION_KEY_FILE", k.seeds[3], "ELECTION_KEYS_FILE", k.members}, kv...)...)
	}
	for _, tc := range []struct {
		env  map[string]string
		name string
		says string
	}{
		{with("ELECTION_SECRET", "change-me"), "ELECTION_SECRET", "replaced by member keys"},
		{with("ELECTION_MEMBERSHIP", "dynamic"), "NODE_PEERS", "with dynamic membership the members are those present"},
		{with("ELECTION_MEMBERSHIP", "sometimes"), "ELECTION_MEMBERSHIP", `"sometimes" is not static or dynamic`},
		{with("ELECTION_MEMBERSHIP", "dynamic", "NODE_PEERS", "-", "ELECTION_ALGORITHM", "byzantine"), "ELECTION_CREDS_FILE", "required with byzantine and dynamic membership"},
		{with("ELECTION_MEMBERSHIP", "dynamic", "NODE_PEERS", "-", "ELECTION_ALGORITHM", "paxos"), "ELECTION_VOTERS", "required with paxos and dynamic membership"},
		{with("ELECTION_MEMBERSHIP", "dynamic", "NODE_PEERS", "-", "ELECTION_ALGORITHM", "paxos", "ELECTION_VOTERS", "1,x"), "ELECTION_VOTERS", `"x" is not an ID`},
		{with("ELECTION_MEMBERSHIP", "dynamic", "NODE_PEERS", "-", "ELECTION_ALGORITHM", "paxos", "ELECTION_VOTERS", "1,2,1"), "ELECTION_VOTERS", "1 appears twice"},
		{with("ELECTION_MEMBERSHIP", "dynamic", "NODE_PEERS", "-", "NODE_ID", "65537"), "NODE_ID", "above 65536"},
		{with("ELECTION_MEMBERSHIP", "dynamic", "NODE_PEERS", "-", "ELECTION_PRESENCE_INTERVAL", "1ms"), "ELECTION_PRESENCE_INTERVAL", "shorter than one tick"},
		{with("NODE_PEERS", "-"), "NODE_PEERS", "required with static membership"},
		{with("ELECTION_KEEP_LEADER", "true"), "ELECTION_KEEP_LEADER", "needs dynamic membership"},
		{with("ELECTION_VOTERS", "1,2,3"), "ELECTION_VOTERS", "with static membership every member of NODE_PEERS votes"},
		{with("ELECTION_CLUSTERS", "shard-{3..0}"), "ELECTION_CLUSTERS", "runs backwards"},
		{with("ELECTION_CLUSTERS", "a,b,a"), "ELECTION_CLUSTERS", `"a" is given twice`},
		{with("ELECTION_CLUSTERS", "a.b"), "ELECTION_CLUSTERS", "must match"},
		{with("ELECTION_CLUSTERS", "s{0..20000}"), "ELECTION_CLUSTERS", "more than 16384 names"},
		{with("ELECTION_CLUSTERS", "a,b", "ELECTION_CLUSTER", "c"), "ELECTION_CLUSTERS", "set with ELECTION_CLUSTER"},
		{with("ELECTION_RANK", "random"), "ELECTION_RANK", `"random" is not id or spread`},
		{with("ELECTION_BATCH_WINDOW", "2s"), "ELECTION_BATCH_WINDOW", "want 0 (off) to 1s"},
		{withKeys("ELECTION_CLUSTERS", "s{0..1}", "ELECTION_KEYS_FILE", file("stated", "#: cluster s0\n"+string(members))), "ELECTION_KEYS_FILE", "states cluster"},
		{with("ELECTION_SECRET", "change-me"), "ELECTION_SECRET", "docs/configuration.md#member-keys"},
		{with("ELECTION_KEY_FILE", k.seeds[3]), "ELECTION_KEYS_FILE", "required with ELECTION_KEY_FILE"},
		{with("ELECTION_KEYS_FILE", k.members), "ELECTION_KEY_FILE", "required with ELECTION_KEYS_FILE"},
		{withKeys("ELECTION_KEY_FILE", filepath.Join(dir, "none")), "ELECTION_KEY_FILE", "no such file"},
		{withKeys("ELECTION_KEY_FILE", file("public", strings.Fields(lines[2])[1])), "ELECTION_KEY_FILE", "does not hold a user seed"},
		{withKeys("ELECTION_KEY_FILE", k.seeds[4]), "ELECTION_KEYS_FILE", "line 3: member 3 is listed with"},
		{withKeys("ELECTION_KEYS_FILE", file("dup", string(members)+lines[0]+"\n")), "ELECTION_KEYS_FILE", "line 6: duplicate member ID 1"},
		{withKeys("ELECTION_KEYS_FILE", file("bad", strings.Replace(string(members), "2 U", "2 X", 1))), "ELECTION_KEYS_FILE", "line 2: member 2"},
		{withKeys("NODE_PEERS", "1,2,3,4"), "ELECTION_KEYS_FILE", "line 5: member 5 is not one of the peers"},
		{withKeys("NODE_PEERS", "1,2,3,4,5,6"), "ELECTION_KEYS_FILE", "no key for member 6"},
		{withKeys("ELECTION_KEY_FILE", chmod(t, file("open.seed", mustRead(t, k.seeds[3])), 0o644)), "ELECTION_KEY_FILE", "chmod 600"},
		{withKeys("ELECTION_KEY_FILE", chmod(t, file("shared.seed", mustRead(t, k.seeds[3])), 0o640)), "ELECTION_KEY_FILE", "readable by group or others"},
		{withKeys("ELECTION_KEY_FILE", chmod(t, file("world.seed", mustRead(t, k.seeds[3])), 0o604)), "ELECTION_KEY_FILE", "chmod 600"},
		{withKeys("ELECTION_KEY_FILE", chmod(t, file("changeable.seed", mustRead(t, k.seeds[3])), 0o620)), "ELECTION_KEY_FILE", "writable by group or others"},
		{with("ELECTION_KEY_FILE", small.seeds[3], "ELECTION_KEYS_FILE", small.members, "NODE_PEERS", "1,2,3", "ELECTION_ALGORITHM", "byzantine"), "ELECTION_ALGORITHM", "ELECTION_BYZANTINE_SMALL=true"},
		{with("ELECTION_KEY_FILE", small.seeds[3], "ELECTION_KEYS_FILE", small.members, "NODE_PEERS", "1,2,3", "ELECTION_ALGORITHM", "byzantine"), "ELECTION_ALGORITHM", "of 3 members tolerates no liar"},
		{with("ELECTION_KEY_FILE", small.seeds[3], "ELECTION_KEYS_FILE", small.members, "NODE_PEERS", "1,2,3", "ELECTION_ALGORITHM", "byzantine", "ELECTION_BYZANTINE_SMALL", "maybe"), "ELECTION_BYZANTINE_SMALL", `"maybe" is not true or false`},
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
	cfg, err := loadConfig(withKeys())
	if err != nil || cfg.signer == nil || cfg.keys.Len() != 5 || !cfg.asNkeyUser() {
		t.Fatalf("loadConfig(valid keys) = %v; signer %v, %d keys, nkey user %v", err, cfg.signer, cfg.keys.Len(), cfg.asNkeyUser())
	}
	// With a NATS user, the node connects as that user; it still signs.
	cfg, err = loadConfig(withKeys("NATS_USER", "node", "NATS_PASSWORD", "pw"))
	if err != nil || cfg.signer == nil || cfg.asNkeyUser() {
		t.Fatalf("loadConfig(keys and NATS_USER) = %v; signer %v, nkey user %v", err, cfg.signer, cfg.asNkeyUser())
	}
	// Byzantine with four members tolerates one liar; with three, only
	// when asked for explicitly.
	if _, err := loadConfig(withKeys("NODE_PEERS", "1,2,3,4,5", "ELECTION_ALGORITHM", "byzantine")); err != nil {
		t.Errorf("byzantine with 5 members: %v", err)
	}
	smallEnv := with("ELECTION_KEY_FILE", small.seeds[3], "ELECTION_KEYS_FILE", small.members, "NODE_PEERS", "1,2,3", "ELECTION_ALGORITHM", "byzantine")
	for _, opt := range []string{"true", "1"} {
		smallEnv["ELECTION_BYZANTINE_SMALL"] = opt
		if _, err := loadConfig(smallEnv); err != nil {
			t.Errorf("byzantine with 3 members and ELECTION_BYZANTINE_SMALL=%s: %v", opt, err)
		}
	}
	// A seed file the owner alone may read (and write) is used.
	if _, err := loadConfig(withKeys("ELECTION_KEY_FILE", chmod(t, file("owner.seed", mustRead(t, k.seeds[3])), 0o400))); err != nil {
		t.Errorf("seed file of mode 0400: %v", err)
	}
}

// mustRead returns the contents of path.
func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// chmod sets path's mode and returns path.
func chmod(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// syncBuffer is a log destination safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMemberKeyWithoutNkeyUsers: a node with a member key, on a NATS
// server that lists no nkey users, connects without the key (it has no
// other credentials) and says once why, instead of waiting for NATS for
// ever.
func TestMemberKeyWithoutNkeyUsers(t *testing.T) {
	url := batontest.StartNATS(t)
	k := writeKeys(t, 1)
	env := map[string]string{
		"NODE_ID": "1", "NODE_PEERS": "1", "HTTP_ADDR": "127.0.0.1:0", "NATS_URL": url,
		"ELECTION_KEY_FILE": k.seeds[1], "ELECTION_KEYS_FILE": k.members, "ELECTION_DATA": t.TempDir(),
		"ELECTION_CONNECTION_EVENTS": "off",
	}
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- run(ctx, env, &stderr) }()
	batontest.CheckFor(t, 10*time.Second, func() error {
		if !strings.Contains(stderr.String(), "NATS connected") {
			return fmt.Errorf("not connected yet; log:\n%s", stderr.String())
		}
		return nil
	})
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit status: got %d, want %d", c, exitOK)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the node did not stop")
	}
	out := stderr.String()
	if n := strings.Count(out, "nkeys not supported by the server"); n != 1 {
		t.Errorf("the server's reason is logged %d times, want once:\n%s", n, out)
	}
}
