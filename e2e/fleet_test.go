package e2e

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// The fleet example (examples/fleet, docs/fleet.md): identical replicas of
// one service that elect among those present, each taking its member ID
// from its hostname.
const fleetCluster = "fleet"

// The fleet's image is built once per test binary, from
// deploy/fleet.Dockerfile, as go tool task images builds it.
var (
	fleetImageOnce sync.Once
	fleetImageTag  string
	fleetImageErr  error
)

func buildFleetImage(t *testing.T) string {
	t.Helper()
	fleetImageOnce.Do(func() { fleetImageTag, fleetImageErr = doBuildFleetImage() })
	if fleetImageErr != nil {
		t.Fatalf("e2e: building the fleet image: %v", fleetImageErr)
	}
	return fleetImageTag
}

func doBuildFleetImage() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "baton-e2e-fleet-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	for name, pkg := range map[string]string{"fleet": "./examples/fleet", "healthcheck": "./cmd/healthcheck"} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "bin", name), pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "deploy", "fleet.Dockerfile"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.Dockerfile"), dockerfile, 0o644); err != nil {
		return "", err
	}
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return "", err
	}
	defer provider.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return provider.BuildImage(ctx, &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		Context: dir, Dockerfile: "fleet.Dockerfile", Repo: "baton-e2e-fleet", Tag: "test", KeepImage: true,
	}})
}

// fleetID is the member ID a replica derives from its hostname, computed
// here from docs/fleet.md's formula, independently of the program: FNV-1a
// (32 bits) of the hostname, the high half XORed into the low, plus 1.
func fleetID(hostname string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(hostname))
	sum := h.Sum32()
	return uint64((sum>>16)^(sum&0xffff)) + 1
}

// fleetReplica is one container of the fleet.
type fleetReplica struct {
	host string
	id   uint64
	c    testcontainers.Container
}

// fleetDeployment is NATS (three servers, as in Compose), the observer and
// the fleet's replicas, and every announcement of the fleet as the test
// received it.
type fleetDeployment struct {
	*deployment
	image   string
	running map[uint64]*fleetReplica // by ID
	// left is how each replica that is gone left, by ID: the reason the
	// observer must record.
	left map[uint64]string
	// joined are the IDs of every replica started.
	joined []uint64

	// creds, if set, are the keys of a fleet whose replicas connect with
	// the credentials they issue themselves, to NATS servers that check
	// them.
	creds *fleetCredentials

	mu            sync.Mutex
	announcements []protocol.Announcement
	annErr        error
}

// fleetCredentials are the files of a deployment whose NATS servers check
// the fleet's credentials, as go tool task keys makes them for Compose:
// the rendered accounts (with the callout), the check's keys, the fleet's
// authority, in dir on the host.
type fleetCredentials struct {
	dir       string
	authority nkeys.KeyPair
}

