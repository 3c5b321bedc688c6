package natsconf

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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
	// A cluster whose members issue themselves credentials (the fleet)
	// has no member keys: the Taskfile makes its authority instead.
	var clusters [][][]byte
	for _, m := range regexp.MustCompile(`ELECTION_CLUSTER: ([A-Za-z0-9_-]+)`).FindAllSubmatch(compose, -1) {
		seed := "./.keys/" + string(m[1]) + "/authority.seed"
		if !strings.Contains(string(compose), seed) {
			clusters = append(clusters, m)
			continue
		}
		if !strings.Contains(string(taskfile), "-out .keys/"+string(m[1])+" -cluster "+string(m[1])+" -authority new") {
			t.Errorf("compose.yaml mounts %s, which the Taskfile does not make", seed)
		}
	}
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

// maxHealthChecksPerSecond bounds the health checks a deployment runs.
// Each one is a process started inside a container (docker exec), which
// costs far more CPU than the election itself: at one check every 2 s in
// each of Compose's 23 containers (11.5 a second) a 2-core host was busy
// enough for the clusters to hold dozens of elections a minute at idle.
const maxHealthChecksPerSecond = 2.0

// TestHealthChecksSparse: the health checks of compose.yaml, and those
// the images carry (which the end-to-end tests use as they are), stay
// within the budget for a deployment of compose.yaml's size.
func TestHealthChecksSparse(t *testing.T) {
	compose, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// interval finds the first health check interval re matches in src.
	interval := func(where string, src []byte, re string) time.Duration {
		t.Helper()
		m := regexp.MustCompile(re).FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s: no health check interval", where)
		}
		d, err := time.ParseDuration(string(m[1]))
		if err != nil || d <= 0 {
			t.Fatalf("%s: health check interval %q: %v", where, m[1], err)
		}
		return d
	}
	// The interval of the health check that follows a block's first line.
	inCompose := func(block string) time.Duration {
		return interval("compose.yaml under "+block, compose,
			`(?m)^`+regexp.QuoteMeta(block)+`$[\s\S]*?^ +healthcheck:\n(?: +\S.*\n)*? +interval: (\S+)`)
	}
	inImage := func(name string) time.Duration {
		src, err := os.ReadFile("../../deploy/" + name + ".Dockerfile")
		if err != nil {
			t.Fatal(err)
		}
		return interval("deploy/"+name+".Dockerfile", src, `HEALTHCHECK --interval=(\S+)`)
	}
	services, _, _ := strings.Cut(string(compose), "\nvolumes:")
	count := func(re string) int {
		return len(regexp.MustCompile(`(?m)`+re).FindAllString(services, -1))
	}
	nats, nodes := count(`^  nats-[0-9]+:`), count(`^  [a-z]+-[0-9]+: \{<<: \*node`)
	if nats == 0 || nodes == 0 {
		t.Fatalf("compose.yaml: %d NATS services, %d nodes", nats, nodes)
	}
	for _, c := range []struct {
		what                 string
		nats, node, observer time.Duration
	}{
		{"compose.yaml", inCompose("x-nats: &nats"), inCompose("x-node: &node"), inCompose("  observer:")},
		{"the images", inImage("nats"), inImage("node"), inImage("observer")},
	} {
		perSecond := float64(nats)/c.nats.Seconds() + float64(nodes)/c.node.Seconds() + 1/c.observer.Seconds()
		t.Logf("%s: %.2f health checks a second", c.what, perSecond)
		if perSecond > maxHealthChecksPerSecond {
			t.Errorf("%s: %d NATS servers, %d nodes and the observer run %.1f health checks a second; want at most %.1f",
				c.what, nats, nodes, perSecond, maxHealthChecksPerSecond)
		}
	}
}
