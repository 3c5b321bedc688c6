package protocol

import (
	"fmt"
	"strconv"
	"time"
)

// Status is a node's view of the election as it shows it to the world:
// the answer to GET /status, what pkg/node's Node.Status returns and what
// the tools that follow nodes decode. Its JSON is the contract's, field
// for field:
//
//	{"id":3,"cluster":"default","algorithm":"bully","leader":5,"term":12,"state":"follower"}
//
// (election.SoftState is the machine's own view, in ticks, from which a node
// makes this one.)
type Status struct {
	ID        uint64    `json:"id"`
	Cluster   string    `json:"cluster"`
	Algorithm Algorithm `json:"algorithm"`
	// Leader is nil while the leader is undefined.
	Leader *uint64 `json:"leader"`
	// Term is the term of the leadership this node last accepted or
	// claimed, 0 before any.
	Term uint64 `json:"term"`
	// State is follower, candidate or leader.
	State string `json:"state"`
	// LeaseRemainingMS is, while this node leads under a lease (Paxos),
	// how long the lease still holds, in milliseconds; absent otherwise.
	LeaseRemainingMS *int64 `json:"lease_remaining_ms,omitempty"`
	// Members are, with dynamic membership, the IDs of the members
	// present as the node sees them, itself included, sorted; absent
	// with a static membership.
	Members []uint64 `json:"members,omitempty"`
	// Voters is, for Paxos with dynamic membership, the voter
	// configuration the node holds: "next" is present while the voters
	// change.
	Voters *Voters `json:"voters,omitempty"`
	// Since is when the node's view took its present leader, term and
	// state (its ETag), on the node's clock: when it followed a new
	// leader, or its lease ended, say. Absent while the node does not
	// run (before its start, after it stopped), and from builds before it.
	Since *time.Time `json:"since,omitempty"`
}

// ETag names the leadership view of a status (leader, term and state),
// quoted as an HTTP entity tag: GET /status serves it, and a request that
// names it in If-None-Match with ?wait= waits for it to change.
func (s Status) ETag() string {
	leader := "null"
	if s.Leader != nil {
		leader = strconv.FormatUint(*s.Leader, 10)
	}
	return fmt.Sprintf(`"%s-%d-%s"`, leader, s.Term, s.State)
}
