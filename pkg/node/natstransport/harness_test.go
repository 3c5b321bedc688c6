package natstransport_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// testTiming is the timing of the tests, in ticks of 10 ms. The leader
// time-out is generous so that a loaded machine does not suspect a live
// leader; the failovers that do not wait for it stay fast.
var testTiming = election.Timing{
	HeartbeatTicks:     5,
	LeaderTimeoutTicks: 50,
	AnswerTicks:        5,
	CoordinatorTicks:   30,
	LeaseTicks:         election.DefaultLeaseTicks,
	LeaderLeaseTicks:   election.LeaderLease(election.DefaultLeaseTicks, election.DefaultMaxDrift),
}

// byzantineTiming is testTiming with a longer lease: every round of the
// byzantine algorithm costs each member several signature checks, and a
// loaded machine running the race detector must not make a live leader's
// lease lapse.
var byzantineTiming = func() election.Timing {
	t := testTiming
	t.LeaseTicks = 40
	t.LeaderLeaseTicks = election.LeaderLease(t.LeaseTicks, election.DefaultMaxDrift)
	return t
}()

// connect connects to url as the node service does: without echo, so a
// node does not receive what it publishes, and draining for at most 1 s.
func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return batontest.Connect(t, url, append([]nats.Option{nats.NoEcho(), nats.DrainTimeout(time.Second)}, opts...)...)
}

// testLogger discards logs unless NODE_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("NODE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// running is a node started by a test.
type running struct {
	*node.Node
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

// cluster describes the nodes a test starts.
type cluster struct {
	url       string
	name      string
	algorithm protocol.Algorithm
	members   []uint64
	// signers and keys are the members' keys (batontest.MemberKeys); nil
	// runs the cluster unsigned. With accounts too, nodes connect to NATS
	// with their keys (the server must list them: withMemberUsers).
	signers map[uint64]*signing.Signer
	keys    *signing.MemberKeys
	// data holds each node's data directory, so that a node restarted by
	// the test finds its state again; created by start when nil.
	data map[uint64]string
	// timing replaces testTiming when not zero.
	timing election.Timing
	// accounts: the server runs batontest.WithAccounts; nodes connect as
	// the node user under their connection names, and probe for
	// connection events as the node service does.
	accounts bool
	// events is Config.ConnectionEvents.
	events string
	// maxAge is Config.MaxMessageAge; zero means its default.
	maxAge time.Duration
}

// dataDir is node id's data directory, the same for every start of it.
func (c *cluster) dataDir(t *testing.T, id uint64) string {
	if c.data == nil {
		c.data = make(map[uint64]string)
	}
	if c.data[id] == "" {
		c.data[id] = t.TempDir()
	}
	return c.data[id]
}

// start runs node id of c on its own connection.
func (c *cluster) start(t *testing.T, id uint64) *running {
	t.Helper()
	var opts []nats.Option
	var probe func(context.Context, string) error
	if c.accounts {
		opts = batontest.AsNode(c.name, id)
		if c.signers != nil {
			opts = batontest.AsMember(c.name, c.signers[id])
		}
		probe = func(_ context.Context, name string) error {
			nc, err := nats.Connect(c.url, append(opts[:len(opts):len(opts)], nats.Name(name))...)
			if err != nil {
				return err
			}
			nc.Close()
			return nil
		}
	}
	nc := connect(t, c.url, opts...)
	timing := testTiming
	if c.timing != (election.Timing{}) {
		timing = c.timing
	}
	n, err := natsnode.New(nc, natsnode.Config{
		Node: node.Config{
			Cluster:   c.name,
			Algorithm: c.algorithm,
			Election:  election.Config{ID: id, Members: c.members, Timing: timing},
			DataDir:   c.dataDir(t, id),
			Logger:    testLogger().With("node", id, "cluster", c.name),
		},
		Signer:           c.signers[id],
		Keys:             c.keys,
		ConnectionEvents: c.events,
		Probe:            probe,
		MaxMessageAge:    c.maxAge,
	})
	return run(t, n, nc, err)
}

// run runs n, made by New on nc with error err, until the test ends, and
// waits until it is healthy.
func run(t *testing.T, n *node.Node, nc *nats.Conn, err error) *running {
	t.Helper()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Node: n, nc: nc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- n.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	batontest.CheckFor(t, 5*time.Second, func() error {
		if !n.Healthy() {
			return errors.New("not healthy")
		}
		return nil
	})
	return r
}

// startAll starts every member of c, lowest ID first, and returns them by
// ID.
func (c *cluster) startAll(t *testing.T) map[uint64]*running {
	t.Helper()
	nodes := make(map[uint64]*running)
	for _, id := range c.members {
		nodes[id] = c.start(t, id)
	}
	return nodes
}

// stop cancels the node's context, as SIGTERM does, and returns Run's
// result. It is idempotent.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("node did not stop")
		return nil
	}
}

