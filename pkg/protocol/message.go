// Package protocol owns the wire: the messages that election nodes exchange,
// their JSON encoding, their validation, the leader announcement that
// applications consume, and every NATS subject name.
//
// Every message carries a version field. Decoding is strict: a payload that
// is too large, is not JSON, has a field of the wrong type or an unknown
// field, names an unknown message type or a different version is rejected
// with a *ValidationError whose Reason says why. Validate then checks the
// fields against the cluster's membership and the subject the message came
// on, so a message that could not have been sent by a member is rejected too.
//
// The package holds the wire format alone: it imports no NATS client and
// no key format. Signatures, member keys and the NATS headers that carry
// them are package signing's (pkg/signing).
package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/baton-election/baton/pkg/certify"
)

// Version is the version of the node-to-node message format. Version 2
// added the freshness fields (Inc, N, TS) and the term ceiling.
const Version = 2

// MaxPayload is the largest encoded message a node accepts, in bytes.
const MaxPayload = 1024

// MaxCertifiedPayload is the largest encoded message of the byzantine
// algorithm's types (Certified) a node accepts, in bytes: they carry
// signed statements and certificates of up to certify.MaxMembers
// signatures. A message of any other type is still held to MaxPayload.
const MaxCertifiedPayload = 64 << 10

// MaxMemberID is the largest ID of a member of a cluster with dynamic
// membership. Terms are partitioned by ID there (the member with ID i
// owns the terms t with (t−1) mod MaxMemberID = i−1), so that no two
// members ever claim the same term whoever joins or leaves; a bounded ID
// also bounds everything a node keeps per member it hears of.
const MaxMemberID = 1 << 16

// DynamicMember reports whether id can be a member of a cluster with
// dynamic membership: 1 to MaxMemberID.
func DynamicMember(id uint64) bool { return id >= 1 && id <= MaxMemberID }

// MaxTerm is the largest valid term: 2^62. A message, announcement or stored
// state with a larger term is invalid, so that no arithmetic on a term can
// wrap round. A node never claims a term above it; a cluster that reaches it
// elects no new leader (at one election per millisecond, that takes about
// 146 million years).
const MaxTerm uint64 = 1 << 62

// MaxHops bounds the Hops of a ring message. Rings drop a message after two
// rounds, so no valid message comes near it.
const MaxHops = 1 << 20

// Steady reports whether m is part of a cluster's failure detection
// rather than of an election: a heartbeat, a follower's probe of a leader
// it has not heard for a while (at most one per silence), a Paxos
// leader's lease renewal (a Propose naming its leader) and its
// acceptances, or a byzantine leader's round with its certificate and
// the acknowledgements of its rounds.
func Steady(m Message) bool {
	switch m.Type {
	case TypeHeartbeat, TypeProbe, TypeBzAck:
		return true
	case TypePropose, TypeAccepted:
		return m.Candidate != 0
	case TypeBzPropose:
		return m.Cert != nil
	}
	return false
}

// MaxWait bounds the Wait of a Paxos Nack, in ticks.
const MaxWait = 1 << 20

// Type names a kind of node-to-node message.
type Type string

