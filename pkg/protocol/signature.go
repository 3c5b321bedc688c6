package protocol

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// ReadAnnouncement is ReadAnnouncementOf with the algorithm the keys
// state (keys.Algorithm), if any.
func ReadAnnouncement(keys *MemberKeys, cluster string, data []byte, h nats.Header) (Announcement, error) {
	return ReadAnnouncementOf(keys, cluster, keys.Algorithm(), data, h)
}

// ReadAnnouncementOf decodes an announcement received for cluster, with
// the headers it came with, for a reader that knows the cluster's
// algorithm from its own configuration: algorithm, or, if "", the one the
// keys state (ClusterAlgorithm; keys that state another cluster or
// algorithm are an error wrapping ErrKeys). With keys, the announcement
// must be signed by the member it names as leader (see MemberKeys.Verify;
// the signature is checked before the payload is decoded): a missing or
// wrong signature is a *ValidationError with ReasonSignature. A malformed
// announcement (an unknown algorithm among others), or one of another
// cluster, wraps ErrAnnouncement. Then VerifyAnnouncementOf applies: an
// announcement of another algorithm wraps ErrAlgorithm; in a byzantine
// cluster, one without a certificate that holds wraps ErrUncertified,
// whatever algorithm it names; with keys but no known algorithm, only a
// certified announcement is believed (ErrNoAlgorithm); without keys, a
// byzantine one wraps ErrNeedKeys. Every reader (the observer,
// pkg/leader) checks announcements with it.
func ReadAnnouncementOf(keys *MemberKeys, cluster string, algorithm Algorithm, data []byte, h nats.Header) (Announcement, error) {
	algorithm, err := ClusterAlgorithm(keys, cluster, algorithm)
	if err != nil {
		return Announcement{}, err
	}
	var signer uint64
	if keys != nil {
		if signer, err = keys.Verify(LeaderSubject(cluster), data, h); err != nil {
			return Announcement{}, err
		}
	}
	a, err := DecodeAnnouncement(data)
	if err != nil {
		return Announcement{}, err
	}
	if a.Cluster != cluster {
		return Announcement{}, fmt.Errorf("%w: cluster %q where %q was expected", ErrAnnouncement, a.Cluster, cluster)
	}
	if keys != nil {
		if err := CheckSigner(signer, a.Leader); err != nil {
			return Announcement{}, err
		}
	}
	if err := VerifyAnnouncementOf(keys, algorithm, a); err != nil {
		return Announcement{}, err
	}
	return a, nil
}
