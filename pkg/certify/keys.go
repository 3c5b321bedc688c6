package certify

import (
	"fmt"
	"slices"

	"github.com/nats-io/nkeys"
)

// Signer signs a member's statements.
type Signer interface {
	// Member is the ID of the member whose key signs.
	Member() uint64
	// Sign returns the Ed25519 signature of data.
	Sign(data []byte) ([]byte, error)
}

// Verifier checks the members' signatures.
type Verifier interface {
	// Verify returns nil if sig is member's signature of data; otherwise
	// an error that wraps ErrUnknownMember or ErrSignature.
	Verify(member uint64, data, sig []byte) error
}

// Members is a cluster's membership as a certificate's reader knows it.
type Members interface {
	Verifier
	// Size is the number of members, n.
	Size() int
	// Has reports whether id is a member.
	Has(id uint64) bool
}

// Keys holds the public keys of a cluster's members. It implements
// Members. Build it with NewKeys; the zero Keys has no members. It is not
// changed after NewKeys, so it is safe for concurrent use.
type Keys struct {
	keys map[uint64]nkeys.KeyPair
}

// NewKeys returns the members' keys: 1–MaxMembers members, IDs ≥ 1, each
// an Ed25519 user key ("U…"), no key shared by two members (one key for
// two IDs would let one liar count twice). Only the public keys are kept:
// pairs from nkeys.FromPublicKey do, and so do pairs from seeds. The
// error wraps ErrKeys.
func NewKeys(pairs map[uint64]nkeys.KeyPair) (*Keys, error) {
	if len(pairs) == 0 || len(pairs) > MaxMembers {
		return nil, fmt.Errorf("%w: %d members, want 1 to %d", ErrKeys, len(pairs), MaxMembers)
	}
	ids := make([]uint64, 0, len(pairs))
	for id := range pairs {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the first error found does not depend on map order
	k := &Keys{keys: make(map[uint64]nkeys.KeyPair, len(pairs))}
	owner := make(map[string]uint64, len(pairs))
	for _, id := range ids {
		pair := pairs[id]
		if id == 0 {
			return nil, fmt.Errorf("%w: member 0; IDs are ≥ 1", ErrKeys)
		}
		if pair == nil {
			return nil, fmt.Errorf("%w: member %d has no key", ErrKeys, id)
		}
		public, err := pair.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("%w: member %d: %v", ErrKeys, id, err)
		}
		if !nkeys.IsValidPublicUserKey(public) {
			return nil, fmt.Errorf("%w: member %d: %q is not a user public key (U…)", ErrKeys, id, public)
		}
		if other, ok := owner[public]; ok {
			return nil, fmt.Errorf("%w: members %d and %d share the key %s", ErrKeys, other, id, public)
		}
		owner[public] = id
		k.keys[id], err = nkeys.FromPublicKey(public)
		if err != nil {
			return nil, fmt.Errorf("%w: member %d: %v", ErrKeys, id, err)
		}
	}
	return k, nil
}

// Size is the number of members.
func (k *Keys) Size() int { return len(k.keys) }

// Has reports whether id is a member.
func (k *Keys) Has(id uint64) bool {
	_, ok := k.keys[id]
	return ok
}

// PublicKey returns member id's public key ("U…"), or false if id is not
// a member.
func (k *Keys) PublicKey(id uint64) (string, bool) {
	pair, ok := k.keys[id]
	if !ok {
		return "", false
	}
	public, err := pair.PublicKey()
	return public, err == nil
}

// IDs returns the members' IDs in ascending order.
func (k *Keys) IDs() []uint64 {
	ids := make([]uint64, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Verify checks member's signature of data.
func (k *Keys) Verify(member uint64, data, sig []byte) error {
	pair, ok := k.keys[member]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownMember, member)
	}
	if len(sig) != SignatureSize {
		return fmt.Errorf("%w: member %d: signature of %d bytes, want %d", ErrSignature, member, len(sig), SignatureSize)
	}
	if err := pair.Verify(data, sig); err != nil {
		return fmt.Errorf("%w: member %d: %v", ErrSignature, member, err)
	}
	return nil
}

// KeySigner signs with a member's seed. It implements Signer.
type KeySigner struct {
	member uint64
	pair   nkeys.KeyPair
}

// NewSigner returns the signer of member with pair, which must hold a user
// seed ("SU…", e.g. from nkeys.FromSeed). The error wraps ErrKeys.
func NewSigner(member uint64, pair nkeys.KeyPair) (*KeySigner, error) {
	if member == 0 {
		return nil, fmt.Errorf("%w: member 0; IDs are ≥ 1", ErrKeys)
	}
	if pair == nil {
		return nil, fmt.Errorf("%w: member %d has no key", ErrKeys, member)
	}
	public, err := pair.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: member %d: %v", ErrKeys, member, err)
	}
	if !nkeys.IsValidPublicUserKey(public) {
		return nil, fmt.Errorf("%w: member %d: %q is not a user key (U…)", ErrKeys, member, public)
	}
	if _, err := pair.Seed(); err != nil {
		return nil, fmt.Errorf("%w: member %d: the key cannot sign: %v", ErrKeys, member, err)
	}
	return &KeySigner{member: member, pair: pair}, nil
}

// Member is the signer's member ID.
func (s *KeySigner) Member() uint64 { return s.member }

// Sign returns the Ed25519 signature of data.
func (s *KeySigner) Sign(data []byte) ([]byte, error) { return s.pair.Sign(data) }
