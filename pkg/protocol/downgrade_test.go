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
