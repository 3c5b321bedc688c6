package agreement_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

const (
	cluster = "orders"
	term    = 7
	round   = 100 * time.Millisecond
)

var t0 = time.Unix(1_000_000, 0)

// harness is four members with keys, whose leader in term 7 is member
// 4, certified by the votes of 1, 2 and 3; the members listed in honest
// run a machine each, the others are the test's to play.
type harness struct {
	t        *testing.T
	signers  map[uint64]*signing.Signer
	keys     *signing.MemberKeys
	cert     certify.Certificate
	machines map[uint64]*agreement.Machine
	now      time.Time
	// What the machines produced, per member.
	decided  map[uint64][]agreement.Order
	evidence map[uint64][]certify.Evidence
	highest  map[uint64]agreement.ID
	// queue holds the messages in flight, each for every member but its
	// sender; sent holds every message sent, in order.
	queue []protocol.OrderMessage
	sent  []protocol.OrderMessage
}

func newHarness(t *testing.T, floor agreement.ID, honest ...uint64) *harness {
	t.Helper()
	signers, keys := batontest.MemberKeys(t, 1, 2, 3, 4)
	h := &harness{t: t, signers: signers, keys: keys, machines: map[uint64]*agreement.Machine{}, now: t0,
		decided: map[uint64][]agreement.Order{}, evidence: map[uint64][]certify.Evidence{}, highest: map[uint64]agreement.ID{}}
	var votes []certify.SignedStatement
	for _, id := range []uint64{1, 2, 3} {
		votes = append(votes, h.sign(id, certify.Vote(cluster, id, term, 4)))
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	h.cert = cert
	for _, id := range honest {
		m, err := agreement.New(agreement.Config{Cluster: cluster, Signer: signers[id].Certify(), Members: keys.IDs(),
			Keys: keys.Members(), Round: round, MaxOrders: 4, Default: "retreat", Floor: floor})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Lead(cert); err != nil {
			t.Fatal(err)
		}
		h.machines[id] = m
	}
	return h
}

func (h *harness) sign(id uint64, st certify.Statement) certify.SignedStatement {
	h.t.Helper()
	s, err := certify.Sign(h.signers[id].Certify(), st)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// collect takes every machine's Ready, in ID order.
func (h *harness) collect() {
	for _, id := range h.ids() {
		rd := h.machines[id].Ready()
		if rd.Highest != nil {
			if !rd.Highest.After(h.highest[id]) {
				h.t.Errorf("member %d: Highest went from %+v to %+v", id, h.highest[id], *rd.Highest)
			}
			h.highest[id] = *rd.Highest
		}
		for _, om := range rd.Messages {
			if om.From != id {
				h.t.Errorf("member %d sent a message as %d", id, om.From)
			}
			h.queue = append(h.queue, om)
		}
		h.decided[id] = append(h.decided[id], rd.Decisions...)
		h.evidence[id] = append(h.evidence[id], rd.Evidence...)
	}
}

func (h *harness) ids() []uint64 {
	var ids []uint64
	for id := range h.machines {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// inject queues om, a message of a member the test plays.
func (h *harness) inject(om protocol.OrderMessage) { h.queue = append(h.queue, om) }

// deliver hands every message in flight, and those they cause, to every
// machine but its sender's, in order.
func (h *harness) deliver() {
	h.collect()
	for len(h.queue) > 0 {
		om := h.queue[0]
		h.queue = h.queue[1:]
		h.sent = append(h.sent, om)
		for _, id := range h.ids() {
			if id != om.From {
				h.machines[id].Receive(h.now, om)
			}
		}
		h.collect()
	}
}

// advance moves the time by d, ticks every machine whose Next is due,
// and delivers what follows.
func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	for _, id := range h.ids() {
		if next, ok := h.machines[id].Next(); ok && !h.now.Before(next) {
			h.machines[id].Tick(h.now)
		}
	}
	h.deliver()
}

// lie is a message of member from for order seq, its relays signed with
// from's key unless the relay says otherwise.
type lie struct {
	to    uint64
	path  []uint64
	value string
	// by, if not nil, signs the relay instead of from's key.
	by *signing.Signer
}

func (h *harness) message(from, seq uint64, cert *certify.Certificate, lies ...lie) protocol.OrderMessage {
	h.t.Helper()
	return h.messageIn(term, from, seq, cert, lies...)
}

// messageIn is message, for an order of term t.
func (h *harness) messageIn(t, from, seq uint64, cert *certify.Certificate, lies ...lie) protocol.OrderMessage {
	h.t.Helper()
	om := protocol.OrderMessage{Cluster: cluster, Term: t, Seq: seq, From: from, Certificate: cert}
	for _, l := range lies {
		vi := slices.Index(om.Values, l.value)
		if vi < 0 {
			vi = len(om.Values)
			om.Values = append(om.Values, l.value)
		}
		signer := h.signers[from]
		if l.by != nil {
			signer = l.by
		}
		cs, err := certify.NewSigner(from, signer.KeyPair())
		if err != nil {
			h.t.Fatal(err)
		}
		s, err := certify.Sign(cs, certify.Relay(cluster, t, seq, l.path, []byte(l.value)))
		if err != nil {
			h.t.Fatal(err)
		}
		om.Relays = append(om.Relays, protocol.OrderRelay{To: l.to, Path: l.path, Value: vi, Signature: len(om.Signatures)})
		om.Signatures = append(om.Signatures, s.Signature)
	}
	return om
}

// decisions returns each member's decision of order seq.
func (h *harness) decisions(seq uint64) map[uint64]string {
	got := map[uint64]string{}
	for id, ds := range h.decided {
		for _, d := range ds {
			if d.Term == term && d.Seq == seq {
				got[id] = d.Value
			}
		}
	}
	return got
}

// expectEvidence checks that each of members found exactly one proof,
// against liar, and that it holds.
func (h *harness) expectEvidence(liar uint64, members ...uint64) {
	h.t.Helper()
	for _, id := range h.ids() {
		got := h.evidence[id]
		want := 0
		if slices.Contains(members, id) {
			want = 1
		}
		if len(got) != want {
			h.t.Errorf("member %d found %d proofs of a lie; want %d", id, len(got), want)
			continue
		}
		for _, e := range got {
			if e.Member() != liar {
				h.t.Errorf("member %d convicted %d; want %d", id, e.Member(), liar)
			}
			if err := certify.VerifyEvidence(h.keys.Members(), e); err != nil {
				h.t.Errorf("member %d's evidence does not hold: %v", id, err)
			}
			if e.First.Statement.Kind != certify.KindRelay {
				h.t.Errorf("member %d's evidence is of %ss; want relays", id, e.First.Statement.Kind)
			}
		}
		if s := h.machines[id].Stats(); s.Evidence != uint64(want) {
			h.t.Errorf("member %d: Stats.Evidence = %d; want %d", id, s.Evidence, want)
		}
	}
}

// IC2: an honest leader's order is decided, with its value, by every
// member, at once when nothing is missing; every relay is signed, one
// signature for each path and value; nobody finds evidence; each
// member's Highest is the order.
func TestHonestLeaderOrderDecided(t *testing.T) {
	h := newHarness(t, agreement.ID{}, 1, 2, 3, 4)
	o, err := h.machines[4].Issue(h.now, "attack")
	if err != nil {
		t.Fatal(err)
	}
	if want := (agreement.Order{Cluster: cluster, Term: term, Seq: 1, Leader: 4, Value: "attack"}); o != want {
		t.Fatalf("Issue = %+v; want %+v", o, want)
	}
	h.deliver()
	for id := uint64(1); id <= 4; id++ {
		if got := h.decisions(1)[id]; got != "attack" {
			t.Errorf("member %d decided %q; want %q", id, got, "attack")
		}
		if got, want := h.highest[id], (agreement.ID{Term: term, Seq: 1}); got != want {
			t.Errorf("member %d: Highest %+v; want %+v", id, got, want)
		}
	}
	// The leader's relays to 1, 2, 3, and each lieutenant's to two.
	if len(h.sent) != 4 {
		t.Fatalf("%d messages sent; want 4", len(h.sent))
	}
	for _, om := range h.sent {
		if len(om.Signatures) != 1 {
			t.Errorf("message of %d: %d signatures for one path and value; want 1", om.From, len(om.Signatures))
		}
		for _, r := range om.Relays {
			s := certify.SignedStatement{Statement: certify.Relay(cluster, term, 1, r.Path, []byte(om.Values[r.Value])), Signature: om.Signatures[r.Signature]}
			if err := s.Verify(h.keys.Members()); err != nil {
				t.Errorf("relay %+v of %d: %v", r, om.From, err)
			}
		}
	}
	h.expectEvidence(0)
}

// A traitor lieutenant that relays one value to one member and another to
// the other along its path is convicted by every member that sees both
// (all of them: the relays are broadcast), once per order however often
// it lies again; the honest members still decide the leader's value.
func TestRelayEquivocationIsEvidence(t *testing.T) {
	h := newHarness(t, agreement.ID{}, 1, 2, 4)
	if _, err := h.machines[4].Issue(h.now, "attack"); err != nil {
		t.Fatal(err)
	}
	h.inject(h.message(3, 1, nil, lie{to: 1, path: []uint64{4, 3}, value: "retreat"}))
	h.inject(h.message(3, 1, nil, lie{to: 2, path: []uint64{4, 3}, value: "attack"}))
	h.inject(h.message(3, 1, nil, lie{to: 2, path: []uint64{4, 3}, value: "wait"}, lie{to: 1, path: []uint64{4, 3}, value: "go"}))
	h.deliver()
	h.advance(round)
	h.advance(round)
	for _, id := range []uint64{1, 2, 4} {
		if got := h.decisions(1)[id]; got != "attack" {
			t.Errorf("member %d decided %q; want %q", id, got, "attack")
		}
	}
	h.expectEvidence(3, 1, 2, 4)
	if got := h.machines[1].Stats().Equivocations; got != 1 {
		t.Errorf("member 1 counted %d equivocations to it; want 1", got)
	}
}

// A1/A3: the relays a traitor withholds count as the default once their
// round has ended; nothing is decided before the deadline, the leader's
// value after it. Next names the deadlines.
func TestWithheldRelaysEndOnDeadline(t *testing.T) {
	h := newHarness(t, agreement.ID{}, 1, 2, 4)
	if _, err := h.machines[4].Issue(h.now, "attack"); err != nil {
		t.Fatal(err)
	}
	h.deliver()
	if got := h.decisions(1); len(got) != 1 {
		t.Fatalf("decisions %v before the deadline; want the leader's alone", got)
	}
	if next, ok := h.machines[1].Next(); !ok || !next.Equal(t0.Add(round)) {
		t.Errorf("Next = %v, %t; want the end of round 1, %v", next, ok, t0.Add(round))
	}
	h.advance(round)
	h.advance(round)
	for _, id := range []uint64{1, 2} {
		if got := h.decisions(1)[id]; got != "attack" {
			t.Errorf("member %d decided %q; want %q", id, got, "attack")
		}
	}
}

// A certified leader that issues one value to some members and another to
// the rest is convicted by them all; the lieutenants agree (IC1).
func TestLyingLeaderIsEvidence(t *testing.T) {
	h := newHarness(t, agreement.ID{}, 1, 2, 3)
	h.inject(h.message(4, 1, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}, lie{to: 2, path: []uint64{4}, value: "attack"},
		lie{to: 3, path: []uint64{4}, value: "retreat"}))
	h.deliver()
	got := h.decisions(1)
	if len(got) != 3 || got[1] != got[2] || got[2] != got[3] {
		t.Errorf("decisions %v; want one value decided by 1, 2 and 3", got)
	}
	h.expectEvidence(4, 1, 2, 3)
}

// A pair of relays that is no proof is not evidence: a second value whose
// signature is not the sender's (another key, or the signature of its
// first relay), copies of one value to several members, values along
// different paths. A relay to a member whose signature fails does not
// count at all.
func TestNoEvidenceWithoutAContradiction(t *testing.T) {
	stranger := batontest.NewSigner(t, 3)
	h := newHarness(t, agreement.ID{}, 1, 2, 4)
	if _, err := h.machines[4].Issue(h.now, "attack"); err != nil {
		t.Fatal(err)
	}
	first := h.message(3, 1, nil, lie{to: 1, path: []uint64{4, 3}, value: "attack"})
	h.inject(first)
	h.inject(h.message(3, 1, nil, lie{to: 2, path: []uint64{4, 3}, value: "attack"}))
	h.inject(h.message(3, 1, nil, lie{to: 1, path: []uint64{4, 3}, value: "retreat", by: stranger}))
	h.inject(h.message(3, 1, nil, lie{to: 2, path: []uint64{4, 3}, value: "retreat", by: stranger}))
	reused := h.message(3, 1, nil, lie{to: 2, path: []uint64{4, 3}, value: "retreat"})
	reused.Signatures = first.Signatures
	h.inject(reused)
	h.deliver()
	h.expectEvidence(0)
	for _, id := range []uint64{1, 2} {
		s := h.machines[id].Stats()
		if s.Equivocations != 0 {
			t.Errorf("member %d counted %d equivocations; the second values' signatures do not hold", id, s.Equivocations)
		}
		if s.Rejected == 0 {
			t.Errorf("member %d rejected no relay; the forged ones must be", id)
		}
	}
	for id, v := range h.decisions(1) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}

	// The forged relay first, to another member, then the real one: the
	// forged one is not taken for the first of a pair.
	h = newHarness(t, agreement.ID{}, 1, 2)
	h.inject(h.message(4, 1, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}, lie{to: 2, path: []uint64{4}, value: "attack"}, lie{to: 3, path: []uint64{4}, value: "attack"}))
	h.inject(h.message(3, 1, nil, lie{to: 1, path: []uint64{4, 3}, value: "retreat", by: stranger}))
	h.inject(h.message(3, 1, nil, lie{to: 2, path: []uint64{4, 3}, value: "attack"}))
	h.deliver()
	h.expectEvidence(0)

	// Different paths, different values: no contradiction.
	h = newHarness(t, agreement.ID{}, 1, 2)
	h.inject(h.message(4, 1, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}, lie{to: 2, path: []uint64{4}, value: "attack"}, lie{to: 3, path: []uint64{4}, value: "attack"}))
	h.inject(h.message(3, 1, nil, lie{to: 1, path: []uint64{4, 3}, value: "retreat"}, lie{to: 2, path: []uint64{4, 3}, value: "retreat"}))
	h.inject(h.message(3, 1, nil, lie{to: 1, path: []uint64{4, 2, 3}, value: "attack"}))
	h.deliver()
	h.expectEvidence(0)
}

