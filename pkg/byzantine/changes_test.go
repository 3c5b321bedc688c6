package byzantine

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

// changeNet runs machines whose member set changes over a network that
// delivers every message at once, in order.
type changeNet struct {
	t       *testing.T
	genesis *certify.Keys
	all     *certify.Keys
	signers map[uint64]certify.Signer
	ms      map[uint64]*Machine
	hard    map[uint64]election.HardState
	events  map[uint64][]election.Event
	queue   []protocol.Message
	certs   map[uint64]uint64 // term → certified leader, over every member
	sets    map[uint64][certify.DigestSize]byte
	// filter, if set, may drop a message before delivery.
	filter func(m protocol.Message, to uint64) bool
	// forged are members whose credential the authority did not issue.
	forged map[uint64]bool
}

// testCred is the credential the test authority issues to id for key.
func testCred(id uint64, key string) string { return fmt.Sprintf("cred:%d:%s", id, key) }

func testAdmit(id uint64, key, cred string) error {
	if cred != testCred(id, key) {
		return errors.New("not issued by the authority")
	}
	return nil
}

// newChangeNet makes members 1..genesis the configured set, and keys for
// members up to total.
func newChangeNet(t *testing.T, genesis, total int) *changeNet {
	var ids []uint64
	for id := uint64(1); id <= uint64(total); id++ {
		ids = append(ids, id)
	}
	all, signers, err := sim.MemberKeys(ids)
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := sim.MemberKeys(ids[:genesis])
	if err != nil {
		t.Fatal(err)
	}
	return &changeNet{t: t, genesis: g, all: all, signers: signers, ms: map[uint64]*Machine{},
		hard: map[uint64]election.HardState{}, events: map[uint64][]election.Event{},
		certs: map[uint64]uint64{}, sets: map[uint64][certify.DigestSize]byte{}, forged: map[uint64]bool{}}
}

// newLedNet is newChangeNet with the configured members started, once
// the highest of them leads.
func newLedNet(t *testing.T, genesis, total int) *changeNet {
	n := newChangeNet(t, genesis, total)
	for id := uint64(1); id <= uint64(genesis); id++ {
		n.start(id)
	}
	n.runUntil(2000, fmt.Sprintf("member %d leads the configured set", genesis), func() bool { return n.leads(uint64(genesis)) })
	return n
}

