// The Go test of baton_verify.py, the Python reader of docs/protocol.md:
// it runs the verifier against real nodes on an embedded NATS server
// configured as the deployment, and checks that it believes the genuine
// announcements and refuses the tampered ones.
package python

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stream is the observer's stream (OBSERVER_STREAM's default).
const stream = "ELECTION_LEADERS"

// wait bounds every wait of the test for an event.
const wait = time.Minute

// pythonWithNaCl returns a python3 that imports nacl (PyNaCl, Debian's
// python3-nacl): $BATON_PYTHON, python3 on the PATH, or /usr/bin/python3.
// Without one the test is skipped, unless CI_PYTHON_REQUIRED=1.
func pythonWithNaCl(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, candidate := range []string{os.Getenv("BATON_PYTHON"), "python3", "/usr/bin/python3"} {
		if candidate == "" {
			continue
		}
		path, err := exec.LookPath(candidate)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", candidate, err))
			continue
		}
		out, err := exec.Command(path, "-c", "import nacl.signing").CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, fmt.Sprintf("%s: %v: %s", path, err, strings.TrimSpace(string(out))))
	}
	msg := "no python3 with PyNaCl (apt-get install python3-nacl): " + strings.Join(tried, "; ")
	if os.Getenv("CI_PYTHON_REQUIRED") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// cluster is one election cluster of the test, with its members file as
// an application holds it: the public keys and the statements of the
// cluster's name and algorithm.
type cluster struct {
	name      string
	algorithm protocol.Algorithm
	ids       []uint64
	signers   map[uint64]*protocol.Signer
	keys      *protocol.MemberKeys
	keysFile  string
}

func newCluster(t *testing.T, name string, algorithm protocol.Algorithm, ids ...uint64) *cluster {
	t.Helper()
	signers, keys := batontest.MemberKeys(t, ids...)
	keys, err := keys.State(name, algorithm)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# the members of " + name + "\n" + keys.Statements())
	for _, id := range keys.IDs() {
		public, _ := keys.PublicKey(id)
		fmt.Fprintf(&b, "%d %s\n", id, public)
	}
	file := filepath.Join(t.TempDir(), "members.keys")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return &cluster{name: name, algorithm: algorithm, ids: ids, signers: signers, keys: keys, keysFile: file}
}