// A relay to this member whose signature is not its sender's does not
// reach the agreement: its path counts as missing until the deadline.
func TestRelayWithoutItsSignatureNotTaken(t *testing.T) {
	h := newHarness(t, agreement.ID{}, 1)
	h.inject(h.message(4, 1, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack", by: batontest.NewSigner(t, 4)}))
	h.deliver()
	if s := h.machines[1].Stats(); s.Received != 0 || s.Rejected != 1 || s.Opened != 1 {
		t.Errorf("member 1: %+v; want the order opened, its relay rejected and none received", s)
	}
}

// A member restarted with the greatest order it took part in as its
// Floor opens no order up to it again (a replay would make it relay a
// second time along its paths), and reports each greater one it opens.
func TestFloorKeepsOrdersTakenPartIn(t *testing.T) {
	h := newHarness(t, agreement.ID{Term: term, Seq: 2}, 1, 2, 3)
	for seq := uint64(1); seq <= 3; seq++ {
		h.inject(h.message(4, seq, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}, lie{to: 2, path: []uint64{4}, value: "attack"}, lie{to: 3, path: []uint64{4}, value: "attack"}))
	}
	h.deliver()
	for id := uint64(1); id <= 3; id++ {
		if s := h.machines[id].Stats(); s.Opened != 1 || s.Stale != 2 {
			t.Errorf("member %d: %+v; want order 3 opened, 1 and 2 stale", id, s)
		}
		if got, want := h.highest[id], (agreement.ID{Term: term, Seq: 3}); got != want {
			t.Errorf("member %d: Highest %+v; want %+v", id, got, want)
		}
	}
	// The leader, restarted likewise, issues after its floor.
	h = newHarness(t, agreement.ID{Term: term, Seq: 2}, 4)
	if o, err := h.machines[4].Issue(h.now, "x"); err != nil || o.Seq != 3 {
		t.Errorf("Issue after floor 2 = %+v, %v; want order 3", o, err)
	}
}

// Issue refuses a member that is not the certified leader, a value the
// wire cannot carry, and more than MaxOrders orders within an order's
// rounds.
func TestIssueRefuses(t *testing.T) {
	h := newHarness(t, agreement.ID{}, 1, 4)
	if _, err := h.machines[1].Issue(h.now, "x"); !errors.Is(err, agreement.ErrNotLeader) {
		t.Errorf("Issue on member 1: %v; want ErrNotLeader", err)
	}
	if _, err := h.machines[4].Issue(h.now, "\xff"); err == nil {
		t.Error("Issue of invalid UTF-8 succeeded")
	}
	for range 4 {
		if _, err := h.machines[4].Issue(h.now, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.machines[4].Issue(h.now, "x"); !errors.Is(err, agreement.ErrBusy) {
		t.Errorf("fifth Issue with MaxOrders 4: %v; want ErrBusy", err)
	}
	h.now = h.now.Add(2 * round)
	if o, err := h.machines[4].Issue(h.now, "x"); err != nil || o.Seq != 5 {
		t.Errorf("Issue after the rounds = %+v, %v; want order 5", o, err)
	}
}

// A liar that keeps sending relays for others that contradict its first,
// each with a bad signature, has at most 8 of them checked per order:
// the rest are ignored, not checked one Ed25519 verification each.
func TestForgedContradictionsCheckedBounded(t *testing.T) {
	stranger := batontest.NewSigner(t, 3)
	h := newHarness(t, agreement.ID{}, 1)
	h.inject(h.message(4, 1, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}))
	h.inject(h.message(3, 1, nil, lie{to: 2, path: []uint64{4, 3}, value: "attack"}))
	for i := range 20 {
		h.inject(h.message(3, 1, nil, lie{to: 2, path: []uint64{4, 3}, value: fmt.Sprint("forged ", i), by: stranger}))
	}
	h.deliver()
	if s := h.machines[1].Stats(); s.Rejected != 8 || s.Evidence != 0 {
		t.Errorf("member 1: %+v; want 8 forged relays checked and rejected, no evidence", s)
	}
}

// certificate returns the certificate of leader in t, with the votes of
// voters.
func (h *harness) certificate(t, leader uint64, voters ...uint64) certify.Certificate {
	h.t.Helper()
	var votes []certify.SignedStatement
	for _, id := range voters {
		votes = append(votes, h.sign(id, certify.Vote(cluster, id, t, leader)))
	}
	c, err := certify.NewCertificate(votes)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// A leader superseded by a newer certified one (member 3, certified in
// term 5 before member 4 in term 7) may still issue in its own term, but
// its orders cannot take the current leader's slots: with MaxOrders
// orders of term 5 under way, the first order of term 7 still opens.
func TestSupersededLeaderCannotHoldTheSlots(t *testing.T) {
	h := newHarness(t, agreement.ID{}, 1)
	old := h.certificate(5, 3, 1, 2, 4)
	for seq := uint64(1); seq <= 4; seq++ { // MaxOrders, none ever decided
		h.inject(h.messageIn(5, 3, seq, &old, lie{to: 1, path: []uint64{3}, value: fmt.Sprint("stall ", seq)}))
	}
	h.deliver()
	if s := h.machines[1].Stats(); s.Opened != 4 {
		t.Fatalf("member 1: %+v; want the 4 orders of term 5 opened", s)
	}
	h.inject(h.message(4, 1, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}))
	h.deliver()
	if s := h.machines[1].Stats(); s.Opened != 5 || s.Dropped != 0 {
		t.Errorf("member 1: %+v; want the current leader's order opened, nothing dropped", s)
	}
	// The current leader's next orders open up to MaxOrders of its own.
	for seq := uint64(2); seq <= 4; seq++ {
		h.inject(h.message(4, seq, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}))
	}
	h.deliver()
	if s := h.machines[1].Stats(); s.Opened != 8 || s.Dropped != 0 {
		t.Errorf("member 1: %+v; want 4 orders of each term under way", s)
	}
	h.inject(h.message(4, 5, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}))
	h.deliver()
	if s := h.machines[1].Stats(); s.Opened != 8 || s.Dropped != 1 {
		t.Errorf("member 1: %+v; want a fifth order of term 7 refused (MaxOrders)", s)
	}
}

