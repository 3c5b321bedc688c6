package certify

import (
	"encoding/binary"
	"fmt"
)

// WritePrefix starts every encoded Write. It differs from Prefix, so that
// a leader's signature over a write is never read as a statement of the
// election, nor a statement as a write.
const WritePrefix = "baton-write-v1"

// Write is a leader's word that a write to a shared resource is its own:
// the member Leader, certified leader of Cluster in Term, asks for the
// write whose SHA-256 is Digest. The resource, which chose what the write
// holds (the data, and a nonce or sequence number of its own when a
// replay of the same write matters), checks the leader's certificate, then
// the leader's signature of the Write with the key its members file lists
// for Leader; anyone else, who may hold the public certificate but not the
// leader's seed, cannot sign it. The encoding (Encode), signed with
// Ed25519, is:
//
//	field        bytes     value
//	prefix       14        the ASCII "baton-write-v1" (WritePrefix)
//	cluster      2 + len   uint16 length, then the name (1–255 bytes of [A-Za-z0-9_-])
//	term         8         uint64, ≥ 1
//	leader       8         uint64, ≥ 1
//	digest       32        SHA-256 of the write (Digest)
type Write struct {
	Cluster string
	Term    uint64
	Leader  uint64
	Digest  [DigestSize]byte
}

// WriteOf returns the Write of leader in term of cluster for the bytes
// write.
func WriteOf(cluster string, term, leader uint64, write []byte) Write {
	return Write{Cluster: cluster, Term: term, Leader: leader, Digest: Digest(write)}
}

// Encode returns the bytes of w that the leader signs. It fails, wrapping
// ErrStatement, if w is malformed.
func (w Write) Encode() ([]byte, error) {
	if err := validateCluster(w.Cluster); err != nil {
		return nil, fmt.Errorf("%w: write: %v", ErrStatement, err)
	}
	if w.Term == 0 || w.Leader == 0 {
		return nil, fmt.Errorf("%w: write: term %d, leader %d; both are ≥ 1", ErrStatement, w.Term, w.Leader)
	}
	b := make([]byte, 0, len(WritePrefix)+2+len(w.Cluster)+8+8+DigestSize)
	b = append(b, WritePrefix...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(w.Cluster)))
	b = append(b, w.Cluster...)
	b = binary.BigEndian.AppendUint64(b, w.Term)
	b = binary.BigEndian.AppendUint64(b, w.Leader)
	return append(b, w.Digest[:]...), nil
}

// SignWrite has signer, which must be w's leader, sign w.
func SignWrite(signer Signer, w Write) ([]byte, error) {
	if signer.Member() != w.Leader {
		return nil, fmt.Errorf("%w: member %d cannot sign a write of leader %d", ErrStatement, signer.Member(), w.Leader)
	}
	data, err := w.Encode()
	if err != nil {
		return nil, err
	}
	sig, err := signer.Sign(data)
	if err != nil {
		return nil, fmt.Errorf("%w: member %d cannot sign: %v", ErrKeys, w.Leader, err)
	}
	return sig, nil
}

// VerifyWrite checks that sig is w's leader's signature of w. The error
// wraps ErrStatement, ErrUnknownMember or ErrSignature.
func VerifyWrite(v Verifier, w Write, sig []byte) error {
	data, err := w.Encode()
	if err != nil {
		return err
	}
	return verify(v, w.Leader, data, sig)
}
