package signing

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
)

// Member keys: every member of a cluster has an Ed25519 key pair in the
// NATS nkeys format (a user seed "SU…", its public key "U…"). A member
// signs everything it publishes with its seed; a receiver that holds the
// public keys of the members (the ELECTION_KEYS_FILE) checks that each
// message is signed by the member it names, so that no client, member or
// not, can speak for another member.
//
// The signature travels in two headers:
//
//	Election-Signer: <the signer's member ID, decimal>
//	Election-Signature: <base64url, no padding, of the 64-byte Ed25519 signature>
//
// The signed bytes are the subject, one zero byte and the payload. An
// announcement is signed as if published on the cluster's leader subject,
// wherever it travels (published, kept in a stream, or sent as the answer
// to a query). After decoding, the member the message names (From for an
// election message, Leader for an announcement) must be the signer.
const (
	// SignatureHeader carries the base64url (unpadded) Ed25519 signature.
	SignatureHeader = "Election-Signature"
	// SignerHeader carries the signer's member ID.
	SignerHeader = "Election-Signer"
)

// signatureSize is the size of an Ed25519 signature.
const signatureSize = 64

// ErrKeys is wrapped by every error in a seed or member keys file.
var ErrKeys = errors.New("protocol: member keys")

// MaxMemberKeys bounds the members of a member keys file, so that a wrong
// file cannot make a process hold keys without bound.
const MaxMemberKeys = 1024

// signedBytes is what a signature covers: subject, a zero byte, payload.
func signedBytes(subject string, payload []byte) []byte {
	b := make([]byte, 0, len(subject)+1+len(payload))
	b = append(b, subject...)
	b = append(b, 0)
	return append(b, payload...)
}

// Signer signs what one member publishes.
type Signer struct {
	id     uint64
	idText string
	kp     nkeys.KeyPair
	public string
	// credential, if not empty, is the member credential every signed
	// message carries (CredentialHeader; WithCredential).
	credential string
}

// NewSigner returns the signer of member id with the user key pair kp,
// which must hold a seed.
func NewSigner(id uint64, kp nkeys.KeyPair) (*Signer, error) {
	public, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeys, err)
	}
	if !nkeys.IsValidPublicUserKey(public) {
		return nil, fmt.Errorf("%w: not a user key (U…): %s", ErrKeys, public)
	}
	if _, err := kp.Seed(); err != nil {
		return nil, fmt.Errorf("%w: no seed: %v", ErrKeys, err)
	}
	return &Signer{id: id, idText: strconv.FormatUint(id, 10), kp: kp, public: public}, nil
}

// ID is the signer's member ID.
func (s *Signer) ID() uint64 { return s.id }

// PublicKey is the signer's public key, U….
func (s *Signer) PublicKey() string { return s.public }

// KeyPair is the signer's key pair, for authenticating to NATS with it.
func (s *Signer) KeyPair() nkeys.KeyPair { return s.kp }

// Header returns the headers that sign payload published on subject.
func (s *Signer) Header(subject string, payload []byte) nats.Header {
	sig, err := s.kp.Sign(signedBytes(subject, payload))
	if err != nil {
		panic(fmt.Sprintf("protocol: sign: %v", err)) // a seed checked by NewSigner
	}
	h := nats.Header{}
	h.Set(SignerHeader, s.idText)
	h.Set(SignatureHeader, base64.RawURLEncoding.EncodeToString(sig))
	if s.credential != "" {
		h.Set(CredentialHeader, s.credential)
	}
	return h
}

// SignAnnouncement returns the headers that sign an announcement of
// cluster.
func (s *Signer) SignAnnouncement(cluster string, data []byte) nats.Header {
	return s.Header(protocol.LeaderSubject(cluster), data)
}

// MemberKeys holds the public keys of a cluster's members. A nil
// *MemberKeys is a cluster without keys.
type MemberKeys struct {
	keys map[uint64]memberKey
	// cluster and algorithm are what the file states of its cluster
	// (StatementPrefix lines); empty where it states nothing.
	cluster   string
	algorithm protocol.Algorithm
	// auth, if not nil, takes the members' keys from their credentials
	// (NewAuthorityKeys); keys is then empty.
	auth *authority
	// sets, if not nil, is the member set of a byzantine cluster with
	// dynamic membership, which certificates are checked against
	// (WithMemberSets).
	sets *MemberSets
}

