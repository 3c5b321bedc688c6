package generals

import (
	"errors"
	"fmt"
	"slices"
)

// MaxMembers bounds the member count N. OM(m) sends
// (N−1) + (N−1)(N−2) + … + (N−1)(N−2)…(N−m−1) messages, about N^(m+1),
// and with m = ⌊(N−1)/3⌋ the exponent grows with N: 9,031 messages at
// N = 12 (m = 3), but 108,384 at N = 13 (m = 4) and about four million
// at N = 16 (m = 5). Twelve keeps one agreement within ten thousand
// messages and each lieutenant's table within 821 values.
const MaxMembers = 12

// MinMembers is the smallest member count: a commander and three
// lieutenants, the fewest that tolerate one traitor (N ≥ 3f+1).
const MinMembers = 4

// MaxValueSize bounds a value (and the default value) in bytes. A larger
// order or configuration is agreed on by its digest.
const MaxValueSize = 1024

// Errors returned by New, Issue, Receive and EndRound; each is wrapped with
// the details of the offending input.
var (
	// ErrConfig: the configuration is out of range.
	ErrConfig = errors.New("generals: invalid configuration")
	// ErrValueSize: a value is longer than MaxValueSize.
	ErrValueSize = errors.New("generals: value too large")
	// ErrNotCommander: Issue was called on a lieutenant.
	ErrNotCommander = errors.New("generals: only the commander issues")
	// ErrIssued: Issue was called twice.
	ErrIssued = errors.New("generals: value already issued")
	// ErrMember: a member index is outside [0, N).
	ErrMember = errors.New("generals: member out of range")
	// ErrPath: a path is malformed: empty, longer than m+1, not starting
	// at the commander, with a repeated member, or containing the receiver.
	ErrPath = errors.New("generals: invalid path")
	// ErrSender: the path's last member is not the member the message
	// came from (oral messages rely on the receiver knowing the sender).
	ErrSender = errors.New("generals: path does not end at its sender")
	// ErrRecipient: the message is addressed to another member.
	ErrRecipient = errors.New("generals: message for another member")
	// ErrLate: the message belongs to a round that has ended; it is
	// ignored (its value stays the default the round's end gave it).
	ErrLate = errors.New("generals: round already ended")
	// ErrEquivocation: a second message along one path carries another
	// value than the first; the sender (the path's last member) lied. The
	// first value is kept.
	ErrEquivocation = errors.New("generals: conflicting values along one path")
)

// Config configures one member's machine.
type Config struct {
	// Members is N, the number of members, from MinMembers to MaxMembers.
	// Members are numbered 0 … N−1; the caller maps them to its node IDs.
	Members int
	// Commander is the member that issues the value (the leader).
	Commander int
	// Self is the member this machine runs for.
	Self int
	// Default is the value decided when there is no majority, and the
	// value of every message that did not arrive by its round's end
	// (Lamport's RETREAT). At most MaxValueSize bytes.
	Default string
}

// Message is one oral message: the value that Path's last member says
// reached it along Path.
type Message struct {
	// To is the recipient.
	To int
	// Path is the relay chain: Path[0] is the commander, the last member
	// is the sender, all distinct; its length (1 … m+1) is the message's
	// round.
	Path []int
	// Value is the value relayed.
	Value string
}

// Faults returns f = ⌊(N−1)/3⌋, the traitors N members tolerate, which is
// also the m of the OM(m) that New runs.
func Faults(n int) int {
	if n < 1 {
		return 0
	}
	return (n - 1) / 3
}

// MessageCount returns how many messages OM(m) sends among n members when
// every message is sent: (n−1) + (n−1)(n−2) + … + (n−1)…(n−m−1).
func MessageCount(n, m int) int {
	total, term := 0, 1
	for k := 1; k <= m+1 && n-k >= 1; k++ {
		term *= n - k
		total += term
	}
	return total
}

// Machine is one member's part in one agreement, OM(m) with m = Faults(N).
// It is not safe for concurrent use.
type Machine struct {
	n, m, commander, self int
	dflt                  string

	issued  bool
	values  map[string]string // path key → value received (or defaulted)
	want    int               // paths a lieutenant receives in all
	closed  int               // rounds ended by EndRound
	decided bool
	value   string
}

// New returns the machine for cfg. The agreement tolerates Faults(N)
// traitors, which New requires to be at least one.
func New(cfg Config) (*Machine, error) {
	if cfg.Members < MinMembers || cfg.Members > MaxMembers {
		return nil, fmt.Errorf("%w: Members %d, want %d to %d", ErrConfig, cfg.Members, MinMembers, MaxMembers)
	}
	return newMachine(cfg, Faults(cfg.Members))
}

