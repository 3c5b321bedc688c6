package natstransport_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// capture records every message of a cluster's election subjects (not the
// leader or query subjects), with its headers, as an eavesdropper would.
type capture struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func startCapture(t *testing.T, url, cluster string) *capture {
	t.Helper()
	c := &capture{}
	nc := connect(t, url)
	subjects := append(protocol.BroadcastSubjects(cluster), protocol.Root+"."+cluster+"."+protocol.KindNode+".*")
	for _, s := range subjects {
		if _, err := nc.Subscribe(s, func(m *nats.Msg) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.msgs = append(c.msgs, &nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.Header})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// taken returns what was captured so far, by message type.
func (c *capture) taken(t *testing.T) map[protocol.Type][]*nats.Msg {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[protocol.Type][]*nats.Msg)
	for _, m := range c.msgs {
		msg, err := protocol.Decode(m.Data)
		if err != nil {
			t.Fatalf("captured %q: %v", m.Data, err)
		}
		out[msg.Type] = append(out[msg.Type], m)
	}
	return out
}

// counters reads a counter of every node.
func counters(t *testing.T, nodes map[uint64]*running, name string, labels ...string) map[uint64]float64 {
	t.Helper()
	out := make(map[uint64]float64)
	for id, n := range nodes {
		out[id] = counter(t, n.Registry(), name, labels...)
	}
	return out
}

// unchanged fails the test if a counter of any node moved since before.
func unchanged(t *testing.T, nodes map[uint64]*running, name string, before map[uint64]float64) {
	t.Helper()
	for id, v := range counters(t, nodes, name) {
		if v != before[id] {
			t.Errorf("node %d: %s went from %v to %v, want unchanged", id, name, before[id], v)
		}
	}
}

// Signed messages cannot be replayed: captured messages of every type,
// and a dead leader's heartbeats (Paxos: its lease renewals) re-published
// every 40 ms, change nothing:
// the leader changes exactly as if they had not been sent, and every copy
// is dropped as replayed or expired.
func TestReplayedMessagesChangeNothing(t *testing.T) {
	for _, algorithm := range protocol.CrashAlgorithms {
		t.Run(string(algorithm), func(t *testing.T) {
			url := batontest.StartNATS(t)
			signers, keys := batontest.MemberKeys(t, five...)
			c := cluster{url: url, name: "replay", algorithm: algorithm, members: five, signers: signers, keys: keys}
			if algorithm == protocol.Paxos {
				// A lease of a second: on a loaded machine with the race
				// detector, a 200 ms lease is sometimes lost and won again
				// with a new ballot, which this test would take for the
				// effect of a replay.
				c.timing = testTiming
				c.timing.LeaseTicks = 100
				c.timing.LeaderLeaseTicks = election.LeaderLease(100, election.DefaultMaxDrift)
			}
			leaders := announcements(t, url, c.name, stated(t, c.keys, c.algorithm))
			eve := startCapture(t, url, c.name)
			nodes := c.startAll(t)
			term := awaitAgreement(t, nodes, 5)
			awaitAnnouncement(t, leaders, 5, term)
			// A failover, so that elections, answers, rounds and acks are
			// captured too; 5 comes back and takes over again.
			nodes[5].crash(t)
			delete(nodes, 5)
			awaitAgreement(t, nodes, 4)
			nodes[5] = c.start(t, 5)
			term = awaitAgreement(t, nodes, 5)
			awaitAnnouncement(t, leaders, 5, term)
			// And 1 leaves cleanly and comes back, so that a Resign is
			// captured.
			nodes[1].stop(t)
			nodes[1] = c.start(t, 1)
			awaitAgreement(t, nodes, 5)
			required := []protocol.Type{protocol.TypeElection, protocol.TypeHeartbeat, protocol.TypeResign}
			beat := protocol.TypeHeartbeat
			if algorithm == protocol.Paxos {
				required = []protocol.Type{protocol.TypePrepare, protocol.TypePromise, protocol.TypePropose, protocol.TypeAccepted, protocol.TypeResign}
				beat = protocol.TypePropose
			}
			// Until a heartbeat of 5's (a lease renewal) is captured too:
			// its first comes a heartbeat interval after it took over.
			var captured map[protocol.Type][]*nats.Msg
			var beats []*nats.Msg
			batontest.CheckFor(t, 5*time.Second, func() error {
				captured = eve.taken(t)
				for _, typ := range required {
					if len(captured[typ]) == 0 {
						return fmt.Errorf("captured no %s message: %v", typ, captured)
					}
				}
				beats = beats[:0]
				for _, m := range captured[beat] {
					if msg, _ := protocol.Decode(m.Data); msg.From == 5 {
						beats = append(beats, m)
					}
				}
				if len(beats) == 0 {
					return fmt.Errorf("captured no %s of node 5", beat)
				}
				return nil
			})

			// 5 dies; 4 takes over as usual.
			nodes[5].crash(t)
			delete(nodes, 5)
			term = awaitAgreement(t, nodes, 4)
			awaitAnnouncement(t, leaders, 4, term)
			changes := counters(t, nodes, "election_leader_changes_total")
			elections := counters(t, nodes, "election_elections_started_total")
			dropped := func() float64 {
				var sum float64
				for _, n := range nodes {
					sum += counter(t, n.Registry(), "election_messages_dropped_total", "reason", string(protocol.ReasonReplayed)) +
						counter(t, n.Registry(), "election_messages_dropped_total", "reason", string(protocol.ReasonExpired))
				}
				return sum
			}
			before := dropped()

			// Replay everything captured, then the dead leader's heartbeats
			// every 40 ms for a second.
			attacker := connect(t, url)
			replays := 0
			for _, msgs := range captured {
				for _, m := range msgs {
					if err := attacker.PublishMsg(m); err != nil {
						t.Fatal(err)
					}
					replays++
				}
			}
			tick := time.NewTicker(40 * time.Millisecond)
			defer tick.Stop()
			for i := range 25 {
				<-tick.C
				if err := attacker.PublishMsg(beats[i%len(beats)]); err != nil {
					t.Fatal(err)
				}
			}
			if err := attacker.Flush(); err != nil {
				t.Fatal(err)
			}
			// Every copy that reached a node was dropped: at least one per
			// replay (broadcasts reach all four, inbox messages one, and
			// those to 5 nobody).
			batontest.CheckFor(t, 5*time.Second, func() error {
				if got := dropped() - before; got < float64(replays) {
					return fmt.Errorf("replayed or expired drops: got %v, want at least %d", got, replays)
				}
				return nil
			})
			if got, err := agreement(nodes, 4); err != nil || got != term {
				t.Fatalf("after the replays: term %d, %v; want leader 4 with term %d", got, err, term)
			}
			unchanged(t, nodes, "election_leader_changes_total", changes)
			unchanged(t, nodes, "election_elections_started_total", elections)
		})
	}
}

// A flood of junk and replayed messages on every subject, thousands per
// second for several seconds, causes no election and costs bounded memory:
// the leader's heartbeats are never starved.
func TestFloodCausesNoElection(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for several seconds")
	}
	url := batontest.StartNATS(t)
	// A leader time-out of 3 s: starving the heartbeats for longer, in
	// the 4 s of the flood, still makes an election, but a CI machine
	// running the race detector with everything in one process does not.
	timing := testTiming
	timing.LeaderTimeoutTicks = 300
	signers, keys := batontest.MemberKeys(t, five...)
	c := cluster{url: url, name: "flood", algorithm: protocol.Bully, members: five, signers: signers, keys: keys, timing: timing}
	eve := startCapture(t, url, c.name)
	nodes := c.startAll(t)
	term := awaitAgreement(t, nodes, 5)
	// Let some heartbeats be captured for the replays.
	batontest.CheckFor(t, 5*time.Second, func() error {
		if n := len(eve.taken(t)[protocol.TypeHeartbeat]); n < 5 {
			return fmt.Errorf("captured %d heartbeats", n)
		}
		return nil
	})
	captured := eve.taken(t)
	var replays []*nats.Msg
	for _, msgs := range captured {
		replays = append(replays, msgs...)
	}
	changes := counters(t, nodes, "election_leader_changes_total")
	elections := counters(t, nodes, "election_elections_started_total")
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	heapBefore := mem.HeapInuse

	subjects := protocol.BroadcastSubjects(c.name)
	for _, id := range five {
		subjects = append(subjects, protocol.InboxSubject(c.name, id))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	stranger := batontest.NewSigner(t, 1)
	junk := func() *nats.Msg {
		subject := subjects[rng.IntN(len(subjects))]
		switch rng.IntN(4) {
		case 0: // random bytes
			data := make([]byte, 1+rng.IntN(2*protocol.MaxPayload))
			for i := range data {
				data[i] = byte(rng.UintN(256))
			}
			return &nats.Msg{Subject: subject, Data: data}
		case 1: // a takeover, unsigned
			return &nats.Msg{Subject: subject, Data: []byte(`{"v":2,"type":"coordinator","from":1,"term":99999,"inc":1,"n":1,"ts":1}`)}
		case 2: // a takeover, signed by a stranger's key under member 1's ID
			m := &nats.Msg{Subject: subject, Data: []byte(`{"v":2,"type":"heartbeat","from":1,"term":99999}`)}
			m.Header = stranger.Header(subject, m.Data)
			return m
		}
		return replays[rng.IntN(len(replays))]
	}
	attacker := connect(t, url)
	const perSecond, seconds = 4000, 4
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for range seconds * 100 {
		<-tick.C
		for range perSecond / 100 {
			if err := attacker.PublishMsg(junk()); err != nil {
				t.Fatal(err)
			}
			sent++
		}
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&mem)
	const bound = 64 << 20
	if grew := int64(mem.HeapInuse) - int64(heapBefore); grew > bound {
		t.Errorf("heap in use grew by %d bytes during the flood, want at most %d", grew, bound)
	}
	if got, err := agreement(nodes, 5); err != nil || got != term {
		t.Fatalf("after %d junk and replayed messages: term %d, %v; want leader 5 with term %d", sent, got, err, term)
	}
	unchanged(t, nodes, "election_leader_changes_total", changes)
	unchanged(t, nodes, "election_elections_started_total", elections)
	t.Logf("flooded %d messages in %d s; heap in use %d → %d bytes", sent, seconds, heapBefore, mem.HeapInuse)
}
