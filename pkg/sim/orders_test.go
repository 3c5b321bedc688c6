package sim_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

// ordersCluster is byzantineCluster with the orders enabled; it returns
// the relay keys too.
func ordersCluster(t *testing.T, n int, traitors []uint64, trace *strings.Builder) (*sim.Cluster, *sim.RelayKeys) {
	t.Helper()
	c, _ := byzantineCluster(t, n, traitors, trace)
	members := c.Members()
	keys, _, err := sim.MemberKeys(members)
	if err != nil {
		t.Fatal(err)
	}
	relay := sim.NewRelayKeys(keys, members)
	signers := map[uint64]certify.Signer{}
	for _, id := range members {
		signers[id] = relay.Signer(id)
	}
	if err := c.EnableOrders(sim.OrdersConfig{Cluster: sim.ByzantineCluster, Keys: relay, Signers: signers,
		Rand: rand.New(rand.NewPCG(3, 4)), MaxInFlight: sim.MaxOrderInFlight(n)}); err != nil {
		t.Fatal(err)
	}
	return c, relay
}

// leaderOf runs c until a node reports leader, and returns it.
func leaderOf(t *testing.T, c *sim.Cluster) uint64 {
	t.Helper()
	for range 2000 {
		c.Tick()
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		for _, id := range c.Members() {
			if st, up := c.Status(id); up && st.Role == election.Leader && st.Leader == id {
				return id
			}
		}
	}
	t.Fatal("no leader after 2000 ticks")
	return 0
}

// An honest leader's order is decided by every member within OrderBound
// on a quiet network; a member restarted from its disk does not open it
// again when its leader's message is replayed, so it decides it once.
func TestOrdersDecidedAndNotReopened(t *testing.T) {
	var trace strings.Builder
	c, _ := ordersCluster(t, 4, nil, &trace)
	for _, id := range c.Members() {
		c.Start(id)
	}
	lead := leaderOf(t, c)
	c.CheckOrdersFrom()
	o, err := c.IssueOrder(lead, "attack")
	if err != nil {
		t.Fatal(err)
	}
	c.Run(sim.OrderBound(4) + 1)
	if err := c.Err(); err != nil {
		t.Fatalf("%v\n%s", err, trace.String())
	}
	if err := c.OrdersErr(); err != nil {
		t.Fatal(err)
	}
	if s := c.OrderStats(); s.Decisions != 4 || s.Checked != 1 {
		t.Fatalf("order stats %+v; want 4 decisions, the order checked", s)
	}
	// The leader's message, replayed to a restarted member.
	var other uint64
	for _, id := range c.Members() {
		if id != lead {
			other = id
			break
		}
	}
	c.Crash(other)
	c.Start(other)
	replay := replayOf(t, c, lead, protocol.OrderMessage{Cluster: sim.ByzantineCluster, Term: o.Term, Seq: o.Seq, From: lead})
	if err := c.InjectOrder(replay); err != nil {
		t.Fatal(err)
	}
	c.Run(sim.OrderBound(4) + 1)
	if err := c.Err(); err != nil {
		t.Fatalf("after the replay: %v", err)
	}
	if s := c.OrderStats(); s.Decisions != 4 {
		t.Errorf("order stats %+v after the replay; want still 4 decisions", s)
	}
}

// replayOf rebuilds the leader's first message of an order: its relay to
// each other member, signed with the leader's relay key, and the
// certificate its election machine holds.
func replayOf(t *testing.T, c *sim.Cluster, lead uint64, om protocol.OrderMessage) protocol.OrderMessage {
	t.Helper()
	members := c.Members()
	keys, _, err := sim.MemberKeys(members)
	if err != nil {
		t.Fatal(err)
	}
	relay := sim.NewRelayKeys(keys, members)
	cert, ok := c.Certificate(lead)
	if !ok {
		t.Fatalf("leader %d holds no certificate", lead)
	}
	om.Certificate = &cert
	om.Values = []string{"attack"}
	s := signed(t, relay.Signer(lead), certify.Relay(sim.ByzantineCluster, om.Term, om.Seq, []uint64{lead}, []byte("attack")))
	om.Signatures = [][]byte{s.Signature}
	for _, id := range members {
		if id != lead {
			om.Relays = append(om.Relays, protocol.OrderRelay{To: id, Path: []uint64{lead}})
		}
	}
	return om
}

