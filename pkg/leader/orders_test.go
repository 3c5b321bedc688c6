package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

func publishDecision(t *testing.T, nc *nats.Conn, s *signing.Signer, d protocol.Decision) {
	t.Helper()
	data, err := protocol.EncodeDecision(d)
	if err != nil {
		t.Fatal(err)
	}
	subject := protocol.DecidedSubject("default") // whatever d's cluster
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Data: data, Header: s.Header(subject, data)}); err != nil {
		t.Fatal(err)
	}
}

// Orders yields an order once f+1 = 2 members signed one value: not on
// one liar's decision, nor on forged ones, nor twice.
func TestOrdersNeedFPlusOneSignedDecisions(t *testing.T) {
	c := newByzCluster(t)
	nc, out, rejected := readOrders(t, c)

	d := func(member, seq uint64, value string) protocol.Decision {
		return protocol.Decision{Cluster: "default", Term: 7, Seq: seq, Value: value, Member: member, At: protocol.Timestamp{Time: time.Now()}}
	}
	publishDecision(t, nc, c.signers[3], d(3, 1, "retreat"))              // a liar alone
	publishDecision(t, nc, batontest.NewSigner(t, 1), d(1, 1, "retreat")) // forged
	publishDecision(t, nc, c.signers[2], d(1, 1, "retreat"))              // signed by another
	publishDecision(t, nc, c.signers[1], protocol.Decision{Cluster: "other", Term: 7, Seq: 1, Value: "retreat", Member: 1})
	publishDecision(t, nc, c.signers[1], d(1, 2, "attack"))
	publishDecision(t, nc, c.signers[2], d(2, 2, "attack"))
	publishDecision(t, nc, c.signers[4], d(4, 2, "attack")) // a third: yielded already
	publishDecision(t, nc, c.signers[1], d(1, 3, "hold"))
	publishDecision(t, nc, c.signers[4], d(4, 3, "hold"))

	for _, want := range []struct {
		seq   uint64
		value string
	}{{2, "attack"}, {3, "hold"}} {
		select {
		case o := <-out:
			if o.Term != 7 || o.Seq != want.seq || o.Value != want.value || len(o.Members) != 2 {
				t.Errorf("Orders yielded %+v; want 7/%d %q by 2 members", o, want.seq, want.value)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("no order yielded in %v; want 7/%d", waitTimeout, want.seq)
		}
	}
	for range 3 {
		select {
		case err := <-rejected:
			if err == nil {
				t.Error("a nil rejection")
			}
		case <-time.After(waitTimeout):
			t.Fatal("fewer than 3 decisions rejected")
		}
	}
}

func TestOrdersNeedKeys(t *testing.T) {
	nc := batontest.Connect(t, batontest.StartNATS(t))
	for _, err := range leader.Orders(context.Background(), nc, "default") {
		if !errors.Is(err, leader.ErrNeedKeys) {
			t.Errorf("Orders without keys: %v; want ErrNeedKeys", err)
		}
		return
	}
	t.Error("Orders without keys yielded nothing")
}

// readOrders follows leader.Orders of cluster "default" with c's keys on
// a connection of its own, once it has subscribed; it returns a
// connection to publish on, the orders yielded and the rejections.
func readOrders(t *testing.T, c *byzCluster) (*nats.Conn, <-chan leader.DecidedOrder, <-chan error) {
	t.Helper()
	url := batontest.StartNATS(t)
	nc, reader := batontest.Connect(t, url), batontest.Connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	rejected := make(chan error, 16)
	out := make(chan leader.DecidedOrder, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for o, err := range leader.Orders(ctx, reader, "default", leader.WithKeys(c.keys),
			leader.WithRejected(func(err error) { rejected <- err })) {
			if err != nil {
				t.Errorf("Orders: %v", err)
				return
			}
			out <- o
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	batontest.CheckFor(t, waitTimeout, func() error {
		if reader.NumSubscriptions() == 0 {
			return errors.New("Orders has not subscribed")
		}
		return reader.Flush()
	})
	return nc, out, rejected
}

// A decision is dated and signed: a replay of f+1 old decisions (or of
// undated ones) is not yielded to a new reader as an order just decided.
func TestOrdersRefuseReplayedDecisions(t *testing.T) {
	c := newByzCluster(t)
	nc, out, rejected := readOrders(t, c)
	old := protocol.Timestamp{Time: time.Now().Add(-time.Hour)}
	for _, id := range []uint64{1, 2} {
		publishDecision(t, nc, c.signers[id], protocol.Decision{Cluster: "default", Term: 7, Seq: 1, Value: "attack", Member: id, At: old})
		publishDecision(t, nc, c.signers[id], protocol.Decision{Cluster: "default", Term: 7, Seq: 2, Value: "attack", Member: id})
	}
	now := protocol.Timestamp{Time: time.Now()}
	for _, id := range []uint64{1, 2} {
		publishDecision(t, nc, c.signers[id], protocol.Decision{Cluster: "default", Term: 7, Seq: 3, Value: "hold", Member: id, At: now})
	}
	select {
	case o := <-out:
		if o.Seq != 3 || o.Value != "hold" {
			t.Errorf("Orders yielded %+v; want only the fresh 7/3 %q", o, "hold")
		}
	case <-time.After(waitTimeout):
		t.Fatalf("no order yielded in %v; want 7/3", waitTimeout)
	}
	for range 4 {
		select {
		case err := <-rejected:
			if err == nil {
				t.Error("a nil rejection")
			}
		case <-time.After(waitTimeout):
			t.Fatal("fewer than 4 decisions rejected; want the old and the undated ones")
		}
	}
}
