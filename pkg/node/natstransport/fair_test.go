package natstransport_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// One member that floods valid messages as itself (bursts as fast as one
// connection publishes) cannot starve the others: its messages beyond its
// share are dropped as sender_limit, no valid message is dropped because
// a queue is full (so the leader's heartbeats all reach the machine), and
// no election starts. Before the per-sender limits, the flood filled the
// queues and dropped the leader's heartbeats with them.
func TestChattyMemberCannotStarveHeartbeats(t *testing.T) {
	if testing.Short() {
		t.Skip("floods")
	}
	url := batontest.StartNATS(t)
	c := cluster{url: url, name: "chatty", algorithm: protocol.Bully, members: five}
	nodes := make(map[uint64]*running)
	for _, id := range five[1:] { // 1 lies: it does not run, it floods
		nodes[id] = c.start(t, id)
	}
	term := awaitAgreement(t, nodes, 5)
	changes := counters(t, nodes, "election_leader_changes_total")
	elections := counters(t, nodes, "election_elections_started_total")
	full := counters(t, nodes, "election_messages_dropped_total", "reason", string(node.ReasonInboxFull))

	// Bursts of 1,000 valid messages as fast as one connection
	// publishes them, each once the last has been read: within the
	// subscriptions' pending limits (1,024 messages), so that NATS drops
	// none and what the node does with them is what is tested.
	liar := connect(t, url)
	inc := uint64(time.Now().UnixNano())
	const bursts, burst = 20, 1000
	// taken is how many messages node r's subscriptions have handled:
	// queued for the machine or dropped, for whatever reason.
	taken := func(r *running) float64 {
		reg := r.Registry()
		return counter(t, reg, "election_messages_received_total") + counter(t, reg, "election_messages_dropped_total") +
			counter(t, reg, "election_subscription_dropped_total")
	}
	expected := map[uint64]float64{}
	for id, r := range nodes {
		expected[id] = taken(r)
	}
	n := uint64(0)
	for range bursts {
		for i := range burst {
			n++
			m := protocol.Message{V: protocol.Version, Type: protocol.TypeHeartbeat, From: 1, Term: 1,
				Inc: inc, N: n, TS: time.Now().UnixMilli()}
			if i%2 == 1 { // an Ack of nothing, to 3 and 5 in turn: the inbox's lane
				m.Type, m.To, m.Seq = protocol.TypeAck, uint64(2+i%4), n
			}
			for id := range nodes {
				if m.To == 0 || m.To == id {
					expected[id]++
				}
			}
			data, err := protocol.Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := liar.Publish(protocol.SubjectFor(c.name, m), data); err != nil {
				t.Fatal(err)
			}
		}
		if err := liar.Flush(); err != nil {
			t.Fatal(err)
		}
		batontest.CheckFor(t, 10*time.Second, func() error {
			for id, r := range nodes {
				if got := taken(r); got < expected[id] {
					return fmt.Errorf("node %d has handled %v messages, want %v", id, got, expected[id])
				}
			}
			return nil
		})
	}
	const flood = bursts * burst
	limited := 0.0
	for _, n := range nodes {
		limited += counter(t, n.Registry(), "election_messages_dropped_total", "reason", string(node.ReasonSenderLimit))
	}
	if limited == 0 {
		t.Errorf("no message of the flood dropped as %s", node.ReasonSenderLimit)
	}
	for id, v := range counters(t, nodes, "election_messages_dropped_total", "reason", string(node.ReasonInboxFull)) {
		if v != full[id] {
			t.Errorf("node %d: %v valid messages dropped for a full queue during the flood, want none", id, v-full[id])
		}
	}
	if got, err := agreement(nodes, 5); err != nil || got != term {
		t.Fatalf("after the flood: term %d, %v; want leader 5 with term %d", got, err, term)
	}
	unchanged(t, nodes, "election_leader_changes_total", changes)
	unchanged(t, nodes, "election_elections_started_total", elections)
	t.Logf("%d messages flooded; %v copies dropped over their sender's share", flood, limited)
	for id, n := range nodes {
		if v := counter(t, n.Registry(), "election_subscription_dropped_total"); v != 0 {
			t.Logf("node %d: NATS dropped %v messages (slow consumer): the burst outran the subscription", id, v)
		}
	}
}
