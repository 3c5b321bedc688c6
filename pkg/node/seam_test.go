package node_test

// Tests of the runtime's own behaviour on the in-memory network of
// pkg/node/transport, inside testing/synctest bubbles: the node's timers
// run on the bubble's fake clock, so the tests are deterministic, wait
// for events rather than time, and take no real time.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// newTestNode is node.New on tr, asking cluster for its term, with the
// machines of f, or of cfg's algorithm if f is zero.
func newTestNode(tr transport.Transport, cluster node.TermSource, cfg node.Config, f machines.Factory) (*node.Node, error) {
	if f.Algorithm == "" {
		f = machines.Factory{Algorithm: cfg.Algorithm, Cluster: cfg.Cluster}
	}
	return node.New(cfg, node.Deps{Transport: tr, Cluster: cluster, Machines: f.New})
}

// seamTiming is the tests' timing in ticks of node.DefaultTick.
var seamTiming = election.Timing{
	HeartbeatTicks:     5,
	LeaderTimeoutTicks: 50,
	AnswerTicks:        5,
	CoordinatorTicks:   30,
	LeaseTicks:         election.DefaultLeaseTicks,
	LeaderLeaseTicks:   election.LeaderLease(election.DefaultLeaseTicks, election.DefaultMaxDrift),
}

// waitLimit bounds every wait of these tests on the bubble's fake clock.
const waitLimit = time.Minute

// sim is a cluster of nodes on one in-memory network.
type sim struct {
	t         *testing.T
	net       *transport.Network
	cluster   string
	algorithm protocol.Algorithm
	members   []uint64
	nodes     map[uint64]*member
	// keys, if set, are the member keys of each node's machine (the
	// byzantine algorithm's).
	keys func(id uint64) (signer *signing.Signer, keys, memberSet *signing.MemberKeys)
}

// member is one node of a sim.
type member struct {
	*node.Node
	conn   *transport.Endpoint
	dir    string
	cancel context.CancelFunc
	done   chan error
}

func newSim(t *testing.T, algorithm protocol.Algorithm, members ...uint64) *sim {
	return &sim{t: t, net: transport.NewNetwork(), cluster: "seam", algorithm: algorithm, members: members, nodes: make(map[uint64]*member)}
}

func seamLogger(id uint64) *slog.Logger {
	if os.Getenv("NODE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
	}
	return slog.New(slog.DiscardHandler)
}

// add builds node id on its own connection; edit, if set, changes its
// configuration. The node does not run yet.
func (s *sim) add(id uint64, edit func(*node.Config)) *member {
	s.t.Helper()
	conn := s.net.Join(id)
	cfg := node.Config{
		Cluster:   s.cluster,
		Algorithm: s.algorithm,
		Election:  election.Config{ID: id, Members: s.members, Timing: seamTiming},
		DataDir:   s.t.TempDir(),
		Logger:    seamLogger(id),
	}
	if edit != nil {
		edit(&cfg)
	}
	f := machines.Factory{Algorithm: cfg.Algorithm, Cluster: cfg.Cluster}
	if s.keys != nil {
		f.Signer, f.Keys, f.MemberSet = s.keys(id)
	}
	n, err := newTestNode(conn, conn, cfg, f)
	if err != nil {
		s.t.Fatalf("node.New: %v", err)
	}
	m := &member{Node: n, conn: conn, dir: cfg.DataDir, done: make(chan error, 1)}
	s.nodes[id] = m
	s.t.Cleanup(func() { m.stop() })
	return m
}

// run starts the node's Run.
func (m *member) run() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- m.Run(ctx) }()
}

// stop cancels Run, as SIGTERM does, and returns its result.
func (m *member) stop() error {
	if m.cancel == nil {
		m.conn.Close()
		return nil
	}
	m.conn.Release()
	m.cancel()
	err, ok := <-m.done
	if ok {
		close(m.done)
	}
	return err
}

// observer records the cluster's announcements.
func (s *sim) observer() <-chan protocol.Announcement {
	ch := make(chan protocol.Announcement, 256)
	s.net.Observe(func(p transport.Packet) {
		if p.Announcement == nil {
			return
		}
		select {
		case ch <- *p.Announcement:
		default:
			s.t.Error("announcements not read")
		}
	})
	return ch
}

