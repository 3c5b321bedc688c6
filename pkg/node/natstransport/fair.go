package natstransport

import (
	"sync"
	"time"

	"github.com/baton-election/baton/pkg/node/transport"
)

// ReasonSenderLimit is transport.ReasonSenderLimit.
const ReasonSenderLimit = transport.ReasonSenderLimit

// Per-sender limits: each member's messages pass a token bucket of their
// own per queue, refilled at a steady rate, far above what an honest
// member sends and far below what it takes to fill a queue that the
// machine drains. A member's leadership claims (heartbeats and
// Coordinators: one every heartbeat interval, 100 ms by default) may take
// at most claimBurst of the claims lane's transport.ClaimsSize slots; its
// other messages (bursts of a ring's election rounds or a Paxos leader's
// acknowledgements, a few per member and election) otherBurstBase plus
// otherBurstPerMember per member.
const (
	claimBurst          = 16
	claimRate           = 50 // per second
	otherBurstBase      = 64
	otherBurstPerMember = 4
	otherRatePerMember  = 100 // per second
)

// senders holds the buckets of every member, per queue. Its zero value is
// ready; it is safe for concurrent use. Its memory is bounded by the
// number of members: only messages that passed every check, the
// membership included, reach it.
type senders struct {
	mu      sync.Mutex
	buckets map[senderLane]*bucket
}

type senderLane struct {
	from  uint64
	claim bool
}

// bucket is a token bucket: tokens left as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

// admit reports whether a message from sender, a claim or not, arriving at
// now (monotonic) is within its share, taking a token if it is. members
// is the size of the membership.
func (s *senders) admit(from uint64, claim bool, members int, now time.Time) bool {
	burst, rate := float64(claimBurst), float64(claimRate)
	if !claim {
		burst = float64(otherBurstBase + otherBurstPerMember*members)
		rate = float64(otherRatePerMember * members)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets == nil {
		s.buckets = make(map[senderLane]*bucket)
	}
	key := senderLane{from: from, claim: claim}
	b := s.buckets[key]
	if b == nil {
		b = &bucket{tokens: burst, at: now}
		s.buckets[key] = b
	}
	if elapsed := now.Sub(b.at).Seconds(); elapsed > 0 {
		b.tokens = min(burst, b.tokens+elapsed*rate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
