package protocol

import (
	"errors"
	"testing"
	"time"
)

// time0 is the time of the announcements of these tests.
var time0 = time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)

// An announcement that names no algorithm, or one that does not exist, is
// malformed.
func TestDecodeAnnouncementRefusesUnknownAlgorithms(t *testing.T) {
	for _, alg := range []Algorithm{"", "raft", "Byzantine", "paxos "} {
		data, err := EncodeAnnouncement(Announcement{Cluster: "c", Leader: 3, Term: 7, Algorithm: alg, At: Timestamp{time0}})
		if err != nil {
			t.Fatal(err)
		}
		if a, err := DecodeAnnouncement(data); !errors.Is(err, ErrAnnouncement) {
			t.Errorf("DecodeAnnouncement(algorithm %q) = %+v, %v; want ErrAnnouncement", alg, a, err)
		}
	}
}

// A reader whose members file states that the cluster is byzantine refuses
// a member's own uncertified leadership whatever algorithm it names.
func TestReadAnnouncementRefusesDowngrades(t *testing.T) {
	c := newCluster(t, 4)
	keys, err := c.keys.State("c", Byzantine)
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []Algorithm{Paxos, Bully, Ring, "", "raft"} {
		a := Announcement{Cluster: "c", Leader: 3, Term: MaxTerm, Algorithm: alg, At: Timestamp{time0}}
		data, err := EncodeAnnouncement(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadAnnouncement(keys, "c", data, c.signers[3].SignAnnouncement("c", data))
		if !errors.Is(err, ErrAnnouncement) {
			t.Errorf("ReadAnnouncement(algorithm %q, no certificate) = %+v, %v; want ErrAnnouncement", alg, got, err)
		}
	}
}

// A reader of a paxos cluster refuses an announcement of another
// algorithm, and a reader of a byzantine cluster a certified announcement
// that names another algorithm.
func TestReadAnnouncementRefusesAnotherAlgorithm(t *testing.T) {
	c := newCluster(t, 4)
	read := func(stated Algorithm, a Announcement) error {
		keys, err := c.keys.State("c", stated)
		if err != nil {
			t.Fatal(err)
		}
		data, err := EncodeAnnouncement(a)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ReadAnnouncement(keys, "c", data, c.signers[a.Leader].SignAnnouncement("c", data))
		return err
	}
	bully := Announcement{Cluster: "c", Leader: 4, Term: 7, Algorithm: Bully, At: Timestamp{time0}}
	if err := read(Paxos, bully); !errors.Is(err, ErrAnnouncement) {
		t.Errorf("bully announcement read as paxos: %v, want ErrAnnouncement", err)
	}
	if err := read(Bully, bully); err != nil {
		t.Errorf("bully announcement read as bully: %v, want nil", err)
	}
	certified := c.announcement(7, 4, c.cert(t, 7, 4, 1, 2, 3))
	certified.Algorithm = Paxos
	if err := read(Byzantine, certified); !errors.Is(err, ErrAnnouncement) {
		t.Errorf("certified announcement naming paxos read as byzantine: %v, want ErrAnnouncement", err)
	}
}

// With keys that state no algorithm, an uncertified announcement is not
// believed: only the keys' statement (or the reader's own option) can say
// that the cluster does without certificates.
func TestReadAnnouncementWithoutAStatedAlgorithm(t *testing.T) {
	c := newCluster(t, 4)
	a := Announcement{Cluster: "c", Leader: 4, Term: 7, Algorithm: Paxos, At: Timestamp{time0}}
	data, err := EncodeAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAnnouncement(c.keys, "c", data, c.signers[4].SignAnnouncement("c", data)); !errors.Is(err, ErrUncertified) {
		t.Errorf("uncertified announcement, keys stating no algorithm: %v, want ErrUncertified", err)
	}
	certified := c.announcement(7, 4, c.cert(t, 7, 4, 1, 2, 3))
	data, err = EncodeAnnouncement(certified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAnnouncement(c.keys, "c", data, c.signers[4].SignAnnouncement("c", data)); err != nil {
		t.Errorf("certified announcement, keys stating no algorithm: %v, want nil", err)
	}
}