// startServer runs an embedded NATS server as the local run does
// (natsconf: the deployment's accounts and users, a user per member key,
// JetStream) and creates the observer's stream on it.
func startServer(t *testing.T, clusters ...*cluster) string {
	t.Helper()
	members := map[string]*protocol.MemberKeys{}
	for _, c := range clusters {
		members[c.name] = c.keys
	}
	dir := t.TempDir()
	o, err := natsconf.OptionsWithMembers(dir, "127.0.0.1", -1, filepath.Join(dir, "jetstream"), natsconf.LocalPasswords, members)
	if err != nil {
		t.Fatal(err)
	}
	o.NoLog, o.NoSigs = true, true
	s, err := natsconf.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsconf.Stop(s) })
	url := s.ClientURL()

	// The observer's stream, as services/observer creates it.
	js, err := jetstream.New(batontest.Connect(t, url, nats.UserInfo(natsconf.ObserverUser, natsconf.LocalPasswords.Observer)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{protocol.AllLeaders}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	return url
}

// start runs c's nodes in this process, each connected as the NATS user
// of its member key, as services/node connects.
func (c *cluster) start(t *testing.T, url string) {
	t.Helper()
	timing := election.DefaultTiming(len(c.ids))
	if c.algorithm.Leases() {
		timing = election.DefaultLeaseTiming(len(c.ids))
	}
	for _, id := range c.ids {
		nc := batontest.Connect(t, url, append(batontest.AsMember(c.name, c.signers[id]),
			nats.CustomInboxPrefix(protocol.InboxPrefix(c.name, id)))...)
		n, err := node.New(nc, node.Config{
			Cluster:   c.name,
			Algorithm: c.algorithm,
			Election:  election.Config{ID: id, Members: c.ids, Timing: timing},
			DataDir:   t.TempDir(),
			Logger:    slog.New(slog.DiscardHandler),
			Signer:    c.signers[id],
			Keys:      c.keys,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
}

// elected waits until the highest ID leads c, as both the query and the
// stream say, and returns that announcement as the stream keeps it.
func (c *cluster) elected(t *testing.T, app *nats.Conn) (protocol.Announcement, *jetstream.RawStreamMsg) {
	t.Helper()
	highest := c.ids[len(c.ids)-1]
	var a protocol.Announcement
	batontest.CheckFor(t, wait, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		current, err := leader.Current(ctx, app, c.name, leader.WithKeys(c.keys), leader.WithoutStream())
		if err != nil {
			return err
		}
		last, err := leader.LastAnnounced(ctx, app, c.name, leader.WithKeys(c.keys))
		if err != nil {
			return err
		}
		if current.Leader != highest || current.Term != last.Term || last.Leader != highest {
			return fmt.Errorf("query: leader %d term %d, stream: leader %d term %d; want leader %d in both",
				current.Leader, current.Term, last.Leader, last.Term, highest)
		}
		a = current
		return nil
	})
	js, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(ctx, protocol.LeaderSubject(c.name))
	if err != nil {
		t.Fatal(err)
	}
	return a, msg
}

// verdict is one line of the verifier's output.
type verdict struct {
	Event     string `json:"event"`
	Source    string `json:"source"`
	Verdict   string `json:"verdict"`
	Reason    string `json:"reason"`
	Leader    uint64 `json:"leader"`
	Term      uint64 `json:"term"`
	Algorithm string `json:"algorithm"`
	SHA256    string `json:"sha256"`
}

// verifier runs baton_verify.py for c, as the application user.
type verifier struct {
	python, script, url string
	c                   *cluster
	app                 *nats.Conn // the Go reader's connection
}

func (v verifier) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, v.python, append([]string{v.script,
		"--server", v.url, "--user", natsconf.AppUser, "--password", natsconf.LocalPasswords.App,
		"--keys", v.c.keysFile, "--timeout", "30"}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// once runs a mode that reads one announcement (query, last) and returns
// its verdict and the verifier's exit status.
func (v verifier) once(t *testing.T, mode string) (verdict, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := v.command(ctx, mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	status := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		status = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", mode, err)
	}
	var got verdict
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: exit %d, output %q, stderr %q: %v", mode, status, out, stderr.String(), err)
	}
	return got, status
}

// watch starts the verifier on the leader subject and returns its
// verdicts as they come, once it has subscribed. The verifier runs until
// the test ends; the channel is closed when it has exited.
func (v verifier) watch(t *testing.T) <-chan verdict {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := v.command(ctx, "watch")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan verdict, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var got verdict
			if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
				got = verdict{Verdict: "unreadable", Reason: sc.Text()}
			}
			select {
			case lines <- got:
			case <-ctx.Done():
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("watch stderr: %s", stderr.String())
		}
	})
	select {
	case first, ok := <-lines:
		if !ok || first.Event != "subscribed" {
			t.Fatalf("watch: first line %+v (open %v), want the subscribed event; stderr %q", first, ok, stderr.String())
		}
	case <-time.After(wait):
		t.Fatal("watch: not subscribed in time")
	}
	return lines
}

// sample is one message published on a cluster's leader subject, and
// what the verifier must make of it.
type sample struct {
	name    string
	payload []byte
	header  nats.Header
	want    string // "verified" or "refused"
}

