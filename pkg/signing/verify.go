package signing

import (
	"fmt"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
)

// ClusterAlgorithm returns the algorithm a reader of cluster with keys
// takes the cluster to run: algorithm, the reader's own setting (""
// for none), or else the one the keys state (keys.Algorithm). It refuses
// an unknown algorithm, keys that state another cluster, and keys that
// state another algorithm; those errors wrap ErrKeys. "" means that the
// reader does not know: see VerifyAnnouncementOf for what it then believes.
func ClusterAlgorithm(keys *MemberKeys, cluster string, algorithm protocol.Algorithm) (protocol.Algorithm, error) {
	if algorithm != "" && !algorithm.Known() {
		return "", fmt.Errorf("%w: unknown algorithm %q; want one of %v", ErrKeys, algorithm, protocol.Algorithms)
	}
	if c := keys.Cluster(); c != "" && c != cluster {
		return "", fmt.Errorf("%w: the members file states cluster %q, not %q", ErrKeys, c, cluster)
	}
	stated := keys.Algorithm()
	switch {
	case stated != "" && algorithm != "" && stated != algorithm:
		return "", fmt.Errorf("%w: the members file states algorithm %q, not %q", ErrKeys, stated, algorithm)
	case algorithm == "":
		return stated, nil
	}
	return algorithm, nil
}

// VerifyAnnouncement is VerifyAnnouncementOf with the algorithm the keys
// state (keys.Algorithm), if any.
func VerifyAnnouncement(keys *MemberKeys, a protocol.Announcement) error {
	return VerifyAnnouncementOf(keys, keys.Algorithm(), a)
}

// VerifyAnnouncementOf checks, with the members' keys, what a decoded
// announcement's signature does not, for a reader that knows (from its own
// configuration, never from the message) that the cluster runs algorithm:
//
//   - The announcement must name algorithm (protocol.ErrAlgorithm otherwise).
//   - In a byzantine cluster, it must carry a certificate that holds
//     (certify.VerifyCertificateFor its cluster, term and leader among the
//     members keys lists), whatever algorithm it names.
//   - A reader with keys that does not know the algorithm ("") believes
//     only a certificate that holds; without one the error wraps
//     protocol.ErrUncertified and protocol.ErrNoAlgorithm. Keys from member credentials
//     (NewAuthorityKeys) are an exception: they are a cluster with
//     dynamic membership, never byzantine, so the reader believes any
//     other algorithm's announcement without a certificate, and none
//     with one.
//   - A certificate on an announcement of another algorithm is checked
//     too, when there are keys.
//
// Without keys (nil) a certificate cannot be checked: a byzantine
// announcement (by algorithm, or by the announcement's own word when the
// algorithm is not known) is refused with an error wrapping protocol.ErrNeedKeys,
// and the others are believed unchecked. A missing or failing certificate
// wraps protocol.ErrAnnouncement, protocol.ErrUncertified and certify's error.
func VerifyAnnouncementOf(keys *MemberKeys, algorithm protocol.Algorithm, a protocol.Announcement) error {
	if algorithm != "" && a.Algorithm != algorithm {
		err := fmt.Errorf("%w: %w: it names %.20q in a %s cluster", protocol.ErrAnnouncement, protocol.ErrAlgorithm, a.Algorithm, algorithm)
		if algorithm == protocol.Byzantine && a.Certificate == nil {
			err = fmt.Errorf("%w: %w: it names %.20q in a byzantine cluster, without a certificate", protocol.ErrAnnouncement, protocol.ErrUncertified, a.Algorithm)
		}
		return err
	}
	if sets := keys.MemberSets(); sets != nil {
		return verifyChanging(sets, a)
	}
	if algorithm == "" && keys.Authority() {
		// Member keys from credentials are those of a cluster with
		// dynamic membership, which byzantine does not run: its
		// leaders hold no certificate, and one that claims to, or
		// names byzantine, lies.
		if a.Algorithm == protocol.Byzantine || a.Certificate != nil {
			return fmt.Errorf("%w: a byzantine announcement or a certificate in a cluster with member credentials", protocol.ErrAnnouncement)
		}
		return nil
	}
	byzantine := algorithm == protocol.Byzantine || (algorithm == "" && a.Algorithm == protocol.Byzantine)
	if keys == nil {
		if byzantine {
			return fmt.Errorf("%w: %w", protocol.ErrAnnouncement, protocol.ErrNeedKeys)
		}
		return nil // nothing is checked without keys
	}
	if a.Certificate == nil {
		switch {
		case byzantine:
			return fmt.Errorf("%w: %w: a byzantine announcement without its certificate", protocol.ErrAnnouncement, protocol.ErrUncertified)
		case algorithm == "":
			return fmt.Errorf("%w: %w: %w", protocol.ErrAnnouncement, protocol.ErrUncertified, protocol.ErrNoAlgorithm)
		}
		return nil
	}
	if err := certify.VerifyCertificateFor(keys.Members(), *a.Certificate, a.Cluster, a.Term, a.Leader); err != nil {
		return fmt.Errorf("%w: %w: %w", protocol.ErrAnnouncement, protocol.ErrUncertified, err)
	}
	return nil
}

// verifyChanging checks the certificate of a byzantine cluster with
// dynamic membership: it follows the changes the announcement carries,
// then checks the certificate against the set of its version.
func verifyChanging(sets *MemberSets, a protocol.Announcement) error {
	if a.Certificate == nil {
		return fmt.Errorf("%w: %w: a byzantine announcement without its certificate", protocol.ErrAnnouncement, protocol.ErrUncertified)
	}
	followErr := sets.Follow(a.Steps)
	members, err := sets.Members(a.Certificate.Version)
	if err != nil {
		if followErr != nil {
			err = fmt.Errorf("%w (and a change it carries does not hold: %w)", err, followErr)
		}
		return fmt.Errorf("%w: %w: %w", protocol.ErrAnnouncement, protocol.ErrUncertified, err)
	}
	if err := certify.VerifyCertificateFor(members, *a.Certificate, a.Cluster, a.Term, a.Leader); err != nil {
		return fmt.Errorf("%w: %w: %w", protocol.ErrAnnouncement, protocol.ErrUncertified, err)
	}
	return nil
}
