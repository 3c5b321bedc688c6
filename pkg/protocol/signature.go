package protocol

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// ReadAnnouncement decodes an announcement received for cluster, with the
// headers it came with. With keys, it must be signed by the member it
// names as leader (see MemberKeys.Verify; the signature is checked before
// the payload is decoded): a missing or wrong signature is a
// *ValidationError with ReasonSignature. A malformed announcement, or one
// of another cluster, wraps ErrAnnouncement. A byzantine announcement
// counts only with the members' keys and a certificate that holds under
// them (VerifyAnnouncement): without keys its error wraps ErrNeedKeys, with
// a missing or failing certificate ErrUncertified. Every reader (the
// observer, pkg/leader) checks announcements with it.
func ReadAnnouncement(keys *MemberKeys, cluster string, data []byte, h nats.Header) (Announcement, error) {
	var signer uint64
	if keys != nil {
		var err error
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
	if err := VerifyAnnouncement(keys, a); err != nil {
		return Announcement{}, err
	}
	return a, nil
}