// The message types. Bully uses Election, Answer and Coordinator; the ring
// uses Election (carrying a candidate), Elected and Ack; both use Heartbeat,
// Resign and Stale. Paxos uses Prepare, Promise, Propose, Accepted, Nack
// and Resign. All three use Probe.
const (
	// TypeElection starts or carries an election. Bully broadcasts it to
	// every node (only higher IDs act on it); the ring sends it to the
	// successor with the largest ID seen so far in Candidate.
	TypeElection Type = "election"
	// TypeAnswer tells a Bully candidate that a higher node is alive and
	// takes over the election.
	TypeAnswer Type = "answer"
	// TypeCoordinator is the Bully winner's broadcast: From leads with Term.
	TypeCoordinator Type = "coordinator"
	// TypeElected is the ring's "elected" round: Candidate leads with Term.
	TypeElected Type = "elected"
	// TypeAck acknowledges a ring message (matched by Seq), so a sender can
	// tell a dead successor from a live one and skip it.
	TypeAck Type = "ack"
	// TypeHeartbeat is broadcast by a leader while it leads; followers that
	// stop hearing it suspect the leader and start an election.
	TypeHeartbeat Type = "heartbeat"
	// TypeResign is broadcast by a node that leaves cleanly, so the others
	// stop waiting for it and, if it led, elect a successor at once. A
	// Paxos leader that hands over to a higher node without leaving
	// broadcasts it too, naming that node in Candidate; Term is then the
	// ballot whose lease it releases.
	TypeResign Type = "resign"
	// TypeStale answers a message whose term is older than the receiver's:
	// Term is the receiver's term and Candidate its leader (0 if none).
	TypeStale Type = "stale"
	// TypeProbe is sent by a follower to its leader when it has not heard
	// from it for a while, before it suspects it: a leader that receives
	// it answers at once with its heartbeat (Bully, ring) or a renewal
	// (Paxos), and the follower suspects nobody. Term is the term the
	// follower accepted.
	TypeProbe Type = "probe"

	// TypePrepare is Paxos phase 1a, broadcast: the sender asks every
	// acceptor to promise ballot Term.
	TypePrepare Type = "prepare"
	// TypePromise is phase 1b, to the proposer: the sender promises ballot
	// Term and reports the last proposal it accepted (ballot Prior, value
	// Candidate; both 0 if none).
	TypePromise Type = "promise"
	// TypePropose is phase 2a, broadcast: the sender proposes itself as
	// the leader of ballot Term; Seq numbers the round, since a leader
	// renews its lease by proposing again. Candidate is the sender once it
	// holds the lease, 0 before.
	TypePropose Type = "propose"
	// TypeAccepted is phase 2b, to the proposer: the sender accepted round
	// Seq of ballot Term; Candidate echoes the Propose's (a renewal's
	// acceptance names the leader).
	TypeAccepted Type = "accepted"
	// TypeNack refuses a Prepare or a Propose: Term is the ballot the
	// sender has promised; Candidate, if not 0, holds a lease the sender
	// granted, which lasts Wait more of the sender's ticks.
	TypeNack Type = "nack"

	// The byzantine algorithm's types (package byzantine). Their signed
	// parts are checked by the algorithm, which holds the members' keys;
	// Validate checks their shape. It also uses Resign.

	// TypeBzPropose is broadcast by the designated leader of Term: round
	// Seq of its candidacy (with TC, the time-out certificate of Term−1,
	// unless Term is 1) or, once it holds Cert, its lease renewal.
	TypeBzPropose Type = "bz_propose"
	// TypeBzVote is broadcast by a member that votes: Statement is its
	// signed vote for the leader of Term, answering round Seq.
	TypeBzVote Type = "bz_vote"
	// TypeBzAck is a member's answer to round Seq of Term, sent to the
	// leader once the member's vote in Term is out (a renewal, or a
	// round before the certificate): a lease grant, as a vote is.
	TypeBzAck Type = "bz_ack"
	// TypeBzTimeout is broadcast by a member that gives up a term:
	// Statement is its signed time-out; Cert or TC, if set, justify the
	// sender's Term.
	TypeBzTimeout Type = "bz_timeout"
	// TypeBzHello is broadcast by a member that starts: it asks the
	// others for their terms, and tells them it is alive.
	TypeBzHello Type = "bz_hello"
	// TypeBzStatus answers a Hello: Term is the sender's term, Cert or TC
	// justify it, Candidate is its certified leader (0 if none).
	TypeBzStatus Type = "bz_status"
	// TypeBzEvidence is broadcast by a member that holds Evidence that
	// another member lied.
	TypeBzEvidence Type = "bz_evidence"
	// TypeBzChange is broadcast by the certified leader of Term to change
	// the member set (dynamic membership): Set is the proposed set, the
	// version after the latest; Cred the credential of the member it
	// adds, if any; QC, if set, a prepared certificate of Set (a quorum's
	// accepts): of an earlier term it justifies the proposal, of Term it
	// asks the members to commit. A member that will not accept Set
	// because it holds a prepared certificate of another answers with
	// TypeBzLock.
	TypeBzChange Type = "bz_change"
	// TypeBzAccept is a member's answer to a TypeBzChange, sent to the
	// leader: Statement is its signed accept of the proposed set.
	TypeBzAccept Type = "bz_accept"
	// TypeBzCommit is broadcast by a member that holds QC, the prepared
	// certificate of Set: Statement is its signed commit of Set.
	TypeBzCommit Type = "bz_commit"
	// TypeBzLock answers a TypeBzChange that the sender will not accept,
	// to the leader: Set and QC are the set it holds prepared and its
	// prepared certificate.
	TypeBzLock Type = "bz_lock"

	// TypePresence says that a member of a cluster with dynamic membership
	// is present. Broadcast when the member starts and then every
	// presence interval; sent to one member in answer to the broadcast
	// of a member it had not heard before, so that a member that joins
	// learns who is present within a round trip. Term is the sender's
	// highest term.
	TypePresence Type = "presence"
)

