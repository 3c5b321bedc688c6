package certify

import (
	"errors"
	"fmt"
	"slices"
)

// MaxSteps bounds the steps of a chain carried at once (FollowChain).
const MaxSteps = 64

// Step is one change of a member set: the new set and the commits of a
// quorum of the set before it.
type Step struct {
	// Set is the new set, the version after the one before.
	Set MemberSet `json:"set"`
	// Commit is the certificate of commits (KindCommit) to Set, signed by
	// a quorum of the set before it.
	Commit QuorumCertificate `json:"commit"`
}

// VerifyStep checks that s is the change of cluster's member set that
// follows prev: s.Set is the version after prev, with one member added
// or removed (MemberSet.Next); s.Commit is a certificate of commits in
// cluster to version s.Set.Version with s.Set's digest, and holds with
// prev's members (VerifyQuorumCertificate). The term of s.Commit is not
// checked. The error wraps ErrMemberSet, or ErrCertificate and the
// errors VerifyQuorumCertificate wraps.
func VerifyStep(cluster string, prev MemberSet, s Step) error {
	if _, _, err := s.Set.Next(prev); err != nil {
		return err
	}
	c := s.Commit
	if c.Kind != KindCommit {
		return fmt.Errorf("%w: step to version %d: a certificate of %ss, not of commits", ErrCertificate, s.Set.Version, c.Kind)
	}
	if c.Cluster != cluster {
		return fmt.Errorf("%w: step to version %d: commits in %q, not in %q", ErrCertificate, s.Set.Version, c.Cluster, cluster)
	}
	if c.Version != s.Set.Version {
		return fmt.Errorf("%w: step to version %d: commits to version %d", ErrCertificate, s.Set.Version, c.Version)
	}
	if c.Digest != s.Set.Digest(cluster) {
		return fmt.Errorf("%w: step to version %d: commits to another set of that version", ErrCertificate, s.Set.Version)
	}
	keys, err := prev.Keys()
	if err != nil {
		return err
	}
	return VerifyQuorumCertificate(keys, c)
}

// FollowChain checks steps one after the other from the member set from
// of cluster (VerifyStep), and returns the last step's set, or from if
// there is no step. steps[0] is the version after from's, each step the
// version after the one before; at most MaxSteps. The error wraps
// ErrMemberSet, or the errors of VerifyStep.
func FollowChain(cluster string, from MemberSet, steps []Step) (MemberSet, error) {
	if len(steps) > MaxSteps {
		return MemberSet{}, fmt.Errorf("%w: a chain of %d steps, at most %d", ErrMemberSet, len(steps), MaxSteps)
	}
	if err := from.Validate(); err != nil {
		return MemberSet{}, err
	}
	last := from
	for _, s := range steps {
		if err := VerifyStep(cluster, last, s); err != nil {
			return MemberSet{}, err
		}
		last = s.Set
	}
	return MemberSet{Version: last.Version, Members: slices.Clone(last.Members)}, nil
}

// stepJSON is the JSON form of a step; both fields must be present.
type stepJSON struct {
	Set    *MemberSet         `json:"set"`
	Commit *QuorumCertificate `json:"commit"`
}

// UnmarshalJSON reads the form
//
//	{"set":<member set>,"commit":<quorum certificate>}
//
// (the form encoding/json writes of a Step), the set as MemberSet reads
// it and the certificate as QuorumCertificate does: both present, no
// other field. It checks their shapes, not the step (VerifyStep does).
// The error wraps ErrMemberSet or ErrCertificate.
func (s *Step) UnmarshalJSON(data []byte) error {
	var w stepJSON
	if err := strict(data, &w); err != nil {
		if errors.Is(err, ErrMemberSet) || errors.Is(err, ErrCertificate) {
			return err
		}
		return fmt.Errorf("%w: step: %v", ErrMemberSet, err)
	}
	if w.Set == nil || w.Commit == nil {
		return fmt.Errorf("%w: step: needs \"set\" and \"commit\"", ErrMemberSet)
	}
	*s = Step{Set: *w.Set, Commit: *w.Commit}
	return nil
}

// DecodeStep reads a step's JSON form (see UnmarshalJSON).
func DecodeStep(data []byte) (Step, error) {
	if len(data) > MaxJSONSize {
		return Step{}, fmt.Errorf("%w: step: %d bytes, at most %d", ErrMemberSet, len(data), MaxJSONSize)
	}
	var s Step
	if err := s.UnmarshalJSON(data); err != nil {
		return Step{}, err
	}
	return s, nil
}