// heartbeats returns the sender of each of the cluster's heartbeats.
func (s *sim) heartbeats() <-chan uint64 {
	ch := make(chan uint64, 1024)
	s.net.Observe(func(p transport.Packet) {
		if p.Announcement != nil || p.Msg.Type != protocol.TypeHeartbeat {
			return
		}
		select {
		case ch <- p.Msg.From:
		default:
			s.t.Error("heartbeats not read")
		}
	})
	return ch
}

// awaitHeartbeat waits for a heartbeat of leader.
func awaitHeartbeat(t *testing.T, ch <-chan uint64, leader uint64) {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		select {
		case from := <-ch:
			if from == leader {
				return
			}
		case <-limit:
			t.Fatalf("no heartbeat of %d", leader)
		}
	}
}

// awaitLeader waits for an announcement of leader and returns it.
func awaitLeader(t *testing.T, ch <-chan protocol.Announcement, leader uint64) protocol.Announcement {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		select {
		case a := <-ch:
			if a.Leader == leader {
				return a
			}
		case <-limit:
			t.Fatalf("no announcement of leader %d", leader)
		}
	}
}

// follows checks that every running node follows leader at term.
func (s *sim) follows(leader, term uint64) error {
	for id, m := range s.nodes {
		if m.cancel == nil {
			continue
		}
		st := m.Status()
		if st.Leader == nil || *st.Leader != leader || st.Term != term {
			return fmt.Errorf("node %d: leader %v term %d, want %d at %d", id, st.Leader, st.Term, leader, term)
		}
	}
	return nil
}

// metric reads a counter or gauge of reg; labels select one series.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		var sum float64
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return sum
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// onDisk reads the term and max term of a node's state.json.
func onDisk(dir string) (term, maxTerm uint64, err error) {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return 0, 0, err
	}
	var st election.HardState
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, 0, err
	}
	return st.Term, st.MaxTerm, nil
}

// statusPage is what GET /status of m serves.
func statusPage(m *member) (protocol.Status, error) {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	var st protocol.Status
	err := json.Unmarshal(rec.Body.Bytes(), &st)
	return st, err
}

// A leader's term is on disk before any of its claims (Coordinator,
// heartbeat) leaves, and its announcement leaves only once its /status
// shows the leadership: checked at the moment each is published.
func TestSeamAnnounceOrdering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2, 3)
		byConn := make(map[*transport.Endpoint]*member)
		for _, id := range s.members {
			m := s.add(id, nil)
			byConn[m.conn] = m
		}
		var mu sync.Mutex
		var claims, announced int
		var violations []string
		s.net.Observe(func(p transport.Packet) {
			m := byConn[p.From]
			if m == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if a := p.Announcement; a != nil {
				st, err := statusPage(m)
				if err != nil || st.State != "leader" || st.Term != a.Term || st.Leader == nil || *st.Leader != a.Leader {
					violations = append(violations, fmt.Sprintf("announcement of %d at term %d while /status shows %+v (%v)", a.Leader, a.Term, st, err))
				}
				announced++
				return
			}
			pm := p.Msg
			if pm.Type != protocol.TypeCoordinator && pm.Type != protocol.TypeHeartbeat {
				return
			}
			term, maxTerm, err := onDisk(m.dir)
			if err != nil || term < pm.Term || maxTerm < pm.Term {
				violations = append(violations, fmt.Sprintf("%s of %d at term %d with term %d, max term %d on disk (%v)", pm.Type, pm.From, pm.Term, term, maxTerm, err))
			}
			claims++
		})
		ch := s.observer()
		beats := s.heartbeats()
		for _, id := range s.members {
			s.nodes[id].run()
		}
		a := awaitLeader(t, ch, 3)
		synctest.Wait()
		// Let a few heartbeats leave too.
		for range 3 {
			awaitHeartbeat(t, beats, 3)
		}
		if err := s.stopAll(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, v := range violations {
			t.Error(v)
		}
		if claims == 0 || announced == 0 {
			t.Fatalf("checked %d claims and %d announcements, want some of each", claims, announced)
		}
		t.Logf("leader 3 at term %d; %d claims and %d announcements checked", a.Term, claims, announced)
	})
}

