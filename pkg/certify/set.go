package certify

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nats-io/nkeys"
)

// MemberSetPrefix starts the bytes whose SHA-256 is a member set's digest
// (MemberSet.Digest). It differs from Prefix and WritePrefix, so that the
// digest of a set is never the hash of a statement's or a write's
// encoding.
const MemberSetPrefix = "baton-members-v1"

// SetMember is one member of a MemberSet: its ID and public key ("U…").
type SetMember struct {
	ID  uint64 `json:"id"`
	Key string `json:"key"`
}

// MemberSet is version Version of a cluster's member set. Version 0 is the
// configured set; each later version differs from the one before by
// exactly one member added or removed (see Next). A valid set (Validate)
// has 1–MaxMembers members in ascending order of ID, IDs ≥ 1 and
// distinct, each key a user public key ("U…") and no key shared by two
// members.
type MemberSet struct {
	Version uint64      `json:"version"`
	Members []SetMember `json:"members"`
}

// NewMemberSet returns version version of a member set: the members of
// keys, in ascending order of ID. The error wraps ErrMemberSet.
func NewMemberSet(version uint64, keys *Keys) (MemberSet, error) {
	if keys == nil {
		return MemberSet{}, fmt.Errorf("%w: version %d: no keys", ErrMemberSet, version)
	}
	s := MemberSet{Version: version}
	for _, id := range keys.IDs() {
		public, ok := keys.PublicKey(id)
		if !ok {
			return MemberSet{}, fmt.Errorf("%w: version %d: member %d has no public key", ErrMemberSet, version, id)
		}
		s.Members = append(s.Members, SetMember{ID: id, Key: public})
	}
	if err := s.Validate(); err != nil {
		return MemberSet{}, err
	}
	return s, nil
}

// Validate checks that s is well formed: 1–MaxMembers members in
// ascending order of ID, IDs ≥ 1 and distinct, each key a user public key
// ("U…"), no key shared by two members. The error wraps ErrMemberSet.
func (s MemberSet) Validate() error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("%w: version %d: %v", ErrMemberSet, s.Version, err)
	}
	return nil
}

func (s MemberSet) validate() error {
	if len(s.Members) == 0 || len(s.Members) > MaxMembers {
		return fmt.Errorf("%d members, want 1 to %d", len(s.Members), MaxMembers)
	}
	owner := make(map[string]uint64, len(s.Members))
	for i, m := range s.Members {
		if m.ID == 0 {
			return errors.New("member 0; IDs are ≥ 1")
		}
		if i > 0 {
			switch before := s.Members[i-1].ID; {
			case m.ID == before:
				return fmt.Errorf("member %d twice", m.ID)
			case m.ID < before:
				return fmt.Errorf("member %d after member %d; members are in ascending order of ID", m.ID, before)
			}
		}
		if !nkeys.IsValidPublicUserKey(m.Key) {
			if len(m.Key) > 64 { // not quoted whole
				return fmt.Errorf("member %d: a key of %d bytes is not a user public key (U…)", m.ID, len(m.Key))
			}
			return fmt.Errorf("member %d: %q is not a user public key (U…)", m.ID, m.Key)
		}
		if other, ok := owner[m.Key]; ok {
			return fmt.Errorf("members %d and %d share the key %s", other, m.ID, m.Key)
		}
		owner[m.Key] = m.ID
	}
	return nil
}

// Keys returns the keys of s's members, to verify their signatures. The
// error wraps ErrMemberSet or ErrKeys.
func (s MemberSet) Keys() (*Keys, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	pairs := make(map[uint64]nkeys.KeyPair, len(s.Members))
	for _, m := range s.Members {
		pair, err := nkeys.FromPublicKey(m.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: version %d: member %d: %v", ErrMemberSet, s.Version, m.ID, err)
		}
		pairs[m.ID] = pair
	}
	return NewKeys(pairs)
}

// IDs returns the members' IDs in the order of s.Members (ascending in a
// valid set).
func (s MemberSet) IDs() []uint64 {
	ids := make([]uint64, len(s.Members))
	for i, m := range s.Members {
		ids[i] = m.ID
	}
	return ids
}

// Key returns member id's public key ("U…"), or false if id is not a
// member.
func (s MemberSet) Key(id uint64) (string, bool) {
	for _, m := range s.Members {
		if m.ID == id {
			return m.Key, true
		}
	}
	return "", false
}

// Digest returns the digest of s in cluster: the SHA-256 of its canonical
// encoding (see the package doc), which starts with MemberSetPrefix, then
// holds the cluster's name, the version and each member's ID and key. It
// is the digest that accepts and commits of s name. It is meant for a
// valid set and cluster name (Validate; VerifyStep checks both): lengths
// are encoded in 16 bits.
func (s MemberSet) Digest(cluster string) [DigestSize]byte {
	b := make([]byte, 0, len(MemberSetPrefix)+2+len(cluster)+8+2+len(s.Members)*(8+2+56))
	b = append(b, MemberSetPrefix...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(cluster)))
	b = append(b, cluster...)
	b = binary.BigEndian.AppendUint64(b, s.Version)
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.Members)))
	for _, m := range s.Members {
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.Key)))
		b = append(b, m.Key...)
	}
	return sha256.Sum256(b)
}