// newMachine builds a machine running OM(m) without requiring N ≥ 3m+1,
// so that tests can show what goes wrong below it.
func newMachine(cfg Config, m int) (*Machine, error) {
	n := cfg.Members
	if n < 2 || n > MaxMembers {
		return nil, fmt.Errorf("%w: Members %d, want %d to %d", ErrConfig, n, MinMembers, MaxMembers)
	}
	if m < 0 || m > n-2 {
		return nil, fmt.Errorf("%w: m %d with %d members", ErrConfig, m, n)
	}
	if cfg.Commander < 0 || cfg.Commander >= n {
		return nil, fmt.Errorf("%w: Commander %d, want 0 to %d", ErrConfig, cfg.Commander, n-1)
	}
	if cfg.Self < 0 || cfg.Self >= n {
		return nil, fmt.Errorf("%w: Self %d, want 0 to %d", ErrConfig, cfg.Self, n-1)
	}
	if len(cfg.Default) > MaxValueSize {
		return nil, fmt.Errorf("%w: Default of %d bytes, at most %d", ErrValueSize, len(cfg.Default), MaxValueSize)
	}
	mc := &Machine{n: n, m: m, commander: cfg.Commander, self: cfg.Self, dflt: cfg.Default}
	if mc.isCommander() {
		return mc, nil
	}
	// A lieutenant receives every path of 1 … m+1 distinct members that
	// starts at the commander and leaves itself out: P(n−2, L−1) of
	// length L.
	term := 1
	for l := 1; l <= m+1; l++ {
		mc.want += term
		term *= n - 1 - l
	}
	mc.values = make(map[string]string, mc.want)
	return mc, nil
}

func (mc *Machine) isCommander() bool { return mc.self == mc.commander }

// Rounds returns m+1, the number of rounds: round L carries the paths of
// L members.
func (mc *Machine) Rounds() int { return mc.m + 1 }

// Issue is the commander's step: it sends v to every lieutenant, and the
// commander decides v.
func (mc *Machine) Issue(v string) ([]Message, error) {
	if !mc.isCommander() {
		return nil, fmt.Errorf("%w: member %d, commander %d", ErrNotCommander, mc.self, mc.commander)
	}
	if mc.issued {
		return nil, ErrIssued
	}
	if len(v) > MaxValueSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrValueSize, len(v), MaxValueSize)
	}
	mc.issued, mc.decided, mc.value = true, true, v
	return mc.relay([]int{mc.commander}, v), nil
}

// Receive takes msg, which arrived from member from (the caller must
// know the sender: the transport authenticates it). It returns the
// messages to send: the relays of msg's value, when its path is shorter
// than m+1. A lieutenant decides as soon as every path has arrived;
// Decision reports it.
func (mc *Machine) Receive(from int, msg Message) ([]Message, error) {
	if from < 0 || from >= mc.n {
		return nil, fmt.Errorf("%w: sender %d, want 0 to %d", ErrMember, from, mc.n-1)
	}
	if msg.To != mc.self {
		return nil, fmt.Errorf("%w: to %d, this is %d", ErrRecipient, msg.To, mc.self)
	}
	if err := mc.checkPath(msg.Path); err != nil {
		return nil, err
	}
	if last := msg.Path[len(msg.Path)-1]; last != from {
		return nil, fmt.Errorf("%w: path ends at %d, sent by %d", ErrSender, last, from)
	}
	if len(msg.Value) > MaxValueSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrValueSize, len(msg.Value), MaxValueSize)
	}
	if len(msg.Path) <= mc.closed {
		return nil, fmt.Errorf("%w: path %v of round %d, %d rounds ended", ErrLate, msg.Path, len(msg.Path), mc.closed)
	}
	key := pathKey(msg.Path)
	if old, ok := mc.values[key]; ok {
		if old != msg.Value {
			return nil, fmt.Errorf("%w: path %v", ErrEquivocation, msg.Path)
		}
		return nil, nil // a copy
	}
	mc.values[key] = msg.Value
	out := mc.relayOn(msg.Path, msg.Value)
	mc.decideIfComplete()
	return out, nil
}

