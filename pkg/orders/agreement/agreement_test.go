package agreement_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
)

const (
	cluster = "orders"
	term    = 7
	round   = 100 * time.Millisecond
)

var t0 = time.Unix(1_000_000, 0)

// cluster4 is four members with keys, whose leader in term 7 is member
// 4, certified by the votes of 1, 2 and 3; the members listed in honest
// run a machine each, the others are the test's to play.
type harness struct {
	t        *testing.T
	signers  map[uint64]*protocol.Signer
	keys     *protocol.MemberKeys
	cert     certify.Certificate
	machines map[uint64]*agreement.Machine
	now      time.Time
	// What the machines produced, per member.
	decided map[uint64][]agreement.Order
	// queue holds the messages in flight, each for every member but its
	// sender; sent holds every message sent, in order.
	queue []protocol.OrderMessage
	sent  []protocol.OrderMessage
}

func newHarness(t *testing.T, honest ...uint64) *harness {
	t.Helper()
	signers, keys := batontest.MemberKeys(t, 1, 2, 3, 4)
	h := &harness{t: t, signers: signers, keys: keys, machines: map[uint64]*agreement.Machine{}, now: t0,
		decided: map[uint64][]agreement.Order{}}
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
		m, err := agreement.New(agreement.Config{Cluster: cluster, Self: id, Members: keys.IDs(),
			Keys: keys.Members(), Round: round, MaxOrders: 4, Default: "retreat"})
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
		for _, om := range rd.Messages {
			if om.From != id {
				h.t.Errorf("member %d sent a message as %d", id, om.From)
			}
			h.queue = append(h.queue, om)
		}
		h.decided[id] = append(h.decided[id], rd.Decisions...)
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

// lie is a relay of a member the test plays.
type lie struct {
	to    uint64
	path  []uint64
	value string
}

func (h *harness) message(from, seq uint64, cert *certify.Certificate, lies ...lie) protocol.OrderMessage {
	om := protocol.OrderMessage{Cluster: cluster, Term: term, Seq: seq, From: from, Certificate: cert}
	for _, l := range lies {
		vi := slices.Index(om.Values, l.value)
		if vi < 0 {
			vi = len(om.Values)
			om.Values = append(om.Values, l.value)
		}
		om.Relays = append(om.Relays, protocol.OrderRelay{To: l.to, Path: l.path, Value: vi})
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

// IC2: an honest leader's order is decided, with its value, by every
// member, at once when nothing is missing: the leader's message to the
// three lieutenants, and each lieutenant's relays to the two others.
func TestHonestLeaderOrderDecided(t *testing.T) {
	h := newHarness(t, 1, 2, 3, 4)
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
	}
	if len(h.sent) != 4 {
		t.Errorf("%d messages sent; want 4", len(h.sent))
	}
}

// IC1: a certified leader that issues one value to two lieutenants and
// another to the third; the lieutenants decide alike, the majority.
func TestLyingLeaderAgreement(t *testing.T) {
	h := newHarness(t, 1, 2, 3)
	h.inject(h.message(4, 1, &h.cert, lie{to: 1, path: []uint64{4}, value: "attack"}, lie{to: 2, path: []uint64{4}, value: "attack"},
		lie{to: 3, path: []uint64{4}, value: "retreat"}))
	h.deliver()
	for id, v := range h.decisions(1) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want the majority's %q", id, v, "attack")
		}
	}
	if got := len(h.decisions(1)); got != 3 {
		t.Errorf("%d lieutenants decided; want 3", got)
	}
}

// A1/A3: the relays a traitor withholds count as the default once their
// round has ended; nothing is decided before the deadline, the leader's
// value after it. Next names the deadlines.
func TestWithheldRelaysEndOnDeadline(t *testing.T) {
	h := newHarness(t, 1, 2, 4)
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

// Issue refuses a member that is not the certified leader, a value the
// wire cannot carry, and more than MaxOrders orders within an order's
// rounds.
func TestIssueRefuses(t *testing.T) {
	h := newHarness(t, 1, 4)
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
