package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// TestLyingMemberCannotEndTheCluster: member 1, with its own valid key and
// NATS user, sends six messages with terms at the ceiling (2^62), as the
// messages that once ended a cluster for good; then the leader is killed.
// Every cluster still elects the next highest ID, with a term far below
// the ceiling, and the observer records it.
func TestLyingMemberCannotEndTheCluster(t *testing.T) {
	d := deploy(t)
	for _, alg := range algorithms {
		t5 := d.leaderTerm(alg, 5)
		// The liar takes member 1's place: its process is gone, its key
		// is the liar's.
		d.kill(d.nodes[alg][1])
		liar := d.member(alg, 1)
		// Member 1 owns the terms t with (t-1) mod 5 = 0; 2^62 is 4 mod 5.
		claim := protocol.MaxTerm - 3
		liar.send([]protocol.Message{
			{Type: protocol.TypeElection, From: 1, Term: protocol.MaxTerm},
			{Type: protocol.TypeCoordinator, From: 1, Term: claim},
			{Type: protocol.TypeHeartbeat, From: 1, Term: claim},
			{Type: protocol.TypeElection, From: 1, Term: protocol.MaxTerm},
			{Type: protocol.TypePrepare, From: 1, Term: claim},
			{Type: protocol.TypePropose, From: 1, Term: claim, Candidate: 1},
		})
		t.Logf("%s: member 1 sent six messages at the term ceiling", alg)

		killed := time.Now()
		d.kill(d.nodes[alg][5])
		t4 := d.waitAgreed(alg, 4, t5, converge, 1, 5)
		t.Logf("%s: leader killed after the lies: nodes 2-4 agreed on 4 (term %d) after %v", alg, t4, time.Since(killed).Round(time.Millisecond))
		// The lies arrived and were believed as far as the bound allows:
		// terms moved far beyond what elections alone would reach.
		if t4 <= t5+1<<20 {
			t.Errorf("%s: term %d after the lies, from %d: the lies did not arrive", alg, t4, t5)
		}
		if t4 >= protocol.MaxTerm/2 {
			t.Errorf("%s: term %d after the lies, want terms far from the ceiling %d", alg, t4, protocol.MaxTerm)
		}
		d.waitRecorded(alg, 4, t5, converge)
		d.checkHistory(alg)
	}
}

// memberClient speaks for one member with its own key, as a member that
// lies would: through its own NATS user and signatures.
type memberClient struct {
	t       *testing.T
	cluster string
	nc      *nats.Conn
	signer  *signing.Signer
	stamp   *protocol.Stamp
}

// member connects to the first NATS server as member id of cluster alg,
// with that member's seed.
func (d *deployment) member(alg string, id uint64) *memberClient {
	d.t.Helper()
	kp, err := signing.ReadSeedFile(filepath.Join(d.keys, alg, memberkeys.SeedFile(id)))
	if err != nil {
		d.t.Fatal(err)
	}
	signer, err := signing.NewSigner(id, kp)
	if err != nil {
		d.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host, err := d.nats[0].Host(ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	port, err := d.nats[0].MappedPort(ctx, "4222/tcp")
	if err != nil {
		d.t.Fatal(err)
	}
	nc, err := nats.Connect(fmt.Sprintf("nats://%s:%s", host, port.Port()),
		nats.Nkey(signer.PublicKey(), kp.Sign), nats.CustomInboxPrefix(protocol.InboxPrefix(alg, id)))
	if err != nil {
		d.t.Fatalf("connect as member %d of %s: %v", id, alg, err)
	}
	d.t.Cleanup(nc.Close)
	return &memberClient{t: d.t, cluster: alg, nc: nc, signer: signer, stamp: protocol.NewStamp(uint64(time.Now().UnixNano()))}
}

// send stamps, signs and publishes msgs, and waits until the server has
// them.
func (c *memberClient) send(msgs []protocol.Message) {
	c.t.Helper()
	for _, m := range msgs {
		c.stamp.Apply(&m, time.Now())
		data, err := protocol.Encode(m)
		if err != nil {
			c.t.Fatal(err)
		}
		subject := protocol.SubjectFor(c.cluster, m)
		if err := c.nc.PublishMsg(&nats.Msg{Subject: subject, Data: data, Header: c.signer.Header(subject, data)}); err != nil {
			c.t.Fatalf("publish %v: %v", m, err)
		}
	}
	if err := c.nc.FlushTimeout(10 * time.Second); err != nil {
		c.t.Fatal(err)
	}
}
