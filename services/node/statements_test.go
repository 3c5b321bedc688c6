package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A members file that states a cluster or an algorithm ("#: cluster",
// "#: algorithm") other than the node's exits with status 2, naming the
// variable that disagrees; one that states the node's own is used.
func TestKeysStatementsMatchTheNode(t *testing.T) {
	t.Chdir(t.TempDir())
	k := writeKeys(t, 1, 2, 3, 4, 5)
	members, err := os.ReadFile(k.members)
	if err != nil {
		t.Fatal(err)
	}
	stating := func(statements string) string {
		p := filepath.Join(t.TempDir(), "members.keys")
		if err := os.WriteFile(p, []byte(statements+string(members)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withKeys := func(file string, kv ...string) map[string]string {
		return with(append([]string{"ELECTION_KEY_FILE", k.seeds[3], "ELECTION_KEYS_FILE", file, "ELECTION_CLUSTER", "prod", "ELECTION_ALGORITHM", "paxos"}, kv...)...)
	}
	for _, tc := range []struct {
		env  map[string]string
		name string
		says string
	}{
		{withKeys(stating("#: cluster staging\n")), "ELECTION_CLUSTER", `states cluster "staging"`},
		{withKeys(stating("#: algorithm byzantine\n")), "ELECTION_ALGORITHM", `states algorithm "byzantine"`},
		{withKeys(stating("#: cluster prod\n#: algorithm bully\n")), "ELECTION_ALGORITHM", `states algorithm "bully"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
	for _, statements := range []string{"", "#: cluster prod\n", "#: cluster prod\n#: algorithm paxos\n"} {
		cfg, err := loadConfig(withKeys(stating(statements)))
		if err != nil {
			t.Errorf("loadConfig(members file stating %q) = %v, want nil", statements, err)
			continue
		}
		if cfg.keys.Cluster() != "prod" || cfg.keys.Algorithm() != "paxos" {
			t.Errorf("members file stating %q: keys state cluster %q, algorithm %q; want the node's prod, paxos", statements, cfg.keys.Cluster(), cfg.keys.Algorithm())
		}
	}
}
