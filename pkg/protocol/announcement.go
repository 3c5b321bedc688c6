package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-election/baton/pkg/certify"
)

// TimeFormat is RFC 3339 with nanoseconds, always nine digits.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Timestamp is a time that encodes in UTC as TimeFormat.
type Timestamp struct{ time.Time }

// MarshalJSON renders the time in UTC with nine fractional digits.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.UTC().Format(TimeFormat))
}

// UnmarshalJSON accepts any RFC 3339 time.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = parsed.UTC()
	return nil
}

// Algorithm names an election algorithm.
type Algorithm string

// The algorithms.
const (
	Bully Algorithm = "bully"
	Ring  Algorithm = "ring"
	Paxos Algorithm = "paxos"
	// Byzantine is the algorithm of package byzantine, which elects a
	// leader among members of whom up to ⌊(n−1)/3⌋ may lie with their
	// own keys; it needs member keys. Its announcements carry the
	// leader's certificate.
	Byzantine Algorithm = "byzantine"
)

// Algorithms lists the algorithms a node can run.
var Algorithms = []Algorithm{Bully, Ring, Paxos, Byzantine}

// Known reports whether a is one of Algorithms.
func (a Algorithm) Known() bool { return slices.Contains(Algorithms, a) }

// CrashAlgorithms lists the algorithms that tolerate crashes, pauses and
// (Paxos) partitions but not lies; they run with or without member keys.
var CrashAlgorithms = []Algorithm{Bully, Ring, Paxos}

// Leases reports whether algorithm's leaders hold a lease granted by a
// quorum (Paxos and byzantine): it renews more often and needs the
// lease's settings.
func (a Algorithm) Leases() bool { return a == Paxos || a == Byzantine }

// NeedsKeys reports whether algorithm runs only with member keys.
func (a Algorithm) NeedsKeys() bool { return a == Byzantine }

// MaxPayload is the largest message a node of algorithm a accepts:
// MaxPayload, or MaxCertifiedPayload for the byzantine algorithm, whose
// messages carry certificates.
func (a Algorithm) MaxPayload() int {
	if a == Byzantine {
		return MaxCertifiedPayload
	}
	return MaxPayload
}

// Announcement is published on LeaderSubject each time a node becomes
// leader. Consumers must ignore fields they do not know.
type Announcement struct {
	Cluster   string    `json:"cluster"`
	Leader    uint64    `json:"leader"`
	Term      uint64    `json:"term"`
	Algorithm Algorithm `json:"algorithm"`
	At        Timestamp `json:"at"`
	// Certificate is the leader's certificate: the votes of a quorum of
	// the members for Leader in Term of Cluster (certify.Certificate, in
	// its JSON form). Byzantine announcements carry it, the others do
	// not; VerifyAnnouncement checks it against the members' keys.
	Certificate *certify.Certificate `json:"certificate,omitempty"`
	// Steps are, in a byzantine cluster with dynamic membership, the
	// last changes of the member set the leader adopted (at most
	// MaxAnnouncedSteps), oldest first, so that a reader follows the set
	// the certificate's version names (MemberSets).
	Steps []certify.Step `json:"steps,omitempty"`
}

// MaxAnnouncement bounds an announcement that carries a certificate, in
// bytes: MaxPayload for the announcement's own fields and
// certify.MaxJSONSize for the certificate, which holds up to
// certify.MaxMembers signatures (at 101 members, a quorum of 68 makes
// about 8 KB). An announcement without a certificate is held to
// MaxPayload.
const MaxAnnouncement = MaxPayload + (1+MaxAnnouncedSteps)*certify.MaxJSONSize

// ErrAnnouncement is wrapped by every error of DecodeAnnouncement.
var ErrAnnouncement = errors.New("protocol: invalid announcement")

// ErrNeedKeys is wrapped by the error of a byzantine announcement read
// or checked without the members' keys: only the keys can tell a valid
// certificate from a forged one, so such an announcement is not
// believed.
var ErrNeedKeys = errors.New("protocol: a byzantine leader is believed only with the members' keys")

// ErrUncertified is wrapped by the error of an announcement whose
// certificate is missing (byzantine) or does not hold under the members'
// keys, together with the certify error that says why.
var ErrUncertified = errors.New("protocol: leader without a valid certificate")