// StatementPrefix starts a line of a member keys file that states what the
// file's cluster is: "#: cluster <name>" and "#: algorithm <name>", each at
// most once. Readers that know only the contract's format (an ID and a key
// per line, # lines ignored) read such a line as a comment; readers of this
// project take the cluster's name and algorithm from it, so that they know
// the cluster from their own configuration rather than from a message.
const StatementPrefix = "#:"

// Cluster is the cluster the file states, or "" if it states none.
func (k *MemberKeys) Cluster() string {
	if k == nil {
		return ""
	}
	return k.cluster
}

// Algorithm is the algorithm the file states, or "" if it states none.
func (k *MemberKeys) Algorithm() protocol.Algorithm {
	if k == nil {
		return ""
	}
	return k.algorithm
}

// State returns a copy of k stating cluster and algorithm (either may be
// "" for not stated). It refuses an invalid cluster name, an unknown
// algorithm, and a statement that contradicts one k already holds.
func (k *MemberKeys) State(cluster string, algorithm protocol.Algorithm) (*MemberKeys, error) {
	if k == nil {
		return nil, fmt.Errorf("%w: no keys", ErrKeys)
	}
	c := &MemberKeys{keys: k.keys, cluster: k.cluster, algorithm: k.algorithm, auth: k.auth}
	if cluster != "" {
		if err := protocol.ValidateCluster(cluster); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeys, err)
		}
		if c.cluster != "" && c.cluster != cluster {
			return nil, fmt.Errorf("%w: the keys state cluster %q, not %q", ErrKeys, c.cluster, cluster)
		}
		c.cluster = cluster
	}
	if algorithm != "" {
		if !algorithm.Known() {
			return nil, fmt.Errorf("%w: unknown algorithm %q", ErrKeys, algorithm)
		}
		if c.algorithm != "" && c.algorithm != algorithm {
			return nil, fmt.Errorf("%w: the keys state algorithm %q, not %q", ErrKeys, c.algorithm, algorithm)
		}
		c.algorithm = algorithm
	}
	return c, nil
}

// Statements returns the StatementPrefix lines that state k's cluster and
// algorithm, each ending in a newline; "" if k states neither.
func (k *MemberKeys) Statements() string {
	var b strings.Builder
	if c := k.Cluster(); c != "" {
		fmt.Fprintf(&b, "%s cluster %s\n", StatementPrefix, c)
	}
	if a := k.Algorithm(); a != "" {
		fmt.Fprintf(&b, "%s algorithm %s\n", StatementPrefix, a)
	}
	return b.String()
}

// statement reads a StatementPrefix line into k.
func (k *MemberKeys) statement(text string) error {
	fields := strings.Fields(strings.TrimPrefix(text, StatementPrefix))
	if len(fields) != 2 {
		return fmt.Errorf("want \"%s cluster <name>\" or \"%s algorithm <name>\", got %q", StatementPrefix, StatementPrefix, text)
	}
	switch fields[0] {
	case "cluster":
		if k.cluster != "" {
			return errors.New("the cluster is stated twice")
		}
		if err := protocol.ValidateCluster(fields[1]); err != nil {
			return err
		}
		k.cluster = fields[1]
	case "algorithm":
		if k.algorithm != "" {
			return errors.New("the algorithm is stated twice")
		}
		a := protocol.Algorithm(fields[1])
		if !a.Known() {
			return fmt.Errorf("unknown algorithm %q; want one of %v", fields[1], protocol.Algorithms)
		}
		k.algorithm = a
	default:
		return fmt.Errorf("unknown statement %q; want cluster or algorithm", fields[0])
	}
	return nil
}

type memberKey struct {
	public string
	kp     nkeys.KeyPair
	line   int // where the file listed it; 0 if not from a file
}

