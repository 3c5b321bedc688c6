package certify

import (
	"errors"
	"fmt"
	"slices"
)

// Evidence is two signed statements of one member that contradict each
// other: proof that the member lied.
type Evidence struct {
	First  SignedStatement
	Second SignedStatement
}

// Member is the ID of the member the evidence convicts.
func (e Evidence) Member() uint64 { return e.First.Statement.Member }

// Kind is the kind of the two statements: KindVote for a lie in the
// election, KindRelay for a lie about an order. Only vote evidence
// excludes a member from the election (package byzantine): a member whose
// orders service lost its state may sign two relays of one order along
// one path without lying on purpose, so relay evidence is recorded (the
// observer) but shrinks no quorum.
func (e Evidence) Kind() Kind { return e.First.Statement.Kind }

// Contradicts reports whether no honest member states both a and b: both
// are valid statements of one member in one cluster, and either both are
// votes in one term for different leaders, or both are relays of one
// order of one term along one path with different digests.
func Contradicts(a, b Statement) bool { return contradiction(a, b) == nil }

// contradiction returns nil if a and b contradict each other, or why not.
func contradiction(a, b Statement) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("first: %w", err)
	}
	if err := b.Validate(); err != nil {
		return fmt.Errorf("second: %w", err)
	}
	switch {
	case a.Member != b.Member:
		return fmt.Errorf("statements of members %d and %d", a.Member, b.Member)
	case a.Cluster != b.Cluster:
		return fmt.Errorf("statements in clusters %q and %q", a.Cluster, b.Cluster)
	case a.Kind != b.Kind:
		return fmt.Errorf("a %s and a %s do not contradict each other", a.Kind, b.Kind)
	case a.Term != b.Term:
		return fmt.Errorf("statements of terms %d and %d", a.Term, b.Term)
	}
	switch a.Kind {
	case KindVote:
		if a.Leader == b.Leader {
			return fmt.Errorf("two votes for the same leader %d", a.Leader)
		}
		return nil
	case KindRelay:
		if a.Order != b.Order {
			return fmt.Errorf("relays of orders %d and %d", a.Order, b.Order)
		}
		if !slices.Equal(a.Path, b.Path) {
			return errors.New("relays along different paths")
		}
		if a.Digest == b.Digest {
			return errors.New("two relays of the same value")
		}
		return nil
	}
	return fmt.Errorf("%ss do not contradict each other", a.Kind)
}

// VerifyEvidence checks that e proves its member lied: its two statements
// contradict each other and both signatures are the member's. The error
// wraps ErrEvidence, and ErrStatement, ErrUnknownMember or ErrSignature
// where one applies.
func VerifyEvidence(v Verifier, e Evidence) error {
	if err := contradiction(e.First.Statement, e.Second.Statement); err != nil {
		return fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	if err := e.First.Verify(v); err != nil {
		return fmt.Errorf("%w: first: %w", ErrEvidence, err)
	}
	if err := e.Second.Verify(v); err != nil {
		return fmt.Errorf("%w: second: %w", ErrEvidence, err)
	}
	return nil
}