// publish puts each sample on c's leader subject, each stored by the
// stream before the next, and checks the watching verifier's verdict on
// it. Verdicts on other payloads (the nodes' own announcements, should
// the cluster elect again meanwhile) are passed over.
func publish(t *testing.T, url string, c *cluster, lines <-chan verdict, samples []sample) {
	t.Helper()
	// The node user may publish on every election subject: here it plays
	// a member that publishes what it likes under its own key.
	js, err := jetstream.New(batontest.Connect(t, url, nats.UserInfo(natsconf.NodeUser, natsconf.LocalPasswords.Node)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: protocol.LeaderSubject(c.name), Data: s.payload, Header: s.header})
		cancel()
		if err != nil {
			t.Fatalf("%s: publish: %v", s.name, err)
		}
		sum := sha256.Sum256(s.payload)
		digest := hex.EncodeToString(sum[:])
		deadline := time.After(wait)
		for judged := false; !judged; {
			select {
			case got, ok := <-lines:
				switch {
				case !ok:
					t.Fatalf("%s: the verifier exited", s.name)
				case got.SHA256 != digest:
					t.Logf("%s: passed over the verdict on another announcement: %+v", s.name, got)
				case got.Verdict != s.want:
					t.Errorf("%s: verdict %q (%s), want %q; payload %s", s.name, got.Verdict, got.Reason, s.want, s.payload)
					judged = true
				default:
					t.Logf("%s: %s %s", s.name, got.Verdict, got.Reason)
					judged = true
				}
			case <-deadline:
				t.Fatalf("%s: no verdict in time", s.name)
			}
		}
	}
}