// The cluster fails a run in which relay evidence convicts an honest
// member: here two contradicting relays of member 2 (made with its key,
// which only a test holds) reach the others, which find the evidence.
func TestRelayEvidenceAgainstAnHonestMemberCaught(t *testing.T) {
	c, relay := ordersCluster(t, 4, nil, nil)
	for _, id := range c.Members() {
		c.Start(id)
	}
	lead := leaderOf(t, c)
	o, err := c.IssueOrder(lead, "attack")
	if err != nil {
		t.Fatal(err)
	}
	var honest uint64
	for _, id := range c.Members() {
		if id != lead {
			honest = id
			break
		}
	}
	for _, v := range []string{"attack", "retreat"} {
		s := signed(t, relay.Signer(honest), certify.Relay(sim.ByzantineCluster, o.Term, o.Seq, []uint64{lead, honest}, []byte(v)))
		var to uint64
		for _, id := range c.Members() {
			if id != lead && id != honest {
				to = id
				break
			}
		}
		om := protocol.OrderMessage{Cluster: sim.ByzantineCluster, Term: o.Term, Seq: o.Seq, From: honest, Values: []string{v},
			Relays: []protocol.OrderRelay{{To: to, Path: []uint64{lead, honest}}}, Signatures: [][]byte{s.Signature}}
		if err := c.InjectOrder(om); err != nil {
			t.Fatal(err)
		}
	}
	c.Run(sim.OrderBound(4))
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "an honest member") {
		t.Errorf("cluster error %v; want relay evidence against an honest member", err)
	}
}

// A traitor that takes part in the orders says what its agreement
// machine would, bent: every message it broadcasts is valid, its own or
// a verbatim replay of one it received, and some relay a value the
// leader did not issue.
func TestTraitorOrderLies(t *testing.T) {
	members := []uint64{1, 2, 3, 4}
	keys, signers, err := sim.MemberKeys(members)
	if err != nil {
		t.Fatal(err)
	}
	relay := sim.NewRelayKeys(keys, members)
	var votes []certify.SignedStatement
	for _, id := range []uint64{1, 2, 3} {
		votes = append(votes, signed(t, signers[id], certify.Vote(sim.ByzantineCluster, id, 4, 4)))
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	machine := func(id uint64) *agreement.Machine {
		m, err := agreement.New(agreement.Config{Cluster: sim.ByzantineCluster, Signer: relay.Signer(id), Members: members,
			Keys: relay, Round: sim.OrderRound * time.Millisecond, MaxOrders: 16, Default: sim.OrderDefault})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	lead := machine(4)
	if err := lead.Lead(cert); err != nil {
		t.Fatal(err)
	}
	traitor := sim.NewTraitor(sim.TraitorConfig{ID: 3, Signer: signers[3], Cluster: sim.ByzantineCluster, Members: members,
		Accomplices: []uint64{3}, Rand: rand.New(rand.NewPCG(1, 1)), Orders: machine(3), OrderSigner: relay.Signer(3),
		OrderKeys: relay, OrderRand: rand.New(rand.NewPCG(2, 2))})
	now := time.Unix(0, 0)
	var heard []protocol.OrderMessage
	lies := 0
	for seq := range 40 {
		if _, err := lead.Issue(now, "attack"); err != nil {
			t.Fatal(err)
		}
		for _, om := range lead.Ready().Messages {
			heard = append(heard, om)
			traitor.ReceiveOrder(now, om)
		}
		now = now.Add(time.Duration(4*sim.OrderRound) * time.Millisecond) // past the order's rounds
		for _, om := range traitor.TickOrders(now) {
			if err := protocol.ValidateOrderMessage(om); err != nil {
				t.Fatalf("order %d: the traitor sends an invalid message: %v", seq+1, err)
			}
			if om.From != 3 {
				if !slices.ContainsFunc(heard, func(h protocol.OrderMessage) bool { return h.From == om.From && h.Seq == om.Seq }) {
					t.Fatalf("order %d: the traitor sends a message of %d it never received", seq+1, om.From)
				}
				continue
			}
			for _, r := range om.Relays {
				if om.Values[r.Value] != "attack" {
					lies++
				}
			}
		}
	}
	if lies == 0 || traitor.OrderLies() == 0 {
		t.Errorf("the traitor relayed %d wrong values, %d lies in all; want some", lies, traitor.OrderLies())
	}
}