func makeFleetCredentials(t *testing.T) *fleetCredentials {
	t.Helper()
	c := &fleetCredentials{dir: t.TempDir()}
	keys, _, err := natsauth.EnsureKeys(filepath.Join(c.dir, "callout"))
	if err != nil {
		t.Fatal(err)
	}
	if c.authority, err = nkeys.CreateAccount(); err != nil {
		t.Fatal(err)
	}
	seed, _ := c.authority.Seed()
	public, _ := c.authority.PublicKey()
	conf, err := natsconf.RenderWith(nil, &natsconf.Callout{Issuer: keys.Issuer, User: keys.User})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]struct {
		data []byte
		mode os.FileMode
	}{
		"authority.seed":  {append(seed, '\n'), 0o600},
		"fleet.authority": {[]byte(public + "\n"), 0o644},
		"accounts.conf":   {[]byte(conf), 0o644},
	} {
		if err := os.WriteFile(filepath.Join(c.dir, name), f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// file is the container file of name in dir, at path, with mode.
func (c *fleetCredentials) file(name, path string, mode int64) testcontainers.ContainerFile {
	return testcontainers.ContainerFile{HostFilePath: filepath.Join(c.dir, name), ContainerFilePath: path, FileMode: mode}
}

// deployFleet starts NATS and the observer, and subscribes to the
// fleet's announcements. The replicas run unsigned, as the node user, and
// the observer has no member keys, so that it records them (with keys of
// other clusters it would refuse a cluster it holds none for).
func deployFleet(t *testing.T) *fleetDeployment { return deployFleetWith(t, nil) }

// deployFleetWith is deployFleet, and with creds the NATS servers check
// the fleet's credentials as in Compose, the replicas connect with those
// they issue themselves, and the observer checks them with the
// authority's public key.
func deployFleetWith(t *testing.T, creds *fleetCredentials) *fleetDeployment {
	t.Helper()
	docker := requireDocker(t)
	d := &deployment{t: t, docker: docker, images: buildImages(t), sizes: map[string]int{}}
	f := &fleetDeployment{deployment: d, image: buildFleetImage(t), running: map[uint64]*fleetReplica{}, left: map[uint64]string{}, creds: creds}
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

	var routes []string
	for i := 1; i <= natsServers; i++ {
		routes = append(routes, fmt.Sprintf("nats://%s:%s@nats-%d:6222", natsconf.RouteUser, natsconf.LocalPasswords.Route, i))
	}
	var reqs []testcontainers.GenericContainerRequest
	for i := 1; i <= natsServers; i++ {
		name := fmt.Sprintf("nats-%d", i)
		// The image's own accounts: the node, observer and app users.
		env := natsconf.LocalPasswords.Env()
		if creds != nil {
			env["NATS_CALLOUT_ISSUER_SEED_FILE"] = "/etc/nats/callout/" + natsauth.IssuerSeedFile
			env["NATS_CALLOUT_USER_SEED_FILE"] = "/etc/nats/callout/" + natsauth.UserSeedFile
			env["NATS_CALLOUT_AUTHORITIES_DIR"] = "/etc/nats/callout/authorities"
		}
		req := d.request(d.images["nats"], name, env, []string{
			"--name=" + name, "--routes=" + strings.Join(routes, ","),
		}, "4222/tcp")
		req.WaitingFor = wait.ForExec([]string{"/healthcheck", "http://127.0.0.1:8222/healthz"}).WithStartupTimeout(60 * time.Second)
		if creds != nil {
			req.Files = []testcontainers.ContainerFile{
				creds.file("accounts.conf", "/etc/nats/accounts.conf", 0o644),
				creds.file("callout/"+natsauth.IssuerSeedFile, "/etc/nats/callout/"+natsauth.IssuerSeedFile, 0o600),
				creds.file("callout/"+natsauth.UserSeedFile, "/etc/nats/callout/"+natsauth.UserSeedFile, 0o600),
				creds.file("fleet.authority", "/etc/nats/callout/authorities/fleet.authority", 0o644),
			}
		}
		reqs = append(reqs, req)
	}
	d.nats = d.startAll(reqs)
	obsEnv := map[string]string{
		"NATS_URL":                 natsURLs(),
		"NATS_USER":                natsconf.ObserverUser,
		"NATS_PASSWORD":            natsconf.LocalPasswords.Observer,
		"OBSERVER_DATA":            "/data",
		"OBSERVER_STREAM_REPLICAS": "3",
		"HTTP_ADDR":                ":8080",
	}
	obs := d.request(d.images["observer"], "observer", obsEnv, nil, "8080/tcp")
	if creds != nil {
		obsEnv["OBSERVER_KEYS_DIR"] = "/run/baton/keys"
		obs.Files = []testcontainers.ContainerFile{creds.file("fleet.authority", "/run/baton/keys/fleet.authority", 0o644)}
	}
	d.observer = d.startAll([]testcontainers.GenericContainerRequest{obs})[0]

	host, err := d.nats[0].Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port, err := d.nats[0].MappedPort(ctx, "4222/tcp")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(fmt.Sprintf("nats://%s:%s", host, port.Port()), nats.UserInfo(natsconf.AppUser, natsconf.LocalPasswords.App))
	if err != nil {
		t.Fatalf("connect as the app user: %v", err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe(protocol.LeaderSubject(fleetCluster), func(m *nats.Msg) {
		a, err := signing.ReadAnnouncement(nil, fleetCluster, m.Data, m.Header)
		f.mu.Lock()
		defer f.mu.Unlock()
		if err != nil {
			f.annErr = errors.Join(f.annErr, err)
			return
		}
		f.announcements = append(f.announcements, a)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			d.logsOf(d.observer, 40)
		}
	})
	return f
}

// start starts one replica per hostname, at once, with the same
// environment: nothing in it is a replica's own.
func (f *fleetDeployment) start(hosts ...string) {
	f.t.Helper()
	env := map[string]string{
		"NATS_URL":            natsURLs(),
		"NATS_USER":           natsconf.NodeUser,
		"NATS_PASSWORD":       natsconf.LocalPasswords.Node,
		"FLEET_WORK_INTERVAL": "100ms",
	}
	if f.creds != nil {
		// As in Compose: no NATS user, a credential of its own.
		delete(env, "NATS_USER")
		delete(env, "NATS_PASSWORD")
		env["FLEET_ISSUER_SEED_FILE"] = "/run/baton/authority.seed"
	}
	var reqs []testcontainers.GenericContainerRequest
	for _, h := range hosts {
		req := f.request(f.image, h, env, nil, "8080/tcp")
		req.ConfigModifier = func(c *container.Config) { c.Hostname = h }
		if f.creds != nil {
			req.Files = []testcontainers.ContainerFile{f.creds.file("authority.seed", "/run/baton/authority.seed", 0o600)}
		}
		reqs = append(reqs, req)
	}
	started := f.startAll(reqs)
	for i, c := range started {
		id := fleetID(hosts[i])
		f.running[id] = &fleetReplica{host: hosts[i], id: id, c: c}
		f.joined = append(f.joined, id)
	}
	// What they logged, if the test fails (before their removal).
	f.t.Cleanup(func() {
		if f.t.Failed() {
			for _, c := range started {
				f.logsOf(c, 40)
			}
		}
	})
}

// ids are the IDs of the running replicas, sorted.
func (f *fleetDeployment) ids() []uint64 { return slices.Sorted(maps.Keys(f.running)) }

// leader is the running replica with the highest ID.
func (f *fleetDeployment) leader() *fleetReplica { return f.running[slices.Max(f.ids())] }

// kill kills a replica with SIGKILL: its connection closes without a word.
func (f *fleetDeployment) kill(r *fleetReplica) {
	f.t.Helper()
	f.deployment.kill(r.c)
	delete(f.running, r.id)
	f.left[r.id] = "disconnected"
}

// terminate stops replicas with SIGTERM (docker stop, as Compose does
// when it scales in), at once: each must resign and exit with status 0
// within 2 s.
func (f *fleetDeployment) terminate(rs ...*fleetReplica) {
	f.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(rs))
	for i, r := range rs {
		wg.Go(func() {
			start := time.Now()
			timeout := 5 * time.Second
			if err := r.c.Stop(context.Background(), &timeout); err != nil {
				errs[i] = fmt.Errorf("docker stop %s: %w", r.host, err)
				return
			}
			took := time.Since(start)
			st, err := r.c.State(context.Background())
			switch {
			case err != nil:
				errs[i] = err
			case st.ExitCode != 0:
				errs[i] = fmt.Errorf("replica %d (%s) exited with status %d on SIGTERM, want 0", r.id, r.host, st.ExitCode)
			case took > 3*time.Second: // 2 s, and the time docker takes to stop a container
				errs[i] = fmt.Errorf("replica %d (%s) took %v to stop on SIGTERM, want 2 s at most", r.id, r.host, took)
			}
			f.t.Logf("replica %d (%s) stopped by SIGTERM in %v", r.id, r.host, took.Round(time.Millisecond))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.t.Fatal(err)
	}
	for _, r := range rs {
		delete(f.running, r.id)
		f.left[r.id] = "resign"
	}
}

// fleetStatus is a replica's /status with its members.
type fleetStatus struct {
	status
	Members []uint64 `json:"members"`
}

// observedMember is one of the observer's …/members.
type observedMember struct {
	ID uint64 `json:"id"`
}

// memberEvent is one of the observer's …/membership.
type memberEvent struct {
	Member uint64 `json:"member"`
	Event  string `json:"event"`
	Reason string `json:"reason"`
	At     string `json:"at"`
}

// observerJSON reads one of the observer's answers about the fleet.
func (f *fleetDeployment) observerJSON(path string, v any) error {
	u, err := f.url(f.observer, "/api/clusters/"+fleetCluster+path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return getJSON(ctx, u, v)
}

// settle waits until the fleet has settled after step: every running
// replica says its ID is the one its hostname gives, sees exactly the
// running replicas as members and agrees with the others on the highest
// of them as leader, in one term above after; the observer lists the
// same members, and has recorded how each replica joined and left. It
// returns the term.
func (f *fleetDeployment) settle(step string, after uint64) uint64 {
	f.t.Helper()
	start := time.Now()
	want := f.ids()
	top := slices.Max(want)
	var term uint64
	f.waitFor(converge, step+": the fleet agrees", func() error {
		term = 0
		for _, id := range want {
			r := f.running[id]
			u, err := f.url(r.c, "/status")
			if err != nil {
				return err
			}
			var s fleetStatus
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = getJSON(ctx, u, &s)
			cancel()
			switch {
			case err != nil:
				return fmt.Errorf("replica %d: %v", id, err)
			case s.ID != id:
				f.t.Fatalf("replica %s says it is %d; its hostname gives %d", r.host, s.ID, id)
			case !slices.Equal(s.Members, want):
				return fmt.Errorf("replica %d sees members %v, want %v", id, s.Members, want)
			case s.Leader == nil || *s.Leader != top || s.Term <= after:
				return fmt.Errorf("replica %d: leader %v term %d state %s, want leader %d above term %d", id, deref(s.Leader), s.Term, s.State, top, after)
			case term != 0 && s.Term != term:
				return fmt.Errorf("replica %d has term %d, another %d", id, s.Term, term)
			case (s.State == "leader") != (id == top):
				return fmt.Errorf("replica %d in state %s", id, s.State)
			}
			term = s.Term
		}
		var ms []observedMember
		if err := f.observerJSON("/members", &ms); err != nil {
			return fmt.Errorf("observer's members: %v", err)
		}
		var seen []uint64
		for _, m := range ms {
			seen = append(seen, m.ID)
		}
		if !slices.Equal(seen, want) {
			return fmt.Errorf("observer lists members %v, want %v", seen, want)
		}
		return f.checkMembership()
	})
	f.t.Logf("%s: %d replicas %v agreed on leader %d, term %d, in %v", step, len(want), want, top, term, time.Since(start).Round(time.Millisecond))
	return term
}

// checkMembership checks the observer's record of joins and departures:
// each replica started joined once (on its presence) and, if it is gone,
// left once, after joining, for the reason its end gives (resign on
// SIGTERM, disconnected when killed); nothing else.
func (f *fleetDeployment) checkMembership() error {
	var events []memberEvent
	if err := f.observerJSON("/membership", &events); err != nil {
		return fmt.Errorf("observer's membership: %v", err)
	}
	byMember := map[uint64][]memberEvent{}
	for _, e := range events {
		byMember[e.Member] = append(byMember[e.Member], e)
	}
	for _, id := range f.joined {
		got := byMember[id]
		delete(byMember, id)
		want := []memberEvent{{Member: id, Event: "joined", Reason: "presence"}}
		if reason, gone := f.left[id]; gone {
			want = append(want, memberEvent{Member: id, Event: "left", Reason: reason})
		}
		if len(got) > len(want) {
			f.t.Fatalf("observer recorded %+v for replica %d, want %+v", got, id, want)
		}
		for i := range got {
			if got[i].Event != want[i].Event || got[i].Reason != want[i].Reason {
				f.t.Fatalf("observer recorded %+v for replica %d, want %+v", got, id, want)
			}
		}
		if len(got) < len(want) {
			return fmt.Errorf("observer recorded %+v for replica %d, want %+v", got, id, want)
		}
	}
	if len(byMember) > 0 {
		f.t.Fatalf("observer recorded members that never ran: %+v", byMember)
	}
	return nil
}

// checkAnnouncements checks every announcement received so far: each
// term above the one before, in the order they arrived (so no two
// leaders share a term), and that the leaderships the fleet settled on
// were announced.
func (f *fleetDeployment) checkAnnouncements(settled map[uint64]uint64) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.annErr != nil {
		f.t.Errorf("unreadable announcements: %v", f.annErr)
	}
	leaders := map[uint64]uint64{}
	for i, a := range f.announcements {
		if i > 0 && a.Term <= f.announcements[i-1].Term {
			f.t.Errorf("announcement of %d at term %d follows %d at term %d: terms must increase", a.Leader, a.Term, f.announcements[i-1].Leader, f.announcements[i-1].Term)
		}
		if l, ok := leaders[a.Term]; ok && l != a.Leader {
			f.t.Errorf("term %d announced by %d and by %d", a.Term, l, a.Leader)
		}
		leaders[a.Term] = a.Leader
	}
	for term, leader := range settled {
		if leaders[term] != leader {
			f.t.Errorf("the fleet settled on leader %d at term %d, never announced", leader, term)
		}
	}
	f.t.Logf("%d announcements, terms increasing", len(f.announcements))
}

// TestFleet scales the fleet 3 → 7 → 2 while it elects: replicas with
// hostnames that differ start at once, leaders are killed twice (SIGKILL)
// and stopped once (SIGTERM), and the fleet scales in with SIGTERM, as
// Compose does. After each step the replicas agree on the highest ID
// present, each sees exactly the replicas running, and the observer lists
// them and records every join and departure with its reason. Every
// announcement has a term above the one before.
func TestFleet(t *testing.T) {
	// Their IDs: 12908, 52243, 52354, then 55113, 54696, 55919, 56030, so
	// that the replicas that join take over.
	hosts := []string{"replica-1", "replica-2", "replica-3", "replica-4", "replica-5", "replica-6", "replica-7"}
	ids := map[uint64]string{}
	for _, h := range hosts {
		if other, ok := ids[fleetID(h)]; ok {
			t.Fatalf("hostnames %s and %s share the member ID %d: pick others", other, h, fleetID(h))
		}
		ids[fleetID(h)] = h
	}
	f := deployFleet(t)
	began := time.Now()
	settled := map[uint64]uint64{} // term → leader
	record := func(term uint64) { settled[term] = f.leader().id }

	f.start(hosts[:3]...)
	term := f.settle("3 replicas", 0)
	record(term)

	f.start(hosts[3:]...)
	term = f.settle("scaled out to 7", term)
	record(term)

	for i := 1; i <= 2; i++ {
		leader := f.leader()
		f.kill(leader)
		term = f.settle(fmt.Sprintf("leader %d killed (%d)", leader.id, i), term)
		record(term)
	}

	leader := f.leader()
	f.terminate(leader)
	term = f.settle(fmt.Sprintf("leader %d stopped by SIGTERM", leader.id), term)
	record(term)

	// Scale in to 2: two followers stop at once, with SIGTERM.
	var followers []*fleetReplica
	for _, id := range f.ids()[:len(f.running)-2] {
		followers = append(followers, f.running[id])
	}
	f.terminate(followers...)
	term = f.settle("scaled in to 2", term-1)
	record(term)

	// Only the leader works.
	top := f.leader()
	f.waitFor(converge, "the leader works, its follower does not", func() error {
		for _, r := range f.running {
			u, err := f.url(r.c, "/work")
			if err != nil {
				return err
			}
			var w struct {
				Leading bool   `json:"leading"`
				Term    uint64 `json:"term"`
				Done    uint64 `json:"done"`
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = getJSON(ctx, u, &w)
			cancel()
			if err != nil {
				return err
			}
			if r == top && (!w.Leading || w.Term != term || w.Done == 0) {
				return fmt.Errorf("leader %d's work: %+v", r.id, w)
			}
			if r != top && w.Leading {
				t.Fatalf("follower %d works: %+v", r.id, w)
			}
		}
		return nil
	})

	f.checkAnnouncements(settled)
	h := f.checkHistory(fleetCluster)
	if last := h[len(h)-1]; last.Leader != top.id || last.Term != term {
		t.Errorf("observer's last leadership %+v, want leader %d at term %d", last, top.id, term)
	}
	t.Logf("fleet scaled 3 → 7 → 2 with two leaders killed and one stopped in %v", time.Since(began).Round(time.Millisecond))
}

// TestFleetCredentials runs the fleet as Compose does: the replicas
// connect with the credentials they issue themselves to NATS servers that
// check them (cmd/natsd). They elect; a killed leader is replaced and
// recorded by the observer as disconnected, from the server's connection
// event, which names it only because its connection is its own; and a
// fleet credential is refused another cluster's subjects.
func TestFleetCredentials(t *testing.T) {
	hosts := []string{"replica-1", "replica-2", "replica-3"}
	f := deployFleetWith(t, makeFleetCredentials(t))
	f.start(hosts...)
	term := f.settle("3 replicas with credentials", 0)
	leader := f.leader()
	f.kill(leader)
	f.settle(fmt.Sprintf("leader %d killed", leader.id), term)

	// A client with a credential of the fleet, from the host.
	ctx := context.Background()
	host, err := f.nats[0].Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port, err := f.nats[0].MappedPort(ctx, "4222/tcp")
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	public, _ := user.PublicKey()
	token, err := membercreds.Issue(f.creds.authority, fleetCluster, 77, public, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	violations := make(chan error, 4)
	nc, err := nats.Connect(fmt.Sprintf("nats://%s:%s", host, port.Port()), append(membercreds.NATSOptions(token, user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))...)
	if err != nil {
		t.Fatalf("a fleet credential: %v", err)
	}
	defer nc.Close()
	if err := nc.Publish("election.bully.leader", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !strings.Contains(err.Error(), `Permissions Violation for Publish to "election.bully.leader"`) {
			t.Errorf("publish on another cluster's subject: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a fleet credential published on election.bully.leader unrefused")
	}
	// Without its seed, the credential is refused.
	thief, _ := nkeys.CreateUser()
	if nc, err := nats.Connect(fmt.Sprintf("nats://%s:%s", host, port.Port()), membercreds.NATSOptions(token, thief)...); err == nil {
		nc.Close()
		t.Error("a credential presented without its seed was admitted")
	}
}
