package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
)

// Algorithms lists the algorithms a node can run.
var Algorithms = []Algorithm{Bully, Ring, Paxos}

// Announcement is published on LeaderSubject each time a node becomes
// leader. Consumers must ignore fields they do not know.
type Announcement struct {
	Cluster   string    `json:"cluster"`
	Leader    uint64    `json:"leader"`
	Term      uint64    `json:"term"`
	Algorithm Algorithm `json:"algorithm"`
	At        Timestamp `json:"at"`
}

// ErrAnnouncement is wrapped by every error of DecodeAnnouncement.
var ErrAnnouncement = errors.New("protocol: invalid announcement")

// EncodeAnnouncement returns the wire form of a.
func EncodeAnnouncement(a Announcement) ([]byte, error) { return json.Marshal(a) }

// DecodeAnnouncement parses and checks an announcement. Unknown fields are
// ignored, as the contract asks of consumers.
func DecodeAnnouncement(data []byte) (Announcement, error) {
	var a Announcement
	if len(data) > MaxPayload {
		return a, fmt.Errorf("%w: %d bytes exceeds %d", ErrAnnouncement, len(data), MaxPayload)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return Announcement{}, fmt.Errorf("%w: %v", ErrAnnouncement, err)
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
	}
	return a, nil
}
