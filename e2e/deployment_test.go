package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// The deployment under test mirrors compose.yaml: three NATS servers with
// JetStream, one five-node cluster per crash-tolerant algorithm, and the
// observer. The byzantine clusters (four and seven members, each with a
// liar) are deployed on their own, by the tests that need them
// (deployClusters), so that the other scenarios do not carry their
// containers.
const (
	nodesPerCluster = 5
	natsServers     = 3
)

var algorithms = []string{"bully", "ring", "paxos"}

// cluster is one cluster of a deployment.
type cluster struct {
	alg  string
	size int // members 1..size
	// liar, if not 0, is the member that runs the lying member's image
	// (e2e/liar) instead of the node's, with its own key.
	liar uint64
}

// standardClusters are the clusters of deploy.
func standardClusters() []cluster {
	var cs []cluster
	for _, alg := range algorithms {
		cs = append(cs, cluster{alg: alg, size: nodesPerCluster})
	}
	return cs
}

// images are built once per test binary.
var (
	imagesOnce sync.Once
	imagesErr  error
	images     map[string]string // service → image tag
)

// requireDocker skips the test with one clear line when Docker is not
// reachable, unless E2E_REQUIRED=1 (as in CI), where it fails instead.
func requireDocker(t *testing.T) *testcontainers.DockerClient {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err == nil {
		_, err = docker.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		if os.Getenv("E2E_REQUIRED") == "1" {
			t.Fatalf("e2e: Docker is required (E2E_REQUIRED=1) but not reachable: %v", err)
		}
		t.Skipf("e2e: skipped, Docker is not reachable: %v", err)
	}
	t.Cleanup(func() { docker.Close() })
	return docker
}

// buildImages compiles the static binaries and builds the images from
// deploy/*.Dockerfile, exactly as `task up` does, and the lying member's
// image (e2e/liar, a test program) in the same way.
func buildImages(t *testing.T) map[string]string {
	t.Helper()
	imagesOnce.Do(func() { images, imagesErr = doBuildImages() })
	if imagesErr != nil {
		t.Fatalf("e2e: building images: %v", imagesErr)
	}
	return images
}

func doBuildImages() (map[string]string, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baton-e2e-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	binaries := map[string]string{
		"node":        "./services/node",
		"observer":    "./services/observer",
		"healthcheck": "./cmd/healthcheck",
		"nats-server": "./cmd/natsd", // nats-server with the credential check
		"liar":        "./liar",
	}
	for name, pkg := range binaries {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "bin", name), pkg)
		cmd.Dir = root
		if name == "liar" {
			cmd.Dir = filepath.Join(root, "e2e") // a program of this module
		}
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	// The NATS server's configuration, at the paths its Dockerfile copies.
	for _, file := range []string{"deploy/nats.conf", "internal/natsconf/accounts.conf"} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(file)), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			return nil, err
		}
	}
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, err
	}
	defer provider.Close()
	built := make(map[string]string)
	dockerfiles := map[string]string{
		"node":     "deploy/node.Dockerfile",
		"observer": "deploy/observer.Dockerfile",
		"nats":     "deploy/nats.Dockerfile",
		"liar":     "e2e/liar/liar.Dockerfile",
	}
	for _, svc := range []string{"node", "observer", "nats", "liar"} {
		dockerfile, err := os.ReadFile(filepath.Join(root, dockerfiles[svc]))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, svc+".Dockerfile"), dockerfile, 0o644); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		tag, err := provider.BuildImage(ctx, &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
			Context:    dir,
			Dockerfile: svc + ".Dockerfile",
			Repo:       "baton-e2e-" + svc,
			Tag:        "test",
			KeepImage:  true,
		}})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("docker build %s: %w", svc, err)
		}
		built[svc] = tag
	}
	return built, nil
}

// repoRoot returns the directory of the root module, whose binaries and
// deploy/ files the images are built from: this module requires it from
// the same checkout (go.work, or the replace in e2e/go.mod).
func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/baton-election/baton").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/baton-election/baton: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("the root module github.com/baton-election/baton has no directory")
	}
	return dir, nil
}