// Types lists every message type, in a fixed order (for metrics and docs).
var Types = []Type{TypeElection, TypeAnswer, TypeCoordinator, TypeElected, TypeAck, TypeHeartbeat, TypeResign, TypeStale, TypeProbe,
	TypePrepare, TypePromise, TypePropose, TypeAccepted, TypeNack,
	TypeBzPropose, TypeBzVote, TypeBzAck, TypeBzTimeout, TypeBzHello, TypeBzStatus, TypeBzEvidence,
	TypeBzChange, TypeBzAccept, TypeBzCommit, TypeBzLock, TypePresence}

// Certified reports whether t is one of the byzantine algorithm's types,
// which may carry signed statements and certificates.
func Certified(t Type) bool {
	switch t {
	case TypeBzPropose, TypeBzVote, TypeBzAck, TypeBzTimeout, TypeBzHello, TypeBzStatus, TypeBzEvidence,
		TypeBzChange, TypeBzAccept, TypeBzCommit, TypeBzLock:
		return true
	}
	return false
}

// Message is one node-to-node message. The zero value of To means the
// message is broadcast; of Candidate, that it carries no candidate.
type Message struct {
	// V is the format version; always Version.
	V int `json:"v"`
	// Type is the kind of message.
	Type Type `json:"type"`
	// From is the sender's ID.
	From uint64 `json:"from"`
	// To is the receiver's ID for point-to-point messages, 0 when broadcast.
	To uint64 `json:"to,omitempty"`
	// Term is the sender's term: the term it claims for Coordinator,
	// Elected, Heartbeat and Resign, the highest term it knows otherwise.
	Term uint64 `json:"term"`
	// Candidate is the ID carried by ring Election and Elected messages, and
	// the sender's leader in Stale messages.
	Candidate uint64 `json:"candidate,omitempty"`
	// Seq numbers a ring message so that its Ack can be matched to it.
	Seq uint64 `json:"seq,omitempty"`
	// Hops counts how many nodes forwarded a ring message, so a message
	// whose candidate has died cannot circle forever.
	Hops int `json:"hops,omitempty"`
	// Prior is, in a Paxos Promise, the ballot of the last proposal the
	// sender accepted (at most Term).
	Prior uint64 `json:"prior,omitempty"`
	// Wait is, in a Paxos Nack, how many more of the sender's ticks the
	// lease it granted lasts; at most MaxWait.
	Wait int `json:"wait,omitempty"`
	// Cfg is, with dynamic membership, the sender's Paxos voter
	// configuration: on a Prepare and a Propose the proposer's, on a
	// Promise and a Nack the acceptor's.
	Cfg *Voters `json:"cfg,omitempty"`

	// The certified fields, only on the byzantine algorithm's types.

	// Statement is a signed vote (BzVote) or time-out (BzTimeout) of the
	// sender.
	Statement *certify.SignedStatement `json:"stmt,omitempty"`
	// Cert is the certificate of Term's leader (BzPropose, BzTimeout,
	// BzStatus).
	Cert *certify.Certificate `json:"cert,omitempty"`
	// TC is a time-out certificate of Term−1 (BzPropose, BzTimeout,
	// BzStatus): the justification of Term.
	TC *certify.TimeoutCertificate `json:"tc,omitempty"`
	// Evidence proves that a member lied (BzEvidence).
	Evidence *certify.Evidence `json:"evidence,omitempty"`
	// Version is, with a member set that changes, the version of the
	// latest member set the sender knows (BzPropose, BzHello, BzStatus).
	Version uint64 `json:"version,omitempty"`
	// Set is a member set: proposed (BzChange), committed (BzCommit) or
	// held prepared (BzLock).
	Set *certify.MemberSet `json:"set,omitempty"`
	// QC is a prepared certificate of Set (BzChange, BzCommit, BzLock).
	QC *certify.QuorumCertificate `json:"qc,omitempty"`
	// Steps are the changes of the member set after the version the
	// receiver knows, oldest first (BzStatus): how a member that was
	// away, or joins, catches up.
	Steps []certify.Step `json:"steps,omitempty"`
	// Key and Cred are, on the BzHello of a member that asks to join, its
	// public key and the credential that binds it to its ID; Cred is, on
	// a BzChange that adds a member, that member's credential.
	Key  string `json:"key,omitempty"`
	Cred string `json:"cred,omitempty"`

	// The freshness fields are set by the runtime that publishes the
	// message, not by the algorithms, and checked by a ReplayGuard on
	// receipt; the signature covers them.

	// Inc is the sender's incarnation: a number that grows each time the
	// sender's process starts.
	Inc uint64 `json:"inc,omitempty"`
	// N numbers the messages of one incarnation, from 1, in the order they
	// are sent.
	N uint64 `json:"n,omitempty"`
	// TS is the sender's wall-clock time when it sent the message, in
	// milliseconds since the Unix epoch.
	TS int64 `json:"ts,omitempty"`
	// ToInc is, on a point-to-point message, the receiver's incarnation as
	// the sender knows it (0 if it knows none yet), so that a message
	// captured before the receiver restarted cannot be replayed to its new
	// incarnation.
	ToInc uint64 `json:"ti,omitempty"`
}

