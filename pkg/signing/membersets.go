package signing

import (
	"fmt"
	"slices"
	"sync"

	"github.com/baton-election/baton/pkg/certify"
)

// setsKept is how many versions of the member set MemberSets keeps: a
// certificate of a version that old may still be read while the cluster
// moves on.
const setsKept = 4

// MemberSets follows, for a reader, the member set of a byzantine cluster
// with dynamic membership: version 0 is the configured set (the reader's
// own configuration, never a message), and each later version is
// believed only with the commits of a quorum of the version before it
// (certify.VerifyStep). Announcements carry the last changes their
// leader adopted (Announcement.Steps); VerifyAnnouncementOf follows them
// before it checks the certificate against the set of its version. A
// reader that missed more changes than an announcement carries cannot
// follow, and refuses the leaders it cannot check. Safe for concurrent
// use.
type MemberSets struct {
	cluster string
	mu      sync.Mutex
	sets    []versionKeys // ascending by version, the last setsKept
}

type versionKeys struct {
	set  certify.MemberSet
	keys *certify.Keys
}

// NewMemberSets returns the follower of cluster's member set from its
// configured set, the members and keys of configured (a listed
// membership, such as a members file).
func NewMemberSets(cluster string, configured *MemberKeys) (*MemberSets, error) {
	keys, err := configured.CertifyKeys()
	if err != nil {
		return nil, err
	}
	set, err := certify.NewMemberSet(0, keys)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeys, err)
	}
	return &MemberSets{cluster: cluster, sets: []versionKeys{{set: set, keys: keys}}}, nil
}

// Follow adopts the changes of steps that come after the latest set it
// knows, each checked against the set before it; it stops at the first
// that does not hold, and returns why.
func (s *MemberSets) Follow(steps []certify.Step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, step := range steps {
		latest := s.sets[len(s.sets)-1]
		if step.Set.Version <= latest.set.Version {
			continue
		}
		if err := certify.VerifyStep(s.cluster, latest.set, step); err != nil {
			return err
		}
		keys, err := step.Set.Keys()
		if err != nil {
			return err
		}
		s.sets = append(s.sets, versionKeys{set: step.Set, keys: keys})
		if len(s.sets) > setsKept {
			s.sets = slices.Delete(s.sets, 0, len(s.sets)-setsKept)
		}
	}
	return nil
}

// Members returns the members of version, if it is one of those kept.
func (s *MemberSets) Members(version uint64) (certify.Members, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.sets {
		if v.set.Version == version {
			return v.keys, nil
		}
	}
	first, last := s.sets[0].set.Version, s.sets[len(s.sets)-1].set.Version
	return nil, fmt.Errorf("%w: member set version %d unknown: this reader follows versions %d to %d", ErrKeys, version, first, last)
}

// Latest returns the latest member set followed.
func (s *MemberSets) Latest() certify.MemberSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sets[len(s.sets)-1].set
}

// WithMemberSets returns keys that check messages as k does and the
// certificates of a byzantine cluster with dynamic membership against
// the set sets follows.
func (k *MemberKeys) WithMemberSets(sets *MemberSets) *MemberKeys {
	c := *k
	c.sets = sets
	return &c
}

// MemberSets returns the member set k follows, nil if none.
func (k *MemberKeys) MemberSets() *MemberSets {
	if k == nil {
		return nil
	}
	return k.sets
}

// MembersOf returns the members whose votes a certificate of member-set
// version holds: the set of that version where k follows a changing set
// (WithMemberSets), k's members for version 0 otherwise.
func (k *MemberKeys) MembersOf(version uint64) (certify.Members, error) {
	if sets := k.MemberSets(); sets != nil {
		return sets.Members(version)
	}
	if version != 0 {
		return nil, fmt.Errorf("%w: a certificate of member set version %d, but this reader's member set does not change", ErrKeys, version)
	}
	return k.Members(), nil
}
