package certify

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Prefix starts every encoded statement (domain separation).
const Prefix = "baton-certify-v1"

// MaxMembers bounds the members of a cluster, hence the signatures of a
// certificate and the length of a relay's path.
const MaxMembers = 128

// MaxClusterLen bounds a cluster name in bytes.
const MaxClusterLen = 255

// DigestSize is the size of a value's digest (SHA-256).
const DigestSize = sha256.Size

// SignatureSize is the size of an Ed25519 signature.
const SignatureSize = 64

// maxEncodedSize bounds an encoded statement: a relay with the longest
// cluster name and path.
const maxEncodedSize = len(Prefix) + 1 + 2 + MaxClusterLen + 8 + 8 + 8 + 2 + 8*MaxMembers + DigestSize

// Kind says what a statement states.
type Kind uint8

// The kinds of statement. Their numbers are part of the encoding.
const (
	// KindVote: the member votes for Leader in Term.
	KindVote Kind = 1
	// KindTimeout: the member gives up on Term.
	KindTimeout Kind = 2
	// KindRelay: the member relays order Order of Term along Path.
	KindRelay Kind = 3
	// KindAccept: the member accepts the member set whose digest is
	// Digest as version Version, proposed by the leader of Term.
	KindAccept Kind = 4
	// KindCommit: the member saw a quorum accept the member set whose
	// digest is Digest as version Version, and commits to it.
	KindCommit Kind = 5
)

// kinds are the known kinds.
var kinds = []Kind{KindVote, KindTimeout, KindRelay, KindAccept, KindCommit}

