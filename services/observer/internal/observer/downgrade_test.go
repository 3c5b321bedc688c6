package observer

import (
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

// The observer knows a cluster's algorithm from its keys file
// (OBSERVER_KEYS_DIR/<cluster>.keys, "#: algorithm byzantine"), not from
// the announcement: a member that announces itself at the highest term,
// signed with its own key but without a certificate, naming another
// algorithm, none, or one that does not exist, is not recorded, and the
// certified leader after it is.
func TestDowngradedAnnouncementNotRecorded(t *testing.T) {
	for _, alg := range []protocol.Algorithm{protocol.Paxos, "", "raft"} {
		t.Run(string(alg), func(t *testing.T) {
			nc, b, o, _ := startStatedByzantine(t)

			subject := protocol.LeaderSubject("default")
			liar := announcement("default", 3, protocol.MaxTerm, t0)
			liar.Algorithm = alg
			data, err := protocol.EncodeAnnouncement(liar)
			if err != nil {
				t.Fatal(err)
			}
			publishSigned(t, nc, subject, data, b.signers[3])
			honest := announcement("default", 4, 8, t0.Add(time.Second))
			honest.Algorithm, honest.Certificate = protocol.Byzantine, certificate(t, b.signers, 8, 4, 1, 2, 3)
			if data, err = protocol.EncodeAnnouncement(honest); err != nil {
				t.Fatal(err)
			}
			publishSigned(t, nc, subject, data, b.signers[4])

			o.waitFor(t, "the certified term 8", func() bool {
				c, ok := o.store.Cluster("default")
				if !ok {
					return false
				}
				l, ok := c.Current()
				return ok && l.Term == 8
			})
			c, _ := o.store.Cluster("default")
			for _, l := range c.Leaderships {
				if l.Leader == 3 || l.Term == protocol.MaxTerm {
					t.Errorf("recorded leadership %+v of the uncertified member 3", l)
				}
			}
			if l, _ := c.Current(); l.Leader != 4 || l.Term != 8 {
				t.Errorf("current leadership %+v, want member 4 in term 8", l)
			}
		})
	}
}