// countingKeys counts the signature checks.
type countingKeys struct {
	certify.Members
	checks int
}

func (k *countingKeys) Verify(member uint64, data, sig []byte) error {
	k.checks++
	return k.Members.Verify(member, data, sig)
}

// A liar's flood costs a bounded number of signature checks per order,
// whatever it sends: relays to this member with bad signatures, with
// fresh values along its path each signed, or for others, sent again and
// again. (Each relay to this member was checked before, 32 a message,
// again on every copy.)
func TestSignatureChecksBoundedPerOrder(t *testing.T) {
	h := newHarness(t, agreement.ID{})
	keys := &countingKeys{Members: h.keys.Members()}
	m, err := agreement.New(agreement.Config{Cluster: cluster, Signer: h.signers[1].Certify(), Members: h.keys.IDs(),
		Keys: keys, Round: round, MaxOrders: 4, Default: "retreat"})
	if err != nil {
		t.Fatal(err)
	}
	m.Receive(t0, h.message(4, 1, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}))
	opened := keys.checks // 2's relay [4 2] never comes: the order stays undecided
	stranger := batontest.NewSigner(t, 3)
	var floods []protocol.OrderMessage
	for _, flood := range []struct {
		to uint64
		by *signing.Signer
	}{{1, nil}, {2, nil}, {1, stranger}, {2, stranger}} {
		var lies []lie
		for i := range protocol.MaxOrderRelays {
			lies = append(lies, lie{to: flood.to, path: []uint64{4, 3}, value: fmt.Sprintf("lie %d to %d", i, flood.to), by: flood.by})
		}
		floods = append(floods, h.message(3, 1, nil, lies...))
	}
	var bytes int
	for range 25 {
		for _, om := range floods {
			data, err := protocol.EncodeOrderMessage(om)
			if err != nil {
				t.Fatal(err)
			}
			bytes += len(data)
			m.Receive(t0, om)
		}
	}
	checks := keys.checks - opened
	t.Logf("flood of %d messages, %d KB: %d relay signature checks, %.3f per KB (the opening took %d)",
		25*len(floods), bytes/1024, checks, float64(checks)*1024/float64(bytes), opened)
	if checks > 12 {
		t.Errorf("%d relay signature checks for a flood of %d KB; want at most 12 (one per path of the liar's, one failure, the evidence, the bounded forgeries)", checks, bytes/1024)
	}
	if s := m.Stats(); s.Evidence != 1 {
		t.Errorf("Stats.Evidence = %d; want the liar's contradiction found once", s.Evidence)
	}
}

