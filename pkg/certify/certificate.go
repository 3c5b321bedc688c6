package certify

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// F is the number of lying members n members tolerate, ⌊(n−1)/3⌋ (0 for
// n < 1).
func F(n int) int {
	if n < 1 {
		return 0
	}
	return (n - 1) / 3
}

// Quorum is the number of distinct votes a certificate needs among n
// members, ⌈(n+f+1)/2⌉ with f = F(n) (0 for n < 1).
func Quorum(n int) int {
	if n < 1 {
		return 0
	}
	return (n + F(n) + 2) / 2
}

// Certificate shows that a quorum of a cluster's members voted for Leader
// in Term, under version Version of the member set.
type Certificate struct {
	// Cluster is the cluster's name.
	Cluster string
	// Term is the term, ≥ 1.
	Term uint64
	// Leader is the member voted for, ≥ 1.
	Leader uint64
	// Version is the member-set version of the votes (0 for the
	// configured set).
	Version uint64
	// Votes are the signatures of VoteIn(Cluster, member, Term, Leader,
	// Version), one per member, in ascending order of member as
	// NewCertificate builds them (VerifyCertificate accepts any order).
	Votes []MemberSignature
}

// MemberSignature is one member's signature in a certificate.
type MemberSignature struct {
	// Member is the ID of the member that voted.
	Member uint64
	// Signature is its signature of the vote, SignatureSize bytes.
	Signature []byte
}

// Vote returns the vote statement that member signed for c.
func (c Certificate) Vote(member uint64) Statement {
	return VoteIn(c.Cluster, member, c.Term, c.Leader, c.Version)
}

// NewCertificate gathers signed votes, all for one cluster, term and
// leader under one member-set version and each from a different member,
// into a certificate, in ascending order of member. It checks neither the
// signatures nor the quorum: VerifyCertificate does. The error wraps
// ErrCertificate.
func NewCertificate(votes []SignedStatement) (Certificate, error) {
	if len(votes) == 0 || len(votes) > MaxMembers {
		return Certificate{}, fmt.Errorf("%w: %d votes, want 1 to %d", ErrCertificate, len(votes), MaxMembers)
	}
	first := votes[0].Statement
	c := Certificate{Cluster: first.Cluster, Term: first.Term, Leader: first.Leader, Version: first.Version}
	seen := make(map[uint64]bool, len(votes))
	for _, v := range votes {
		s := v.Statement
		if err := s.Validate(); err != nil {
			return Certificate{}, fmt.Errorf("%w: %w", ErrCertificate, err)
		}
		if s.Kind != KindVote {
			return Certificate{}, fmt.Errorf("%w: %s of member %d among the votes", ErrCertificate, s.Kind.withArticle(), s.Member)
		}
		if s.Cluster != c.Cluster || s.Term != c.Term || s.Leader != c.Leader {
			return Certificate{}, fmt.Errorf("%w: member %d votes for %d in term %d of %q, not for %d in term %d of %q",
				ErrCertificate, s.Member, s.Leader, s.Term, s.Cluster, c.Leader, c.Term, c.Cluster)
		}
		if s.Version != c.Version {
			return Certificate{}, fmt.Errorf("%w: member %d votes under member-set version %d, not %d",
				ErrCertificate, s.Member, s.Version, c.Version)
		}
		if seen[s.Member] {
			return Certificate{}, fmt.Errorf("%w: member %d votes twice", ErrCertificate, s.Member)
		}
		seen[s.Member] = true
		c.Votes = append(c.Votes, MemberSignature{Member: s.Member, Signature: slices.Clone(v.Signature)})
	}
	sortByMember(c.Votes)
	return c, nil
}

// validateShape checks what can be checked without the members: the
// fields, the number of votes against MaxMembers, distinct signers and
// the signatures' sizes.
func (c Certificate) validateShape() error {
	if err := validateCluster(c.Cluster); err != nil {
		return err
	}
	if c.Term == 0 {
		return errors.New("term 0; terms are ≥ 1")
	}
	if c.Leader == 0 {
		return errors.New("leader 0; IDs are ≥ 1")
	}
	return validateSignatures(c.Votes, "votes")
}