// crash closes the node's connection under it: it cannot resign, and Run
// returns by itself.
func (r *running) crash(t *testing.T) {
	t.Helper()
	r.nc.Close()
	select {
	case err := <-r.done:
		close(r.done)
		if !errors.Is(err, node.ErrConnectionClosed) {
			t.Fatalf("Run after crash: got %v, want %v", err, node.ErrConnectionClosed)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its connection closed")
	}
}

// agreement checks that every node follows leader with one term, and that
// leader leads; it returns the term.
func agreement(nodes map[uint64]*running, leader uint64) (uint64, error) {
	var term uint64
	for id, n := range nodes {
		st := n.Status()
		switch {
		case st.Leader == nil || *st.Leader != leader:
			return 0, fmt.Errorf("node %d: leader %s, want %d", id, fmtLeader(st.Leader), leader)
		case id == leader && st.State != "leader":
			return 0, fmt.Errorf("node %d: state %s, want leader", id, st.State)
		case term != 0 && st.Term != term:
			return 0, fmt.Errorf("node %d: term %d, others %d", id, st.Term, term)
		}
		term = st.Term
	}
	return term, nil
}

// awaitAgreement waits until every node follows leader, and returns the
// term.
func awaitAgreement(t *testing.T, nodes map[uint64]*running, leader uint64) uint64 {
	t.Helper()
	var term uint64
	batontest.CheckFor(t, 20*time.Second, func() (err error) {
		term, err = agreement(nodes, leader)
		return err
	})
	return term
}

func fmtLeader(l *uint64) string {
	if l == nil {
		return "null"
	}
	return fmt.Sprint(*l)
}

// counter reads a counter of a node's registry; labels select one series.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		return sum
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// stated returns keys stating algorithm, as a reader of the cluster knows
// it; nil without keys.
func stated(t *testing.T, keys *signing.MemberKeys, algorithm protocol.Algorithm) *signing.MemberKeys {
	t.Helper()
	if keys == nil {
		return nil
	}
	k, err := keys.State("", algorithm)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// announcements subscribes to a cluster's leader subject; with keys,
// every announcement must be signed by the leader it names.
func announcements(t *testing.T, url, cluster string, keys *signing.MemberKeys) <-chan protocol.Announcement {
	t.Helper()
	nc := connect(t, url)
	ch := make(chan protocol.Announcement, 64)
	_, err := nc.Subscribe(protocol.LeaderSubject(cluster), func(m *nats.Msg) {
		a, err := signing.ReadAnnouncement(keys, cluster, m.Data, m.Header)
		if err != nil {
			t.Errorf("announcement %q: %v", m.Data, err)
			return
		}
		ch <- a
	})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return ch
}

// awaitAnnouncement waits for leader's announcement of term.
func awaitAnnouncement(t *testing.T, ch <-chan protocol.Announcement, leader, term uint64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case a := <-ch:
			if a.Leader == leader && a.Term == term {
				return
			}
		case <-timeout:
			t.Fatalf("no announcement of leader %d with term %d", leader, term)
		}
	}
}

// query asks the cluster for its leader; with keys, the answer must be
// signed by the leader it names. While no node answers (a lease that
// lapsed on a loaded machine and is being won again), it asks again for
// up to 10 s.
func query(t *testing.T, nc *nats.Conn, cluster string, keys *signing.MemberKeys) protocol.Announcement {
	t.Helper()
	var reply *nats.Msg
	batontest.CheckFor(t, 10*time.Second, func() (err error) {
		reply, err = nc.Request(protocol.QuerySubject(cluster), nil, 2*time.Second)
		return err
	})
	a, err := signing.ReadAnnouncement(keys, cluster, reply.Data, reply.Header)
	if err != nil {
		t.Fatalf("query reply %q: %v", reply.Data, err)
	}
	return a
}

func electionConfig(id uint64, members []uint64) election.Config {
	return election.Config{ID: id, Members: members, Timing: testTiming}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
