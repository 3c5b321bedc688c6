package protocol

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Every subject of a cluster lives under "election.<cluster>.":
//
//	election.<cluster>.leader        leader announcements (JSON Announcement)
//	election.<cluster>.election      Bully Election, broadcast
//	election.<cluster>.coordinator   Bully Coordinator, broadcast
//	election.<cluster>.heartbeat     leader heartbeats, broadcast
//	election.<cluster>.resign        clean leave, broadcast
//	election.<cluster>.prepare       Paxos Prepare, broadcast
//	election.<cluster>.propose       Paxos Propose (and lease renewal), broadcast
//	election.<cluster>.node.<id>     one node's inbox (Answer, Stale, ring messages)
//	election.<cluster>.query         request/reply: the leader answers with its Announcement
//	election.<cluster>.bz_<type>     the byzantine broadcasts (bz_propose, bz_vote, bz_timeout, bz_hello, bz_evidence, bz_change, bz_commit)
//	election.<cluster>.order         the oral messages of the agreement on a leader's orders (order.go)
//	election.<cluster>.decided       the members' signed decisions on those orders
//	election.<cluster>.presence      dynamic membership: members say they are present
const (
	// Root is the first token of every subject.
	Root = "election"
	// AllLeaders matches the leader subject of every cluster.
	AllLeaders = Root + ".*.leader"
)

// Subject kinds: the token after the cluster name.
const (
	KindLeader      = "leader"
	KindElection    = "election"
	KindCoordinator = "coordinator"
	KindHeartbeat   = "heartbeat"
	KindResign      = "resign"
	KindNode        = "node"
	KindQuery       = "query"
	KindPrepare     = "prepare"
	KindPropose     = "propose"
	KindPresence    = "presence"
	// KindEvidence is the subject of TypeBzEvidence: members broadcast
	// there the evidence that another member lied.
	KindEvidence = string(TypeBzEvidence)
)

var clusterName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ErrClusterName is returned for a cluster name outside [A-Za-z0-9_-]+.
var ErrClusterName = errors.New("protocol: cluster name must match [A-Za-z0-9_-]+")

// ValidateCluster reports whether name can be used as a cluster name.
func ValidateCluster(name string) error {
	if !clusterName.MatchString(name) {
		return fmt.Errorf("%w: %q", ErrClusterName, name)
	}
	return nil
}

// LeaderSubject is where a cluster's leader announcements are published.
func LeaderSubject(cluster string) string { return Root + "." + cluster + "." + KindLeader }

// QuerySubject is where an application asks for the current leader: a
// request on it is answered by the node that leads, with its Announcement.
// No answer means no leader is known.
func QuerySubject(cluster string) string { return Root + "." + cluster + "." + KindQuery }

// InboxSubject is the inbox of one node of a cluster.
func InboxSubject(cluster string, id uint64) string {
	return Root + "." + cluster + "." + KindNode + "." + strconv.FormatUint(id, 10)
}

// BroadcastSubject is the subject of a broadcast message type, or "" if t is
// never broadcast.
func BroadcastSubject(cluster string, t Type) string {
	switch t {
	case TypeElection, TypeCoordinator, TypeHeartbeat, TypeResign, TypePrepare, TypePropose, TypePresence:
		return Root + "." + cluster + "." + string(t)
	case TypeBzPropose, TypeBzVote, TypeBzTimeout, TypeBzHello, TypeBzEvidence, TypeBzChange, TypeBzCommit:
		return Root + "." + cluster + "." + string(t)
	}
	return ""
}

// CertifiedBroadcastTypes lists the byzantine algorithm's broadcast
// types. BroadcastTypes, which the nodes of the other algorithms
// subscribe to, does not hold them.
var CertifiedBroadcastTypes = []Type{TypeBzPropose, TypeBzVote, TypeBzTimeout, TypeBzHello, TypeBzEvidence, TypeBzChange, TypeBzCommit}

// BroadcastTypes lists the message types that are broadcast by Bully, the
// ring and Paxos (see CertifiedBroadcastTypes for the byzantine ones).
var BroadcastTypes = []Type{TypeElection, TypeCoordinator, TypeHeartbeat, TypeResign, TypePrepare, TypePropose, TypePresence}