// validateSignatures checks 1–MaxMembers signatures of distinct members,
// each of SignatureSize bytes.
func validateSignatures(sigs []MemberSignature, what string) error {
	if len(sigs) == 0 || len(sigs) > MaxMembers {
		return fmt.Errorf("%d %s, want 1 to %d", len(sigs), what, MaxMembers)
	}
	seen := make(map[uint64]bool, len(sigs))
	for _, v := range sigs {
		if v.Member == 0 {
			return errors.New("a signature of member 0; IDs are ≥ 1")
		}
		if seen[v.Member] {
			return fmt.Errorf("member %d signs twice", v.Member)
		}
		seen[v.Member] = true
		if len(v.Signature) != SignatureSize {
			return fmt.Errorf("member %d: signature of %d bytes, want %d", v.Member, len(v.Signature), SignatureSize)
		}
	}
	return nil
}

// checkMembers checks n, that need (named needName) ≤ len(sigs) ≤ n, and that every
// signer is a member.
func checkMembers(members Members, sigs []MemberSignature, need int, needName, what string) error {
	n := members.Size()
	if n < 1 || n > MaxMembers {
		return fmt.Errorf("%d members, want 1 to %d", n, MaxMembers)
	}
	if len(sigs) > n {
		return fmt.Errorf("%d %s among %d members", len(sigs), what, n)
	}
	if len(sigs) < need {
		return fmt.Errorf("%d %s, %s of %d members is %d", len(sigs), what, needName, n, need)
	}
	for _, v := range sigs {
		if !members.Has(v.Member) {
			return fmt.Errorf("signer: %w: %d", ErrUnknownMember, v.Member)
		}
	}
	return nil
}

// checkSignatures checks each member's signature of its statement.
func checkSignatures(members Members, sigs []MemberSignature, statement func(member uint64) Statement) error {
	for _, v := range sigs {
		data, err := statement(v.Member).Encode()
		if err != nil {
			return err
		}
		if err := verify(members, v.Member, data, v.Signature); err != nil {
			return err
		}
	}
	return nil
}

// sortByMember sorts signatures in ascending order of member.
func sortByMember(sigs []MemberSignature) {
	slices.SortFunc(sigs, func(a, b MemberSignature) int { return cmp.Compare(a.Member, b.Member) })
}

// VerifyCertificate checks that c certifies c.Leader in c.Term of
// c.Cluster among members, the member set of version c.Version: the
// leader is a member; the signers are distinct members, at least
// Quorum(n) and at most n of them; every signature is the signer's over
// its vote for c.Leader in c.Term of c.Cluster under c.Version. The cheap
// checks come first, the signatures last. A caller that expects a given
// cluster, term or leader compares them with c's (or uses
// VerifyCertificateFor). The error wraps ErrCertificate, and
// ErrUnknownMember or ErrSignature where one applies.
func VerifyCertificate(members Members, c Certificate) error {
	if err := c.validateShape(); err != nil {
		return fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	n := members.Size()
	if err := checkMembers(members, c.Votes, Quorum(n), "a quorum", "votes"); err != nil {
		return fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	if !members.Has(c.Leader) {
		return fmt.Errorf("%w: leader: %w: %d", ErrCertificate, ErrUnknownMember, c.Leader)
	}
	if err := checkSignatures(members, c.Votes, c.Vote); err != nil {
		return fmt.Errorf("%w: vote for %d in term %d: %w", ErrCertificate, c.Leader, c.Term, err)
	}
	return nil
}

// VerifyCertificateFor checks, as VerifyCertificate does, that c
// certifies leader in term of cluster.
func VerifyCertificateFor(members Members, c Certificate, cluster string, term, leader uint64) error {
	if c.Cluster != cluster || c.Term != term || c.Leader != leader {
		return fmt.Errorf("%w: it certifies %d in term %d of %q, not %d in term %d of %q",
			ErrCertificate, c.Leader, c.Term, c.Cluster, leader, term, cluster)
	}
	return VerifyCertificate(members, c)
}