// Next checks that s is the version after prev: both are valid,
// s.Version is prev.Version+1, and s differs from prev by exactly one
// member, added (added is its ID) or removed (removed is its ID); every
// other member keeps its key. The error wraps ErrMemberSet.
func (s MemberSet) Next(prev MemberSet) (added, removed uint64, err error) {
	if err := prev.Validate(); err != nil {
		return 0, 0, err
	}
	if err := s.Validate(); err != nil {
		return 0, 0, err
	}
	if prev.Version == math.MaxUint64 || s.Version != prev.Version+1 {
		return 0, 0, fmt.Errorf("%w: version %d does not follow version %d", ErrMemberSet, s.Version, prev.Version)
	}
	before := make(map[uint64]string, len(prev.Members))
	for _, m := range prev.Members {
		before[m.ID] = m.Key
	}
	after := make(map[uint64]bool, len(s.Members))
	var adds, removes []uint64
	for _, m := range s.Members {
		after[m.ID] = true
		key, ok := before[m.ID]
		if !ok {
			adds = append(adds, m.ID)
			continue
		}
		if key != m.Key {
			return 0, 0, fmt.Errorf("%w: version %d: member %d has another key than in version %d", ErrMemberSet, s.Version, m.ID, prev.Version)
		}
	}
	for _, m := range prev.Members {
		if !after[m.ID] {
			removes = append(removes, m.ID)
		}
	}
	switch {
	case len(adds) == 1 && len(removes) == 0:
		return adds[0], 0, nil
	case len(adds) == 0 && len(removes) == 1:
		return 0, removes[0], nil
	}
	return 0, 0, fmt.Errorf("%w: version %d adds %s and removes %s of version %d; a change adds or removes exactly one member",
		ErrMemberSet, s.Version, memberList(adds), memberList(removes), prev.Version)
}

// memberList names IDs: "no member", "member 3", "members 3, 5".
func memberList(ids []uint64) string {
	switch len(ids) {
	case 0:
		return "no member"
	case 1:
		return fmt.Sprintf("member %d", ids[0])
	}
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = fmt.Sprint(id)
	}
	return "members " + strings.Join(names, ", ")
}

// With returns the version after s: s with m added. s must be valid; m's
// ID must not be a member's, nor its key a member's. The error wraps
// ErrMemberSet.
func (s MemberSet) With(m SetMember) (MemberSet, error) {
	if err := s.next(); err != nil {
		return MemberSet{}, err
	}
	for _, x := range s.Members {
		if x.ID == m.ID {
			return MemberSet{}, fmt.Errorf("%w: version %d: %d is already a member", ErrMemberSet, s.Version, m.ID)
		}
		if x.Key == m.Key {
			return MemberSet{}, fmt.Errorf("%w: version %d: the key %s is already member %d's", ErrMemberSet, s.Version, m.Key, x.ID)
		}
	}
	at, _ := slices.BinarySearchFunc(s.Members, m.ID, func(x SetMember, id uint64) int { return cmp.Compare(x.ID, id) })
	next := MemberSet{Version: s.Version + 1, Members: slices.Insert(slices.Clone(s.Members), at, m)}
	if err := next.Validate(); err != nil {
		return MemberSet{}, err
	}
	return next, nil
}

// Without returns the version after s: s with member id removed. s must
// be valid, id a member, and not the last one. The error wraps
// ErrMemberSet.
func (s MemberSet) Without(id uint64) (MemberSet, error) {
	if err := s.next(); err != nil {
		return MemberSet{}, err
	}
	at := slices.IndexFunc(s.Members, func(m SetMember) bool { return m.ID == id })
	if at < 0 {
		return MemberSet{}, fmt.Errorf("%w: version %d: %d is not a member", ErrMemberSet, s.Version, id)
	}
	if len(s.Members) == 1 {
		return MemberSet{}, fmt.Errorf("%w: version %d: removing member %d would leave no member", ErrMemberSet, s.Version, id)
	}
	return MemberSet{Version: s.Version + 1, Members: slices.Delete(slices.Clone(s.Members), at, at+1)}, nil
}

// next checks that s is valid and has a version after it.
func (s MemberSet) next() error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Version == math.MaxUint64 {
		return fmt.Errorf("%w: version %d is the last", ErrMemberSet, s.Version)
	}
	return nil
}

// memberSetJSON is the JSON form of a member set; the version must be
// present.
type memberSetJSON struct {
	Version *uint64     `json:"version"`
	Members []SetMember `json:"members"`
}

// UnmarshalJSON reads the form
//
//	{"version":3,"members":[{"id":1,"key":"U…"},{"id":2,"key":"U…"},…]}
//
// (the form encoding/json writes of a MemberSet): both fields present, no
// other, in members no field but id and key, and the set valid
// (Validate). The error wraps ErrMemberSet.
func (s *MemberSet) UnmarshalJSON(data []byte) error {
	var w memberSetJSON
	if err := strict(data, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrMemberSet, err)
	}
	if w.Version == nil {
		return fmt.Errorf("%w: field \"version\" missing", ErrMemberSet)
	}
	out := MemberSet{Version: *w.Version, Members: w.Members}
	if err := out.Validate(); err != nil {
		return err
	}
	*s = out
	return nil
}

// DecodeMemberSet reads a member set's JSON form (see UnmarshalJSON).
func DecodeMemberSet(data []byte) (MemberSet, error) {
	if len(data) > MaxJSONSize {
		return MemberSet{}, fmt.Errorf("%w: %d bytes, at most %d", ErrMemberSet, len(data), MaxJSONSize)
	}
	var s MemberSet
	if err := s.UnmarshalJSON(data); err != nil {
		return MemberSet{}, err
	}
	return s, nil
}