// deployment is one running copy of the system on its own Docker network.
type deployment struct {
	t        *testing.T
	docker   *testcontainers.DockerClient
	images   map[string]string
	net      *testcontainers.DockerNetwork
	nats     []testcontainers.Container
	sizes    map[string]int                                 // algorithm → members
	nodes    map[string]map[uint64]testcontainers.Container // algorithm → ID → container
	observer testcontainers.Container
	keys     string // each cluster's member keys (<keys>/<alg>/) and the NATS accounts
	members  map[string]*signing.MemberKeys
}

// deploy starts NATS, the clusters of the crash-tolerant algorithms and
// the observer, and waits until every cluster has agreed on node 5 and
// the observer has recorded it.
func deploy(t *testing.T) *deployment {
	t.Helper()
	return deployClusters(t, standardClusters())
}

// deployClusters starts NATS, the observer and clusters, and waits until
// every cluster has agreed on its highest honest member and the observer
// has recorded it.
func deployClusters(t *testing.T, clusters []cluster) *deployment {
	t.Helper()
	docker := requireDocker(t)
	d := &deployment{t: t, docker: docker, images: buildImages(t), sizes: map[string]int{},
		nodes: map[string]map[uint64]testcontainers.Container{}, members: map[string]*signing.MemberKeys{}}
	ctx := context.Background()
	nw, err := tcnetwork.New(ctx)
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	d.net = nw
	t.Cleanup(func() {
		if err := nw.Remove(context.Background()); err != nil {
			t.Logf("remove network: %v", err)
		}
	})

	// Every member has its own key (as in Compose): the NATS servers list
	// each public key as a user confined to its cluster, the nodes sign
	// with their seeds, the observer checks with the public keys.
	d.keys = t.TempDir()
	for _, c := range clusters {
		d.sizes[c.alg] = c.size
		ms, err := memberkeys.Generate(filepath.Join(d.keys, c.alg), c.alg, protocol.Algorithm(c.alg), memberIDs(c.size))
		if err != nil {
			t.Fatalf("member keys of %s: %v", c.alg, err)
		}
		d.members[c.alg] = ms
	}
	accounts, err := natsconf.Render(d.members)
	if err != nil {
		t.Fatalf("render the NATS accounts: %v", err)
	}
	if err := os.WriteFile(filepath.Join(d.keys, "accounts.conf"), []byte(accounts), 0o644); err != nil {
		t.Fatal(err)
	}

	var routes []string
	for i := 1; i <= natsServers; i++ {
		routes = append(routes, fmt.Sprintf("nats://%s:%s@nats-%d:6222", natsconf.RouteUser, natsconf.LocalPasswords.Route, i))
	}
	reqs := make([]testcontainers.GenericContainerRequest, 0, natsServers)
	for i := 1; i <= natsServers; i++ {
		name := fmt.Sprintf("nats-%d", i)
		// The image's configuration (deploy/nats.conf) holds the cluster,
		// its route user, the accounts and users, with the passwords from
		// the environment. Its monitoring port listens inside the
		// container only, so the health check runs there.
		req := d.request(d.images["nats"], name, natsconf.LocalPasswords.Env(), []string{
			"--name=" + name, "--routes=" + strings.Join(routes, ","),
		}, "4222/tcp")
		req.Files = []testcontainers.ContainerFile{{HostFilePath: filepath.Join(d.keys, "accounts.conf"), ContainerFilePath: "/etc/nats/accounts.conf", FileMode: 0o644}}
		req.WaitingFor = wait.ForExec([]string{"/healthcheck", "http://127.0.0.1:8222/healthz"}).WithStartupTimeout(60 * time.Second)
		reqs = append(reqs, req)
	}
	d.nats = d.startAll(reqs)

	// The observer comes up before the nodes, so that its stream captures
	// the very first election.
	obs := d.request(d.images["observer"], "observer", map[string]string{
		"NATS_URL":                 natsURLs(),
		"NATS_USER":                natsconf.ObserverUser,
		"NATS_PASSWORD":            natsconf.LocalPasswords.Observer,
		"OBSERVER_DATA":            "/data",
		"OBSERVER_STREAM_REPLICAS": "3",
		"OBSERVER_KEYS_DIR":        "/run/baton/keys",
		"HTTP_ADDR":                ":8080",
	}, nil, "8080/tcp")
	for _, c := range clusters {
		obs.Files = append(obs.Files, testcontainers.ContainerFile{HostFilePath: filepath.Join(d.keys, c.alg, memberkeys.MembersFile), ContainerFilePath: "/run/baton/keys/" + c.alg + ".keys", FileMode: 0o644})
	}
	d.observer = d.startAll([]testcontainers.GenericContainerRequest{obs})[0]

	type key struct {
		alg string
		id  uint64
	}
	var keys []key
	var nodeReqs []testcontainers.GenericContainerRequest
	for _, c := range clusters {
		d.nodes[c.alg] = map[uint64]testcontainers.Container{}
		for id := uint64(1); id <= uint64(c.size); id++ {
			keys = append(keys, key{c.alg, id})
			image := d.images["node"]
			if id == c.liar {
				image = d.images["liar"]
			}
			req := d.request(image, nodeName(c.alg, id), nodeEnv(c.alg, id, c.size), nil, "8080/tcp")
			req.Files = []testcontainers.ContainerFile{
				{HostFilePath: filepath.Join(d.keys, c.alg, memberkeys.SeedFile(id)), ContainerFilePath: "/run/baton/node.seed", FileMode: 0o600},
				{HostFilePath: filepath.Join(d.keys, c.alg, memberkeys.MembersFile), ContainerFilePath: "/run/baton/members.keys", FileMode: 0o644},
			}
			nodeReqs = append(nodeReqs, req)
		}
	}
	started := d.startAll(nodeReqs)
	for i, k := range keys {
		d.nodes[k.alg][k.id] = started[i]
	}
	for _, c := range clusters {
		if c.liar == 0 {
			continue
		}
		// What the observer and the honest nodes logged, if the test
		// fails (before their containers are removed).
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			d.logsOf(d.observer, 60)
			for id := uint64(1); id <= uint64(c.size); id++ {
				if id != c.liar {
					d.logsOf(d.nodes[c.alg][id], 30)
					d.dumpNode(c.alg, id)
				}
			}
		})
	}
	for _, c := range clusters {
		top := uint64(c.size)
		if top == c.liar {
			top--
		}
		var skip []uint64
		if c.liar != 0 {
			skip = append(skip, c.liar)
		}
		d.waitAgreed(c.alg, top, 0, 30*time.Second, skip...)
		d.waitRecorded(c.alg, top, 0, 30*time.Second)
	}
	return d
}

