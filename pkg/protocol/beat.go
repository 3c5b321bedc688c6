package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A beat says that a member process of a deployment with several
// elections (a node with several clusters) is alive: each such process
// publishes one on election.<conn>.beat every beat interval, whatever the
// number of its elections, where conn is the cluster after which the
// processes of the deployment name their connections (as for batches).
// A process that hears no beat of a member for the beat time-out tells
// each of its elections that the member is down, as it does when the
// member's connection closes: the elections of a hung process fail over
// together, and their own heartbeats can be rare.
//
// The payload is BeatVersion, the member's ID (uvarint) and when the beat
// was sent (uvarint, Unix milliseconds); with keys it is signed as a
// batch is (the headers of Signer.Header over the beat subject and
// payload), by the member it names.

// KindBeat is the subject kind of beats.
const KindBeat = "beat"

// BeatVersion is the first byte of a beat's payload.
const BeatVersion byte = 1

// MaxBeatPayload bounds a beat's payload.
const MaxBeatPayload = 1 + 2*binary.MaxVarintLen64

// ErrBeat is wrapped by the errors of ReadBeat.
var ErrBeat = errors.New("protocol: beat")

// Beat is one beat: member From was alive at Sent.
type Beat struct {
	From uint64
	Sent time.Time
}

// BeatSubject is the beats' subject of the deployment whose processes
// name their connections after conn.
func BeatSubject(conn string) string { return Root + "." + conn + "." + KindBeat }

// AppendBeat appends the payload of b to buf.
func AppendBeat(buf []byte, b Beat) []byte {
	buf = append(buf, BeatVersion)
	buf = binary.AppendUvarint(buf, b.From)
	return binary.AppendUvarint(buf, uint64(max(b.Sent.UnixMilli(), 0)))
}

// ReadBeat decodes a beat's payload: its version, a member ID that a
// member may have (not 0) and a time that fits, and nothing after them.
func ReadBeat(payload []byte) (Beat, error) {
	if len(payload) > MaxBeatPayload {
		return Beat{}, fmt.Errorf("%w: %d bytes, above %d", ErrBeat, len(payload), MaxBeatPayload)
	}
	if len(payload) == 0 || payload[0] != BeatVersion {
		return Beat{}, fmt.Errorf("%w: not a beat of version %d", ErrBeat, BeatVersion)
	}
	rest := payload[1:]
	from, n := binary.Uvarint(rest)
	if n <= 0 || from == 0 {
		return Beat{}, fmt.Errorf("%w: no member ID", ErrBeat)
	}
	rest = rest[n:]
	sent, n := binary.Uvarint(rest)
	if n <= 0 || sent > maxBeatMillis {
		return Beat{}, fmt.Errorf("%w: no time it was sent", ErrBeat)
	}
	if n != len(rest) {
		return Beat{}, fmt.Errorf("%w: %d bytes after the beat", ErrBeat, len(rest)-n)
	}
	return Beat{From: from, Sent: time.UnixMilli(int64(sent))}, nil
}

// maxBeatMillis bounds a beat's time (the year 9999), so that it converts
// to a time.Time and back without overflow.
const maxBeatMillis = 253402300799999
