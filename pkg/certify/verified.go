package certify

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// Verified remembers the certificates that held, so that a reader that
// sees one certificate again and again (a leader's every round carries
// it, an application fences each write with it) checks its quorum's
// signatures once. A certificate never changes: one that held under a
// set of keys holds for good. It is known by a hash of all of it (the
// cluster, term, leader and member-set version, and each member with its
// signature), so another certificate of the same cluster, term and
// leader, forged, signed by another quorum or under another version, is
// checked in full; one that fails is not remembered. It keeps at most its
// size, and forgets the oldest first. A Verified serves one cluster, each
// certificate checked with the keys of its member-set version: a reader
// of several clusters keeps one for each. It is safe for concurrent use.
type Verified struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]struct{}
	ring [][sha256.Size]byte // in the order remembered; next is the oldest once full
	next int
}

// NewVerified returns a Verified that keeps at most size certificates
// (at least one).
func NewVerified(size int) *Verified {
	size = max(size, 1)
	return &Verified{seen: make(map[[sha256.Size]byte]struct{}, size), ring: make([][sha256.Size]byte, 0, size)}
}

// VerifyCertificate checks c as the function VerifyCertificate does,
// unless the same certificate held before.
func (v *Verified) VerifyCertificate(members Members, c Certificate) error {
	key := certificateKey(c)
	v.mu.Lock()
	_, ok := v.seen[key]
	v.mu.Unlock()
	if ok {
		return nil
	}
	if err := VerifyCertificate(members, c); err != nil {
		return err
	}
	v.remember(key)
	return nil
}

// VerifyCertificateFor checks, as v.VerifyCertificate does, that c
// certifies leader in term of cluster.
func (v *Verified) VerifyCertificateFor(members Members, c Certificate, cluster string, term, leader uint64) error {
	if c.Cluster != cluster || c.Term != term || c.Leader != leader {
		return VerifyCertificateFor(members, c, cluster, term, leader) // says why
	}
	return v.VerifyCertificate(members, c)
}

// Len is how many certificates it remembers.
func (v *Verified) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}

func (v *Verified) remember(key [sha256.Size]byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.seen[key]; ok {
		return
	}
	if len(v.ring) < cap(v.ring) {
		v.ring = append(v.ring, key)
	} else {
		delete(v.seen, v.ring[v.next])
		v.ring[v.next] = key
		v.next = (v.next + 1) % len(v.ring)
	}
	v.seen[key] = struct{}{}
}

// certificateKey hashes every field of c, each length prefixed.
func certificateKey(c Certificate) [sha256.Size]byte {
	h := sha256.New()
	var b []byte
	b = binary.BigEndian.AppendUint64(b, uint64(len(c.Cluster)))
	b = append(b, c.Cluster...)
	b = binary.BigEndian.AppendUint64(b, c.Term)
	b = binary.BigEndian.AppendUint64(b, c.Leader)
	b = binary.BigEndian.AppendUint64(b, c.Version)
	b = binary.BigEndian.AppendUint64(b, uint64(len(c.Votes)))
	h.Write(b)
	for _, s := range c.Votes {
		b = binary.BigEndian.AppendUint64(b[:0], s.Member)
		b = binary.BigEndian.AppendUint64(b, uint64(len(s.Signature)))
		h.Write(b)
		h.Write(s.Signature)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}
