package signing

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/protocol"
)

// ReadAnnouncement is ReadAnnouncementOf with the algorithm the keys
// state (keys.Algorithm), if any.
func ReadAnnouncement(keys *MemberKeys, cluster string, data []byte, h nats.Header) (protocol.Announcement, error) {
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
// cluster, wraps protocol.ErrAnnouncement. Then VerifyAnnouncementOf applies: an
// announcement of another algorithm wraps ErrAlgorithm; in a byzantine
// cluster, one without a certificate that holds wraps ErrUncertified,
// whatever algorithm it names; with keys but no known algorithm, only a
// certified announcement is believed (ErrNoAlgorithm); without keys, a
// byzantine one wraps ErrNeedKeys. Every reader (the observer,
// pkg/leader) checks announcements with it.
func ReadAnnouncementOf(keys *MemberKeys, cluster string, algorithm protocol.Algorithm, data []byte, h nats.Header) (protocol.Announcement, error) {
	algorithm, err := ClusterAlgorithm(keys, cluster, algorithm)
	if err != nil {
		return protocol.Announcement{}, err
	}
	var signer uint64
	if keys != nil {
		if signer, err = keys.Verify(protocol.LeaderSubject(cluster), data, h); err != nil {
			return protocol.Announcement{}, err
		}
	}
	a, err := protocol.DecodeAnnouncement(data)
	if err != nil {
		return protocol.Announcement{}, err
	}
	if a.Cluster != cluster {
		return protocol.Announcement{}, fmt.Errorf("%w: cluster %q where %q was expected", protocol.ErrAnnouncement, a.Cluster, cluster)
	}
	if keys != nil {
		if err := CheckSigner(signer, a.Leader); err != nil {
			return protocol.Announcement{}, err
		}
	}
	if err := VerifyAnnouncementOf(keys, algorithm, a); err != nil {
		return protocol.Announcement{}, err
	}
	return a, nil
}