// stopAll stops every running node.
func (s *sim) stopAll() error {
	var errs []error
	for _, m := range s.nodes {
		if m.cancel != nil {
			errs = append(errs, m.stop())
		}
	}
	return errors.Join(errs...)
}

// query asks the cluster for its leader and returns every answer.
func (s *sim) query() []protocol.Announcement {
	synctest.Wait()
	return s.net.Query()
}

// The query responder answers only while its node leads: nobody answers
// before a leader is elected, the leader answers, and once a higher node
// has taken over, only the new leader answers.
func TestSeamQueryResponderOnlyWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2, 3)
		ch := s.observer()
		if got := s.query(); len(got) != 0 {
			t.Fatalf("query without nodes: answers %+v, want none", got)
		}
		s.add(1, nil).run()
		s.add(2, nil).run()
		first := awaitLeader(t, ch, 2)
		synctest.Wait()
		if got := s.query(); len(got) != 1 || got[0].Leader != 2 || got[0].Term != first.Term {
			t.Fatalf("query while 2 leads at term %d: answers %+v, want one from 2", first.Term, got)
		}
		s.add(3, nil).run()
		second := awaitLeader(t, ch, 3)
		synctest.Wait()
		if err := s.follows(3, second.Term); err != nil {
			t.Fatal(err)
		}
		if got := s.query(); len(got) != 1 || got[0].Leader != 3 || got[0].Term != second.Term {
			t.Fatalf("query after 3 took over at term %d: answers %+v, want one from 3 alone", second.Term, got)
		}
		if err := s.stopAll(); err != nil {
			t.Fatal(err)
		}
		if got := s.query(); len(got) != 0 {
			t.Fatalf("query after every node stopped: answers %+v, want none", got)
		}
	})
}

// Cancelling a leader's Run publishes its Resign while its connection is
// still open (before draining it), and the next node takes over on the
// Resign, without a leader time-out anywhere.
func TestSeamShutdownHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2, 3)
		for _, id := range s.members {
			s.add(id, nil)
		}
		leader := s.nodes[3]
		var mu sync.Mutex
		var resigns []string
		s.net.Observe(func(p transport.Packet) {
			if p.From != leader.conn || p.Announcement != nil {
				return
			}
			if p.Msg.Type == protocol.TypeResign {
				mu.Lock()
				defer mu.Unlock()
				resigns = append(resigns, fmt.Sprintf("connected %v", p.From.Connected()))
			}
		})
		ch := s.observer()
		for _, id := range s.members {
			s.nodes[id].run()
		}
		first := awaitLeader(t, ch, 3)
		synctest.Wait()
		if err := s.follows(3, first.Term); err != nil {
			t.Fatal(err)
		}
		if err := leader.stop(); err != nil {
			t.Fatalf("Run of the leader: %v", err)
		}
		if leader.conn.Connected() {
			t.Error("the leader's connection is open after Run returned")
		}
		mu.Lock()
		if len(resigns) != 1 || resigns[0] != "connected true" {
			t.Errorf("the leader's Resigns: %v, want one before closing", resigns)
		}
		mu.Unlock()
		next := awaitLeader(t, ch, 2)
		synctest.Wait()
		if next.Term <= first.Term {
			t.Errorf("new term %d, want above %d", next.Term, first.Term)
		}
		delete(s.nodes, 3)
		if err := s.follows(2, next.Term); err != nil {
			t.Fatal(err)
		}
		for _, id := range []uint64{1, 2} {
			if v := metric(t, s.nodes[id].Registry(), "election_leader_timeouts_total"); v != 0 {
				t.Errorf("node %d: %v leader time-outs, want none", id, v)
			}
		}
	})
}

