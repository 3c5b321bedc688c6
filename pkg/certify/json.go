package certify

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// MaxJSONSize bounds the JSON form of a certificate, a signed statement,
// evidence, a member set, a quorum certificate or a step; the largest
// valid certificates (MaxMembers signatures), member set (MaxMembers
// members) and step fit.
const MaxJSONSize = 32 << 10

// statementJSON is the JSON form of a signed statement.
type statementJSON struct {
	Kind      string   `json:"kind"`
	Cluster   string   `json:"cluster"`
	Member    uint64   `json:"member"`
	Term      uint64   `json:"term"`
	Leader    *uint64  `json:"leader,omitempty"`
	Version   *uint64  `json:"version,omitempty"`
	Order     *uint64  `json:"order,omitempty"`
	Path      []uint64 `json:"path,omitempty"`
	Digest    string   `json:"digest,omitempty"`
	Signature []byte   `json:"signature"`
}

// kindFields are the JSON fields of each kind beyond kind, cluster,
// member, term and signature (a vote's version only when ≥ 1).
var kindFields = map[Kind][]string{
	KindVote:    {"leader", "version"},
	KindTimeout: nil,
	KindRelay:   {"order", "path", "digest"},
	KindAccept:  {"version", "digest"},
	KindCommit:  {"version", "digest"},
}

// MarshalJSON renders s as
//
//	{"kind":"vote","cluster":"default","member":2,"term":7,"leader":4,"signature":"<base64>"}
//	{"kind":"vote","cluster":"default","member":2,"term":7,"leader":4,"version":3,"signature":"<base64>"}
//	{"kind":"timeout","cluster":"default","member":2,"term":7,"signature":"<base64>"}
//	{"kind":"relay","cluster":"default","member":3,"term":7,"order":1,"path":[4,3],"digest":"<hex>","signature":"<base64>"}
//	{"kind":"accept","cluster":"default","member":2,"term":7,"version":3,"digest":"<hex>","signature":"<base64>"}
//	{"kind":"commit","cluster":"default","member":2,"term":7,"version":3,"digest":"<hex>","signature":"<base64>"}
//
// A vote's version is there only when ≥ 1 (a vote under the configured
// set has none). It fails if the statement is invalid.
func (s SignedStatement) MarshalJSON() ([]byte, error) {
	st := s.Statement
	if err := st.Validate(); err != nil {
		return nil, err
	}
	w := statementJSON{Kind: st.Kind.String(), Cluster: st.Cluster, Member: st.Member, Term: st.Term, Signature: s.Signature}
	switch st.Kind {
	case KindVote:
		w.Leader = &st.Leader
		if st.Version != 0 {
			w.Version = &st.Version
		}
	case KindRelay:
		w.Order = &st.Order
		w.Path = st.Path
		w.Digest = hex.EncodeToString(st.Digest[:])
	case KindAccept, KindCommit:
		w.Version = &st.Version
		w.Digest = hex.EncodeToString(st.Digest[:])
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the form MarshalJSON writes: every field the kind
// has must be present and no other (a vote's version is present only
// when ≥ 1); the statement must be valid and the signature SignatureSize
// bytes.
func (s *SignedStatement) UnmarshalJSON(data []byte) error {
	var w statementJSON
	if err := strict(data, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrStatement, err)
	}
	kind, ok := kindNamed(w.Kind)
	if !ok {
		return fmt.Errorf("%w: unknown kind %q", ErrStatement, w.Kind)
	}
	st := Statement{Kind: kind, Cluster: w.Cluster, Member: w.Member, Term: w.Term}
	misplaced := func(field string) error {
		return fmt.Errorf("%w: %s: field %q does not belong to it", ErrStatement, kind, field)
	}
	missing := func(field string) error {
		return fmt.Errorf("%w: %s: field %q missing", ErrStatement, kind, field)
	}
	switch kind {
	case KindVote:
		if w.Leader == nil {
			return missing("leader")
		}
		st.Leader = *w.Leader
		if w.Version != nil {
			if *w.Version == 0 {
				return fmt.Errorf("%w: vote: version 0; a vote under the configured set has no \"version\"", ErrStatement)
			}
			st.Version = *w.Version
		}
	case KindRelay:
		if w.Order == nil {
			return missing("order")
		}
		if w.Path == nil {
			return missing("path")
		}
		if w.Digest == "" {
			return missing("digest")
		}
		st.Order, st.Path = *w.Order, w.Path
	case KindAccept, KindCommit:
		if w.Version == nil {
			return missing("version")
		}
		if w.Digest == "" {
			return missing("digest")
		}
		st.Version = *w.Version
	}
	for _, f := range []struct {
		name    string
		present bool
	}{
		{"leader", w.Leader != nil},
		{"version", w.Version != nil},
		{"order", w.Order != nil},
		{"path", w.Path != nil},
		{"digest", w.Digest != ""},
	} {
		if f.present && !slices.Contains(kindFields[kind], f.name) {
			return misplaced(f.name)
		}
	}
	if w.Digest != "" {
		d, err := parseDigest(w.Digest)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrStatement, kind, err)
		}
		st.Digest = d
	}
	if err := st.Validate(); err != nil {
		return err
	}
	if len(w.Signature) != SignatureSize {
		return fmt.Errorf("%w: member %d: signature of %d bytes, want %d", ErrSignature, st.Member, len(w.Signature), SignatureSize)
	}
	*s = SignedStatement{Statement: st, Signature: w.Signature}
	return nil
}

