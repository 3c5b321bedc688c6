package protocol

import (
	"fmt"
	"slices"
)

// MaxVoters bounds the voters of a Paxos cluster with dynamic membership,
// in each of a configuration's two sets: every renewal waits for a
// majority of them, and a proposal carries them.
const MaxVoters = 15

// Voters is the voter configuration of a Paxos cluster with dynamic
// membership: the members whose acceptors form the quorums. It changes
// through the protocol, in two steps, as joint consensus does: from
// {Voters: old} to the joint {Voters: old, Next: new}, whose quorums are
// a majority of each, and, once a joint quorum has accepted that, to
// {Voters: new}. Each step is a new Version, proposed by the leader of
// Ballot; configurations are ordered by (Version, Ballot), and a node
// only ever moves to a newer one.
type Voters struct {
	// Version is 0 for the configured voters (ELECTION_VOTERS), and
	// grows by one with each step.
	Version uint64 `json:"version"`
	// Ballot is the ballot of the leader that proposed this version; 0
	// for version 0.
	Ballot uint64 `json:"ballot,omitempty"`
	// Voters are the voters, sorted; Next, while the configuration is
	// joint, the voters it moves to, sorted.
	Voters []uint64 `json:"voters"`
	Next   []uint64 `json:"next,omitempty"`
}

// Newer reports whether v comes after o: a higher version, or the same
// version proposed under a higher ballot. Any configuration is newer
// than nil.
func (v *Voters) Newer(o *Voters) bool {
	switch {
	case v == nil:
		return false
	case o == nil:
		return true
	case v.Version != o.Version:
		return v.Version > o.Version
	}
	return v.Ballot > o.Ballot
}

// Joint reports whether v moves from Voters to Next.
func (v *Voters) Joint() bool { return len(v.Next) > 0 }

// Votes reports whether id is a voter of v: in Voters or Next.
func (v *Voters) Votes(id uint64) bool {
	_, in := slices.BinarySearch(v.Voters, id)
	_, next := slices.BinarySearch(v.Next, id)
	return in || next
}

// Quorate reports whether ids (distinct) hold a quorum of v: a majority
// of Voters and, while joint, a majority of Next.
func (v *Voters) Quorate(ids []uint64) bool {
	return majority(v.Voters, ids) && (!v.Joint() || majority(v.Next, ids))
}

// majority reports whether ids hold a majority of set.
func majority(set, ids []uint64) bool {
	n := 0
	for _, id := range ids {
		if _, ok := slices.BinarySearch(set, id); ok {
			n++
		}
	}
	return n >= len(set)/2+1
}

// Validate checks v's shape: one to MaxVoters voters in each set, sorted,
// none twice, each an ID of dynamic membership; a ballot and terms at
// most MaxTerm; version 0 has no ballot and is not joint.
func (v *Voters) Validate() error {
	if v.Version > MaxTerm || v.Ballot > MaxTerm {
		return fmt.Errorf("voters of version %d, ballot %d: above %d", v.Version, v.Ballot, MaxTerm)
	}
	if v.Version == 0 && (v.Ballot != 0 || v.Joint()) {
		return fmt.Errorf("voters of version 0 with a ballot or a next set")
	}
	if err := validVoterSet(v.Voters); err != nil {
		return err
	}
	if v.Next != nil {
		return validVoterSet(v.Next)
	}
	return nil
}

// validVoterSet checks one set of voters.
func validVoterSet(ids []uint64) error {
	if len(ids) == 0 || len(ids) > MaxVoters {
		return fmt.Errorf("%d voters, want 1 to %d", len(ids), MaxVoters)
	}
	for i, id := range ids {
		if !DynamicMember(id) {
			return fmt.Errorf("voter %d outside 1..%d", id, MaxMemberID)
		}
		if i > 0 && ids[i-1] >= id {
			return fmt.Errorf("voters %v not sorted or not distinct", ids)
		}
	}
	return nil
}