// String returns the kind's name in the JSON form: vote, timeout, relay,
// accept, commit.
func (k Kind) String() string {
	switch k {
	case KindVote:
		return "vote"
	case KindTimeout:
		return "timeout"
	case KindRelay:
		return "relay"
	case KindAccept:
		return "accept"
	case KindCommit:
		return "commit"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// withArticle returns the kind's name after "a" or "an": "a vote", "an
// accept".
func (k Kind) withArticle() string {
	if k == KindAccept {
		return "an " + k.String()
	}
	return "a " + k.String()
}

// kindNamed returns the kind of a name String returns.
func kindNamed(name string) (Kind, bool) {
	for _, k := range kinds {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

// Errors. Each error of the package wraps one of them.
var (
	// ErrStatement: a statement, or its encoding, is malformed.
	ErrStatement = errors.New("certify: invalid statement")
	// ErrKeys: member keys, or a signing key, are unusable.
	ErrKeys = errors.New("certify: invalid member keys")
	// ErrUnknownMember: a signer is not a member of the cluster.
	ErrUnknownMember = errors.New("certify: unknown member")
	// ErrSignature: a signature is missing, malformed or does not hold.
	ErrSignature = errors.New("certify: bad signature")
	// ErrCertificate: a certificate is malformed or does not hold.
	ErrCertificate = errors.New("certify: invalid certificate")
	// ErrEvidence: evidence is malformed or proves nothing.
	ErrEvidence = errors.New("certify: invalid evidence")
	// ErrMemberSet: a member set, or a change of it, is malformed or
	// does not hold.
	ErrMemberSet = errors.New("certify: invalid member set")
)

// Statement is what one member states; which fields it uses depends on
// Kind, and the others must be zero.
type Statement struct {
	// Kind says what is stated.
	Kind Kind
	// Cluster is the cluster's name, 1–MaxClusterLen bytes of [A-Za-z0-9_-].
	Cluster string
	// Member is the ID of the member that states it, ≥ 1.
	Member uint64
	// Term is the term voted in, given up, or whose leader issued the
	// relayed order or proposed the member set; ≥ 1.
	Term uint64
	// Leader is the member voted for (KindVote), ≥ 1.
	Leader uint64
	// Version is the member-set version: the one a vote is cast under
	// (KindVote; 0 for the configured set, encoded only when ≥ 1), or the
	// one the accepted or committed member set would be (KindAccept,
	// KindCommit; ≥ 1). Zero in the other kinds.
	Version uint64
	// Order numbers the order among those of Term's leader (KindRelay).
	Order uint64
	// Path is the relay chain (KindRelay): the leader that issued the
	// order, then the members that relayed it, distinct; the last is
	// Member. 1–MaxMembers IDs.
	Path []uint64
	// Digest is the SHA-256 of the relayed value (KindRelay; see Digest),
	// or the digest of the accepted or committed member set (KindAccept,
	// KindCommit, not zero; see MemberSet.Digest).
	Digest [DigestSize]byte
}

// Digest returns the digest of a relayed value, its SHA-256.
func Digest(value []byte) [DigestSize]byte { return sha256.Sum256(value) }

// Vote returns member's vote for leader in term of cluster, under the
// configured member set (version 0); it is VoteIn with version 0.
func Vote(cluster string, member, term, leader uint64) Statement {
	return VoteIn(cluster, member, term, leader, 0)
}

// VoteIn returns member's vote for leader in term of cluster, under
// version version of the member set.
func VoteIn(cluster string, member, term, leader, version uint64) Statement {
	return Statement{Kind: KindVote, Cluster: cluster, Member: member, Term: term, Leader: leader, Version: version}
}

// Timeout returns member's time-out of term in cluster.
func Timeout(cluster string, member, term uint64) Statement {
	return Statement{Kind: KindTimeout, Cluster: cluster, Member: member, Term: term}
}

// Relay returns the relay, by path's last member, of order of term's
// leader with value's digest along path.
func Relay(cluster string, term, order uint64, path []uint64, value []byte) Statement {
	var member uint64
	if len(path) > 0 {
		member = path[len(path)-1]
	}
	return Statement{Kind: KindRelay, Cluster: cluster, Member: member, Term: term, Order: order,
		Path: append([]uint64(nil), path...), Digest: Digest(value)}
}

// Accept returns member's accept of the member set whose digest is digest
// as version version of cluster, proposed by the leader of term.
func Accept(cluster string, member, term, version uint64, digest [DigestSize]byte) Statement {
	return Statement{Kind: KindAccept, Cluster: cluster, Member: member, Term: term, Version: version, Digest: digest}
}

// Commit returns member's commit to the member set whose digest is digest
// as version version of cluster, proposed by the leader of term.
func Commit(cluster string, member, term, version uint64, digest [DigestSize]byte) Statement {
	return Statement{Kind: KindCommit, Cluster: cluster, Member: member, Term: term, Version: version, Digest: digest}
}

// validateCluster checks a cluster name.
func validateCluster(name string) error {
	if name == "" || len(name) > MaxClusterLen {
		return fmt.Errorf("cluster name of %d bytes, want 1 to %d", len(name), MaxClusterLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("cluster name %q: byte %d is not one of [A-Za-z0-9_-]", name, i)
		}
	}
	return nil
}

// Validate checks that s is well formed (it does not check a signature).
// The error wraps ErrStatement.
func (s Statement) Validate() error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrStatement, s.Kind, err)
	}
	return nil
}

func (s Statement) validate() error {
	if err := validateCluster(s.Cluster); err != nil {
		return err
	}
	if s.Member == 0 {
		return errors.New("member 0; IDs are ≥ 1")
	}
	if s.Term == 0 {
		return errors.New("term 0; terms are ≥ 1")
	}
	switch s.Kind {
	case KindVote:
		if s.Leader == 0 {
			return errors.New("leader 0; IDs are ≥ 1")
		}
		return s.noRelay()
	case KindTimeout:
		if s.Leader != 0 {
			return fmt.Errorf("leader %d in a time-out", s.Leader)
		}
		if s.Version != 0 {
			return fmt.Errorf("version %d in a time-out", s.Version)
		}
		return s.noRelay()
	case KindRelay:
		if s.Leader != 0 {
			return fmt.Errorf("leader %d in a relay", s.Leader)
		}
		if s.Version != 0 {
			return fmt.Errorf("version %d in a relay", s.Version)
		}
		return validatePath(s.Path, s.Member)
	case KindAccept, KindCommit:
		if s.Leader != 0 {
			return fmt.Errorf("leader %d in %s", s.Leader, s.Kind.withArticle())
		}
		if s.Version == 0 {
			return errors.New("version 0; the versions of changed member sets are ≥ 1")
		}
		if s.Order != 0 || s.Path != nil {
			return fmt.Errorf("order or path in %s", s.Kind.withArticle())
		}
		if s.Digest == ([DigestSize]byte{}) {
			return errors.New("zero digest; want the member set's")
		}
		return nil
	}
	return errors.New("unknown kind")
}

// noRelay checks that the relay's fields are zero.
func (s Statement) noRelay() error {
	if s.Order != 0 || s.Path != nil || s.Digest != ([DigestSize]byte{}) {
		return errors.New("order, path or digest outside a relay")
	}
	return nil
}

// validatePath checks a relay's path, whose last member is member.
func validatePath(path []uint64, member uint64) error {
	if len(path) == 0 || len(path) > MaxMembers {
		return fmt.Errorf("path of %d members, want 1 to %d", len(path), MaxMembers)
	}
	seen := make(map[uint64]bool, len(path))
	for _, id := range path {
		if id == 0 {
			return errors.New("member 0 in the path; IDs are ≥ 1")
		}
		if seen[id] {
			return fmt.Errorf("member %d twice in the path", id)
		}
		seen[id] = true
	}
	if last := path[len(path)-1]; last != member {
		return fmt.Errorf("path ends with %d, not with the member %d", last, member)
	}
	return nil
}

// Encode returns the canonical encoding of s, the bytes that are signed
// (see the package doc). It fails, wrapping ErrStatement, if s is invalid.
func (s Statement) Encode() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, s.encodedSize())
	b = append(b, Prefix...)
	b = append(b, byte(s.Kind))
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.Cluster)))
	b = append(b, s.Cluster...)
	b = binary.BigEndian.AppendUint64(b, s.Member)
	b = binary.BigEndian.AppendUint64(b, s.Term)
	switch s.Kind {
	case KindVote:
		b = binary.BigEndian.AppendUint64(b, s.Leader)
		if s.Version != 0 {
			b = binary.BigEndian.AppendUint64(b, s.Version)
		}
	case KindAccept, KindCommit:
		b = binary.BigEndian.AppendUint64(b, s.Version)
		b = append(b, s.Digest[:]...)
	case KindRelay:
		b = binary.BigEndian.AppendUint64(b, s.Order)
		b = binary.BigEndian.AppendUint16(b, uint16(len(s.Path)))
		for _, id := range s.Path {
			b = binary.BigEndian.AppendUint64(b, id)
		}
		b = append(b, s.Digest[:]...)
	}
	return b, nil
}