// start starts (or restarts, from its stored state) member id.
func (n *changeNet) start(id uint64) *Machine {
	n.t.Helper()
	key, _ := n.all.PublicKey(id)
	timing := election.DefaultLeaseTiming(len(n.genesis.IDs()))
	timing.PresenceTicks = 20
	cfg := Config{
		Config: election.Config{ID: id, Members: n.genesis.IDs(), Timing: timing,
			State: n.hard[id], Restored: n.hard[id] != (election.HardState{})},
		Cluster: testCluster, Signer: n.signers[id], Keys: n.genesis,
		Changes: &Changes{Admit: testAdmit, Key: key, Cred: testCred(id, key)},
	}
	if n.forged[id] {
		cfg.Changes.Cred = "forged"
	}
	m, err := New(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	n.ms[id] = m
	m.Start()
	n.collect(id)
	return m
}

// stop crashes member id (or, with resign, has it leave), and tells the
// others its connection closed.
func (n *changeNet) stop(id uint64, resign bool) {
	if resign {
		n.ms[id].Resign()
		n.collect(id)
		n.pump()
	}
	delete(n.ms, id)
	for _, o := range n.sorted() {
		n.ms[o].PeerDown(id)
		n.collect(o)
	}
}

func (n *changeNet) sorted() []uint64 {
	ids := make([]uint64, 0, len(n.ms))
	for id := range n.ms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// collect takes member id's output: its state stored, then its messages
// queued.
func (n *changeNet) collect(id uint64) {
	m := n.ms[id]
	rd := m.Ready()
	if rd.State != nil {
		n.hard[id] = *rd.State
	}
	n.events[id] = append(n.events[id], rd.Events...)
	for _, msg := range rd.Messages {
		if err := protocol.ValidateFor(withVersion(msg), protocol.DynamicMember); err != nil {
			n.t.Fatalf("member %d sends an invalid %s: %v", id, msg, err)
		}
		n.queue = append(n.queue, msg)
	}
	if c, ok := m.Certificate(); ok {
		if l, seen := n.certs[c.Term]; seen && l != c.Leader {
			n.t.Fatalf("two certified leaders in term %d: %d and %d", c.Term, l, c.Leader)
		}
		n.certs[c.Term] = c.Leader
	}
	for _, s := range m.steps {
		d := s.Set.Digest(testCluster)
		if o, seen := n.sets[s.Set.Version]; seen && o != d {
			n.t.Fatalf("two member sets of version %d", s.Set.Version)
		}
		n.sets[s.Set.Version] = d
	}
}

func withVersion(m protocol.Message) protocol.Message {
	m.V = protocol.Version
	return m
}

// pump delivers every queued message, and what they cause.
func (n *changeNet) pump() {
	for len(n.queue) > 0 {
		msg := n.queue[0]
		n.queue = n.queue[1:]
		for _, id := range n.sorted() {
			if id == msg.From || msg.To != 0 && msg.To != id {
				continue
			}
			if n.filter != nil && !n.filter(msg, id) {
				continue
			}
			n.ms[id].Step(msg)
			n.collect(id)
		}
	}
}

// run ticks every member k times, delivering after each tick.
func (n *changeNet) run(k int) {
	for range k {
		for _, id := range n.sorted() {
			n.ms[id].Tick()
			n.collect(id)
		}
		n.pump()
	}
}

// runUntil ticks until cond holds, at most k ticks.
func (n *changeNet) runUntil(k int, what string, cond func() bool) {
	n.t.Helper()
	for i := range k {
		if cond() {
			n.t.Logf("%s after %d ticks", what, i)
			return
		}
		n.run(1)
	}
	if !cond() {
		n.t.Fatalf("not within %d ticks: %s", k, what)
	}
}

// agreed reports whether every running member's latest set is version
// v with the members ids.
func (n *changeNet) agreed(v uint64, ids ...uint64) bool {
	for _, m := range n.ms {
		if m.latest.version != v || !slices.Equal(m.latest.set.IDs(), ids) {
			return false
		}
	}
	return true
}

// leads reports whether id leads, and every running member names it.
func (n *changeNet) leads(id uint64) bool {
	if n.ms[id] == nil || n.ms[id].Status().Role != election.Leader {
		return false
	}
	for _, m := range n.ms {
		if m.Status().Leader != id {
			return false
		}
	}
	return true
}

func TestMemberJoinsWithCredentialAndLeads(t *testing.T) {
	n := newLedNet(t, 4, 5)
	n.start(5)
	n.runUntil(2000, "every member adds 5", func() bool { return n.agreed(1, 1, 2, 3, 4, 5) })
	n.runUntil(4000, "5, the highest, leads", func() bool { return n.leads(5) })
	if !slices.ContainsFunc(n.events[1], func(e election.Event) bool { return e.Kind == election.MemberAdded && e.Member == 5 }) {
		t.Fatalf("member 1 reported no MemberAdded of 5: %v", n.events[1])
	}
}

func TestDepartedMemberIsRemoved(t *testing.T) {
	n := newLedNet(t, 5, 5)
	n.stop(2, true)
	n.runUntil(2000, "every member removes 2", func() bool { return n.agreed(1, 1, 3, 4, 5) })
	// Four members are the fewest: a crash is not followed by a removal.
	n.stop(3, false)
	n.run(500)
	if !n.agreed(1, 1, 3, 4, 5) {
		t.Fatalf("the set shrank below %d members", DefaultMinMembers)
	}
}

func TestLeaderLeavesAndTheRestGoOn(t *testing.T) {
	n := newLedNet(t, 5, 6)
	n.start(6)
	n.runUntil(4000, "6 joins and leads", func() bool { return n.agreed(1, 1, 2, 3, 4, 5, 6) && n.leads(6) })
	n.stop(6, false)
	n.runUntil(4000, "6 is removed and 5 leads", func() bool { return n.agreed(2, 1, 2, 3, 4, 5) && n.leads(5) })
}

func TestMemberWithoutCredentialIsNotAdded(t *testing.T) {
	n := newLedNet(t, 4, 5)
	n.forged[5] = true
	n.start(5)
	n.run(1000)
	if n.ms[4].latest.version != 0 || n.ms[1].latest.version != 0 {
		t.Fatalf("a member without a credential was added: version %d", n.ms[4].latest.version)
	}
}

func TestRestartedMemberKeepsTheLatestSet(t *testing.T) {
	n := newLedNet(t, 4, 5)
	n.start(5)
	n.runUntil(2000, "every member adds 5", func() bool { return n.agreed(1, 1, 2, 3, 4, 5) })
	n.stop(3, false)
	m := n.start(3)
	if m.latest.version != 1 || !m.latest.has(5) {
		t.Fatalf("restarted member 3 knows version %d %v, want version 1 with 5", m.latest.version, m.latest.set.IDs())
	}
	n.runUntil(4000, "5 leads, 3 back", func() bool { return n.leads(5) })
}

// A leader that lies cannot add a member the authority did not admit:
// the others refuse its proposal.
func TestProposalOfUnadmittedMemberIsRefused(t *testing.T) {
	n := newLedNet(t, 4, 6)
	leader := n.ms[4]
	key, _ := n.all.PublicKey(6)
	set, err := leader.latest.set.With(certify.SetMember{ID: 6, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	// accepts hands msg to the followers and counts their accepts.
	accepts := func(msg protocol.Message) int {
		count := 0
		for _, id := range []uint64{1, 2, 3} {
			n.ms[id].Step(msg)
			for _, out := range n.ms[id].Ready().Messages {
				if out.Type == protocol.TypeBzAccept {
					count++
				}
			}
		}
		return count
	}
	msg := protocol.Message{Type: protocol.TypeBzChange, From: 4, Term: leader.term(), Set: &set, Cred: "forged"}
	if got := accepts(msg); got != 0 {
		t.Fatalf("%d members accepted a member with a forged credential", got)
	}
	msg.Cred = testCred(6, key)
	if got := accepts(msg); got != 3 {
		t.Fatalf("%d members accepted a member with its credential, want 3", got)
	}
}

// Two members that ask to join at once are added one after the other:
// the leader that made the first change hands its term over, since the
// second needs a leader certified under the first.
func TestTwoJoinersAreAddedInTurn(t *testing.T) {
	n := newLedNet(t, 4, 6)
	n.start(5)
	n.start(6)
	n.runUntil(4000, "both are added and 6 leads", func() bool { return n.agreed(2, 1, 2, 3, 4, 5, 6) && n.leads(6) })
}

// A member removed while it was away comes back with its disk: it
// learns the changes it missed, asks to join again and is added.
func TestRemovedMemberComesBack(t *testing.T) {
	n := newLedNet(t, 4, 6)
	n.start(5)
	n.start(6)
	n.runUntil(4000, "both are added and 6 leads", func() bool { return n.agreed(2, 1, 2, 3, 4, 5, 6) && n.leads(6) })
	n.stop(6, true)
	n.runUntil(4000, "6 is removed", func() bool { return n.agreed(3, 1, 2, 3, 4, 5) })
	n.start(6)
	n.runUntil(4000, "6 is back and leads", func() bool { return n.agreed(4, 1, 2, 3, 4, 5, 6) && n.leads(6) })
}

// A member just added is not taken for gone before the member time-out
// has passed since it was added, even if nothing of it arrives meanwhile.
func TestAddedMemberIsNotGoneAtOnce(t *testing.T) {
	n := newLedNet(t, 4, 5)
	n.run(200) // the others have heard nothing of 5 for longer than the member time-out
	// Of 5, only its asking to join arrives.
	n.filter = func(m protocol.Message, _ uint64) bool { return m.From != 5 || m.Key != "" }
	n.start(5)
	n.runUntil(2000, "the others add 5", func() bool {
		return n.ms[1].latest.version == 1 && n.ms[2].latest.version == 1 && n.ms[3].latest.version == 1 && n.ms[4].latest.version == 1
	})
	n.run(40) // half the member time-out (4 presence intervals of 20 ticks)
	for id, m := range n.ms {
		if id != 5 && m.latest.version != 1 {
			t.Fatalf("member %d holds version %d %v: 5 was removed at once", id, m.latest.version, m.latest.asc)
		}
	}
}

// A Status carries the changes a member lacks, oldest first, as many as
// fit a message: the member follows them and asks again for the rest.
func TestStatusStepsFitAMessage(t *testing.T) {
	n := newLedNet(t, 4, 4)
	m := n.ms[4]
	var ids []uint64
	for id := uint64(100); id < 100+6*stepsKept; id++ {
		ids = append(ids, id)
	}
	keys, _, err := sim.MemberKeys(ids)
	if err != nil {
		t.Fatal(err)
	}
	// Steps of ever larger sets, as a member keeps them (their commits
	// are not checked here: their size is what counts).
	set := m.latest.set
	for i := range stepsKept {
		next := certify.MemberSet{Version: set.Version + 1, Members: slices.Clone(set.Members)}
		for _, id := range ids[6*i : 6*i+6] {
			key, _ := keys.PublicKey(id)
			next.Members = append(next.Members, certify.SetMember{ID: id, Key: key})
		}
		m.steps = append(m.steps, certify.Step{Set: next})
		set = next
	}
	m.latest.version = set.Version
	if steps := m.stepsAfter(0); len(steps) == 0 || len(steps) == stepsKept {
		t.Fatalf("%d changes of %d carried, want some but not all", len(steps), stepsKept)
	}
	msg := m.statusMessage(1, 0)
	msg.V = protocol.Version
	data, err := protocol.Encode(msg)
	if err != nil || len(data) > protocol.MaxCertifiedPayload {
		t.Fatalf("a status of %d bytes (%v), at most %d", len(data), err, protocol.MaxCertifiedPayload)
	}
}