// NewMemberKeys returns the keys of public, member ID to public user key.
func NewMemberKeys(public map[uint64]string) (*MemberKeys, error) {
	if len(public) > MaxMemberKeys {
		return nil, fmt.Errorf("%w: %d members, more than %d", ErrKeys, len(public), MaxMemberKeys)
	}
	k := &MemberKeys{keys: make(map[uint64]memberKey, len(public))}
	for id, p := range public {
		if err := k.add(id, p, 0); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func (k *MemberKeys) add(id uint64, public string, line int) error {
	if id == 0 {
		return errors.New("member ID 0: IDs are positive integers")
	}
	if prev, dup := k.keys[id]; dup {
		return fmt.Errorf("duplicate member ID %d (first on line %d)", id, prev.line)
	}
	if !nkeys.IsValidPublicKey(public) {
		return fmt.Errorf("member %d: %q is not a public key in the nkeys format", id, public)
	}
	if !nkeys.IsValidPublicUserKey(public) {
		return fmt.Errorf("member %d: %s is not a user key (U…) but a key of another type", id, public)
	}
	for other, m := range k.keys {
		if m.public == public {
			return fmt.Errorf("member %d has the key of member %d: each member needs its own", id, other)
		}
	}
	kp, err := nkeys.FromPublicKey(public)
	if err != nil {
		return fmt.Errorf("member %d: %v", id, err)
	}
	k.keys[id] = memberKey{public: public, kp: kp, line: line}
	return nil
}

// ParseMemberKeys reads a member keys file: one line per member,
// "<ID> <public key U…>"; blank lines and lines starting with # are
// ignored, except the statements of the cluster's name and algorithm
// (StatementPrefix). Its errors name the line.
func ParseMemberKeys(r io.Reader) (*MemberKeys, error) {
	k := &MemberKeys{keys: make(map[uint64]memberKey)}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, StatementPrefix) {
			if err := k.statement(text); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrKeys, line, err)
			}
			continue
		}
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%w: line %d: want \"<ID> <public key>\", got %q", ErrKeys, line, text)
		}
		if len(k.keys) == MaxMemberKeys {
			return nil, fmt.Errorf("%w: line %d: more than %d members", ErrKeys, line, MaxMemberKeys)
		}
		id, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %q is not a positive integer ID", ErrKeys, line, fields[0])
		}
		if err := k.add(id, fields[1], line); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrKeys, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeys, err)
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("%w: no member listed", ErrKeys)
	}
	return k, nil
}

// ReadMemberKeysFile reads the member keys file at path (ParseMemberKeys).
func ReadMemberKeysFile(path string) (*MemberKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeys, err)
	}
	defer f.Close()
	k, err := ParseMemberKeys(f)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// ReadSeedFile reads a user seed (SU…, as nk -gen user writes it) from
// path: its first line that is not blank and does not start with #.
func ReadSeedFile(path string) (nkeys.KeyPair, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeys, err)
	}
	var seed []byte
	for line := range bytes.Lines(data) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			seed = line
			break
		}
	}
	if !bytes.HasPrefix(seed, []byte("SU")) {
		return nil, fmt.Errorf("%w: %s does not hold a user seed (SU…)", ErrKeys, path)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: not a valid user seed: %v", ErrKeys, path, err)
	}
	return kp, nil
}

// Check reports whether the keys are those of members, and, with a
// signer, that the signer's public key is the one listed for its ID.
//
// With member credentials (Authority) no member is listed: it reports
// whether the signer carries a credential.
func (k *MemberKeys) Check(members []uint64, signer *Signer) error {
	if k.Authority() {
		if signer != nil && signer.credential == "" {
			return fmt.Errorf("%w: the members' keys come from their credentials, but this node has none", ErrKeys)
		}
		return nil
	}
	ids := k.IDs()
	for _, id := range ids {
		if !slices.Contains(members, id) {
			return fmt.Errorf("%w: line %d: member %d is not one of the peers %v", ErrKeys, k.keys[id].line, id, members)
		}
	}
	for _, id := range members {
		if _, ok := k.keys[id]; !ok {
			return fmt.Errorf("%w: no key for member %d", ErrKeys, id)
		}
	}
	if signer != nil {
		if listed := k.keys[signer.id]; listed.public != signer.public {
			return fmt.Errorf("%w: line %d: member %d is listed with %s, but this node's seed is the key of %s", ErrKeys, listed.line, signer.id, listed.public, signer.public)
		}
	}
	return nil
}

// Len is the number of members with a key.
func (k *MemberKeys) Len() int {
	if k == nil {
		return 0
	}
	if k.auth != nil {
		return len(k.auth.ids())
	}
	return len(k.keys)
}