// encodedSize is the length of a valid statement's encoding.
func (s Statement) encodedSize() int {
	n := len(Prefix) + 1 + 2 + len(s.Cluster) + 8 + 8
	switch s.Kind {
	case KindVote:
		n += 8
		if s.Version != 0 {
			n += 8
		}
	case KindAccept, KindCommit:
		n += 8 + DigestSize
	case KindRelay:
		n += 8 + 2 + 8*len(s.Path) + DigestSize
	}
	return n
}

// reader reads a statement's encoding; its first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%d bytes left where %s needs %d", len(r.b), what, n)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u16(what string) uint16 {
	if b := r.take(2, what); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if b := r.take(8, what); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// DecodeStatement reads a statement's canonical encoding. It refuses,
// wrapping ErrStatement, any input that Encode would not produce: wrong
// prefix, unknown kind, short or trailing bytes, invalid fields, a vote's
// version 0 encoded (a vote of the configured set has no version field).
func DecodeStatement(data []byte) (Statement, error) {
	s, err := decodeStatement(data)
	if err != nil {
		return Statement{}, fmt.Errorf("%w: encoding: %v", ErrStatement, err)
	}
	return s, nil
}

func decodeStatement(data []byte) (Statement, error) {
	if len(data) > maxEncodedSize {
		return Statement{}, fmt.Errorf("%d bytes, at most %d", len(data), maxEncodedSize)
	}
	r := &reader{b: data}
	if p := r.take(len(Prefix), "the prefix"); p != nil && string(p) != Prefix {
		return Statement{}, fmt.Errorf("prefix %q, want %q", p, Prefix)
	}
	var s Statement
	if k := r.take(1, "the kind"); k != nil {
		s.Kind = Kind(k[0])
	}
	if r.err == nil && !slices.Contains(kinds, s.Kind) {
		return Statement{}, fmt.Errorf("unknown kind %d", uint8(s.Kind))
	}
	n := r.u16("the cluster's length")
	s.Cluster = string(r.take(int(n), "the cluster"))
	s.Member = r.u64("the member")
	s.Term = r.u64("the term")
	switch s.Kind {
	case KindVote:
		s.Leader = r.u64("the leader")
		if r.err == nil && len(r.b) == 8 {
			if s.Version = r.u64("the version"); s.Version == 0 {
				return Statement{}, errors.New("a vote's version 0 encoded; version 0 is left out")
			}
		}
	case KindAccept, KindCommit:
		s.Version = r.u64("the version")
		copy(s.Digest[:], r.take(DigestSize, "the digest"))
	case KindRelay:
		s.Order = r.u64("the order")
		count := r.u16("the path's length")
		if r.err == nil && (count == 0 || int(count) > MaxMembers) {
			return Statement{}, fmt.Errorf("path of %d members, want 1 to %d", count, MaxMembers)
		}
		if r.err == nil {
			s.Path = make([]uint64, count)
			for i := range s.Path {
				s.Path[i] = r.u64("the path")
			}
		}
		copy(s.Digest[:], r.take(DigestSize, "the digest"))
	}
	if r.err != nil {
		return Statement{}, r.err
	}
	if len(r.b) > 0 {
		return Statement{}, fmt.Errorf("%d bytes after the statement", len(r.b))
	}
	if err := s.validate(); err != nil {
		return Statement{}, err
	}
	return s, nil
}