// A flood of valid messages to a stalled node fills its bounded inbox;
// what does not fit is dropped and counted as inbox_full, while the
// leader's heartbeats still reach it through the claims queue, and once
// it resumes it follows the leader without having timed it out.
func TestSeamFloodFillsInboxClaimsGetThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const inboxSize, flood = 8, 100
		// Member 1 never runs: the flood comes in its name.
		s := newSim(t, protocol.Bully, 1, 2, 3)
		victim := s.add(2, func(c *node.Config) { c.InboxSize = inboxSize })
		s.add(3, nil)
		ch := s.observer()
		beats := s.heartbeats()
		victim.run()
		s.nodes[3].run()
		a := awaitLeader(t, ch, 3)
		synctest.Wait()
		if err := s.follows(3, a.Term); err != nil {
			t.Fatal(err)
		}
		reg := victim.Registry()
		heartbeats := metric(t, reg, "election_messages_received_total", "type", "heartbeat") +
			metric(t, reg, "election_messages_received_total", "type", "coordinator")
		elections := metric(t, reg, "election_messages_received_total", "type", "election")

		// The victim's writes stall: the first Election it handles makes
		// it answer, and its loop waits there while the rest of the flood
		// arrives.
		victim.conn.Hold()
		attacker := s.net.Join(1) // member 1 never runs: the flood comes in its name
		defer attacker.Close()
		stamp := protocol.NewStamp(1)
		for i := range flood {
			m := protocol.Message{V: protocol.Version, Type: protocol.TypeElection, From: 1, Term: a.Term}
			stamp.Apply(&m, time.Now())
			if err := attacker.Send(m); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				synctest.Wait() // the victim takes it, and stalls answering it
			}
		}
		synctest.Wait()
		// The victim handled the first Election; then inboxSize wait in its
		// inbox. The rest is dropped.
		drops := metric(t, reg, "election_messages_dropped_total", "reason", "inbox_full")
		queued := metric(t, reg, "election_messages_received_total", "type", "election") - elections
		if drops+queued != flood || queued != 1+inboxSize {
			t.Errorf("elections of the flood: %v queued and %v dropped as inbox_full, want %d in all with %d queued",
				queued, drops, flood, 1+inboxSize)
		}
		// The leader's next heartbeat reaches the stalled victim, its inbox
		// still full.
		awaitHeartbeat(t, beats, 3)
		synctest.Wait()
		if got := metric(t, reg, "election_messages_received_total", "type", "heartbeat") +
			metric(t, reg, "election_messages_received_total", "type", "coordinator"); got <= heartbeats {
			t.Fatalf("claims received by the flooded node: %v, no more than the %v before the flood", got, heartbeats)
		}
		victim.conn.Release()
		synctest.Wait()
		// Let the cluster settle after the victim has handled its queue.
		awaitHeartbeat(t, beats, 3)
		synctest.Wait()
		st := s.nodes[3].Status()
		if err := s.follows(3, st.Term); err != nil {
			t.Fatal(err)
		}
		if v := metric(t, reg, "election_leader_timeouts_total"); v != 0 {
			t.Errorf("flooded node: %v leader time-outs, want none", v)
		}
	})
}

