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
	// not; signing.VerifyAnnouncement checks it against the members' keys.
	Certificate *certify.Certificate `json:"certificate,omitempty"`
	// Steps are, in a byzantine cluster with dynamic membership, the
	// last changes of the member set the leader adopted (at most
	// MaxAnnouncedSteps), oldest first, so that a reader follows the set
	// the certificate's version names (signing.MemberSets).
	Steps []certify.Step `json:"steps,omitempty"`
}

// MaxAnnouncedSteps bounds the changes of the member set an announcement
// carries: the last ones the leader adopted.
const MaxAnnouncedSteps = 8

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
// (signing.VerifyAnnouncement does): a byzantine announcement must carry one, and
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