// EncodeAnnouncement returns the wire form of a.
func EncodeAnnouncement(a Announcement) ([]byte, error) { return json.Marshal(a) }

// DecodeAnnouncement parses and checks an announcement. Unknown fields are
// ignored, as the contract asks of consumers. Its algorithm must be one of
// Algorithms (an announcement that names none, or another, is refused). It
// checks the shape of a certificate, not its signatures
// (VerifyAnnouncement does): a byzantine announcement must carry one, and
// a certificate, wherever it is carried, must name the announcement's
// cluster, term and leader.
func DecodeAnnouncement(data []byte) (Announcement, error) {
	var a Announcement
	if len(data) > MaxAnnouncement {
		return a, fmt.Errorf("%w: %d bytes exceeds %d", ErrAnnouncement, len(data), MaxAnnouncement)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return Announcement{}, fmt.Errorf("%w: %w", ErrAnnouncement, err)
	}
	switch {
	case ValidateCluster(a.Cluster) != nil:
		return Announcement{}, fmt.Errorf("%w: cluster %q", ErrAnnouncement, a.Cluster)
	case a.Leader == 0:
		return Announcement{}, fmt.Errorf("%w: leader missing", ErrAnnouncement)
	case a.Term == 0:
		return Announcement{}, fmt.Errorf("%w: term missing", ErrAnnouncement)
	case a.Term > MaxTerm:
		return Announcement{}, fmt.Errorf("%w: term %d above the ceiling %d", ErrAnnouncement, a.Term, MaxTerm)
	case a.At.IsZero():
		return Announcement{}, fmt.Errorf("%w: at missing", ErrAnnouncement)
	case !a.Algorithm.Known():
		return Announcement{}, fmt.Errorf("%w: algorithm %.20q is not one of %v", ErrAnnouncement, a.Algorithm, Algorithms)
	case a.Certificate == nil && len(data) > MaxPayload:
		return Announcement{}, fmt.Errorf("%w: %d bytes without a certificate exceeds %d", ErrAnnouncement, len(data), MaxPayload)
	case a.Certificate == nil && a.Algorithm == Byzantine:
		return Announcement{}, fmt.Errorf("%w: %w: a byzantine announcement without its certificate", ErrAnnouncement, ErrUncertified)
	case len(a.Steps) > MaxAnnouncedSteps:
		return Announcement{}, fmt.Errorf("%w: %d changes of the member set, at most %d", ErrAnnouncement, len(a.Steps), MaxAnnouncedSteps)
	case a.Steps != nil && a.Certificate == nil:
		return Announcement{}, fmt.Errorf("%w: changes of the member set without a certificate", ErrAnnouncement)
	}
	if c := a.Certificate; c != nil && (c.Cluster != a.Cluster || c.Term != a.Term || c.Leader != a.Leader) {
		return Announcement{}, fmt.Errorf("%w: %w: the certificate is of leader %d in term %d of %q, the announcement of leader %d in term %d of %q",
			ErrAnnouncement, ErrUncertified, c.Leader, c.Term, c.Cluster, a.Leader, a.Term, a.Cluster)
	}
	return a, nil
}

// ErrAlgorithm is wrapped by the error of an announcement whose algorithm
// is not the one its reader knows the cluster runs.
var ErrAlgorithm = errors.New("protocol: announcement of another algorithm")

// ErrNoAlgorithm is wrapped by the error of an announcement without a
// certificate read with the members' keys but without knowing the
// cluster's algorithm: the keys file states none ("#: algorithm") and the
// reader gave none. Only the reader's own configuration can say that a
// cluster does without certificates; a message cannot.
var ErrNoAlgorithm = errors.New("protocol: the cluster's algorithm is not known (state it in the members file: \"#: algorithm <name>\")")

