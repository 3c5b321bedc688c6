package natstransport_test

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// slowTiming has a leader time-out of a second, so that the connection
// event reaches the followers long before it.
func slowTiming() election.Timing {
	t := testTiming
	t.LeaderTimeoutTicks = 100
	return t
}

// TestConnectionEventsReplaceACrashedLeader crashes the leader on a server
// configured as the deployment's (internal/natsconf): the others stop
// following it because its connection closed, not because it fell silent,
// and elect the next, for Bully and the ring. Paxos waits for the lease, which the
// event does not shorten (see pkg/paxos), so it is not run here.
func TestConnectionEventsReplaceACrashedLeader(t *testing.T) {
	for _, tc := range []struct {
		algorithm protocol.Algorithm
		keys      bool
	}{{protocol.Bully, false}, {protocol.Ring, false}, {protocol.Bully, true}} {
		algorithm := tc.algorithm
		name := string(algorithm)
		if tc.keys {
			name += "/member_keys"
		}
		t.Run(name, func(t *testing.T) {
			members := []uint64{1, 2, 3}
			opts := []batontest.NATSOption{batontest.WithAccounts()}
			c := cluster{name: "events", algorithm: algorithm, members: members, accounts: true, timing: slowTiming()}
			if tc.keys {
				// The nodes connect with their member keys: a member's own
				// disconnect, carrying its key, still counts.
				c.signers, c.keys = batontest.MemberKeys(t, members...)
				opts = append(opts, batontest.WithMemberUsers(c.keys))
			}
			url := batontest.StartNATS(t, opts...)
			c.url = url
			nodes := c.startAll(t)
			term := awaitAgreement(t, nodes, 3)
			// The last node to start may see no other member connect, and
			// probes after a grace, beside its election.
			batontest.CheckFor(t, 5*time.Second, func() error {
				for id, n := range nodes {
					if got := counter(t, n.Registry(), "election_connection_events"); got != 1 {
						return fmt.Errorf("node %d: election_connection_events = %v, want 1", id, got)
					}
				}
				return nil
			})

			nodes[3].crash(t)
			delete(nodes, 3)
			if next := awaitAgreement(t, nodes, 2); next <= term {
				t.Fatalf("term after the crash: got %d, want > %d", next, term)
			}
			for id, n := range nodes {
				if got := counter(t, n.Registry(), "election_peer_disconnects_total"); got < 1 {
					t.Errorf("node %d: election_peer_disconnects_total = %v, want ≥ 1", id, got)
				}
				if got := counter(t, n.Registry(), "election_leader_disconnects_total"); got != 1 {
					t.Errorf("node %d: election_leader_disconnects_total = %v, want 1", id, got)
				}
				if got := counter(t, n.Registry(), "election_leader_timeouts_total"); got != 0 {
					t.Errorf("node %d: election_leader_timeouts_total = %v, want 0: the event came first", id, got)
				}
			}
		})
	}
}

// TestConnectionNameProvesNothing: with member keys, a client that
// connects under a member's connection name, without the member's key,
// and disconnects does not make the others take that member for dead: not
// as a client of the node user's password, nor as another member with
// its own key. Attributed by the name alone, each disconnect would make
// Bully and ring followers start an election against their live leader.
func TestConnectionNameProvesNothing(t *testing.T) {
	for _, algorithm := range []protocol.Algorithm{protocol.Bully, protocol.Ring} {
		t.Run(string(algorithm), func(t *testing.T) {
			members := []uint64{1, 2, 3}
			c := cluster{name: "events", algorithm: algorithm, members: members, accounts: true, timing: slowTiming()}
			c.signers, c.keys = batontest.MemberKeys(t, members...)
			c.url = batontest.StartNATS(t, batontest.WithAccounts(), batontest.WithMemberUsers(c.keys))
			nodes := c.startAll(t)
			term := awaitAgreement(t, nodes, 3)
			changes := counters(t, nodes, "election_leader_changes_total")
			elections := counters(t, nodes, "election_elections_started_total")

			leaderName := nats.Name(protocol.ConnectionName(c.name, 3))
			impostors := [][]nats.Option{
				append(batontest.AsNode(c.name, 3), leaderName),              // the node user's password
				append(batontest.AsMember(c.name, c.signers[2]), leaderName), // member 2's own key
			}
			// Claiming the leader's key without its seed: the server, which
			// lists the members as nkey users, refuses the connection.
			claim := nats.Nkey(c.signers[3].PublicKey(), c.signers[2].KeyPair().Sign)
			if nc, err := nats.Connect(c.url, append(batontest.AsNode(c.name, 3), claim)...); err == nil {
				nc.Close()
				t.Fatal("a client claiming the leader's key without its seed was let in")
			}
			for _, opts := range impostors {
				nc, err := nats.Connect(c.url, opts...)
				if err != nil {
					t.Fatal(err)
				}
				nc.Close()
			}
			// Each impostor's connect and disconnect events reach the
			// followers and are dropped as forged (the leader ignores
			// events that name itself).
			for id, n := range nodes {
				if id == 3 {
					continue
				}
				batontest.CheckFor(t, 5*time.Second, func() error {
					if got := counter(t, n.Registry(), "election_messages_dropped_total", "reason", string(protocol.ReasonSignature)); got < 4 {
						return fmt.Errorf("node %d: forged connection events dropped: got %v, want 4", id, got)
					}
					return nil
				})
			}
			if got, err := agreement(nodes, 3); err != nil || got != term {
				t.Fatalf("after the impostors: term %d, %v; want leader 3, term %d", got, err, term)
			}
			for id, n := range nodes {
				if got := counter(t, n.Registry(), "election_peer_disconnects_total"); got != 0 {
					t.Errorf("node %d: election_peer_disconnects_total = %v, want 0", id, got)
				}
				if got := counter(t, n.Registry(), "election_leader_changes_total"); got != changes[id] {
					t.Errorf("node %d: leader changes: got %v, want %v", id, got, changes[id])
				}
				if got := counter(t, n.Registry(), "election_elections_started_total"); got != elections[id] {
					t.Errorf("node %d: elections started: got %v, want %v", id, got, elections[id])
				}
			}
		})
	}
}

// TestConnectionEventsNotDelivered runs nodes on a server without the
// accounts that deliver connection events: they elect a leader as usual
// and report through the gauge that they rely on heartbeats. With the
// events off, the node does not subscribe to them at all.
func TestConnectionEventsNotDelivered(t *testing.T) {
	for _, events := range []string{node.ConnectionEventsAuto, node.ConnectionEventsOff} {
		t.Run(events, func(t *testing.T) {
			url := batontest.StartNATS(t)
			c := cluster{url: url, name: "plain", algorithm: protocol.Bully, members: []uint64{1, 2}, events: events}
			nodes := c.startAll(t)
			awaitAgreement(t, nodes, 2)
			for id, n := range nodes {
				if got := counter(t, n.Registry(), "election_connection_events"); got != 0 {
					t.Errorf("node %d: election_connection_events = %v, want 0", id, got)
				}
			}
		})
	}
}