// String renders a message compactly for logs and simulator traces.
func (m Message) String() string {
	s := fmt.Sprintf("%s %d→", m.Type, m.From)
	if m.To == 0 {
		s += "*"
	} else {
		s += fmt.Sprint(m.To)
	}
	s += fmt.Sprintf(" term=%d", m.Term)
	if m.Candidate != 0 {
		s += fmt.Sprintf(" cand=%d", m.Candidate)
	}
	if m.Seq != 0 {
		s += fmt.Sprintf(" seq=%d", m.Seq)
	}
	return s
}

// Reason classifies why a message was rejected. Reasons are stable strings,
// used as metric labels.
type Reason string

// The reasons a message is rejected.
const (
	ReasonOversized    Reason = "oversized"
	ReasonMalformed    Reason = "malformed"
	ReasonVersion      Reason = "version"
	ReasonUnknownType  Reason = "unknown_type"
	ReasonInvalidField Reason = "invalid_field"
	ReasonNotMember    Reason = "not_member"
	ReasonWrongSubject Reason = "wrong_subject"
	ReasonSignature    Reason = "bad_signature"
	// ReasonReplayed: a message already received, or one of an earlier
	// incarnation of its sender.
	ReasonReplayed Reason = "replayed"
	// ReasonExpired: a message sent longer ago than the receiver accepts, or
	// dated in the future beyond the same bound.
	ReasonExpired Reason = "expired"
)

// Reasons lists every rejection reason, in a fixed order.
var Reasons = []Reason{ReasonOversized, ReasonMalformed, ReasonVersion, ReasonUnknownType, ReasonInvalidField, ReasonNotMember, ReasonWrongSubject, ReasonSignature, ReasonReplayed, ReasonExpired}

// ValidationError is the error for a message that is rejected.
type ValidationError struct {
	Reason Reason
	Detail string
}

func (e *ValidationError) Error() string {
	return "protocol: " + string(e.Reason) + ": " + e.Detail
}