// IDs are the members with a key, in increasing order.
func (k *MemberKeys) IDs() []uint64 {
	if k == nil {
		return nil
	}
	if k.auth != nil {
		return k.auth.ids()
	}
	ids := make([]uint64, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// CertifyKeys returns the members' public keys as certify.Keys: the keys
// of a listed membership (not from credentials).
func (k *MemberKeys) CertifyKeys() (*certify.Keys, error) {
	if k == nil || k.auth != nil {
		return nil, fmt.Errorf("%w: no list of member keys", ErrKeys)
	}
	pairs := make(map[uint64]nkeys.KeyPair, len(k.keys))
	for id, m := range k.keys {
		kp, err := nkeys.FromPublicKey(m.public)
		if err != nil {
			return nil, fmt.Errorf("%w: member %d: %v", ErrKeys, id, err)
		}
		pairs[id] = kp
	}
	return certify.NewKeys(pairs)
}

// PublicKey is member id's public key, if it has one.
//
// With member credentials, it is the key of member id's last message that
// verified, if any did.
func (k *MemberKeys) PublicKey(id uint64) (string, bool) {
	if k == nil {
		return "", false
	}
	if k.auth != nil {
		return k.auth.publicKey(id)
	}
	m, ok := k.keys[id]
	return m.public, ok
}

// Verify checks that payload, received on subject with header h, is
// signed by the member its SignerHeader names, and returns that member.
// A missing, malformed or wrong signature, or a signer without a key, is a
// *ValidationError with protocol.ReasonSignature. The caller then checks that the
// message names the signer (CheckSigner).
//
// With member credentials (NewAuthorityKeys), the signer's key is the
// one its credential binds, which the message carries (CredentialHeader).
func (k *MemberKeys) Verify(subject string, payload []byte, h nats.Header) (uint64, error) {
	if k.auth != nil {
		return k.auth.verify(subject, payload, h)
	}
	signer, signature := h.Get(SignerHeader), h.Get(SignatureHeader)
	if signer == "" || signature == "" {
		return 0, reject(protocol.ReasonSignature, "message is not signed")
	}
	id, err := strconv.ParseUint(signer, 10, 64)
	if err != nil {
		return 0, reject(protocol.ReasonSignature, "signer %.20q is not a member ID", signer)
	}
	key, ok := k.keys[id]
	if !ok {
		return 0, reject(protocol.ReasonSignature, "signer %d has no key", id)
	}
	if base64.RawURLEncoding.DecodedLen(len(signature)) != signatureSize {
		return 0, reject(protocol.ReasonSignature, "signature is not %d bytes of base64url", signatureSize)
	}
	sig, err := base64.RawURLEncoding.DecodeString(signature)
	if err != nil {
		return 0, reject(protocol.ReasonSignature, "signature is not base64url")
	}
	if key.kp.Verify(signedBytes(subject, payload), sig) != nil {
		return 0, reject(protocol.ReasonSignature, "signature is not member %d's", id)
	}
	return id, nil
}

// CheckSigner reports whether the member a message names is its signer.
func CheckSigner(signer, named uint64) error {
	if signer != named {
		return reject(protocol.ReasonSignature, "signed by member %d, but the message is from %d", signer, named)
	}
	return nil
}

// Members returns the keys as the membership that checks certificates,
// signed statements and evidence (certify.Members): the members are those
// with a key, and a member's signature is checked with its key. A nil
// *MemberKeys has no members.
func (k *MemberKeys) Members() certify.Members { return certifyMembers{k} }

// certifyMembers adapts MemberKeys to certify.Members.
type certifyMembers struct{ k *MemberKeys }

func (m certifyMembers) Size() int { return m.k.Len() }

func (m certifyMembers) Has(id uint64) bool {
	_, ok := m.k.PublicKey(id)
	return ok
}

func (m certifyMembers) Verify(member uint64, data, sig []byte) error {
	if m.k == nil {
		return fmt.Errorf("%w: %d", certify.ErrUnknownMember, member)
	}
	key, ok := m.k.keys[member]
	if !ok {
		return fmt.Errorf("%w: %d", certify.ErrUnknownMember, member)
	}
	if len(sig) != signatureSize {
		return fmt.Errorf("%w: member %d: signature of %d bytes, want %d", certify.ErrSignature, member, len(sig), signatureSize)
	}
	if err := key.kp.Verify(data, sig); err != nil {
		return fmt.Errorf("%w: member %d: %v", certify.ErrSignature, member, err)
	}
	return nil
}

// Certify returns the signer of the byzantine algorithm's statements: the
// same member and key.
func (s *Signer) Certify() certify.Signer {
	cs, err := certify.NewSigner(s.id, s.kp)
	if err != nil {
		panic(fmt.Sprintf("protocol: certify signer: %v", err)) // a seed checked by NewSigner
	}
	return cs
}

// reject is a *protocol.ValidationError of reason r: what a receiver
// counts and drops, as it does a malformed message.
func reject(r protocol.Reason, format string, args ...any) error {
	return &protocol.ValidationError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}
