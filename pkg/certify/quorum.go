package certify

import (
	"errors"
	"fmt"
	"slices"
)

// QuorumCertificate shows that a quorum of a member set accepted, or
// committed to, the member set whose digest is Digest as version Version,
// proposed by the leader of Term. With Kind KindAccept it is a prepared
// certificate; with KindCommit the change is final. The quorum is of the
// members of version Version−1, the set the change is made from.
type QuorumCertificate struct {
	// Kind is KindAccept (a prepared certificate) or KindCommit (the
	// change is final).
	Kind Kind
	// Cluster is the cluster's name.
	Cluster string
	// Term is the term whose leader proposed the set, ≥ 1.
	Term uint64
	// Version is the version of the proposed set, ≥ 1.
	Version uint64
	// Digest is MemberSet.Digest of the proposed set in Cluster.
	Digest [DigestSize]byte
	// Sigs are the signatures of Statement(member), one per member, in
	// ascending order of member as NewQuorumCertificate builds them
	// (VerifyQuorumCertificate accepts any order).
	Sigs []MemberSignature
}

// Statement returns the statement that member signed for c: its accept
// (KindAccept) or its commit (KindCommit).
func (c QuorumCertificate) Statement(member uint64) Statement {
	return Statement{Kind: c.Kind, Cluster: c.Cluster, Member: member, Term: c.Term, Version: c.Version, Digest: c.Digest}
}

// verb is what a member of c does: "accepts" or "commits to".
func (c QuorumCertificate) verb() string {
	if c.Kind == KindCommit {
		return "commits to"
	}
	return "accepts"
}

// NewQuorumCertificate gathers signed accepts, or signed commits, all of
// one cluster, term, version and digest and each from a different
// member, into a certificate, in ascending order of member. It checks
// neither the signatures nor the quorum: VerifyQuorumCertificate does.
// The error wraps ErrCertificate.
func NewQuorumCertificate(sigs []SignedStatement) (QuorumCertificate, error) {
	if len(sigs) == 0 || len(sigs) > MaxMembers {
		return QuorumCertificate{}, fmt.Errorf("%w: %d accepts or commits, want 1 to %d", ErrCertificate, len(sigs), MaxMembers)
	}
	first := sigs[0].Statement
	if first.Kind != KindAccept && first.Kind != KindCommit {
		return QuorumCertificate{}, fmt.Errorf("%w: %s of member %d, not an accept or a commit", ErrCertificate, first.Kind.withArticle(), first.Member)
	}
	c := QuorumCertificate{Kind: first.Kind, Cluster: first.Cluster, Term: first.Term, Version: first.Version, Digest: first.Digest}
	seen := make(map[uint64]bool, len(sigs))
	for _, v := range sigs {
		s := v.Statement
		if err := s.Validate(); err != nil {
			return QuorumCertificate{}, fmt.Errorf("%w: %w", ErrCertificate, err)
		}
		if s.Kind != c.Kind {
			return QuorumCertificate{}, fmt.Errorf("%w: %s of member %d among the %ss", ErrCertificate, s.Kind.withArticle(), s.Member, c.Kind)
		}
		if s.Cluster != c.Cluster || s.Term != c.Term || s.Version != c.Version {
			return QuorumCertificate{}, fmt.Errorf("%w: member %d %s version %d of term %d of %q, not version %d of term %d of %q",
				ErrCertificate, s.Member, c.verb(), s.Version, s.Term, s.Cluster, c.Version, c.Term, c.Cluster)
		}
		if s.Digest != c.Digest {
			return QuorumCertificate{}, fmt.Errorf("%w: member %d %s another set as version %d", ErrCertificate, s.Member, c.verb(), s.Version)
		}
		if seen[s.Member] {
			return QuorumCertificate{}, fmt.Errorf("%w: member %d signs twice", ErrCertificate, s.Member)
		}
		seen[s.Member] = true
		c.Sigs = append(c.Sigs, MemberSignature{Member: s.Member, Signature: slices.Clone(v.Signature)})
	}
	sortByMember(c.Sigs)
	return c, nil
}

// validateShape checks what can be checked without the members.
func (c QuorumCertificate) validateShape() error {
	if c.Kind != KindAccept && c.Kind != KindCommit {
		return fmt.Errorf("kind %s, want accept or commit", c.Kind)
	}
	if err := validateCluster(c.Cluster); err != nil {
		return err
	}
	if c.Term == 0 {
		return errors.New("term 0; terms are ≥ 1")
	}
	if c.Version == 0 {
		return errors.New("version 0; the versions of changed member sets are ≥ 1")
	}
	if c.Digest == ([DigestSize]byte{}) {
		return errors.New("zero digest; want the member set's")
	}
	return validateSignatures(c.Sigs, c.Kind.String()+"s")
}

// VerifyQuorumCertificate checks that a quorum of members accepted, or
// committed to, c.Version of c.Cluster with c.Digest, proposed by the
// leader of c.Term: the signers are distinct members, at least Quorum(n)
// and at most n of them, and every signature is the signer's over its
// accept or commit. members are those of version c.Version−1, the set the
// change is made from. A caller that expects a given kind, cluster,
// version or digest compares them with c's (VerifyStep does). The error
// wraps ErrCertificate, and ErrUnknownMember or ErrSignature where one
// applies.
func VerifyQuorumCertificate(members Members, c QuorumCertificate) error {
	if err := c.validateShape(); err != nil {
		return fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	n := members.Size()
	if err := checkMembers(members, c.Sigs, Quorum(n), "a quorum", c.Kind.String()+"s"); err != nil {
		return fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	if err := checkSignatures(members, c.Sigs, c.Statement); err != nil {
		return fmt.Errorf("%w: %s of version %d in term %d: %w", ErrCertificate, c.Kind, c.Version, c.Term, err)
	}
	return nil
}