func natsURLs() string {
	var urls []string
	for i := 1; i <= natsServers; i++ {
		urls = append(urls, fmt.Sprintf("nats://nats-%d:4222", i))
	}
	return strings.Join(urls, ",")
}

func nodeName(alg string, id uint64) string { return fmt.Sprintf("%s-%d", alg, id) }

// memberIDs lists the IDs of a cluster's size members.
func memberIDs(size int) []uint64 {
	var ids []uint64
	for id := uint64(1); id <= uint64(size); id++ {
		ids = append(ids, id)
	}
	return ids
}

// nodeEnv is the environment of node id of cluster alg, of size members:
// it signs with its member key and connects to NATS as the user of that
// key.
func nodeEnv(alg string, id uint64, size int) map[string]string {
	var peers []string
	for p := 1; p <= size; p++ {
		peers = append(peers, strconv.Itoa(p))
	}
	return map[string]string{
		"NATS_URL":           natsURLs(),
		"ELECTION_KEY_FILE":  "/run/baton/node.seed",
		"ELECTION_KEYS_FILE": "/run/baton/members.keys",
		"NODE_ID":            strconv.FormatUint(id, 10),
		"NODE_PEERS":         strings.Join(peers, ","),
		"ELECTION_ALGORITHM": alg,
		"ELECTION_CLUSTER":   alg,
		"ELECTION_DATA":      "/data",
		"HTTP_ADDR":          ":8080",
	}
}