// BroadcastSubjects lists the broadcast subjects of a cluster.
func BroadcastSubjects(cluster string) []string {
	subjects := make([]string, len(BroadcastTypes))
	for i, t := range BroadcastTypes {
		subjects[i] = BroadcastSubject(cluster, t)
	}
	return subjects
}

// BroadcastSubjectsOf lists the broadcast subjects a node of algorithm
// subscribes to in cluster: BroadcastSubjects, or for the byzantine
// algorithm its own types and Resign.
func BroadcastSubjectsOf(cluster string, a Algorithm) []string {
	if a != Byzantine {
		return BroadcastSubjects(cluster)
	}
	subjects := []string{BroadcastSubject(cluster, TypeResign), BroadcastSubject(cluster, TypePresence)}
	for _, t := range CertifiedBroadcastTypes {
		subjects = append(subjects, BroadcastSubject(cluster, t))
	}
	return subjects
}

// SubjectFor is the subject m is published on in cluster: the receiver's
// inbox for point-to-point messages, the type's broadcast subject otherwise.
func SubjectFor(cluster string, m Message) string {
	if m.To != 0 {
		return InboxSubject(cluster, m.To)
	}
	return BroadcastSubject(cluster, m.Type)
}

// CheckRoute verifies that m arrived on the subject it must be published on
// in cluster, so a message cannot be replayed onto another subject or
// another cluster.
func CheckRoute(cluster, subject string, m Message) error {
	want := SubjectFor(cluster, m)
	if want == "" || subject != want {
		return reject(ReasonWrongSubject, "%s on %q, want %q", m.Type, subject, want)
	}
	return nil
}

// ClusterOf extracts the cluster name from any subject of this package.
func ClusterOf(subject string) (string, error) {
	parts := strings.Split(subject, ".")
	if len(parts) < 3 || parts[0] != Root {
		return "", fmt.Errorf("protocol: %q is not an election subject", subject)
	}
	if err := ValidateCluster(parts[1]); err != nil {
		return "", err
	}
	return parts[1], nil
}

// ConnectionName is the NATS connection name of node id of cluster, by
// which the connection events of the NATS server (the client's name in
// $SYS.ACCOUNT.<account>.DISCONNECT) tell which member came or went.
func ConnectionName(cluster string, id uint64) string {
	return connectionPrefix + cluster + "/" + strconv.FormatUint(id, 10)
}

const connectionPrefix = "baton-node "

// ProbeConnectionName is the name of the short connection by which node id
// of cluster checks at start that the NATS server delivers connection
// events. ParseConnectionName does not take it for a node's.
func ProbeConnectionName(cluster string, id uint64) string {
	return "baton-probe " + cluster + "/" + strconv.FormatUint(id, 10)
}

// ParseConnectionName is the inverse of ConnectionName.
func ParseConnectionName(name string) (cluster string, id uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, connectionPrefix)
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 || ValidateCluster(rest[:i]) != nil {
		return "", 0, false
	}
	id, err := strconv.ParseUint(rest[i+1:], 10, 64)
	if err != nil || id == 0 {
		return "", 0, false
	}
	return rest[:i], id, true
}

// MemberUser is the name of the NATS user that the server's credential
// check (internal/natsauth) gives member id of cluster, admitted with the
// credential that binds its user key userKey (U…): "baton <cluster> <id>
// <userKey>". The server reports it as the user (client.user) of the
// member's connection events, and no client can choose it, as it can its
// connection name: a password user is reported under its configured name,
// an nkey user under its key. So a connection event whose user is
// MemberUser(cluster, id, key) is about a connection of the member whose
// messages are signed with key.
func MemberUser(cluster string, id uint64, userKey string) string {
	return "baton " + cluster + " " + strconv.FormatUint(id, 10) + " " + userKey
}

// InboxPrefix is the inbox prefix (nats.CustomInboxPrefix) of member id of
// cluster: "_INBOX_BATON.<cluster>.<id>". Where the NATS server lists the
// members' keys as users (internal/natsconf), a member user may subscribe
// under its own prefix only and no application or observer may publish
// there, so a node that authenticates with its member key uses it for its
// replies (queries, JetStream requests).
func InboxPrefix(cluster string, id uint64) string {
	return InboxRoot + "." + cluster + "." + strconv.FormatUint(id, 10)
}

// InboxRoot is the first token of every member's inbox prefix.
const InboxRoot = "_INBOX_BATON"