// edit returns the announcement data with fields set (nil deletes one).
func edit(t *testing.T, data []byte, fields map[string]any) []byte {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// signed is data with the signature of member id over c's leader subject.
func (c *cluster) signed(name string, id uint64, data []byte, want string) sample {
	return sample{name: name, payload: data, header: c.signers[id].SignAnnouncement(c.name, data), want: want}
}

// liar is an announcement by member id of itself as leader at term 2^62
// under algorithm, without a certificate, signed with its own key.
func (c *cluster) liar(t *testing.T, id uint64, algorithm string) sample {
	t.Helper()
	data, err := json.Marshal(map[string]any{"cluster": c.name, "leader": id, "term": protocol.MaxTerm,
		"algorithm": algorithm, "at": time.Now().UTC().Format(protocol.TimeFormat)})
	if err != nil {
		t.Fatal(err)
	}
	return c.signed(fmt.Sprintf("member %d claims term 2^62 as %q", id, algorithm), id, data, "refused")
}

func TestVerifierSignedBully(t *testing.T) {
	python := pythonWithNaCl(t)
	c := newCluster(t, "signed", protocol.Bully, 1, 2, 3)
	url := startServer(t, c)
	c.start(t, url)
	app := batontest.Connect(t, url, nats.UserInfo(natsconf.AppUser, natsconf.LocalPasswords.App))
	a, genuine := c.elected(t, app)
	v := verifier{python: python, script: "baton_verify.py", url: url, c: c, app: app}

	c.believes(t, v, "query", "last")

	other := c.ids[0] // a member that does not lead
	lines := v.watch(t)
	publish(t, url, c, lines, []sample{
		{"the genuine announcement again", genuine.Data, genuine.Header, "verified"},
		{"its term changed", edit(t, genuine.Data, map[string]any{"term": a.Term + 3}), genuine.Header, "refused"},
		{"unsigned", genuine.Data, nil, "refused"},
		c.signed("signed by a member that does not lead", other, genuine.Data, "refused"),
		{"signed over another cluster's leader subject", genuine.Data, c.signers[a.Leader].SignAnnouncement("other", genuine.Data), "refused"},
		c.signed("the leader claims paxos", a.Leader, edit(t, genuine.Data, map[string]any{"algorithm": "paxos"}), "refused"),
		c.signed("another cluster named", a.Leader, edit(t, genuine.Data, map[string]any{"cluster": "other"}), "refused"),
		c.liar(t, other, "raft"),
		c.liar(t, other, "paxos"),
		{"the genuine announcement at last", genuine.Data, genuine.Header, "verified"},
	})
	c.believes(t, v, "last")
}

func TestVerifierByzantine(t *testing.T) {
	python := pythonWithNaCl(t)
	c := newCluster(t, "byz", protocol.Byzantine, 1, 2, 3, 4)
	url := startServer(t, c)
	c.start(t, url)
	app := batontest.Connect(t, url, nats.UserInfo(natsconf.AppUser, natsconf.LocalPasswords.App))
	a, genuine := c.elected(t, app)
	if a.Certificate == nil {
		t.Fatalf("the byzantine leader announced no certificate: %+v", a)
	}
	v := verifier{python: python, script: "baton_verify.py", url: url, c: c, app: app}

	c.believes(t, v, "query", "last")

	// The certificate with its votes edited.
	var cert map[string]any
	dec := json.NewDecoder(strings.NewReader(string(mustJSON(t, a.Certificate))))
	dec.UseNumber()
	if err := dec.Decode(&cert); err != nil {
		t.Fatal(err)
	}
	votes := cert["votes"].([]any)
	short := map[string]any{"cluster": cert["cluster"], "term": cert["term"], "leader": cert["leader"], "votes": votes[:len(votes)-1]}
	forgedVote := map[string]any{"member": votes[0].(map[string]any)["member"], "signature": strings.Repeat("A", 86) + "=="}
	forged := map[string]any{"cluster": cert["cluster"], "term": cert["term"], "leader": cert["leader"],
		"votes": append([]any{forgedVote}, votes[1:]...)}
	liar := c.ids[0]

	lines := v.watch(t)
	publish(t, url, c, lines, []sample{
		{"the genuine announcement again", genuine.Data, genuine.Header, "verified"},
		{"its term changed", edit(t, genuine.Data, map[string]any{"term": a.Term + 4}), genuine.Header, "refused"},
		c.signed("the leader without its certificate", a.Leader, edit(t, genuine.Data, map[string]any{"certificate": nil}), "refused"),
		c.signed("the leader claims paxos without a certificate", a.Leader,
			edit(t, genuine.Data, map[string]any{"certificate": nil, "algorithm": "paxos"}), "refused"),
		c.signed("a certificate short of a quorum", a.Leader, edit(t, genuine.Data, map[string]any{"certificate": short}), "refused"),
		c.signed("a certificate with a forged vote", a.Leader, edit(t, genuine.Data, map[string]any{"certificate": forged}), "refused"),
		c.signed("a member with the leader's certificate", liar, edit(t, genuine.Data, map[string]any{"leader": liar}), "refused"),
		c.liar(t, liar, ""),
		c.liar(t, liar, "raft"),
		c.liar(t, liar, "bully"),
		c.liar(t, liar, "byzantine"),
		c.liar(t, liar, "paxos"), // the downgrade, last in the stream
	})
	// The stream's last announcement is now the downgrade: refused.
	if got, status := v.once(t, "last"); got.Verdict != "refused" || status != 1 {
		t.Errorf("last after the downgrade: %+v, exit %d; want refused, exit 1", got, status)
	}
	// The query is answered by the leader itself: still believed.
	c.believes(t, v, "query")

	// The stream's direct get is not enabled: nobody answers it
	// (docs/protocol.md).
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := app.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, []byte(`{"last_by_subj":"`+protocol.LeaderSubject(c.name)+`"}`))
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("DIRECT.GET: %v, want no responders", err)
	}
}

// believes checks that the verifier, in each of modes, believes the
// leader the Go reader believes now (leader.Current and
// leader.LastAnnounced with the members' keys).
func (c *cluster) believes(t *testing.T, v verifier, modes ...string) {
	t.Helper()
	for _, mode := range modes {
		got, status := v.once(t, mode)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		var want protocol.Announcement
		var err error
		if mode == "query" {
			want, err = leader.Current(ctx, v.app, c.name, leader.WithKeys(c.keys), leader.WithoutStream())
		} else {
			want, err = leader.LastAnnounced(ctx, v.app, c.name, leader.WithKeys(c.keys))
		}
		cancel()
		if err != nil {
			t.Fatalf("%s: the Go reader: %v", mode, err)
		}
		// A new election between the two reads moves the term up.
		if got.Verdict != "verified" || status != 0 || got.Algorithm != string(c.algorithm) || got.Term > want.Term ||
			got.Term == want.Term && got.Leader != want.Leader {
			t.Errorf("%s: %+v, exit %d; want verified %s leader %d term %d (or an earlier one), exit 0",
				mode, got, status, c.algorithm, want.Leader, want.Term)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