// EndRound tells the machine that the current round's deadline has
// passed: every path of that round that has not arrived counts as the
// default value, which the machine relays as Lamport's lieutenants relay
// RETREAT. After the last round (Rounds) the lieutenant decides. It
// returns the relays; once every round has ended it does nothing. The
// commander has no rounds to end.
func (mc *Machine) EndRound() []Message {
	if mc.isCommander() || mc.closed > mc.m {
		return nil
	}
	mc.closed++
	var out []Message
	mc.eachPath(mc.closed, func(p []int) {
		key := pathKey(p)
		if _, ok := mc.values[key]; ok {
			return
		}
		mc.values[key] = mc.dflt
		out = append(out, mc.relayOn(p, mc.dflt)...)
	})
	mc.decideIfComplete()
	return out
}

// Decision returns the decided value, and whether the member has decided.
func (mc *Machine) Decision() (string, bool) { return mc.value, mc.decided }

// checkPath checks p's shape: 1 … m+1 distinct members in range, the
// commander first, the receiver absent.
func (mc *Machine) checkPath(p []int) error {
	if len(p) < 1 || len(p) > mc.m+1 {
		return fmt.Errorf("%w: %d members, want 1 to %d", ErrPath, len(p), mc.m+1)
	}
	var seen [MaxMembers]bool
	for _, id := range p {
		if id < 0 || id >= mc.n {
			return fmt.Errorf("%w: path %v: member %d, want 0 to %d", ErrMember, p, id, mc.n-1)
		}
		if seen[id] {
			return fmt.Errorf("%w: path %v repeats %d", ErrPath, p, id)
		}
		seen[id] = true
	}
	if p[0] != mc.commander {
		return fmt.Errorf("%w: path %v starts at %d, commander %d", ErrPath, p, p[0], mc.commander)
	}
	if seen[mc.self] {
		return fmt.Errorf("%w: path %v contains the receiver %d", ErrPath, p, mc.self)
	}
	return nil
}

// relayOn returns the relays of value received along p: none when p has
// m+1 members, else p+self to every member outside p and self.
func (mc *Machine) relayOn(p []int, value string) []Message {
	if len(p) > mc.m {
		return nil
	}
	return mc.relay(append(slices.Clip(p), mc.self), value)
}

// relay returns value along p (which ends at self) to every member outside
// p, in ascending order, each message with its own copy of p.
func (mc *Machine) relay(p []int, value string) []Message {
	out := make([]Message, 0, mc.n-len(p))
	for to := range mc.n {
		if !slices.Contains(p, to) {
			out = append(out, Message{To: to, Path: slices.Clone(p), Value: value})
		}
	}
	return out
}

// eachPath calls fn with every path of l members this lieutenant
// receives, in lexicographic order; fn must not keep p.
func (mc *Machine) eachPath(l int, fn func(p []int)) {
	p := make([]int, 1, l)
	p[0] = mc.commander
	var walk func()
	walk = func() {
		if len(p) == l {
			fn(p)
			return
		}
		for id := range mc.n {
			if id != mc.self && !slices.Contains(p, id) {
				p = append(p, id)
				walk()
				p = p[:len(p)-1]
			}
		}
	}
	walk()
}

func (mc *Machine) decideIfComplete() {
	if mc.decided || len(mc.values) < mc.want {
		return
	}
	mc.decided, mc.value = true, mc.resolve([]int{mc.commander})
}

// resolve returns the value this lieutenant decides for the OM instance
// whose commander is p's last member: at depth m+1 (OM(0)) the value
// received along p; above it the majority of the value received along p
// and of the values resolved for p extended by each other lieutenant of
// the instance.
func (mc *Machine) resolve(p []int) string {
	v, ok := mc.values[pathKey(p)]
	if !ok {
		v = mc.dflt
	}
	if len(p) == mc.m+1 {
		return v
	}
	votes := []string{v}
	for id := range mc.n {
		if id != mc.self && !slices.Contains(p, id) {
			votes = append(votes, mc.resolve(append(slices.Clip(p), id)))
		}
	}
	return majority(votes, mc.dflt)
}

// majority returns the value held by more than half of votes, or dflt when
// none is.
func majority(votes []string, dflt string) string {
	for i, v := range votes {
		if slices.Index(votes, v) != i {
			continue // counted at its first occurrence
		}
		count := 0
		for _, w := range votes[i:] {
			if w == v {
				count++
			}
		}
		if 2*count > len(votes) {
			return v
		}
	}
	return dflt
}

// pathKey encodes a checked path (members below MaxMembers) as a map key.
func pathKey(p []int) string {
	b := make([]byte, len(p))
	for i, id := range p {
		b[i] = byte(id)
	}
	return string(b)
}