// parseDigest reads a digest in lower-case hex.
func parseDigest(s string) ([DigestSize]byte, error) {
	var out [DigestSize]byte
	d, err := hex.DecodeString(s)
	if err != nil || len(d) != DigestSize || hex.EncodeToString(d) != s {
		return out, fmt.Errorf("digest %q is not %d bytes in lower-case hex", s, DigestSize)
	}
	copy(out[:], d)
	return out, nil
}

// DecodeSignedStatement reads a signed statement's JSON form (see
// MarshalJSON). It does not check the signature (Verify does).
func DecodeSignedStatement(data []byte) (SignedStatement, error) {
	if len(data) > MaxJSONSize {
		return SignedStatement{}, fmt.Errorf("%w: %d bytes, at most %d", ErrStatement, len(data), MaxJSONSize)
	}
	var s SignedStatement
	if err := s.UnmarshalJSON(data); err != nil {
		return SignedStatement{}, err
	}
	return s, nil
}

// certificateJSON and voteJSON are the JSON form of a certificate; the
// other certificates list their signatures as voteJSON too.
type certificateJSON struct {
	Cluster string     `json:"cluster"`
	Term    uint64     `json:"term"`
	Leader  uint64     `json:"leader"`
	Version *uint64    `json:"version,omitempty"`
	Votes   []voteJSON `json:"votes"`
}

type voteJSON struct {
	Member    uint64 `json:"member"`
	Signature []byte `json:"signature"`
}

