package signing

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

// time0 is the time of the announcements of these tests.
var time0 = time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)

// A reader whose members file states that the cluster is byzantine refuses
// a member's own uncertified leadership whatever algorithm it names.
func TestReadAnnouncementRefusesDowngrades(t *testing.T) {
	c := newCluster(t, 4)
	keys, err := c.keys.State("c", protocol.Byzantine)
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []protocol.Algorithm{protocol.Paxos, protocol.Bully, protocol.Ring, "", "raft"} {
		a := protocol.Announcement{Cluster: "c", Leader: 3, Term: protocol.MaxTerm, Algorithm: alg, At: protocol.Timestamp{Time: time0}}
		data, err := protocol.EncodeAnnouncement(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadAnnouncement(keys, "c", data, c.signers[3].SignAnnouncement("c", data))
		if !errors.Is(err, protocol.ErrAnnouncement) {
			t.Errorf("ReadAnnouncement(algorithm %q, no certificate) = %+v, %v; want protocol.ErrAnnouncement", alg, got, err)
		}
	}
}

// A reader of a paxos cluster refuses an announcement of another
// algorithm, and a reader of a byzantine cluster a certified announcement
// that names another algorithm.
func TestReadAnnouncementRefusesAnotherAlgorithm(t *testing.T) {
	c := newCluster(t, 4)
	read := func(stated protocol.Algorithm, a protocol.Announcement) error {
		keys, err := c.keys.State("c", stated)
		if err != nil {
			t.Fatal(err)
		}
		data, err := protocol.EncodeAnnouncement(a)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ReadAnnouncement(keys, "c", data, c.signers[a.Leader].SignAnnouncement("c", data))
		return err
	}
	bully := protocol.Announcement{Cluster: "c", Leader: 4, Term: 7, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: time0}}
	if err := read(protocol.Paxos, bully); !errors.Is(err, protocol.ErrAnnouncement) {
		t.Errorf("bully announcement read as paxos: %v, want protocol.ErrAnnouncement", err)
	}
	if err := read(protocol.Bully, bully); err != nil {
		t.Errorf("bully announcement read as bully: %v, want nil", err)
	}
	certified := c.announcement(7, 4, c.cert(t, 7, 4, 1, 2, 3))
	certified.Algorithm = protocol.Paxos
	if err := read(protocol.Byzantine, certified); !errors.Is(err, protocol.ErrAnnouncement) {
		t.Errorf("certified announcement naming paxos read as byzantine: %v, want protocol.ErrAnnouncement", err)
	}
}

// With keys that state no algorithm, an uncertified announcement is not
// believed: only the keys' statement (or the reader's own option) can say
// that the cluster does without certificates.
func TestReadAnnouncementWithoutAStatedAlgorithm(t *testing.T) {
	c := newCluster(t, 4)
	a := protocol.Announcement{Cluster: "c", Leader: 4, Term: 7, Algorithm: protocol.Paxos, At: protocol.Timestamp{Time: time0}}
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAnnouncement(c.keys, "c", data, c.signers[4].SignAnnouncement("c", data)); !errors.Is(err, protocol.ErrUncertified) {
		t.Errorf("uncertified announcement, keys stating no algorithm: %v, want protocol.ErrUncertified", err)
	}
	certified := c.announcement(7, 4, c.cert(t, 7, 4, 1, 2, 3))
	data, err = protocol.EncodeAnnouncement(certified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAnnouncement(c.keys, "c", data, c.signers[4].SignAnnouncement("c", data)); err != nil {
		t.Errorf("certified announcement, keys stating no algorithm: %v, want nil", err)
	}
}
