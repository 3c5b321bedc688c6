package election

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// Rank orders the members in each election: where an algorithm asks
// which of two members is the higher (who should lead, who answers
// whom, who defers to whom), it compares their ranks. The zero value
// ranks by ID (ByID), the rank of every cluster configured without one.
//
// Under both ranks the order is total, the same at every member that has
// the same Rank, and ID 0 (no member: an undefined leader) ranks below
// every member.
type Rank struct {
	cluster string
	spread  bool
}

// The names of the ranks, as ParseRank reads them and Rank.String
// writes them.
const (
	RankID     = "id"
	RankSpread = "spread"
)

// ByID ranks members by ID: the higher ID ranks higher. It is the zero
// Rank.
func ByID() Rank { return Rank{} }

// Spread ranks members by rendezvous (highest-random-weight) hashing of
// the election, named cluster, and the member: member a ranks above
// member b when SpreadScore(cluster, a) > SpreadScore(cluster, b), or
// the scores are equal and a > b. Elections with different names rank
// the members in orders that look unrelated, so that over many
// elections (many clusters) each member leads about as many as the
// others; and a member that joins ranks first only in the elections
// where its score is the highest, every other election keeping its
// order of the others.
func Spread(cluster string) Rank { return Rank{cluster: cluster, spread: true} }

// ParseRank returns the rank named name ("id" or "spread"; "" is "id")
// for the election named cluster.
func ParseRank(name, cluster string) (Rank, error) {
	switch name {
	case "", RankID:
		return ByID(), nil
	case RankSpread:
		return Spread(cluster), nil
	}
	return Rank{}, fmt.Errorf("election: unknown rank %q (want %q or %q)", name, RankID, RankSpread)
}

// IsSpread reports whether r is a Spread rank.
func (r Rank) IsSpread() bool { return r.spread }

// Cluster is the election name of a Spread rank, "" for ByID.
func (r Rank) Cluster() string { return r.cluster }

// String is the rank's name: "id" or "spread".
func (r Rank) String() string {
	if r.spread {
		return RankSpread
	}
	return RankID
}

// SpreadScore is member id's score in the election named cluster: the
// first 8 bytes, read as a big-endian unsigned integer, of the SHA-256
// of the cluster name's bytes, a zero byte, and id as 8 bytes
// big-endian.
func SpreadScore(cluster string, id uint64) uint64 {
	buf := make([]byte, 0, len(cluster)+9)
	buf = append(buf, cluster...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, id)
	sum := sha256.Sum256(buf)
	return binary.BigEndian.Uint64(sum[:8])
}

// Score is member id's score under r: its ID for ByID, SpreadScore for
// Spread. Ranks compare scores first and IDs on a tie.
func (r Rank) Score(id uint64) uint64 {
	if !r.spread {
		return id
	}
	return SpreadScore(r.cluster, id)
}

// Above reports whether member a ranks above member b. No member ranks
// above itself, and ID 0 ranks below every other.
func (r Rank) Above(a, b uint64) bool {
	if !r.spread {
		return a > b
	}
	return above(a, b, r.Score(a), r.Score(b))
}

// above orders a with score sa and b with score sb.
func above(a, b, sa, sb uint64) bool {
	switch {
	case a == b || a == 0:
		return false
	case b == 0:
		return true
	case sa != sb:
		return sa > sb
	}
	return a > b
}

// Sort sorts ids in increasing rank: the highest-ranked last.
func (r Rank) Sort(ids []uint64) { r.Ranker(ids).Sort(ids) }

// Highest returns the highest-ranked of ids, 0 if there are none.
func (r Rank) Highest(ids []uint64) uint64 { return r.Ranker(nil).Highest(ids) }

// Ranker compares members by a Rank, with the Spread scores of the
// members it was given (Ranker, Keep) computed once: an algorithm
// compares ranks on every message. It computes the score of any other ID
// when asked, without keeping it, so that its memory stays bounded by
// the members. A Ranker of ByID keeps nothing. It is not safe for
// concurrent use while Keep runs.
type Ranker struct {
	rank   Rank
	scores map[uint64]uint64
}

// Ranker returns a Ranker of r that keeps the scores of members.
func (r Rank) Ranker(members []uint64) *Ranker {
	k := &Ranker{rank: r}
	k.Keep(members)
	return k
}

// Keep replaces the scores kept by those of members (those already kept
// are not computed again).
func (k *Ranker) Keep(members []uint64) {
	if !k.rank.spread {
		return
	}
	scores := make(map[uint64]uint64, len(members))
	for _, id := range members {
		s, ok := k.scores[id]
		if !ok {
			s = k.rank.Score(id)
		}
		scores[id] = s
	}
	k.scores = scores
}

// Rank is the rank k compares by.
func (k *Ranker) Rank() Rank { return k.rank }

// Score is id's score (see Rank.Score).
func (k *Ranker) Score(id uint64) uint64 {
	if !k.rank.spread {
		return id
	}
	if s, ok := k.scores[id]; ok {
		return s
	}
	return k.rank.Score(id)
}

// Above reports whether member a ranks above member b (see Rank.Above).
func (k *Ranker) Above(a, b uint64) bool {
	if !k.rank.spread {
		return a > b
	}
	return above(a, b, k.Score(a), k.Score(b))
}

// Sort sorts ids in increasing rank: the highest-ranked last.
func (k *Ranker) Sort(ids []uint64) {
	if !k.rank.spread {
		slices.Sort(ids)
		return
	}
	slices.SortFunc(ids, func(a, b uint64) int {
		switch {
		case a == b:
			return 0
		case k.Above(a, b):
			return 1
		}
		return -1
	})
}

// Highest returns the highest-ranked of ids, 0 if there are none.
func (k *Ranker) Highest(ids []uint64) uint64 {
	top := uint64(0)
	for _, id := range ids {
		if k.Above(id, top) {
			top = id
		}
	}
	return top
}
