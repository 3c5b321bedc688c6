package certify

import (
	"errors"
	"fmt"
)

// TimeoutCertificate shows that members gave up on Term: their signed
// time-outs. With F(n)+1 of them at least one honest member gave up, so
// the liars alone cannot move a term on; with Quorum(n) of them, they
// share an honest member with every quorum of votes.
type TimeoutCertificate struct {
	// Cluster is the cluster's name.
	Cluster string
	// Term is the term given up, ≥ 1.
	Term uint64
	// Timeouts are the signatures of Timeout(Cluster, member, Term), one
	// per member, in ascending order of member as NewTimeoutCertificate
	// builds them (VerifyTimeoutCertificate accepts any order).
	Timeouts []MemberSignature
}

// Timeout returns the time-out statement that member signed for c.
func (c TimeoutCertificate) Timeout(member uint64) Statement {
	return Timeout(c.Cluster, member, c.Term)
}

// NewTimeoutCertificate gathers signed time-outs, all of one cluster and
// term and each from a different member, in ascending order of member. It
// checks neither the signatures nor their number:
// VerifyTimeoutCertificate does. The error wraps ErrCertificate.
func NewTimeoutCertificate(timeouts []SignedStatement) (TimeoutCertificate, error) {
	if len(timeouts) == 0 || len(timeouts) > MaxMembers {
		return TimeoutCertificate{}, fmt.Errorf("%w: %d time-outs, want 1 to %d", ErrCertificate, len(timeouts), MaxMembers)
	}
	first := timeouts[0].Statement
	c := TimeoutCertificate{Cluster: first.Cluster, Term: first.Term}
	seen := make(map[uint64]bool, len(timeouts))
	for _, t := range timeouts {
		s := t.Statement
		if err := s.Validate(); err != nil {
			return TimeoutCertificate{}, fmt.Errorf("%w: %w", ErrCertificate, err)
		}
		if s.Kind != KindTimeout {
			return TimeoutCertificate{}, fmt.Errorf("%w: %s of member %d among the time-outs", ErrCertificate, s.Kind.withArticle(), s.Member)
		}
		if s.Cluster != c.Cluster || s.Term != c.Term {
			return TimeoutCertificate{}, fmt.Errorf("%w: member %d gives up term %d of %q, not term %d of %q",
				ErrCertificate, s.Member, s.Term, s.Cluster, c.Term, c.Cluster)
		}
		if seen[s.Member] {
			return TimeoutCertificate{}, fmt.Errorf("%w: member %d gives up twice", ErrCertificate, s.Member)
		}
		seen[s.Member] = true
		c.Timeouts = append(c.Timeouts, MemberSignature{Member: s.Member, Signature: append([]byte(nil), t.Signature...)})
	}
	sortByMember(c.Timeouts)
	return c, nil
}

// validateShape checks what can be checked without the members.
func (c TimeoutCertificate) validateShape() error {
	if err := validateCluster(c.Cluster); err != nil {
		return err
	}
	if c.Term == 0 {
		return errors.New("term 0; terms are ≥ 1")
	}
	return validateSignatures(c.Timeouts, "time-outs")
}

// VerifyTimeoutCertificate checks that at least need distinct members
// gave up c.Term of c.Cluster: the signers are distinct members, at least
// need and at most n of them, and every signature is the signer's over
// its time-out. need is F(n)+1 (one honest member gave up) or Quorum(n),
// as the caller's rule asks; below F(n)+1 the liars alone could sign, so
// a smaller need is refused. The error wraps ErrCertificate, and
// ErrUnknownMember or ErrSignature where one applies.
func VerifyTimeoutCertificate(members Members, c TimeoutCertificate, need int) error {
	n := members.Size()
	if need < F(n)+1 || need > n {
		return fmt.Errorf("%w: %d time-outs asked of %d members, want f+1 = %d to %d", ErrCertificate, need, n, F(n)+1, n)
	}
	if err := c.validateShape(); err != nil {
		return fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	if err := checkMembers(members, c.Timeouts, need, "the number asked", "time-outs"); err != nil {
		return fmt.Errorf("%w: %w", ErrCertificate, err)
	}
	if err := checkSignatures(members, c.Timeouts, c.Timeout); err != nil {
		return fmt.Errorf("%w: time-out of term %d: %w", ErrCertificate, c.Term, err)
	}
	return nil
}
