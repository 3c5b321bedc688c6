package natstransport_test

import (
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
)

var five = []uint64{1, 2, 3, 4, 5}

// TestFailover runs five nodes through the life of a cluster: the highest
// ID wins; when it crashes the next highest takes over; when it comes back
// it takes over again with a newer term; when it leaves cleanly it hands
// over without anyone waiting for a time-out.
func TestFailover(t *testing.T) {
	for _, algorithm := range protocol.Algorithms {
		t.Run(string(algorithm), func(t *testing.T) {
			url := batontest.StartNATS(t)
			c := cluster{url: url, name: "default", algorithm: algorithm, members: five}
			if algorithm.NeedsKeys() {
				c.signers, c.keys = batontest.MemberKeys(t, five...)
				c.timing = byzantineTiming
			}
			leaders := announcements(t, url, c.name, stated(t, c.keys, c.algorithm))
			client := connect(t, url)
			nodes := c.startAll(t)

			// The highest ID wins, and everybody agrees.
			term := awaitAgreement(t, nodes, 5)
			awaitAnnouncement(t, leaders, 5, term)
			if a := query(t, client, c.name, stated(t, c.keys, c.algorithm)); a.Leader != 5 || a.Term != term || a.Algorithm != algorithm {
				t.Fatalf("query: got %+v, want leader 5 term %d", a, term)
			}

			// 5 dies without a word: 4 takes over with a newer term.
			nodes[5].crash(t)
			delete(nodes, 5)
			term = awaitFailover(t, nodes, leaders, 4, term)
			if a := query(t, client, c.name, stated(t, c.keys, c.algorithm)); a.Leader != 4 || a.Term != term {
				t.Fatalf("query: got %+v, want leader 4 term %d", a, term)
			}

			// 5 comes back and takes over with a newer term.
			nodes[5] = c.start(t, 5)
			term = awaitFailover(t, nodes, leaders, 5, term)

			// 5 leaves cleanly: 4 takes over at once.
			handOver(t, nodes, leaders, 5, 4, term)
		})
	}
}

// awaitFailover waits until every node follows leader with a term newer
// than before, and leader has announced it; it returns the term.
func awaitFailover(t *testing.T, nodes map[uint64]*running, leaders <-chan protocol.Announcement, leader, before uint64) uint64 {
	t.Helper()
	term := awaitAgreement(t, nodes, leader)
	if term <= before {
		t.Fatalf("term of leader %d: got %d, want > %d", leader, term, before)
	}
	awaitAnnouncement(t, leaders, leader, term)
	return term
}

// handOver stops the leader as SIGTERM does and checks that next takes over
// without any node's leader time-out firing: the leader's Resign started
// the election.
func handOver(t *testing.T, nodes map[uint64]*running, leaders <-chan protocol.Announcement, leader, next, term uint64) {
	t.Helper()
	leaving := nodes[leader]
	delete(nodes, leader)
	timeouts := make(map[uint64]float64)
	for id, n := range nodes {
		timeouts[id] = counter(t, n.Registry(), "election_leader_timeouts_total")
	}
	if err := leaving.stop(t); err != nil {
		t.Fatalf("Run after stop: got %v, want nil", err)
	}
	awaitFailover(t, nodes, leaders, next, term)
	for id, n := range nodes {
		if got := counter(t, n.Registry(), "election_leader_timeouts_total") - timeouts[id]; got != 0 {
			t.Errorf("node %d: leader time-outs during the hand-over: got %v, want 0", id, got)
		}
	}
}
