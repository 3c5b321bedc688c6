// The Go test of baton_verify.py, the Python reader of docs/protocol.md:
// it runs the verifier against real nodes on an embedded NATS server
// configured as the deployment, and checks that it believes the genuine
// announcements and refuses the tampered ones.
package python

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
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
	signers   map[uint64]*signing.Signer
	keys      *signing.MemberKeys
	keysFile  string
	// reader is how the verifier is told the cluster's keys: --keys and
	// the members file, or --authority and the reader's configuration.
	reader []string

	// With member credentials (newCredentialCluster): the authority, and
	// each member's user key, credential and creds file.
	authority  nkeys.KeyPair
	users      map[uint64]nkeys.KeyPair
	tokens     map[uint64]string
	credsFiles map[uint64]string
	// nodes are the services/node processes of run, if it ran them.
	nodes []*process
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
	return &cluster{name: name, algorithm: algorithm, ids: ids, signers: signers, keys: keys, keysFile: file,
		reader: []string{"--keys", file}}
}

// startServer runs an embedded NATS server as the local run does
// (natsconf: the deployment's accounts and users, a user per member key,
// JetStream) and creates the observer's stream on it.
func startServer(t *testing.T, clusters ...*cluster) string {
	t.Helper()
	members := map[string]*signing.MemberKeys{}
	for _, c := range clusters {
		if !c.keys.Authority() { // member credentials list no member user
			members[c.name] = c.keys
		}
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
		n, err := natsnode.New(nc, natsnode.Config{
			Node: node.Config{
				Cluster:   c.name,
				Algorithm: c.algorithm,
				Election:  election.Config{ID: id, Members: c.ids, Timing: timing},
				DataDir:   t.TempDir(),
				Logger:    slog.New(slog.DiscardHandler),
			},
			Signer: c.signers[id],
			Keys:   c.keys,
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
		running(t, c.nodes)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		current, err := leader.Current(ctx, app, c.name, c.readWith(leader.WithoutStream())...)
		if err != nil {
			return err
		}
		last, err := leader.LastAnnounced(ctx, app, c.name, c.readWith()...)
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
	reader              []string   // in place of c.reader, if set
}

func (v verifier) command(ctx context.Context, args ...string) *exec.Cmd {
	reader := v.reader
	if reader == nil {
		reader = v.c.reader
	}
	cmd := exec.CommandContext(ctx, v.python, slices.Concat([]string{v.script,
		"--server", v.url, "--user", natsconf.AppUser, "--password", natsconf.LocalPasswords.App},
		reader, []string{"--timeout", "30"}, args)...)
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

// readWith are the options of the Go reader of c (pkg/leader): its keys
// and its algorithm, with opts.
func (c *cluster) readWith(opts ...leader.Option) []leader.Option {
	return append([]leader.Option{leader.WithKeys(c.keys), leader.WithAlgorithm(c.algorithm)}, opts...)
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
			want, err = leader.Current(ctx, v.app, c.name, c.readWith(leader.WithoutStream())...)
		} else {
			want, err = leader.LastAnnounced(ctx, v.app, c.name, c.readWith()...)
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

// newCredentialCluster is a cluster of member credentials (dynamic
// membership): no members file, an authority (a NATS account key) that
// issues each member its credential (membercreds.Issue, written as its
// creds file with membercreds.WriteCreds, as go run ./cmd/keys -issue
// does), and readers that hold the authority's public key alone.
func newCredentialCluster(t *testing.T, name string, algorithm protocol.Algorithm, ids ...uint64) *cluster {
	t.Helper()
	authority := accountKey(t)
	public, err := authority.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	checker, err := membercreds.NewChecker(name, public)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{name: name, algorithm: algorithm, ids: ids, keys: checker.Keys(), authority: authority,
		signers: map[uint64]*signing.Signer{}, users: map[uint64]nkeys.KeyPair{},
		tokens: map[uint64]string{}, credsFiles: map[uint64]string{},
		reader: []string{"--authority", public, "--cluster", name, "--algorithm", string(algorithm)}}
	dir := t.TempDir()
	for _, id := range ids {
		user, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		userPublic, err := user.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		seed, err := user.Seed()
		if err != nil {
			t.Fatal(err)
		}
		token, err := membercreds.Issue(authority, name, id, userPublic, 0)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+"-"+membercreds.CredsFile(id))
		if err := membercreds.WriteCreds(path, token, seed); err != nil {
			t.Fatal(err)
		}
		c.users[id], c.tokens[id], c.credsFiles[id] = user, token, path
		c.signers[id] = credentialed(t, id, user, token)
	}
	return c
}

// accountKey is a new NATS account key pair, as an authority's.
func accountKey(t *testing.T) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// credentialed is the signer of member id with the user key user, which
// adds token to what it signs (the Election-Credential header).
func credentialed(t *testing.T, id uint64, user nkeys.KeyPair, token string) *signing.Signer {
	t.Helper()
	s, err := signing.NewSigner(id, user)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = s.WithCredential(token); err != nil {
		t.Fatal(err)
	}
	return s
}

// reissued is token with its claims changed by edit, signed by issuer.
func reissued(t *testing.T, token string, issuer nkeys.KeyPair, edit func(*jwt.UserClaims)) string {
	t.Helper()
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	edit(claims)
	out, err := claims.Encode(issuer)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tampered is token with its claims changed by edit and its header and
// signature kept: a JWT whose signature no longer holds.
func tampered(t *testing.T, token string, edit func(map[string]any)) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	data, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		t.Fatal(err)
	}
	edit(claims)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(mustJSON(t, claims)) + "." + parts[2]
}

// process is a services/node process.
type process struct {
	id     uint64
	exited chan struct{} // closed once it has exited; err and log are then set
	err    error
	log    bytes.Buffer
}

// run starts c's nodes as services/node processes (binary), configured as
// a deployment of member credentials: ELECTION_MEMBERSHIP=dynamic, their
// creds files (ELECTION_CREDS_FILE) and the authority (ELECTION_AUTHORITY).
// They connect as the shared node user: the embedded server, like
// Compose's, is not in operator mode, and only the readers check the
// credentials. Each is stopped (SIGTERM) when the test ends, and must exit
// with status 0.
func (c *cluster) run(t *testing.T, url, binary string) {
	t.Helper()
	authority, err := c.authority.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.ids {
		n := &process{id: id, exited: make(chan struct{})}
		cmd := exec.Command(binary)
		cmd.Env = []string{
			"NATS_URL=" + url, "NATS_USER=" + natsconf.NodeUser, "NATS_PASSWORD=" + natsconf.LocalPasswords.Node,
			"NODE_ID=" + strconv.FormatUint(id, 10),
			"ELECTION_CLUSTER=" + c.name,
			"ELECTION_ALGORITHM=" + string(c.algorithm),
			"ELECTION_MEMBERSHIP=dynamic",
			"ELECTION_CREDS_FILE=" + c.credsFiles[id],
			"ELECTION_AUTHORITY=" + authority,
			"ELECTION_DATA=" + t.TempDir(),
			"HTTP_ADDR=127.0.0.1:0",
		}
		cmd.Stdout, cmd.Stderr = &n.log, &n.log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			n.err = cmd.Wait()
			close(n.exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.exited:
				if n.err != nil {
					t.Errorf("node %d after SIGTERM: %v, want exit status 0", id, n.err)
				}
			case <-time.After(wait):
				_ = cmd.Process.Kill()
				<-n.exited
				t.Errorf("node %d did not exit after SIGTERM", id)
			}
			if t.Failed() {
				t.Logf("node %d's log:\n%s", id, n.log.String())
			}
		})
		c.nodes = append(c.nodes, n)
	}
}

// running fails the test if one of nodes has exited.
func running(t *testing.T, nodes []*process) {
	t.Helper()
	for _, n := range nodes {
		select {
		case <-n.exited:
			t.Fatalf("node %d exited: %v (its log follows)", n.id, n.err)
		default:
		}
	}
}

// A cluster of member credentials: real nodes (services/node) with
// dynamic membership, each signing with the credential the authority
// issued it. The verifier, given the authority's public key and its own
// cluster (--authority, --cluster), believes the leader's announcements
// and refuses an announcement re-signed by a member with another
// member's credential, a credential of another authority or of another
// cluster, a tampered credential, and one that no longer or not yet
// holds.
func TestVerifierCredentials(t *testing.T) {
	python := pythonWithNaCl(t)
	binary := batontest.BuildBinary(t, "github.com/baton-election/baton/services/node")
	c := newCredentialCluster(t, "creds", protocol.Bully, 1, 2, 3)
	url := startServer(t, c)
	c.run(t, url, binary)
	app := batontest.Connect(t, url, nats.UserInfo(natsconf.AppUser, natsconf.LocalPasswords.App))
	a, genuine := c.elected(t, app)
	if genuine.Header.Get(signing.CredentialHeader) != c.tokens[a.Leader] {
		t.Fatalf("the leader's announcement carries the credential %q, want member %d's", genuine.Header.Get(signing.CredentialHeader), a.Leader)
	}
	v := verifier{python: python, script: "baton_verify.py", url: url, c: c, app: app}

	c.believes(t, v, "query", "last")

	lead, other := a.Leader, c.ids[0] // other: a member that does not lead
	leaderKey := c.users[lead]
	leaderPublic, err := leaderKey.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	otherPublic, err := c.users[other].PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	// with is genuine.Data signed by member id with key and token.
	with := func(name string, id uint64, key nkeys.KeyPair, token, want string) sample {
		return sample{name: name, payload: genuine.Data, header: credentialed(t, id, key, token).SignAnnouncement(c.name, genuine.Data), want: want}
	}
	issued := func(issuer nkeys.KeyPair, cluster string, id uint64, public string) string {
		token, err := membercreds.Issue(issuer, cluster, id, public, 0)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	headerWith := func(h nats.Header, kv ...string) nats.Header {
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	reissue := func(edit func(*jwt.UserClaims)) string { return reissued(t, c.tokens[lead], c.authority, edit) }
	noCredential := c.signers[lead].SignAnnouncement(c.name, genuine.Data)
	noCredential.Del(signing.CredentialHeader)
	// The leader's credential with the other member's key in it, as the
	// other member would edit it to sign as the leader.
	stolen := tampered(t, c.tokens[lead], func(claims map[string]any) { claims["sub"] = otherPublic })
	// The leader's credential with its signature altered.
	parts := strings.Split(c.tokens[lead], ".")
	flipped := parts[2][1:]
	if parts[2][0] == 'A' {
		flipped = "B" + flipped
	} else {
		flipped = "A" + flipped
	}
	badSignature := parts[0] + "." + parts[1] + "." + flipped
	signingKey := accountKey(t)
	authorityPublic, err := c.authority.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	bySigningKey := reissued(t, c.tokens[lead], signingKey, func(claims *jwt.UserClaims) { claims.IssuerAccount = authorityPublic })

	samples := []sample{
		{"the genuine announcement again", genuine.Data, genuine.Header, "verified"},
		{"its term changed", edit(t, genuine.Data, map[string]any{"term": a.Term + 3}), genuine.Header, "refused"},
		{"without its credential", genuine.Data, noCredential, "refused"},
		{"re-signed by another member as the leader, with the leader's credential", genuine.Data,
			headerWith(c.signers[other].SignAnnouncement(c.name, genuine.Data),
				signing.SignerHeader, strconv.FormatUint(lead, 10), signing.CredentialHeader, c.tokens[lead]), "refused"},
		{"re-signed by another member as itself, with the leader's credential", genuine.Data,
			headerWith(c.signers[other].SignAnnouncement(c.name, genuine.Data), signing.CredentialHeader, c.tokens[lead]), "refused"},
		c.signed("re-signed by another member with its own credential", other, genuine.Data, "refused"),
		with("re-signed by another member as the leader, with the leader's credential tampered to name its key",
			lead, c.users[other], stolen, "refused"),
		with("the leader's credential with its signature altered", lead, leaderKey, badSignature, "refused"),
		with("a credential of another authority", lead, leaderKey, issued(accountKey(t), c.name, lead, leaderPublic), "refused"),
		with("a credential of another cluster", lead, leaderKey, issued(c.authority, "other", lead, leaderPublic), "refused"),
		with("a credential of the cluster's name in another case", lead, leaderKey, issued(c.authority, "CREDS", lead, leaderPublic), "refused"),
		with("a credential of a signing key the reader does not list", lead, leaderKey, bySigningKey, "refused"),
		with("an expired credential", lead, leaderKey, reissue(func(claims *jwt.UserClaims) { claims.Expires = time.Now().Add(-time.Hour).Unix() }), "refused"),
		with("a credential not valid yet", lead, leaderKey, reissue(func(claims *jwt.UserClaims) { claims.NotBefore = time.Now().Add(time.Hour).Unix() }), "refused"),
		with("a bearer token", lead, leaderKey, reissue(func(claims *jwt.UserClaims) { claims.BearerToken = true }), "refused"),
		with("a credential whose ID tag contradicts its name", lead, leaderKey, reissue(func(claims *jwt.UserClaims) {
			claims.Tags = jwt.TagList{}
			claims.Tags.Add(membercreds.ClusterTag+c.name, membercreds.IDTag+strconv.FormatUint(other, 10))
		}), "refused"),
		c.signed("the leader claims paxos", lead, edit(t, genuine.Data, map[string]any{"algorithm": "paxos"}), "refused"),
		c.signed("another cluster named", lead, edit(t, genuine.Data, map[string]any{"cluster": "other"}), "refused"),
		c.signed("the leader with a certificate, which only a members file counts", lead,
			edit(t, genuine.Data, map[string]any{"certificate": map[string]any{"cluster": c.name, "term": a.Term, "leader": lead, "votes": []any{}}}), "refused"),
		{"the genuine announcement at last", genuine.Data, genuine.Header, "verified"},
	}
	goAgrees(t, c.keys, c, samples)
	publish(t, url, c, v.watch(t), samples)
	c.believes(t, v, "last")

	// A reader that lists the authority's signing key believes what the
	// signing key issued for the authority, and nothing it issued for
	// another account.
	authorities := authorityPublic + "," + mustPublic(t, signingKey)
	withSigningKey := v
	withSigningKey.reader = []string{"--authority", authorities, "--cluster", c.name, "--algorithm", string(c.algorithm)}
	samples = []sample{
		with("a credential of the authority's signing key", lead, leaderKey, bySigningKey, "verified"),
		with("a credential of the signing key for another account", lead, leaderKey,
			reissued(t, c.tokens[lead], signingKey, func(claims *jwt.UserClaims) { claims.IssuerAccount = mustPublic(t, accountKey(t)) }), "refused"),
		{"the genuine announcement at last", genuine.Data, genuine.Header, "verified"},
	}
	checker, err := membercreds.NewChecker(c.name, authorities)
	if err != nil {
		t.Fatal(err)
	}
	goAgrees(t, checker.Keys(), c, samples)
	publish(t, url, c, withSigningKey.watch(t), samples)
	running(t, c.nodes)
}

// goAgrees checks that the Go reader of c's announcements with keys
// (signing.ReadAnnouncementOf, as pkg/leader reads them) makes of each
// sample what the verifier must.
func goAgrees(t *testing.T, keys *signing.MemberKeys, c *cluster, samples []sample) {
	t.Helper()
	for _, s := range samples {
		_, err := signing.ReadAnnouncementOf(keys, c.name, c.algorithm, s.payload, s.header)
		if got := map[bool]string{true: "verified", false: "refused"}[err == nil]; got != s.want {
			t.Errorf("%s: the Go reader: %s (%v), want %s", s.name, got, err, s.want)
		}
	}
}

func mustPublic(t *testing.T, kp nkeys.KeyPair) string {
	t.Helper()
	public, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return public
}