func reject(r Reason, format string, args ...any) error {
	return &ValidationError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the Reason of a *ValidationError in err's chain, or
// ReasonMalformed for any other error.
func ReasonOf(err error) Reason {
	var v *ValidationError
	if errors.As(err, &v) {
		return v.Reason
	}
	return ReasonMalformed
}

// Encode returns the wire form of m, setting its version.
func Encode(m Message) ([]byte, error) {
	m.V = Version
	return json.Marshal(m)
}

// Decode parses a wire payload strictly. It checks size, syntax, field
// types, the version and the message type, but not membership: see Validate.
func Decode(data []byte) (Message, error) {
	var m Message
	if len(data) > MaxCertifiedPayload {
		return m, reject(ReasonOversized, "%d bytes exceeds %d", len(data), MaxCertifiedPayload)
	}
	if len(data) > MaxPayload {
		// Only the byzantine algorithm's types may be larger.
		var head struct {
			Type Type `json:"type"`
		}
		if json.Unmarshal(data, &head) != nil || !Certified(head.Type) {
			return m, reject(ReasonOversized, "%d bytes exceeds %d", len(data), MaxPayload)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return Message{}, reject(ReasonInvalidField, "field %q: %s is not %s", typeErr.Field, typeErr.Value, typeErr.Type)
		}
		return Message{}, reject(ReasonMalformed, "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Message{}, reject(ReasonMalformed, "trailing data after message")
	}
	if m.V != Version {
		return Message{}, reject(ReasonVersion, "version %d, want %d", m.V, Version)
	}
	if !slices.Contains(Types, m.Type) {
		return Message{}, reject(ReasonUnknownType, "type %q", m.Type)
	}
	return m, nil
}

// Validate checks that m could have been sent by a member of the sorted
// membership members: the sender is a member, every ID it names is a member,
// the fields its type needs are set, and it addresses a single receiver
// exactly when its type is point-to-point.
func Validate(m Message, members []uint64) error {
	return ValidateFor(m, func(id uint64) bool {
		_, ok := slices.BinarySearch(members, id)
		return ok
	})
}

// ValidateFor is Validate for a membership given by isMember: for a
// cluster with dynamic membership, DynamicMember.
func ValidateFor(m Message, isMember func(uint64) bool) error {
	if !isMember(m.From) {
		return reject(ReasonNotMember, "sender %d is not a member", m.From)
	}
	if m.To != 0 && !isMember(m.To) {
		return reject(ReasonNotMember, "receiver %d is not a member", m.To)
	}
	if m.Candidate != 0 && !isMember(m.Candidate) {
		return reject(ReasonNotMember, "candidate %d is not a member", m.Candidate)
	}
	if m.To == m.From {
		return reject(ReasonInvalidField, "message from %d to itself", m.From)
	}
	if m.Hops < 0 || m.Hops > MaxHops {
		return reject(ReasonInvalidField, "hops %d outside [0, %d]", m.Hops, MaxHops)
	}
	if m.Term > MaxTerm {
		return reject(ReasonInvalidField, "term %d above the ceiling %d", m.Term, MaxTerm)
	}
	if m.Wait < 0 || m.Wait > MaxWait {
		return reject(ReasonInvalidField, "wait %d outside [0, %d]", m.Wait, MaxWait)
	}
	if m.Prior > m.Term {
		return reject(ReasonInvalidField, "prior ballot %d above the ballot %d", m.Prior, m.Term)
	}
	switch m.Type {
	case TypeResign:
		if m.To != 0 {
			return reject(ReasonInvalidField, "resign must be broadcast")
		}
	case TypeCoordinator, TypeHeartbeat:
		if m.To != 0 {
			return reject(ReasonInvalidField, "%s must be broadcast", m.Type)
		}
		if m.Term == 0 {
			return reject(ReasonInvalidField, "%s without a term", m.Type)
		}
	case TypeAnswer, TypeAck, TypeStale, TypeProbe:
		if m.To == 0 {
			return reject(ReasonInvalidField, "%s needs a receiver", m.Type)
		}
	case TypeElected:
		if m.To == 0 || m.Candidate == 0 || m.Term == 0 {
			return reject(ReasonInvalidField, "elected needs a receiver, a candidate and a term")
		}
	case TypeElection:
		// Bully broadcasts Election without a candidate; the ring sends it
		// to one successor with one.
		if (m.To == 0) != (m.Candidate == 0) {
			return reject(ReasonInvalidField, "election must be a broadcast without a candidate or point-to-point with one")
		}
	case TypePrepare, TypePropose:
		if m.To != 0 || m.Term == 0 {
			return reject(ReasonInvalidField, "%s must be broadcast with a ballot", m.Type)
		}
		if m.Type == TypePropose && m.Candidate != 0 && m.Candidate != m.From {
			return reject(ReasonInvalidField, "propose names %d as its leader, not its sender %d", m.Candidate, m.From)
		}
	case TypePromise, TypeAccepted:
		if m.To == 0 || m.Term == 0 {
			return reject(ReasonInvalidField, "%s needs a receiver and a ballot", m.Type)
		}
	case TypeNack:
		// Its Term is the ballot the sender promised: 0 if none yet.
		if m.To == 0 {
			return reject(ReasonInvalidField, "nack needs a receiver")
		}
	case TypePresence:
		if m.Candidate != 0 || m.Seq != 0 || m.Hops != 0 {
			return reject(ReasonInvalidField, "presence carries only a term")
		}
	}
	if err := validateCertified(m, isMember); err != nil {
		return err
	}
	if m.Type != TypePromise && m.Prior != 0 {
		return reject(ReasonInvalidField, "prior ballot on a %s", m.Type)
	}
	if m.Type != TypeNack && m.Wait != 0 {
		return reject(ReasonInvalidField, "wait on a %s", m.Type)
	}
	if m.Cfg != nil {
		switch m.Type {
		case TypePrepare, TypePromise, TypePropose, TypeNack:
		default:
			return reject(ReasonInvalidField, "voters on a %s", m.Type)
		}
		if err := m.Cfg.Validate(); err != nil {
			return reject(ReasonInvalidField, "%v", err)
		}
		for _, id := range append(slices.Clone(m.Cfg.Voters), m.Cfg.Next...) {
			if !isMember(id) {
				return reject(ReasonNotMember, "voter %d is not a member", id)
			}
		}
	}
	return nil
}

// validateCertified checks the byzantine algorithm's types and the
// certified fields: their shapes, their members and their terms, not
// their signatures (the algorithm checks those with the members' keys).
func validateCertified(m Message, isMember func(uint64) bool) error {
	if !Certified(m.Type) {
		if m.Statement != nil || m.Cert != nil || m.TC != nil || m.Evidence != nil ||
			m.Version != 0 || m.Set != nil || m.QC != nil || m.Steps != nil || m.Key != "" || m.Cred != "" {
			return reject(ReasonInvalidField, "signed statement, certificate, evidence or member set on a %s", m.Type)
		}
		return nil
	}
	if err := validateChanges(m, isMember); err != nil {
		return err
	}
	switch m.Type {
	case TypeBzAck, TypeBzStatus, TypeBzAccept, TypeBzLock:
		if m.To == 0 {
			return reject(ReasonInvalidField, "%s needs a receiver", m.Type)
		}
	default:
		if m.To != 0 {
			return reject(ReasonInvalidField, "%s must be broadcast", m.Type)
		}
	}
	wantStatement := m.Type == TypeBzVote || m.Type == TypeBzTimeout || m.Type == TypeBzAccept || m.Type == TypeBzCommit
	if (m.Statement != nil) != wantStatement {
		return reject(ReasonInvalidField, "%s: signed statement present: %t, want %t", m.Type, m.Statement != nil, wantStatement)
	}
	if (m.Evidence != nil) != (m.Type == TypeBzEvidence) {
		return reject(ReasonInvalidField, "%s: evidence present: %t", m.Type, m.Evidence != nil)
	}
	justifies := m.Type == TypeBzPropose || m.Type == TypeBzTimeout || m.Type == TypeBzStatus
	if !justifies && (m.Cert != nil || m.TC != nil) {
		return reject(ReasonInvalidField, "certificate on a %s", m.Type)
	}
	if m.Candidate != 0 && m.Type != TypeBzStatus {
		return reject(ReasonInvalidField, "candidate on a %s", m.Type)
	}
	switch m.Type {
	case TypeBzPropose, TypeBzVote, TypeBzAck:
		if m.Term == 0 || m.Seq == 0 {
			return reject(ReasonInvalidField, "%s needs a term and a round", m.Type)
		}
	default:
		if m.Seq != 0 {
			return reject(ReasonInvalidField, "round on a %s", m.Type)
		}
	}
	if s := m.Statement; s != nil {
		want := map[Type]certify.Kind{TypeBzVote: certify.KindVote, TypeBzTimeout: certify.KindTimeout,
			TypeBzAccept: certify.KindAccept, TypeBzCommit: certify.KindCommit}[m.Type]
		if err := checkStatement(s.Statement, isMember); err != nil {
			return err
		}
		if s.Statement.Kind != want || s.Statement.Member != m.From {
			return reject(ReasonInvalidField, "%s carries a %s of member %d", m.Type, s.Statement.Kind, s.Statement.Member)
		}
		if len(s.Signature) != certify.SignatureSize {
			return reject(ReasonInvalidField, "signature of %d bytes", len(s.Signature))
		}
		if m.Type == TypeBzVote && s.Statement.Term != m.Term {
			return reject(ReasonInvalidField, "vote of term %d on a message of term %d", s.Statement.Term, m.Term)
		}
	}
	if c := m.Cert; c != nil {
		if c.Term != m.Term || c.Leader == 0 || !isMember(c.Leader) {
			return reject(ReasonInvalidField, "certificate of %d in term %d on a message of term %d", c.Leader, c.Term, m.Term)
		}
		if m.Type == TypeBzPropose && c.Leader != m.From {
			return reject(ReasonInvalidField, "propose of %d carries the certificate of %d", m.From, c.Leader)
		}
		if err := checkSignatures(c.Cluster, c.Votes, isMember); err != nil {
			return err
		}
	}
	if c := m.TC; c != nil {
		if m.Term < 2 || c.Term != m.Term-1 {
			return reject(ReasonInvalidField, "time-out certificate of term %d on a message of term %d", c.Term, m.Term)
		}
		if err := checkSignatures(c.Cluster, c.Timeouts, isMember); err != nil {
			return err
		}
	}
	if e := m.Evidence; e != nil {
		if err := checkStatement(e.First.Statement, isMember); err != nil {
			return err
		}
		if err := checkStatement(e.Second.Statement, isMember); err != nil {
			return err
		}
		if !certify.Contradicts(e.First.Statement, e.Second.Statement) {
			return reject(ReasonInvalidField, "evidence whose statements do not contradict each other")
		}
	}
	return nil
}

// validateChanges checks the fields of a change of the member set:
// which types carry them, their shapes and their members, not their
// signatures.
func validateChanges(m Message, isMember func(uint64) bool) error {
	if m.Version > MaxTerm {
		return reject(ReasonInvalidField, "member set version %d above the ceiling %d", m.Version, MaxTerm)
	}
	switch m.Type {
	case TypeBzPropose, TypeBzHello, TypeBzStatus:
	default:
		if m.Version != 0 {
			return reject(ReasonInvalidField, "member set version on a %s", m.Type)
		}
	}
	wantSet := m.Type == TypeBzChange || m.Type == TypeBzCommit || m.Type == TypeBzLock
	if (m.Set != nil) != wantSet {
		return reject(ReasonInvalidField, "%s: member set present: %t, want %t", m.Type, m.Set != nil, wantSet)
	}
	if m.QC != nil && !wantSet || m.QC == nil && (m.Type == TypeBzCommit || m.Type == TypeBzLock) {
		return reject(ReasonInvalidField, "%s: prepared certificate present: %t", m.Type, m.QC != nil)
	}
	if m.Steps != nil && m.Type != TypeBzStatus {
		return reject(ReasonInvalidField, "member set changes on a %s", m.Type)
	}
	if len(m.Steps) > certify.MaxSteps {
		return reject(ReasonInvalidField, "%d member set changes, at most %d", len(m.Steps), certify.MaxSteps)
	}
	if m.Key != "" && m.Type != TypeBzHello || m.Cred != "" && m.Type != TypeBzHello && m.Type != TypeBzChange {
		return reject(ReasonInvalidField, "key or credential on a %s", m.Type)
	}
	if (m.Key == "") != (m.Cred == "") && m.Type == TypeBzHello {
		return reject(ReasonInvalidField, "a hello that asks to join needs both a key and a credential")
	}
	if len(m.Key) > 64 || len(m.Cred) > MaxCredentialSize {
		return reject(ReasonInvalidField, "key of %d bytes or credential of %d bytes, at most 64 and %d", len(m.Key), len(m.Cred), MaxCredentialSize)
	}
	if m.Type == TypeBzChange && m.Term == 0 {
		return reject(ReasonInvalidField, "change without a term")
	}
	sets := make([]*certify.MemberSet, 0, 1+len(m.Steps))
	if m.Set != nil {
		sets = append(sets, m.Set)
	}
	for i := range m.Steps {
		sets = append(sets, &m.Steps[i].Set)
		if err := checkQC(&m.Steps[i].Commit, certify.KindCommit, isMember); err != nil {
			return err
		}
	}
	for _, set := range sets {
		if err := set.Validate(); err != nil {
			return reject(ReasonInvalidField, "%v", err)
		}
		if set.Version > MaxTerm {
			return reject(ReasonInvalidField, "member set version %d above the ceiling %d", set.Version, MaxTerm)
		}
		for _, id := range set.IDs() {
			if !isMember(id) {
				return reject(ReasonNotMember, "member set names %d", id)
			}
		}
	}
	if m.QC != nil {
		if err := checkQC(m.QC, certify.KindAccept, isMember); err != nil {
			return err
		}
		if m.QC.Version != m.Set.Version {
			return reject(ReasonInvalidField, "prepared certificate of version %d for a set of version %d", m.QC.Version, m.Set.Version)
		}
	}
	return nil
}

// checkQC checks a quorum certificate's kind, term and signers.
func checkQC(c *certify.QuorumCertificate, kind certify.Kind, isMember func(uint64) bool) error {
	if c.Kind != kind || c.Term == 0 || c.Term > MaxTerm || c.Version == 0 || c.Version > MaxTerm {
		return reject(ReasonInvalidField, "a %s certificate of term %d, version %d, where a %s certificate is due", c.Kind, c.Term, c.Version, kind)
	}
	return checkSignatures(c.Cluster, c.Sigs, isMember)
}

// checkStatement checks a statement's shape, term and member.
func checkStatement(s certify.Statement, isMember func(uint64) bool) error {
	if err := s.Validate(); err != nil {
		return reject(ReasonInvalidField, "%v", err)
	}
	if s.Term > MaxTerm || s.Version > MaxTerm {
		return reject(ReasonInvalidField, "statement of term %d, version %d, above the ceiling %d", s.Term, s.Version, MaxTerm)
	}
	if !isMember(s.Member) || (s.Leader != 0 && !isMember(s.Leader)) {
		return reject(ReasonNotMember, "statement of %d for %d names a non-member", s.Member, s.Leader)
	}
	return nil
}

// checkSignatures checks a certificate's signers: 1 to certify.MaxMembers
// distinct members, signatures of the right size, a valid cluster name.
func checkSignatures(cluster string, sigs []certify.MemberSignature, isMember func(uint64) bool) error {
	if err := certify.Timeout(cluster, 1, 1).Validate(); err != nil {
		return reject(ReasonInvalidField, "certificate: %v", err)
	}
	if len(sigs) == 0 || len(sigs) > certify.MaxMembers {
		return reject(ReasonInvalidField, "certificate of %d signatures, want 1 to %d", len(sigs), certify.MaxMembers)
	}
	seen := make(map[uint64]bool, len(sigs))
	for _, v := range sigs {
		if !isMember(v.Member) {
			return reject(ReasonNotMember, "certificate signed by %d", v.Member)
		}
		if seen[v.Member] {
			return reject(ReasonInvalidField, "certificate signed twice by %d", v.Member)
		}
		seen[v.Member] = true
		if len(v.Signature) != certify.SignatureSize {
			return reject(ReasonInvalidField, "certificate: signature of %d bytes", len(v.Signature))
		}
	}
	return nil
}

// MaxCredentialSize bounds the credential a message may carry, in bytes.
const MaxCredentialSize = 4096
