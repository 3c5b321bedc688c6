package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
)

// Each member has its own bucket per queue: a burst, then the steady rate;
// another member's share, and the same member's other queue, are untouched.
func TestSendersAdmit(t *testing.T) {
	var s senders
	now := time.Unix(1000, 0)
	for i := range claimBurst {
		if !s.admit(1, true, 5, now) {
			t.Fatalf("claim %d of the burst refused", i+1)
		}
	}
	if s.admit(1, true, 5, now) {
		t.Errorf("claim beyond the burst admitted")
	}
	if !s.admit(2, true, 5, now) {
		t.Errorf("another member's claim refused")
	}
	if !s.admit(1, false, 5, now) {
		t.Errorf("the same member's other message refused")
	}
	later := now.Add(time.Second / claimRate)
	if !s.admit(1, true, 5, later) {
		t.Errorf("claim after a refill interval refused")
	}
	if s.admit(1, true, 5, later) {
		t.Errorf("second claim within one refill interval admitted")
	}
	if got, want := s.buckets[senderLane{from: 1, claim: false}].tokens, float64(otherBurstBase+otherBurstPerMember*5-1); got != want {
		t.Errorf("other messages' bucket after one: %v tokens, want %v", got, want)
	}
}

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
	full := counters(t, nodes, "election_messages_dropped_total", "reason", string(ReasonInboxFull))

	// Bursts of 1,000 valid messages as fast as one connection
	// publishes them, each once the last has been read: within the
	// subscriptions' pending limits (1,024 messages), so that NATS drops
	// none and what the node does with them is what is tested.
	liar := connect(t, url)
	inc := uint64(time.Now().UnixNano())
	const bursts, burst = 20, 1000
	n := uint64(0)
	for range bursts {
		for i := range burst {
			n++
			m := protocol.Message{V: protocol.Version, Type: protocol.TypeHeartbeat, From: 1, Term: 1,
				Inc: inc, N: n, TS: time.Now().UnixMilli()}
			if i%2 == 1 { // an Ack of nothing, to each in turn: the inbox's lane
				m.Type, m.To, m.Seq = protocol.TypeAck, uint64(2+i%4), n
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
			for id, n := range nodes {
				if n.pending() != 0 || len(n.claims) != 0 || len(n.inbox) != 0 {
					return fmt.Errorf("node %d still has messages waiting", id)
				}
			}
			return nil
		})
	}
	const flood = bursts * burst
	limited := 0.0
	for _, n := range nodes {
		limited += counter(t, n.Registry(), "election_messages_dropped_total", "reason", string(ReasonSenderLimit))
	}
	if limited == 0 {
		t.Errorf("no message of the flood dropped as %s", ReasonSenderLimit)
	}
	for id, v := range counters(t, nodes, "election_messages_dropped_total", "reason", string(ReasonInboxFull)) {
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
