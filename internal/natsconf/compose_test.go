package natsconf

import (
	"os"
	"regexp"
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
	peers := regexp.MustCompile(`NODE_PEERS: "([0-9,]+)"`).FindSubmatch(compose)
	if peers == nil {
		t.Fatal("compose.yaml: no NODE_PEERS")
	}
	want := map[string]bool{}
	for _, m := range regexp.MustCompile(`ELECTION_CLUSTER: ([A-Za-z0-9_-]+)`).FindAllSubmatch(compose, -1) {
		want["-cluster "+string(m[1])+"="+string(peers[1])] = true
	}
	line := regexp.MustCompile(`KEY_CLUSTERS: (.*)`).FindSubmatch(taskfile)
	if line == nil {
		t.Fatal("Taskfile.yml: no KEY_CLUSTERS")
	}
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`-cluster \S+`).FindAll(line[1], -1) {
		got[string(m)] = true
	}
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("Taskfile KEY_CLUSTERS %v; compose.yaml has %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("Taskfile KEY_CLUSTERS lacks %q", k)
		}
	}
	nodes := regexp.MustCompile(`(?m)^  ([a-z]+)-([0-9]+): \{.*\}$`).FindAllSubmatch(compose, -1)
	if len(nodes) != len(want)*len(strings.Split(string(peers[1]), ",")) {
		t.Errorf("compose.yaml: %d node services for %d clusters of %s", len(nodes), len(want), peers[1])
	}
	for _, m := range nodes {
		svc := string(m[0])
		seed := "./.keys/" + string(m[1]) + "/node-" + string(m[2]) + ".seed:/run/baton/node.seed:ro"
		if !strings.Contains(svc, seed) || !strings.Contains(svc, "./.keys/"+string(m[1])+"/members.keys:") {
			t.Errorf("compose.yaml: %s-%s does not mount its own seed and its cluster's members", m[1], m[2])
		}
	}
}
