package natsconf

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The Taskfile makes keys for exactly the clusters of compose.yaml, with
// their members, and every node mounts its own seed.
func TestComposeKeysMatch(t *testing.T) {
	compose, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	taskfile, err := os.ReadFile("../../Taskfile.yml")
	if err != nil {
		t.Fatal(err)
	}
	// Each node service <cluster>-<id> names its member; together they
	// are the clusters and their members.
	nodes := regexp.MustCompile(`(?m)^  ([a-z]+)-([0-9]+): \{.*\}$`).FindAllSubmatch(compose, -1)
	members := map[string][]int{}
	for _, m := range nodes {
		id, err := strconv.Atoi(string(m[2]))
		if err != nil {
			t.Fatal(err)
		}
		members[string(m[1])] = append(members[string(m[1])], id)
	}
	clusters := regexp.MustCompile(`ELECTION_CLUSTER: ([A-Za-z0-9_-]+)`).FindAllSubmatch(compose, -1)
	if len(clusters) == 0 || len(clusters) != len(members) {
		t.Fatalf("compose.yaml: %d clusters configured, node services of %d", len(clusters), len(members))
	}
	want := map[string]bool{}
	for _, m := range clusters {
		ids := members[string(m[1])]
		if len(ids) == 0 {
			t.Fatalf("compose.yaml: no node services of cluster %s", m[1])
		}
		slices.Sort(ids)
		list := make([]string, len(ids))
		for i, id := range ids {
			list[i] = strconv.Itoa(id)
		}
		want["-cluster "+string(m[1])+"="+strings.Join(list, ",")] = true
	}
	line := regexp.MustCompile(`KEY_CLUSTERS: (.*)`).FindSubmatch(taskfile)
	if line == nil {
		t.Fatal("Taskfile.yml: no KEY_CLUSTERS")
	}
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`-cluster \S+`).FindAll(line[1], -1) {
		got[string(m)] = true
	}
	if len(got) != len(want) {
		t.Fatalf("Taskfile KEY_CLUSTERS %v; compose.yaml has %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("Taskfile KEY_CLUSTERS lacks %q", k)
		}
	}
	for _, m := range nodes {
		svc := string(m[0])
		seed := "./.keys/" + string(m[1]) + "/node-" + string(m[2]) + ".seed:/run/baton/node.seed:ro"
		if !strings.Contains(svc, seed) || !strings.Contains(svc, "./.keys/"+string(m[1])+"/members.keys:") {
			t.Errorf("compose.yaml: %s-%s does not mount its own seed and its cluster's members", m[1], m[2])
		}
	}
}