// SignedStatement is a statement and its signer's signature over its
// encoding.
type SignedStatement struct {
	Statement Statement
	// Signature is the Ed25519 signature of Statement.Encode() by the key
	// of Statement.Member, SignatureSize bytes.
	Signature []byte
}

// Sign has signer sign st, which must be signer's own statement.
func Sign(signer Signer, st Statement) (SignedStatement, error) {
	if st.Member != signer.Member() {
		return SignedStatement{}, fmt.Errorf("%w: member %d cannot sign a statement of member %d", ErrStatement, signer.Member(), st.Member)
	}
	data, err := st.Encode()
	if err != nil {
		return SignedStatement{}, err
	}
	sig, err := signer.Sign(data)
	if err != nil {
		return SignedStatement{}, fmt.Errorf("%w: member %d cannot sign: %v", ErrKeys, st.Member, err)
	}
	return SignedStatement{Statement: st, Signature: sig}, nil
}

// Verify checks that s is well formed and signed by its member's key.
// The error wraps ErrStatement, ErrUnknownMember or ErrSignature.
func (s SignedStatement) Verify(v Verifier) error {
	data, err := s.Statement.Encode()
	if err != nil {
		return err
	}
	return verify(v, s.Statement.Member, data, s.Signature)
}

// verify checks the signature's size, then the signature.
func verify(v Verifier, member uint64, data, sig []byte) error {
	if len(sig) != SignatureSize {
		return fmt.Errorf("%w: member %d: signature of %d bytes, want %d", ErrSignature, member, len(sig), SignatureSize)
	}
	return v.Verify(member, data, sig)
}