// ClusterAlgorithm returns the algorithm a reader of cluster with keys
// takes the cluster to run: algorithm, the reader's own setting (""
// for none), or else the one the keys state (keys.Algorithm). It refuses
// an unknown algorithm, keys that state another cluster, and keys that
// state another algorithm; those errors wrap ErrKeys. "" means that the
// reader does not know: see VerifyAnnouncementOf for what it then believes.
func ClusterAlgorithm(keys *MemberKeys, cluster string, algorithm Algorithm) (Algorithm, error) {
	if algorithm != "" && !algorithm.Known() {
		return "", fmt.Errorf("%w: unknown algorithm %q; want one of %v", ErrKeys, algorithm, Algorithms)
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
func VerifyAnnouncement(keys *MemberKeys, a Announcement) error {
	return VerifyAnnouncementOf(keys, keys.Algorithm(), a)
}

// VerifyAnnouncementOf checks, with the members' keys, what a decoded
// announcement's signature does not, for a reader that knows (from its own
// configuration, never from the message) that the cluster runs algorithm:
//
//   - The announcement must name algorithm (ErrAlgorithm otherwise).
//   - In a byzantine cluster, it must carry a certificate that holds
//     (certify.VerifyCertificateFor its cluster, term and leader among the
//     members keys lists), whatever algorithm it names.
//   - A reader with keys that does not know the algorithm ("") believes
//     only a certificate that holds; without one the error wraps
//     ErrUncertified and ErrNoAlgorithm. Keys from member credentials
//     (NewAuthorityKeys) are an exception: they are a cluster with
//     dynamic membership, never byzantine, so the reader believes any
//     other algorithm's announcement without a certificate, and none
//     with one.
//   - A certificate on an announcement of another algorithm is checked
//     too, when there are keys.
//
// Without keys (nil) a certificate cannot be checked: a byzantine
// announcement (by algorithm, or by the announcement's own word when the
// algorithm is not known) is refused with an error wrapping ErrNeedKeys,
// and the others are believed unchecked. A missing or failing certificate
// wraps ErrAnnouncement, ErrUncertified and certify's error.
func VerifyAnnouncementOf(keys *MemberKeys, algorithm Algorithm, a Announcement) error {
	if algorithm != "" && a.Algorithm != algorithm {
		err := fmt.Errorf("%w: %w: it names %.20q in a %s cluster", ErrAnnouncement, ErrAlgorithm, a.Algorithm, algorithm)
		if algorithm == Byzantine && a.Certificate == nil {
			err = fmt.Errorf("%w: %w: it names %.20q in a byzantine cluster, without a certificate", ErrAnnouncement, ErrUncertified, a.Algorithm)
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
		if a.Algorithm == Byzantine || a.Certificate != nil {
			return fmt.Errorf("%w: a byzantine announcement or a certificate in a cluster with member credentials", ErrAnnouncement)
		}
		return nil
	}
	byzantine := algorithm == Byzantine || (algorithm == "" && a.Algorithm == Byzantine)
	if keys == nil {
		if byzantine {
			return fmt.Errorf("%w: %w", ErrAnnouncement, ErrNeedKeys)
		}
		return nil // nothing is checked without keys
	}
	if a.Certificate == nil {
		switch {
		case byzantine:
			return fmt.Errorf("%w: %w: a byzantine announcement without its certificate", ErrAnnouncement, ErrUncertified)
		case algorithm == "":
			return fmt.Errorf("%w: %w: %w", ErrAnnouncement, ErrUncertified, ErrNoAlgorithm)
		}
		return nil
	}
	if err := certify.VerifyCertificateFor(keys.Members(), *a.Certificate, a.Cluster, a.Term, a.Leader); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrAnnouncement, ErrUncertified, err)
	}
	return nil
}

// verifyChanging checks the certificate of a byzantine cluster with
// dynamic membership: it follows the changes the announcement carries,
// then checks the certificate against the set of its version.
func verifyChanging(sets *MemberSets, a Announcement) error {
	if a.Certificate == nil {
		return fmt.Errorf("%w: %w: a byzantine announcement without its certificate", ErrAnnouncement, ErrUncertified)
	}
	followErr := sets.Follow(a.Steps)
	members, err := sets.Members(a.Certificate.Version)
	if err != nil {
		if followErr != nil {
			err = fmt.Errorf("%w (and a change it carries does not hold: %w)", err, followErr)
		}
		return fmt.Errorf("%w: %w: %w", ErrAnnouncement, ErrUncertified, err)
	}
	if err := certify.VerifyCertificateFor(members, *a.Certificate, a.Cluster, a.Term, a.Leader); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrAnnouncement, ErrUncertified, err)
	}
	return nil
}
