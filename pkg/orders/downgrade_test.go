package orders_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// A member that announces itself leader at the highest term, naming
// another algorithm (or none) to do without a certificate, is not
// followed: the members still follow the certified leaders after it, and
// the leader of term 8 issues in term 8.
func TestDowngradedAnnouncementIgnored(t *testing.T) {
	for _, alg := range []protocol.Algorithm{protocol.Paxos, "", "raft"} {
		t.Run(string(alg), func(t *testing.T) {
			w := newWorld(t)
			w.start(1, 2, 3, 4)
			if o := w.issue(4, "first"); o.Term != term {
				t.Fatalf("Issue = %+v; want an order of term %d", o, term)
			}
			announce := func(a protocol.Announcement, s *signing.Signer) {
				t.Helper()
				data, err := protocol.EncodeAnnouncement(a)
				if err != nil {
					t.Fatal(err)
				}
				m := &nats.Msg{Subject: protocol.LeaderSubject(cluster), Data: data, Header: s.SignAnnouncement(cluster, data)}
				if err := w.nc.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
			}
			announce(protocol.Announcement{Cluster: cluster, Leader: 3, Term: protocol.MaxTerm, Algorithm: alg,
				At: protocol.Timestamp{Time: time.Now()}}, w.signers[3])
			announce(protocol.Announcement{Cluster: cluster, Leader: 4, Term: term + 1, Algorithm: protocol.Byzantine,
				At: protocol.Timestamp{Time: time.Now()}, Certificate: certificate(t, w.signers, term+1, 4, 1, 2, 3)}, w.signers[4])
			batontest.CheckFor(t, wait, func() error {
				o, err := w.services[4].Issue(w.ctx, "second")
				if err != nil || o.Term != term+1 {
					w.clock.Advance(time.Second) // the orders of term 7 end
					return fmt.Errorf("Issue on leader 4 after the downgrade = %+v, %v; want an order of term %d", o, err, term+1)
				}
				return nil
			})
		})
	}
}