func (d *deployment) request(image, alias string, env map[string]string, cmd []string, healthPort string) testcontainers.GenericContainerRequest {
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        image,
			Env:          env,
			Cmd:          cmd,
			ExposedPorts: []string{healthPort},
			WaitingFor:   wait.ForHTTP("/healthz").WithPort(healthPort).WithStartupTimeout(60 * time.Second),
		},
		Started: true,
	}
	if err := tcnetwork.WithNetwork([]string{alias}, d.net).Customize(&req); err != nil {
		d.t.Fatalf("network for %s: %v", alias, err)
	}
	return req
}

// startAll starts containers concurrently and registers their removal.
func (d *deployment) startAll(reqs []testcontainers.GenericContainerRequest) []testcontainers.Container {
	d.t.Helper()
	out := make([]testcontainers.Container, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			c, err := testcontainers.GenericContainer(context.Background(), req)
			out[i], errs[i] = c, err
		})
	}
	wg.Wait()
	for i := range reqs {
		if out[i] != nil {
			testcontainers.CleanupContainer(d.t, out[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		d.t.Fatalf("start containers: %v", err)
	}
	return out
}

// status is a node's GET /status.
type status struct {
	ID               uint64  `json:"id"`
	Leader           *uint64 `json:"leader"`
	Term             uint64  `json:"term"`
	State            string  `json:"state"`
	LeaseRemainingMS *int64  `json:"lease_remaining_ms"`
}

// leadership is one record of the observer's history.
type leadership struct {
	Term      uint64  `json:"term"`
	Leader    uint64  `json:"leader"`
	Algorithm string  `json:"algorithm"`
	StartedAt string  `json:"started_at"`
	EndedAt   *string `json:"ended_at"`
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

func (d *deployment) url(c testcontainers.Container, path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ep, err := c.PortEndpoint(ctx, "8080/tcp", "http")
	if err != nil {
		return "", err
	}
	return ep + path, nil
}

// statusOf asks one node for its status.
func (d *deployment) statusOf(alg string, id uint64) (status, error) {
	var s status
	u, err := d.url(d.nodes[alg][id], "/status")
	if err != nil {
		return s, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s, getJSON(ctx, u, &s)
}

// waitFor polls check until it returns nil; after timeout it fails the
// test with what and check's last error.
func (d *deployment) waitFor(timeout time.Duration, what string, check func() error) {
	d.t.Helper()
	batontest.CheckFor(d.t, timeout, func() error {
		if err := check(); err != nil {
			return fmt.Errorf("%s: not yet: %w", what, err)
		}
		return nil
	})
}

// waitAgreed waits until every reachable live node of a cluster reports
// want as leader with a term above minTerm, and returns that term. Nodes
// listed in skip are not asked.
func (d *deployment) waitAgreed(alg string, want, minTerm uint64, timeout time.Duration, skip ...uint64) uint64 {
	d.t.Helper()
	var term uint64
	d.waitFor(timeout, fmt.Sprintf("%s cluster agrees on leader %d", alg, want), func() error {
		term = 0
		for id := uint64(1); id <= uint64(d.sizes[alg]); id++ {
			if contains(skip, id) {
				continue
			}
			s, err := d.statusOf(alg, id)
			if err != nil {
				return fmt.Errorf("node %d: %v", id, err)
			}
			if s.Leader == nil || *s.Leader != want || s.Term <= minTerm {
				return fmt.Errorf("node %d: leader %v term %d state %s", id, deref(s.Leader), s.Term, s.State)
			}
			if term != 0 && s.Term != term {
				return fmt.Errorf("node %d has term %d, another node %d", id, s.Term, term)
			}
			term = s.Term
		}
		return nil
	})
	return term
}

// waitRecorded waits until the observer's current leadership of a cluster
// is want with a term above minTerm, and returns the record.
func (d *deployment) waitRecorded(alg string, want, minTerm uint64, timeout time.Duration) leadership {
	d.t.Helper()
	var rec leadership
	d.waitFor(timeout, fmt.Sprintf("observer records leader %d of %s", want, alg), func() error {
		u, err := d.url(d.observer, "/api/clusters/"+alg+"/leader")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := getJSON(ctx, u, &rec); err != nil {
			return err
		}
		if rec.Leader != want || rec.Term <= minTerm {
			return fmt.Errorf("recorded leader %d term %d", rec.Leader, rec.Term)
		}
		return nil
	})
	return rec
}

// history returns the observer's history of a cluster.
func (d *deployment) history(alg string) []leadership {
	d.t.Helper()
	u, err := d.url(d.observer, "/api/clusters/"+alg+"/history")
	if err != nil {
		d.t.Fatal(err)
	}
	var h []leadership
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := getJSON(ctx, u, &h); err != nil {
		d.t.Fatalf("observer history of %s: %v", alg, err)
	}
	return h
}

// checkHistory asserts what every scenario must leave in the observer:
// terms strictly increase and each term appears once (checked on every
// reading: a violation fails at once), and only the last leadership is
// open. The last may have ended a moment ago (a Paxos leader on a loaded
// host that lost its lease and is winning again), so that part is waited
// for, with the scenario's deadline.
func (d *deployment) checkHistory(alg string) []leadership {
	d.t.Helper()
	var h []leadership
	d.waitFor(converge, alg+": history with only its last leadership open", func() error {
		h = d.history(alg)
		if len(h) == 0 {
			return errors.New("history is empty")
		}
		for i, rec := range h {
			if i > 0 && rec.Term <= h[i-1].Term {
				d.t.Fatalf("%s history: term %d follows term %d; want strictly increasing", alg, rec.Term, h[i-1].Term)
			}
			if (rec.EndedAt == nil) != (i == len(h)-1) {
				return fmt.Errorf("record %d (term %d) ended_at=%v; want only the last one open", i, rec.Term, deref(rec.EndedAt))
			}
		}
		return nil
	})
	return h
}

func (d *deployment) kill(c testcontainers.Container) {
	d.t.Helper()
	if _, err := d.docker.ContainerKill(context.Background(), c.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		d.t.Fatalf("docker kill: %v", err)
	}
}

func (d *deployment) start(c testcontainers.Container) {
	d.t.Helper()
	if err := c.Start(context.Background()); err != nil {
		d.t.Fatalf("docker start: %v", err)
	}
}

func (d *deployment) stop(c testcontainers.Container) {
	d.t.Helper()
	timeout := 5 * time.Second
	if err := c.Stop(context.Background(), &timeout); err != nil {
		d.t.Fatalf("docker stop: %v", err)
	}
}

func (d *deployment) pause(c testcontainers.Container) {
	d.t.Helper()
	if _, err := d.docker.ContainerPause(context.Background(), c.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		d.t.Fatalf("docker pause: %v", err)
	}
}

func (d *deployment) unpause(c testcontainers.Container) {
	d.t.Helper()
	if _, err := d.docker.ContainerUnpause(context.Background(), c.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		d.t.Fatalf("docker unpause: %v", err)
	}
}

func (d *deployment) disconnect(c testcontainers.Container) {
	d.t.Helper()
	if _, err := d.docker.NetworkDisconnect(context.Background(), d.net.ID, client.NetworkDisconnectOptions{Container: c.GetContainerID(), Force: true}); err != nil {
		d.t.Fatalf("docker network disconnect: %v", err)
	}
}

func (d *deployment) connect(c testcontainers.Container, alias string) {
	d.t.Helper()
	if _, err := d.docker.NetworkConnect(context.Background(), d.net.ID, client.NetworkConnectOptions{
		Container:      c.GetContainerID(),
		EndpointConfig: &network.EndpointSettings{Aliases: []string{alias}},
	}); err != nil {
		d.t.Fatalf("docker network connect: %v", err)
	}
}

func contains(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// deref is *p for messages, "null" for nil.
func deref[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}