// A certificate that did not hold is remembered: a member that sends
// messages of its own with a forged certificate of a term has it checked
// once, not once a message.
func TestForgedCertificateCheckedOnce(t *testing.T) {
	h := newHarness(t, agreement.ID{})
	keys := &countingKeys{Members: h.keys.Members()}
	m, err := agreement.New(agreement.Config{Cluster: cluster, Signer: h.signers[1].Certify(), Members: h.keys.IDs(),
		Keys: keys, Round: round, MaxOrders: 4, Default: "retreat"})
	if err != nil {
		t.Fatal(err)
	}
	// Member 3 claims term 9 with votes signed by keys not the voters'.
	var votes []certify.SignedStatement
	for _, id := range []uint64{1, 2, 3} {
		s, err := certify.Sign(batontest.NewSigner(t, id).Certify(), certify.Vote(cluster, id, 9, 3))
		if err != nil {
			t.Fatal(err)
		}
		votes = append(votes, s)
	}
	forged, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	for seq := range uint64(50) {
		m.Receive(t0, h.messageIn(9, 3, seq+1, &forged, lie{to: 1, path: []uint64{3}, value: "stall"}))
	}
	if s := m.Stats(); s.Opened != 0 || s.Rejected != 50 {
		t.Errorf("member 1: %+v; want the 50 messages rejected", s)
	}
	if keys.checks > 1 {
		t.Errorf("%d signature checks for 50 messages with one forged certificate; want 1", keys.checks)
	}
}
