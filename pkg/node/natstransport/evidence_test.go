package natstransport

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
)

// Evidence that a member lied in the orders comes from another member's
// orders service (pkg/orders), signed with its key but without the
// node's freshness fields: it is for the observer, and a node leaves it
// alone without counting it as invalid. The node's own evidence, stamped,
// still reaches the machine.
func TestOrdersEvidenceIsLeftAlone(t *testing.T) {
	url := batontest.StartNATS(t)
	members := []uint64{1, 2, 3, 4}
	signers, keys := batontest.MemberKeys(t, members...)
	const cluster = "orders"
	nc := batontest.Connect(t, url, nats.NoEcho())
	a, err := New(nc, Config{Cluster: cluster, Algorithm: protocol.Byzantine, ID: 1, Members: members, MaxMessageAge: time.Minute,
		Signer: signers[1], Keys: keys, Meter: newCountingMeter(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	meter := newCountingMeter() // the lanes count what the adapter drops
	lanes := transport.NewLanes(64, meter)
	if err := a.Connect(t.Context(), lanes); err != nil {
		t.Fatal(err)
	}
	if err := a.Open(transport.Self{Incarnation: 1, Started: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}

	// Member 3 relayed two values of one order along one path; member 2's
	// orders service found it out and publishes the proof.
	relay := func(value string) certify.SignedStatement {
		s, err := certify.Sign(signers[3].Certify(), certify.Relay(cluster, 7, 1, []uint64{4, 3}, []byte(value)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	e := certify.Evidence{First: relay("advance"), Second: relay("retreat")}
	subject := protocol.BroadcastSubject(cluster, protocol.TypeBzEvidence)
	publish := func(m protocol.Message) {
		t.Helper()
		data, err := protocol.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		client := batontest.Connect(t, url)
		if err := client.PublishMsg(&nats.Msg{Subject: subject, Data: data, Header: signers[2].Header(subject, data)}); err != nil {
			t.Fatal(err)
		}
		if err := client.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	publish(protocol.Message{Type: protocol.TypeBzEvidence, From: 2, Evidence: &e})
	// The node's own evidence, stamped, after it: once it is on the
	// lanes, the first has been handled.
	publish(protocol.Message{Type: protocol.TypeBzEvidence, From: 2, Evidence: &e, Inc: 1, N: 1, TS: time.Now().UnixMilli()})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if in, _, err := lanes.Wait(ctx); err != nil {
		t.Fatal("the stamped evidence did not arrive")
	} else if in.Msg.Type != protocol.TypeBzEvidence || in.Msg.N != 1 {
		t.Fatalf("on the lanes: %+v, want the stamped evidence", in)
	}
	if in, _, ok := lanes.Next(); ok {
		t.Errorf("on the lanes besides: %+v", in)
	}
	meter.mu.Lock()
	defer meter.mu.Unlock()
	if len(meter.dropped) != 0 {
		t.Errorf("dropped %v, want nothing counted", meter.dropped)
	}
}
