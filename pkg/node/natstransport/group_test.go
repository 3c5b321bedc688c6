package natstransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// groupProcess is one member process of a test: a node.Group on its own
// connection.
type groupProcess struct {
	*natsnode.Group
	id        uint64
	algorithm protocol.Algorithm
	nc        *nats.Conn
	cancel    context.CancelFunc
	done      chan error
	data      string
	signer    *signing.Signer
	keys      *signing.MemberKeys
}

// keyring is the member keys of a test's processes.
type keyring struct {
	signers map[uint64]*signing.Signer
	keys    *signing.MemberKeys
}

// startGroup runs member id in the elections clusters (static members
// 1..3, bully) over one connection named after conn, as the node service
// does with ELECTION_CLUSTERS; signed with kr's keys, if not nil.
func startGroup(t *testing.T, url, conn string, id uint64, clusters []string, kr ...*keyring) *groupProcess {
	t.Helper()
	return startGroupOf(t, protocol.Bully, url, conn, id, clusters, kr...)
}

// startGroupOf is startGroup with elections of algorithm.
func startGroupOf(t *testing.T, algorithm protocol.Algorithm, url, conn string, id uint64, clusters []string, kr ...*keyring) *groupProcess {
	t.Helper()
	opts := batontest.AsNode(conn, id)
	var signer *signing.Signer
	var keys *signing.MemberKeys
	if len(kr) > 0 {
		signer, keys = kr[0].signers[id], kr[0].keys
		opts = batontest.AsMember(conn, signer)
	}
	nc := connect(t, url, opts...)
	g, err := natsnode.NewGroup(nc, natsnode.GroupConfig{Node: node.GroupConfig{ID: id, Logger: testLogger().With("node", id)},
		Conn: conn, Signer: signer, Keys: keys,
		Probe: func(_ context.Context, name string) error {
			p, err := nats.Connect(url, append(opts[:len(opts):len(opts)], nats.Name(name))...)
			if err != nil {
				return err
			}
			p.Close()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	p := &groupProcess{Group: g, id: id, algorithm: algorithm, nc: nc, done: make(chan error, 1), data: t.TempDir(), signer: signer, keys: keys}
	for _, c := range clusters {
		if _, err := p.Add(p.config(c)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Error("group did not stop")
		}
	})
	batontest.CheckFor(t, 10*time.Second, func() error {
		if !g.Healthy() {
			return errors.New("not healthy")
		}
		return nil
	})
	return p
}

// config is the configuration of p's election of cluster.
func (p *groupProcess) config(cluster string) natsnode.Config {
	return natsnode.Config{
		Node: node.Config{
			Cluster:   cluster,
			Algorithm: p.algorithm,
			Election:  election.Config{ID: p.id, Members: []uint64{1, 2, 3}, Timing: testTiming},
			DataDir:   p.data + "/" + cluster,
		},
		Signer: p.signer,
		Keys:   p.keys,
	}
}

// leaders waits until every process names leader in every election of
// clusters.
func leaders(t *testing.T, procs []*groupProcess, clusters []string, leader uint64) {
	t.Helper()
	batontest.CheckFor(t, 10*time.Second, func() error {
		for _, p := range procs {
			for _, c := range clusters {
				n := p.Node(c)
				if n == nil {
					return fmt.Errorf("member %d is not in %s", p.id, c)
				}
				if st := n.Status(); st.Leader == nil || *st.Leader != leader {
					return fmt.Errorf("member %d in %s: leader %v, want %d", p.id, c, st.Leader, leader)
				}
			}
		}
		return nil
	})
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// One process takes part in many elections over one connection: each
// elects on its own subjects, /status answers for each, a process whose
// connection closes fails over every election it led at once, and
// elections join and leave while the processes run.
func TestGroupManyElections(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithAccounts())
	var clusters []string
	for i := range 12 {
		clusters = append(clusters, fmt.Sprintf("shard-%d", i))
	}
	var procs []*groupProcess
	for id := uint64(1); id <= 3; id++ {
		procs = append(procs, startGroup(t, url, "shard-0", id, clusters))
	}
	leaders(t, procs, clusters, 3)
	// A handful of subscriptions for all twelve elections of a follower:
	// the wildcard ones, the batches (broadcast and to this member) and
	// their replies, the beats, the connection events.
	if n := procs[0].nc.NumSubscriptions(); n > 24 {
		t.Errorf("a process of %d elections holds %d subscriptions, want at most 24", len(clusters), n)
	}

	h := procs[2].Handler()
	code, body := get(t, h, "/status?cluster=shard-7")
	var st protocol.Status
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Cluster != "shard-7" || st.State != "leader" {
		t.Fatalf("/status?cluster=shard-7: %d %s", code, body)
	}
	if code, body := get(t, h, "/status"); code != 200 || !strings.Contains(body, `"cluster":"shard-0"`) {
		t.Fatalf("/status: %d %s", code, body)
	}
	if code, _ := get(t, h, "/status?cluster=shard-99"); code != http.StatusNotFound {
		t.Fatalf("/status of an election not joined: %d, want 404", code)
	}
	var all []protocol.Status
	if code, body := get(t, h, "/elections"); code != 200 || json.Unmarshal([]byte(body), &all) != nil || len(all) != len(clusters) || all[11].Cluster != "shard-11" || all[11].State != "leader" {
		t.Fatalf("/elections: %d %s", code, body)
	}
	if code, _ := get(t, h, "/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	_, metrics := get(t, h, "/metrics")
	if batches := metric(metrics, "election_batches_sent_total"); batches == 0 || metric(metrics, "election_batched_messages_total") <= batches {
		t.Errorf("the leader's broadcasts did not go in batches: %v batches of %v messages", batches, metric(metrics, "election_batched_messages_total"))
	}
	for _, want := range []string{"election_is_leader 12\n", "election_elections 12\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(metrics, "election_term") {
		t.Error("/metrics of a group shows a term, of one election among many")
	}

	// Member 3's connection closes, as when its process dies: the
	// connection event fails over each of its twelve elections.
	procs[2].nc.Close()
	select {
	case err := <-procs[2].done:
		if !errors.Is(err, node.ErrConnectionClosed) {
			t.Fatalf("Run after the connection closed: %v", err)
		}
		procs[2].done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("the group did not stop when its connection closed")
	}
	leaders(t, procs[:2], clusters, 2)
	_, metrics = get(t, procs[1].Handler(), "/metrics")
	if !strings.Contains(metrics, "election_suspicions_total{reason=\"connection_closed\"}") {
		t.Error("no election saw member 3's connection close")
	}

	// An election added to the running processes elects; one that a
	// process leaves fails over to the other.
	for _, p := range procs[:2] {
		if _, err := p.Add(p.config("extra")); err != nil {
			t.Fatal(err)
		}
	}
	leaders(t, procs[:2], []string{"extra"}, 2)
	if err := procs[1].Remove("shard-5"); err != nil {
		t.Fatal(err)
	}
	if procs[1].Node("shard-5") != nil {
		t.Fatal("a removed election is still in the group")
	}
	leaders(t, procs[:1], []string{"shard-5"}, 1)
	if err := procs[1].Remove("shard-5"); !errors.Is(err, node.ErrNoElection) {
		t.Fatalf("removing an election twice: %v", err)
	}
	if _, err := procs[0].Add(procs[0].config("extra")); !errors.Is(err, node.ErrConfig) {
		t.Fatalf("adding an election twice: %v", err)
	}
	wrong := procs[0].config("other")
	wrong.Node.Election.ID = 2
	if _, err := procs[0].Add(wrong); !errors.Is(err, node.ErrConfig) {
		t.Fatalf("adding another member's election: %v", err)
	}
}

// metric is the value of the series name (without labels) in a
// Prometheus text exposition, or -1.
func metric(text, name string) float64 {
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// With member keys, a process signs each batch once, and a batch whose
// signature does not hold, or a message in it that names another member
// than its signer, is dropped: a member cannot speak for another in a
// batch, nor a stranger for anyone.
func TestGroupSignedBatches(t *testing.T) {
	signers, keys := batontest.MemberKeys(t, 1, 2, 3)
	kr := &keyring{signers, keys}
	url := batontest.StartNATS(t, batontest.WithAccounts(), batontest.WithMemberUsers(keys))
	clusters := []string{"shard-0", "shard-1", "shard-2", "shard-3"}
	procs := []*groupProcess{startGroup(t, url, "shard-0", 1, clusters, kr), startGroup(t, url, "shard-0", 2, clusters, kr)}
	leaders(t, procs, clusters, 2)

	// Member 1, with its own key, says in a batch that member 3 leads
	// shard-1 with a far term; a stranger's key signs a batch as member
	// 1's.
	forged := protocol.Message{V: protocol.Version, Type: protocol.TypeHeartbeat, From: 3, Term: 1 << 40}
	protocol.NewStamp(1).Apply(&forged, time.Now())
	data, err := protocol.Encode(forged)
	if err != nil {
		t.Fatal(err)
	}
	batch := protocol.AppendBatchEntry(nil, "shard-1", data)
	subject := protocol.BatchSubject("shard-0")
	liar := connect(t, url, batontest.AsMember("shard-0", signers[1])...)
	if err := liar.PublishMsg(&nats.Msg{Subject: subject, Data: batch, Header: signers[1].Header(subject, batch)}); err != nil {
		t.Fatal(err)
	}
	stranger := batontest.NewSigner(t, 1)
	if err := liar.PublishMsg(&nats.Msg{Subject: subject, Data: batch, Header: stranger.Header(subject, batch)}); err != nil {
		t.Fatal(err)
	}
	liar.Flush()
	batontest.CheckFor(t, 5*time.Second, func() error {
		_, m := get(t, procs[1].Handler(), "/metrics")
		if metric(m, "election_batches_dropped_total") < 1 {
			return errors.New("the stranger's batch was not dropped")
		}
		if !strings.Contains(m, `election_messages_dropped_total{reason="bad_signature"} `) || strings.Contains(m, `election_messages_dropped_total{reason="bad_signature"} 0`+"\n") {
			return errors.New("member 1's message as member 3 was not dropped as forged")
		}
		return nil
	})
	leaders(t, procs, clusters, 2)
	unsigned := procs[0].config("unsigned")
	unsigned.Signer, unsigned.Keys = nil, nil
	if _, err := procs[0].Add(unsigned); !errors.Is(err, node.ErrConfig) {
		t.Errorf("an election without keys in a group with them: %v", err)
	}
	if st := procs[1].Node("shard-1").Status(); st.Term >= 1<<40 {
		t.Fatalf("the forged term reached the machine: %+v", st)
	}
}

// The point-to-point messages of a process's elections (the ring's) to
// one member go
// in batches on that member's batch subject, signed once, never on the
// elections' own inboxes; a batch to a member that no process receives
// comes back as unreachable to its elections; and a message in a batch
// addressed to another member than the batch's is dropped.
func TestGroupPointToPointBatches(t *testing.T) {
	signers, keys := batontest.MemberKeys(t, 1, 2, 3)
	kr := &keyring{signers, keys}
	url := batontest.StartNATS(t, batontest.WithAccounts(), batontest.WithMemberUsers(keys))
	clusters := []string{"shard-0", "shard-1", "shard-2", "shard-3"}

	// Member 3 does not run: a listener with its credential takes its
	// batches, and watches its inboxes.
	spy := connect(t, url, batontest.AsMember("shard-0", signers[3])...)
	type entry struct {
		cluster string
		msg     protocol.Message
	}
	got := make(chan entry, 1024)
	if _, err := spy.Subscribe(protocol.BatchToSubject("shard-0", 3), func(m *nats.Msg) {
		signer, err := keys.Verify(m.Subject, m.Data, m.Header)
		if err != nil {
			t.Errorf("a batch to member 3: %v", err)
			return
		}
		if err := protocol.ReadBatch(m.Data, protocol.MaxCertifiedPayload, func(cluster string, data []byte) bool {
			msg, err := protocol.Decode(data)
			if err != nil || msg.From != signer {
				t.Errorf("an entry of a batch to member 3 signed by %d: %+v, %v", signer, msg, err)
			}
			got <- entry{cluster, msg}
			return true
		}); err != nil {
			t.Errorf("a batch to member 3: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	inboxes, err := spy.SubscribeSync(protocol.InboxSubject("*", 3))
	if err != nil {
		t.Fatal(err)
	}
	spy.Flush()
	procs := []*groupProcess{startGroupOf(t, protocol.Ring, url, "shard-0", 1, clusters, kr), startGroupOf(t, protocol.Ring, url, "shard-0", 2, clusters, kr)}
	leaders(t, procs, clusters, 2)
	select {
	case e := <-got:
		if e.msg.To != 3 || (e.msg.From != 1 && e.msg.From != 2) || !slices.Contains(clusters, e.cluster) {
			t.Fatalf("a message in a batch to member 3: %s %+v", e.cluster, e.msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no batch to member 3")
	}
	if m, err := inboxes.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("a point-to-point message outside a batch: %s", m.Subject)
	}

	// Nobody receives member 3's batches now: an election added to both
	// processes hears at once that member 3 is unreachable.
	if err := spy.Drain(); err != nil {
		t.Fatal(err)
	}
	_, m := get(t, procs[1].Handler(), "/metrics")
	before := metric(m, "election_peers_unreachable_total")
	for _, p := range procs {
		if _, err := p.Add(p.config("late")); err != nil {
			t.Fatal(err)
		}
	}
	leaders(t, procs, []string{"late"}, 2)
	batontest.CheckFor(t, 5*time.Second, func() error {
		_, m := get(t, procs[1].Handler(), "/metrics")
		if n := metric(m, "election_peers_unreachable_total"); n <= before {
			return fmt.Errorf("election_peers_unreachable_total %v, was %v", n, before)
		}
		return nil
	})

	// Member 1, with its own key, puts a message to member 3 in a batch
	// to member 2.
	_, m = get(t, procs[1].Handler(), "/metrics")
	wrong := `election_messages_dropped_total{reason="wrong_subject"}`
	before = metric(m, wrong)
	msg := protocol.Message{V: protocol.Version, Type: protocol.TypeElection, From: 1, To: 3, Term: 1 << 40}
	protocol.NewStamp(1).Apply(&msg, time.Now())
	data, err := protocol.Encode(msg)
	if err != nil {
		t.Fatal(err)
	}
	batch := protocol.AppendBatchEntry(nil, "shard-1", data)
	subject := protocol.BatchToSubject("shard-0", 2)
	liar := connect(t, url, batontest.AsMember("shard-0", signers[1])...)
	if err := liar.PublishMsg(&nats.Msg{Subject: subject, Data: batch, Header: signers[1].Header(subject, batch)}); err != nil {
		t.Fatal(err)
	}
	batontest.CheckFor(t, 5*time.Second, func() error {
		_, m := get(t, procs[1].Handler(), "/metrics")
		if n := metric(m, wrong); n <= max(before, 0) {
			return fmt.Errorf("%s %v, was %v", wrong, n, before)
		}
		return nil
	})
	if st := procs[1].Node("shard-1").Status(); st.Term >= 1<<40 {
		t.Fatalf("the misaddressed message reached the machine: %+v", st)
	}
}
