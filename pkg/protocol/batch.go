package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// A batch carries the broadcast messages that the elections of one member
// process (a node with several clusters) publish within a few
// milliseconds, in one NATS message on election.<conn>.batch, where conn
// is the cluster after which the processes of the deployment name their
// connections (the first of ELECTION_CLUSTERS): one message and, with
// keys, one signature (the headers of signing.Signer.Header over the batch
// subject and payload) instead of one per election.
//
// The payload is BatchVersion, then one entry per message, in the order
// they were sent: the cluster name's length (uvarint), the cluster name,
// the message's length (uvarint) and the message, encoded as on its own
// subject (Encode). A reader takes each message as if it had arrived on
// SubjectFor(cluster, message), signed by the batch's signer.
//
// The point-to-point messages that the elections of a process send to one
// member within the same few milliseconds leave the same way, in one
// batch on election.<conn>.batch.<id> (BatchToSubject), id being the
// member they are addressed to: the same payload, and every message in it
// addressed to id.

// KindBatch is the subject kind of batches.
const KindBatch = "batch"

// BatchVersion is the first byte of a batch's payload.
const BatchVersion byte = 1

// MaxBatchPayload bounds a batch's payload: a writer starts another
// batch rather than exceed it.
const MaxBatchPayload = 256 << 10

// MaxBatchEntries bounds the messages of one batch.
const MaxBatchEntries = 16384

// ErrBatch is wrapped by the errors of ReadBatch.
var ErrBatch = errors.New("protocol: batch")

// BatchSubject is the batches' subject of the deployment whose processes
// name their connections after conn.
func BatchSubject(conn string) string { return Root + "." + conn + "." + KindBatch }

// BatchToSubject is the subject of the batches of point-to-point messages
// addressed to member id, in the deployment whose processes name their
// connections after conn.
func BatchToSubject(conn string, id uint64) string {
	return BatchSubject(conn) + "." + strconv.FormatUint(id, 10)
}

// AppendBatchEntry appends to batch (empty: a new batch) the entry of a
// message of cluster, msg as Encode returned it.
func AppendBatchEntry(batch []byte, cluster string, msg []byte) []byte {
	if len(batch) == 0 {
		batch = append(batch, BatchVersion)
	}
	batch = binary.AppendUvarint(batch, uint64(len(cluster)))
	batch = append(batch, cluster...)
	batch = binary.AppendUvarint(batch, uint64(len(msg)))
	return append(batch, msg...)
}

// BatchEntrySize is the size that an entry of cluster with a message of
// n bytes adds to a batch.
func BatchEntrySize(cluster string, n int) int {
	return uvarintSize(len(cluster)) + len(cluster) + uvarintSize(n) + n
}

func uvarintSize(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// ReadBatch calls f with each entry of batch, in order, until f returns
// false. It checks the whole batch first: its version, its size, each
// length within what remains, each cluster name (ValidateCluster) and at
// most MaxBatchEntries entries, each message at most maxMessage bytes;
// a batch that fails any check is refused whole, before f sees any of it.
func ReadBatch(batch []byte, maxMessage int, f func(cluster string, msg []byte) bool) error {
	if len(batch) > MaxBatchPayload {
		return fmt.Errorf("%w: %d bytes, above %d", ErrBatch, len(batch), MaxBatchPayload)
	}
	if len(batch) == 0 || batch[0] != BatchVersion {
		return fmt.Errorf("%w: not a batch of version %d", ErrBatch, BatchVersion)
	}
	type entry struct{ cluster, msg []byte }
	var entries []entry
	for rest := batch[1:]; len(rest) > 0; {
		if len(entries) == MaxBatchEntries {
			return fmt.Errorf("%w: more than %d entries", ErrBatch, MaxBatchEntries)
		}
		cluster, next, err := field(rest, maxClusterName)
		if err != nil {
			return fmt.Errorf("%w: entry %d: cluster: %w", ErrBatch, len(entries), err)
		}
		if err := ValidateCluster(string(cluster)); err != nil {
			return fmt.Errorf("%w: entry %d: %w", ErrBatch, len(entries), err)
		}
		msg, next, err := field(next, maxMessage)
		if err != nil {
			return fmt.Errorf("%w: entry %d: message: %w", ErrBatch, len(entries), err)
		}
		entries = append(entries, entry{cluster, msg})
		rest = next
	}
	for _, e := range entries {
		if !f(string(e.cluster), e.msg) {
			break
		}
	}
	return nil
}

// maxClusterName bounds a cluster name in a batch: a NATS subject token
// of the deployment's, far below this.
const maxClusterName = 256

// field reads a length (uvarint, at most max) and that many bytes.
func field(b []byte, max int) (value, rest []byte, err error) {
	n, size := binary.Uvarint(b)
	switch {
	case size <= 0:
		return nil, nil, errors.New("bad length")
	case n == 0 || n > uint64(max):
		return nil, nil, fmt.Errorf("length %d, want 1 to %d", n, max)
	case n > uint64(len(b)-size):
		return nil, nil, fmt.Errorf("length %d, beyond the %d bytes left", n, len(b)-size)
	}
	return b[size : size+int(n)], b[size+int(n):], nil
}