// When a leader falls silent, its followers time out and the highest of
// them claims at once. Its Coordinator may reach another follower only
// when that follower's own deadline comes, unread in its socket until the
// flush there (here node 1, whose time-out is longer and whose messages
// wait unread). The follower then goes straight from the old leader to
// the new one: it must not take the silence of the old leader's last
// interval for the new leader's and time it out as soon as it follows it
// (one leader change per failover, never the new leader twice).
func TestSeamFollowerDoesNotTimeOutANewLeaderAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2, 3, 4, 5, 6)
		for _, id := range s.members {
			s.add(id, func(c *node.Config) {
				if id == 1 {
					c.Election.Timing.LeaderTimeoutTicks += 10
				}
			})
		}
		ch := s.observer()
		for _, id := range s.members {
			s.nodes[id].run()
		}
		a := awaitLeader(t, ch, 6)
		synctest.Wait()
		if err := s.follows(6, a.Term); err != nil {
			t.Fatal(err)
		}
		changes := func() map[uint64]float64 {
			m := map[uint64]float64{}
			for _, id := range []uint64{1, 2, 3, 4} {
				m[id] = metric(t, s.nodes[id].Registry(), "election_leader_changes_total")
			}
			return m
		}
		for round := range 5 {
			before := changes()
			s.nodes[6].conn.Hold() // its heartbeats stop; its connection stays open
			s.nodes[1].conn.Unread()
			b := awaitLeader(t, ch, 5)
			// Long enough for any follower that timed out the new leader
			// to have followed it again.
			time.Sleep(3 * time.Duration(seamTiming.LeaderTimeoutTicks) * node.DefaultTick)
			synctest.Wait()
			for _, id := range []uint64{1, 2, 3, 4, 5} {
				if st := s.nodes[id].Status(); st.Leader == nil || *st.Leader != 5 || st.Term != b.Term {
					t.Fatalf("round %d: node %d: %+v, want leader 5 at term %d", round+1, id, st, b.Term)
				}
			}
			after := changes()
			for id, n := range after {
				if n-before[id] != 1 {
					t.Errorf("round %d: node %d changed leader %v times in the failover from 6 to 5, want once", round+1, id, n-before[id])
				}
			}
			s.nodes[1].conn.Read()
			s.nodes[6].conn.Release()
			awaitLeader(t, ch, 6)
			time.Sleep(3 * time.Duration(seamTiming.LeaderTimeoutTicks) * node.DefaultTick)
			synctest.Wait()
		}
	})
}

// A byzantine cluster runs on the in-memory network too: the highest
// member leads with a certificate of its term in its announcement, and
// the next takes over when it hands over.
func TestSeamByzantine(t *testing.T) {
	signers, keys := batontest.MemberKeys(t, 1, 2, 3, 4)
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Byzantine, 1, 2, 3, 4)
		s.keys = func(id uint64) (*signing.Signer, *signing.MemberKeys, *signing.MemberKeys) {
			return signers[id], keys, nil
		}
		for _, id := range s.members {
			s.add(id, func(c *node.Config) {
				c.Election.Timing.LeaseTicks = 40
				c.Election.Timing.LeaderLeaseTicks = election.LeaderLease(40, election.DefaultMaxDrift)
			})
		}
		ch := s.observer()
		for _, id := range s.members {
			s.nodes[id].run()
		}
		first := awaitLeader(t, ch, 4)
		if first.Certificate == nil || first.Certificate.Term != first.Term || first.Certificate.Leader != 4 {
			t.Fatalf("announcement of 4: %+v, want the certificate of its term", first)
		}
		if err := s.nodes[4].stop(); err != nil {
			t.Fatal(err)
		}
		delete(s.nodes, 4)
		next := awaitLeader(t, ch, 3)
		if next.Term <= first.Term || next.Certificate == nil || next.Certificate.Term != next.Term {
			t.Errorf("announcement of 3: %+v, want a certificate of a term above %d", next, first.Term)
		}
	})
}

// A leader whose heartbeats are far apart claims again at once when a
// member may have missed its claims (transport.PeerBack), and a follower
// sends nothing.
func TestSeamPeerBackReasserts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2, 3)
		for _, id := range s.members {
			s.add(id, func(c *node.Config) {
				c.Election.Timing.HeartbeatTicks = 100_000 // 1000 s
				c.Election.Timing.LeaderTimeoutTicks = 200_000
				c.Election.Timing.LeaseTicks, c.Election.Timing.LeaderLeaseTicks = 0, 0
			})
		}
		ch := s.observer()
		beats := s.heartbeats()
		for _, id := range s.members {
			s.nodes[id].run()
		}
		a := awaitLeader(t, ch, 3)
		synctest.Wait()
		if err := s.follows(3, a.Term); err != nil {
			t.Fatal(err)
		}
		for len(beats) > 0 {
			<-beats
		}
		s.nodes[2].conn.Back(1)
		synctest.Wait()
		if len(beats) != 0 {
			t.Fatalf("a follower told that member 1 is back sent a heartbeat")
		}
		s.nodes[3].conn.Back(1)
		awaitHeartbeat(t, beats, 3)
	})
}