// MarshalJSON renders c as
//
//	{"cluster":"default","term":7,"leader":4,"votes":[{"member":1,"signature":"<base64>"},…]}
//	{"cluster":"default","term":7,"leader":4,"version":3,"votes":[{"member":1,"signature":"<base64>"},…]}
//
// where each signature is the member's over VoteIn(cluster, member, term,
// leader, version).Encode(); the version is there only when ≥ 1.
func (c Certificate) MarshalJSON() ([]byte, error) {
	w := certificateJSON{Cluster: c.Cluster, Term: c.Term, Leader: c.Leader, Votes: make([]voteJSON, len(c.Votes))}
	if c.Version != 0 {
		w.Version = &c.Version
	}
	for i, v := range c.Votes {
		w.Votes[i] = voteJSON(v)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the form MarshalJSON writes and checks its shape
// (fields present, a version only when ≥ 1, 1–MaxMembers distinct
// signers, signatures' sizes), not the signatures.
func (c *Certificate) UnmarshalJSON(data []byte) error {
	var w certificateJSON
	if err := strict(data, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	out := Certificate{Cluster: w.Cluster, Term: w.Term, Leader: w.Leader, Votes: make([]MemberSignature, len(w.Votes))}
	if w.Version != nil {
		if *w.Version == 0 {
			return fmt.Errorf("%w: version 0; a certificate of the configured set has no \"version\"", ErrCertificate)
		}
		out.Version = *w.Version
	}
	for i, v := range w.Votes {
		out.Votes[i] = MemberSignature(v)
	}
	if err := out.validateShape(); err != nil {
		return fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	*c = out
	return nil
}

// DecodeCertificate reads a certificate's JSON form (see MarshalJSON). It
// checks the shape; VerifyCertificate checks the rest.
func DecodeCertificate(data []byte) (Certificate, error) {
	if len(data) > MaxJSONSize {
		return Certificate{}, fmt.Errorf("%w: %d bytes, at most %d", ErrCertificate, len(data), MaxJSONSize)
	}
	var c Certificate
	if err := c.UnmarshalJSON(data); err != nil {
		return Certificate{}, err
	}
	return c, nil
}

// timeoutsJSON is the JSON form of a time-out certificate.
type timeoutsJSON struct {
	Cluster  string     `json:"cluster"`
	Term     uint64     `json:"term"`
	Timeouts []voteJSON `json:"timeouts"`
}

// MarshalJSON renders c as
//
//	{"cluster":"default","term":7,"timeouts":[{"member":1,"signature":"<base64>"},…]}
//
// where each signature is the member's over Timeout(cluster, member,
// term).Encode().
func (c TimeoutCertificate) MarshalJSON() ([]byte, error) {
	w := timeoutsJSON{Cluster: c.Cluster, Term: c.Term, Timeouts: make([]voteJSON, len(c.Timeouts))}
	for i, v := range c.Timeouts {
		w.Timeouts[i] = voteJSON(v)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the form MarshalJSON writes and checks its shape,
// not the signatures.
func (c *TimeoutCertificate) UnmarshalJSON(data []byte) error {
	var w timeoutsJSON
	if err := strict(data, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	out := TimeoutCertificate{Cluster: w.Cluster, Term: w.Term, Timeouts: make([]MemberSignature, len(w.Timeouts))}
	for i, v := range w.Timeouts {
		out.Timeouts[i] = MemberSignature(v)
	}
	if err := out.validateShape(); err != nil {
		return fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	*c = out
	return nil
}

// DecodeTimeoutCertificate reads a time-out certificate's JSON form (see
// MarshalJSON). It checks the shape; VerifyTimeoutCertificate checks the
// rest.
func DecodeTimeoutCertificate(data []byte) (TimeoutCertificate, error) {
	if len(data) > MaxJSONSize {
		return TimeoutCertificate{}, fmt.Errorf("%w: %d bytes, at most %d", ErrCertificate, len(data), MaxJSONSize)
	}
	var c TimeoutCertificate
	if err := c.UnmarshalJSON(data); err != nil {
		return TimeoutCertificate{}, err
	}
	return c, nil
}

// quorumJSON is the JSON form of a quorum certificate.
type quorumJSON struct {
	Kind    string     `json:"kind"`
	Cluster string     `json:"cluster"`
	Term    uint64     `json:"term"`
	Version uint64     `json:"version"`
	Digest  string     `json:"digest"`
	Sigs    []voteJSON `json:"sigs"`
}

// MarshalJSON renders c as
//
//	{"kind":"accept","cluster":"default","term":7,"version":3,"digest":"<hex>","sigs":[{"member":1,"signature":"<base64>"},…]}
//
// (kind "commit" for commits) where each signature is the member's over
// Accept(cluster, member, term, version, digest).Encode(), or Commit's.
func (c QuorumCertificate) MarshalJSON() ([]byte, error) {
	w := quorumJSON{Kind: c.Kind.String(), Cluster: c.Cluster, Term: c.Term, Version: c.Version,
		Digest: hex.EncodeToString(c.Digest[:]), Sigs: make([]voteJSON, len(c.Sigs))}
	for i, v := range c.Sigs {
		w.Sigs[i] = voteJSON(v)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the form MarshalJSON writes and checks its shape
// (kind accept or commit, fields present, 1–MaxMembers distinct signers,
// signatures' sizes), not the signatures.
func (c *QuorumCertificate) UnmarshalJSON(data []byte) error {
	var w quorumJSON
	if err := strict(data, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	kind, ok := kindNamed(w.Kind)
	if !ok {
		return fmt.Errorf("%w: unknown kind %q", ErrCertificate, w.Kind)
	}
	if w.Digest == "" {
		return fmt.Errorf("%w: field \"digest\" missing", ErrCertificate)
	}
	digest, err := parseDigest(w.Digest)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	out := QuorumCertificate{Kind: kind, Cluster: w.Cluster, Term: w.Term, Version: w.Version, Digest: digest,
		Sigs: make([]MemberSignature, len(w.Sigs))}
	for i, v := range w.Sigs {
		out.Sigs[i] = MemberSignature(v)
	}
	if err := out.validateShape(); err != nil {
		return fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	*c = out
	return nil
}

// DecodeQuorumCertificate reads a quorum certificate's JSON form (see
// MarshalJSON). It checks the shape; VerifyQuorumCertificate checks the
// rest.
func DecodeQuorumCertificate(data []byte) (QuorumCertificate, error) {
	if len(data) > MaxJSONSize {
		return QuorumCertificate{}, fmt.Errorf("%w: %d bytes, at most %d", ErrCertificate, len(data), MaxJSONSize)
	}
	var c QuorumCertificate
	if err := c.UnmarshalJSON(data); err != nil {
		return QuorumCertificate{}, err
	}
	return c, nil
}

// evidenceJSON is the JSON form of evidence.
type evidenceJSON struct {
	Member uint64           `json:"member"`
	First  *SignedStatement `json:"first"`
	Second *SignedStatement `json:"second"`
}

// MarshalJSON renders e as {"member":3,"first":<statement>,"second":<statement>},
// the statements in the form of SignedStatement.MarshalJSON; member is
// the member convicted, for readers that do not look further.
func (e Evidence) MarshalJSON() ([]byte, error) {
	return json.Marshal(evidenceJSON{Member: e.Member(), First: &e.First, Second: &e.Second})
}

// UnmarshalJSON reads the form MarshalJSON writes; the two statements
// must contradict each other and be member's. It does not check the
// signatures (VerifyEvidence does).
func (e *Evidence) UnmarshalJSON(data []byte) error {
	var w evidenceJSON
	if err := strict(data, &w); err != nil {
		return fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	if w.First == nil || w.Second == nil {
		return fmt.Errorf("%w: needs \"first\" and \"second\"", ErrEvidence)
	}
	if err := contradiction(w.First.Statement, w.Second.Statement); err != nil {
		return fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	if w.Member != w.First.Statement.Member {
		return fmt.Errorf("%w: member %d, but the statements are member %d's", ErrEvidence, w.Member, w.First.Statement.Member)
	}
	*e = Evidence{First: *w.First, Second: *w.Second}
	return nil
}

// DecodeEvidence reads evidence's JSON form (see MarshalJSON).
func DecodeEvidence(data []byte) (Evidence, error) {
	if len(data) > MaxJSONSize {
		return Evidence{}, fmt.Errorf("%w: %d bytes, at most %d", ErrEvidence, len(data), MaxJSONSize)
	}
	var e Evidence
	if err := e.UnmarshalJSON(data); err != nil {
		return Evidence{}, err
	}
	return e, nil
}

// strict decodes one JSON object into v, refusing unknown fields and
// anything after the object.
func strict(data []byte, v any) error {
	if len(data) > MaxJSONSize {
		return fmt.Errorf("%d bytes, at most %d", len(data), MaxJSONSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the object")
	}
	return nil
}
