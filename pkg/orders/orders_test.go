package orders_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/generals"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/orders"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	cluster = "orders"
	term    = 7
	// wait bounds every wait for an event.
	wait = 10 * time.Second
)

// fakeClock is a Clock that moves only when the test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Until(at time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !at.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: at, ch: ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waiters = slices.DeleteFunc(c.waiters, func(w fakeWaiter) bool {
		if w.at.After(c.now) {
			return false
		}
		w.ch <- c.now
		return true
	})
}

// world is a cluster of four members with keys (f = 1) on an embedded
// NATS server, whose leader in term 7 is member 4, certified by the votes
// of 1, 2 and 3.
type world struct {
	t   *testing.T
	url string
	// opts are the connection options of member id, or of an
	// application for id 0.
	opts     func(id uint64) []nats.Option
	signers  map[uint64]*signing.Signer
	keys     *signing.MemberKeys
	cert     *certify.Certificate
	clock    *fakeClock
	nc       *nats.Conn // the test's own connection (traitors, decisions)
	services map[uint64]*orders.Service
	ctx      context.Context
	cancel   context.CancelFunc
}

const round = 100 * time.Millisecond

func newWorld(t *testing.T) *world { return newWorldOf(t, 4, false) }

// newWorldOf is a world of n members whose leader in term 7 is member n,
// certified by the votes of members 1 … quorum. With memberUsers, the
// server has the deployment's users (internal/natsconf): each member
// connects as the user of its key, applications as the app user, and
// the test as the leader.
func newWorldOf(t *testing.T, n int, memberUsers bool) *world {
	t.Helper()
	var members, voters []uint64
	for id := range uint64(n) {
		members = append(members, id+1)
	}
	voters = members[:certify.Quorum(n)]
	signers, keys := batontest.MemberKeys(t, members...)
	var url string
	opts := func(uint64) []nats.Option { return nil }
	if memberUsers {
		o, err := natsconf.OptionsWithMembers(t.TempDir(), "127.0.0.1", -1, t.TempDir(), natsconf.LocalPasswords,
			map[string]*signing.MemberKeys{cluster: keys})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := natsconf.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { natsconf.Stop(srv) })
		url = srv.ClientURL()
		opts = func(id uint64) []nats.Option {
			if id == 0 {
				return []nats.Option{nats.UserInfo(natsconf.AppUser, natsconf.LocalPasswords.App)}
			}
			return append(batontest.AsMember(cluster, signers[id]), nats.CustomInboxPrefix(protocol.InboxPrefix(cluster, id)))
		}
	} else {
		url = batontest.StartNATS(t)
	}
	w := &world{
		t: t, url: url, opts: opts, signers: signers, keys: keys,
		cert:     certificate(t, signers, term, uint64(n), voters...),
		clock:    newFakeClock(),
		nc:       batontest.Connect(t, url, opts(uint64(n))...),
		services: map[uint64]*orders.Service{},
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	t.Cleanup(w.cancel)
	w.answerQueries(uint64(n), term, w.cert)
	return w
}

// certificate returns the certificate of leader in term, signed by voters.
func certificate(t *testing.T, signers map[uint64]*signing.Signer, term, leader uint64, voters ...uint64) *certify.Certificate {
	t.Helper()
	var votes []certify.SignedStatement
	for _, id := range voters {
		v, err := certify.Sign(signers[id].Certify(), certify.Vote(cluster, id, term, leader))
		if err != nil {
			t.Fatal(err)
		}
		votes = append(votes, v)
	}
	c, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// answerQueries answers the leader queries as the leading node does,
// with its signed, certified announcement.
func (w *world) answerQueries(leaderID, term uint64, c *certify.Certificate) {
	w.t.Helper()
	a := protocol.Announcement{Cluster: cluster, Leader: leaderID, Term: term, Algorithm: protocol.Byzantine,
		At: protocol.Timestamp{Time: time.Now()}, Certificate: c}
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		w.t.Fatal(err)
	}
	h := w.signers[leaderID].SignAnnouncement(cluster, data)
	sub, err := w.nc.Subscribe(protocol.QuerySubject(cluster), func(m *nats.Msg) {
		_ = m.RespondMsg(&nats.Msg{Data: data, Header: h})
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := w.nc.Flush(); err != nil {
		w.t.Fatal(err)
	}
}

// start runs the service of each of members, each on its own connection,
// and waits until they have subscribed.
func (w *world) start(members ...uint64) {
	w.t.Helper()
	w.startWith(func(uint64, *orders.Config) {}, members...)
}

// startWith is start, with each member's configuration changed by
// configure.
func (w *world) startWith(configure func(id uint64, c *orders.Config), members ...uint64) {
	w.t.Helper()
	for _, id := range members {
		cfg := orders.Config{
			Cluster: cluster, Signer: w.signers[id], Keys: w.keys, Round: round, Default: "retreat", Clock: w.clock,
			Ephemeral: true,
		}
		configure(id, &cfg)
		s, err := orders.New(batontest.Connect(w.t, w.url, w.opts(id)...), cfg)
		if err != nil {
			w.t.Fatal(err)
		}
		w.services[id] = s
		done := make(chan error, 1)
		go func() { done <- s.Run(w.ctx) }()
		w.t.Cleanup(func() {
			w.cancel()
			if err := <-done; err != nil {
				w.t.Errorf("member %d: Run: %v", id, err)
			}
		})
		select {
		case <-s.Ready():
		case err := <-done:
			w.t.Fatalf("member %d: Run: %v", id, err)
		case <-time.After(wait):
			w.t.Fatalf("member %d not ready after %v", id, wait)
		}
	}
}

// issue issues value on member id, once it knows it leads.
func (w *world) issue(id uint64, value string) orders.Order {
	w.t.Helper()
	var o orders.Order
	batontest.CheckFor(w.t, wait, func() error {
		var err error
		o, err = w.services[id].Issue(w.ctx, value)
		if errors.Is(err, orders.ErrNotLeader) {
			return err
		}
		if err != nil {
			w.t.Fatalf("Issue: %v", err)
		}
		return nil
	})
	return o
}

// decisions subscribes to the members' decisions, checked against the
// keys, and returns them as they come.
func (w *world) decisions() <-chan protocol.Decision {
	w.t.Helper()
	out := make(chan protocol.Decision, 64)
	sub, err := w.nc.Subscribe(protocol.DecidedSubject(cluster), func(m *nats.Msg) {
		signer, err := w.keys.Verify(m.Subject, m.Data, m.Header)
		if err != nil {
			return // forged ones are the subject of other checks
		}
		d, err := protocol.DecodeDecision(m.Data)
		if err != nil || d.Member != signer {
			return
		}
		out <- d
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := w.nc.Flush(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

// expectDecisions waits for the decisions of members on order seq and
// returns them, member → value.
func (w *world) expectDecisions(ch <-chan protocol.Decision, seq uint64, members ...uint64) map[uint64]string {
	w.t.Helper()
	got := map[uint64]string{}
	timeout := time.After(wait)
	for len(got) < len(members) {
		select {
		case d := <-ch:
			if d.Term == term && d.Seq == seq && slices.Contains(members, d.Member) {
				got[d.Member] = d.Value
			}
		case <-timeout:
			w.t.Fatalf("order %d: decisions %v after %v; want those of members %v", seq, got, wait, members)
		}
	}
	return got
}

// readOrders follows leader.Orders on a connection of its own, and
// returns the orders it yields once it has subscribed.
func (w *world) readOrders() <-chan leader.DecidedOrder {
	w.t.Helper()
	nc := batontest.Connect(w.t, w.url, w.opts(0)...)
	out := make(chan leader.DecidedOrder, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for o, err := range leader.Orders(w.ctx, nc, cluster, leader.WithKeys(w.keys)) {
			if err != nil {
				w.t.Errorf("leader.Orders: %v", err)
				return
			}
			out <- o
		}
	}()
	w.t.Cleanup(func() {
		w.cancel()
		<-done
	})
	batontest.CheckFor(w.t, wait, func() error {
		if nc.NumSubscriptions() == 0 {
			return errors.New("leader.Orders has not subscribed")
		}
		return nil
	})
	if err := nc.Flush(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

func (w *world) expectOrder(ch <-chan leader.DecidedOrder) leader.DecidedOrder {
	w.t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(wait):
		w.t.Fatalf("leader.Orders yielded nothing in %v", wait)
	}
	return leader.DecidedOrder{}
}

// publish publishes om signed by signer.
func (w *world) publish(signer *signing.Signer, subject string, v any) {
	w.t.Helper()
	var data []byte
	var err error
	switch v := v.(type) {
	case protocol.OrderMessage:
		data, err = protocol.EncodeOrderMessage(signRelays(w.t, signer, v))
	case protocol.Decision:
		data, err = protocol.EncodeDecision(v)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.nc.PublishMsg(&nats.Msg{Subject: subject, Data: data, Header: signer.Header(subject, data)}); err != nil {
		w.t.Fatal(err)
	}
	if err := w.nc.Flush(); err != nil {
		w.t.Fatal(err)
	}
}

// relays builds the message of from for order seq: to each recipient its
// path and value.
func relays(from, seq uint64, c *certify.Certificate, rs ...relay) protocol.OrderMessage {
	om := protocol.OrderMessage{Cluster: cluster, Term: term, Seq: seq, From: from, Certificate: c}
	for _, r := range rs {
		i := slices.Index(om.Values, r.value)
		if i < 0 {
			i = len(om.Values)
			om.Values = append(om.Values, r.value)
		}
		om.Relays = append(om.Relays, protocol.OrderRelay{To: r.to, Path: r.path, Value: i})
	}
	return om
}

// signRelays signs each relay of om that has no signature with signer's
// key, as om's sender (signer may not be that member: its signatures then
// do not hold).
func signRelays(t *testing.T, signer *signing.Signer, om protocol.OrderMessage) protocol.OrderMessage {
	t.Helper()
	if len(om.Signatures) > 0 {
		return om
	}
	cs, err := certify.NewSigner(om.From, signer.KeyPair())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range om.Relays {
		s, err := certify.Sign(cs, certify.Relay(om.Cluster, om.Term, om.Seq, r.Path, []byte(om.Values[r.Value])))
		if err != nil {
			t.Fatal(err)
		}
		om.Relays[i].Signature = len(om.Signatures)
		om.Signatures = append(om.Signatures, s.Signature)
	}
	return om
}

type relay struct {
	to    uint64
	path  []uint64
	value string
}

// IC2: an honest leader's order is decided, with its value, by every
// honest member, and pkg/leader yields it; the sequence numbers count the
// term's orders.
func TestHonestLeaderOrderDecided(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	yielded := w.readOrders()
	w.start(1, 2, 3, 4)

	for seq, value := range []string{"attack at dawn", "hold"} {
		o := w.issue(4, value)
		want := orders.Order{Cluster: cluster, Term: term, Seq: uint64(seq + 1), Leader: 4, Value: value}
		if o != want {
			t.Fatalf("Issue = %+v; want %+v", o, want)
		}
		got := w.expectDecisions(decided, o.Seq, 1, 2, 3, 4)
		for id, v := range got {
			if v != value {
				t.Errorf("order %d: member %d decided %q; want %q", o.Seq, id, v, value)
			}
		}
		d := w.expectOrder(yielded)
		if d.Term != term || d.Seq != o.Seq || d.Value != value || len(d.Members) != 2 {
			t.Errorf("leader.Orders yielded %+v; want order %d/%d %q by f+1 = 2 members", d, term, o.Seq, value)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		if s := w.services[id].Stats(); s.Opened != 2 || s.Decided != 2 || s.Rejected != 0 || s.Equivocations != 0 {
			t.Errorf("member %d: stats %+v; want 2 opened and decided, nothing rejected", id, s)
		}
	}
}

// IC2 with a traitor lieutenant: member 3 relays "retreat" to 1 and 2
// (signing with its own key), tells 1 two things along one path, and
// publishes a decision of "retreat". The honest members decide the
// leader's value, 1 counts the equivocation, and pkg/leader yields the
// leader's value only.
func TestTraitorLieutenant(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	yielded := w.readOrders()
	w.start(1, 2, 4)

	// The traitor's relays are published first: they wait at 1 and 2
	// until the leader's message opens the order, then count in round 2.
	w.publish(w.signers[3], protocol.OrderSubject(cluster), relays(3, 1, nil,
		relay{1, []uint64{4, 3}, "retreat"}, relay{2, []uint64{4, 3}, "retreat"}))
	w.publish(w.signers[3], protocol.OrderSubject(cluster), relays(3, 1, nil,
		relay{1, []uint64{4, 3}, "attack"}))
	w.publish(w.signers[3], protocol.DecidedSubject(cluster),
		protocol.Decision{Cluster: cluster, Term: term, Seq: 1, Value: "retreat", Member: 3, At: protocol.Timestamp{Time: time.Now()}})
	w.issue(4, "attack")
	for id, v := range w.expectDecisions(decided, 1, 1, 2, 4) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want the leader's %q", id, v, "attack")
		}
	}
	if d := w.expectOrder(yielded); d.Value != "attack" || slices.Contains(d.Members, 3) {
		t.Errorf("leader.Orders yielded %+v; want %q decided by honest members", d, "attack")
	}
	if got := w.services[1].Stats().Equivocations; got != 1 {
		t.Errorf("member 1 counted %d equivocations; want 1", got)
	}
}

// A member that is not the certified leader cannot issue: Issue refuses,
// and the members open no order from its messages, whether it borrows
// the leader's certificate, shows a certificate of its own with too few
// votes, or one whose votes it forged.
func TestNonLeaderCannotIssue(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	w.start(1, 2, 3, 4)

	if _, err := w.services[1].Issue(w.ctx, "attack"); !errors.Is(err, orders.ErrNotLeader) {
		t.Fatalf("Issue on member 1, leader 4: %v; want ErrNotLeader", err)
	}
	stranger := map[uint64]*signing.Signer{1: w.signers[1], 2: batontest.NewSigner(t, 2), 3: batontest.NewSigner(t, 3)}
	own := certificate(t, stranger, term+1, 1, 1, 2, 3) // two votes forged
	short := certificate(t, w.signers, term+1, 1, 1, 2) // a quorum is 3
	cases := []struct {
		name string
		om   protocol.OrderMessage
	}{
		{"the leader's certificate", relays(1, 1, w.cert, relay{2, []uint64{1}, "retreat"}, relay{3, []uint64{1}, "retreat"})},
		{"forged votes", withTerm(relays(1, 1, own, relay{2, []uint64{1}, "retreat"}, relay{3, []uint64{1}, "retreat"}), term+1)},
		{"two votes", withTerm(relays(1, 1, short, relay{2, []uint64{1}, "retreat"}, relay{3, []uint64{1}, "retreat"}), term+1)},
	}
	for i, c := range cases {
		w.publish(w.signers[1], protocol.OrderSubject(cluster), c.om)
		batontest.CheckFor(t, wait, func() error {
			for _, id := range []uint64{2, 3} {
				if s := w.services[id].Stats(); s.Rejected != uint64(i+1) || s.Opened != 0 {
					return fmt.Errorf("%s: member %d: %+v; want %d rejected, none opened", c.name, id, s, i+1)
				}
			}
			return nil
		})
	}
	// The leader's first order is still seq 1 of term 7, and decided.
	o := w.issue(4, "attack")
	if o.Term != term || o.Seq != 1 {
		t.Fatalf("Issue = %+v; want order 1 of term %d", o, term)
	}
	for id, v := range w.expectDecisions(decided, 1, 1, 2, 3, 4) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}
}

func withTerm(om protocol.OrderMessage, t uint64) protocol.OrderMessage {
	om.Term = t
	return om
}

// IC1 with a certified commander that lies: member 4, the certified
// leader, sends different values to different lieutenants. The honest
// lieutenants decide one value: the majority when two got the same, the
// default when all three got different ones.
func TestLyingCommander(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	yielded := w.readOrders()
	w.start(1, 2, 3)

	cases := []struct {
		values [3]string
		want   string
	}{
		{[3]string{"attack", "retreat-now", "attack"}, "attack"},
		{[3]string{"a", "b", "c"}, "retreat"},
	}
	for i, c := range cases {
		seq := uint64(i + 1)
		w.publish(w.signers[4], protocol.OrderSubject(cluster), relays(4, seq, w.cert,
			relay{1, []uint64{4}, c.values[0]}, relay{2, []uint64{4}, c.values[1]}, relay{3, []uint64{4}, c.values[2]}))
		got := w.expectDecisions(decided, seq, 1, 2, 3)
		for id, v := range got {
			if v != c.want {
				t.Errorf("order %d, commander sent %q: member %d decided %q; want %q", seq, c.values, id, v, c.want)
			}
		}
		if d := w.expectOrder(yielded); d.Seq != seq || d.Value != c.want {
			t.Errorf("leader.Orders yielded %+v; want order %d with %q", d, seq, c.want)
		}
	}
}

// A2: messages whose signature is not the sender's are dropped: a
// stranger's key that claims to be the leader or a lieutenant, and a
// member that signs for another. Forged decisions do not count toward
// f+1.
func TestForgedMessagesDropped(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	yielded := w.readOrders()
	w.start(1, 2, 3, 4)

	fake4, fake3 := batontest.NewSigner(t, 4), batontest.NewSigner(t, 3)
	w.publish(fake4, protocol.OrderSubject(cluster), relays(4, 1, w.cert,
		relay{1, []uint64{4}, "retreat"}, relay{2, []uint64{4}, "retreat"}, relay{3, []uint64{4}, "retreat"}))
	w.publish(fake3, protocol.OrderSubject(cluster), relays(3, 1, nil, relay{1, []uint64{4, 3}, "retreat"}))
	w.publish(w.signers[2], protocol.OrderSubject(cluster), relays(3, 1, nil, relay{1, []uint64{4, 3}, "retreat"}))
	for _, id := range []uint64{1, 2} {
		w.publish(batontest.NewSigner(t, id), protocol.DecidedSubject(cluster),
			protocol.Decision{Cluster: cluster, Term: term, Seq: 1, Value: "retreat", Member: id, At: protocol.Timestamp{Time: time.Now()}})
	}
	batontest.CheckFor(t, wait, func() error {
		if s := w.services[1].Stats(); s.Rejected != 3 || s.Opened != 0 {
			return fmt.Errorf("member 1: %+v; want 3 rejected, none opened", s)
		}
		return nil
	})

	w.issue(4, "attack")
	for id, v := range w.expectDecisions(decided, 1, 1, 2, 3, 4) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}
	if d := w.expectOrder(yielded); d.Value != "attack" {
		t.Errorf("leader.Orders yielded %+v; want %q", d, "attack")
	}
}

// A1/A3: a traitor that withholds its relays is detected by the round
// deadlines: at the end of round 2 its path counts as the default, and
// the honest lieutenants decide the leader's value.
func TestWithheldRelaysEndOnDeadline(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	w.start(1, 2, 4)

	w.issue(4, "attack")
	// Each honest lieutenant has the leader's message and the other's
	// relay; the traitor's never comes.
	batontest.CheckFor(t, wait, func() error {
		for _, id := range []uint64{1, 2} {
			if s := w.services[id].Stats(); s.Received != 2 {
				return fmt.Errorf("member %d received %d messages; want 2", id, s.Received)
			}
		}
		return nil
	})
	select {
	case d := <-decided:
		if d.Member != 4 {
			t.Fatalf("member %d decided before the deadline: %+v", d.Member, d)
		}
	case <-time.After(wait):
		t.Fatal("the leader published no decision")
	}
	w.clock.Advance(round)
	w.clock.Advance(round)
	for id, v := range w.expectDecisions(decided, 1, 1, 2) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}
}

// A leader refuses more than MaxOrders orders within the time their
// agreement takes, and values the wire cannot carry.
func TestIssueBounds(t *testing.T) {
	w := newWorld(t)
	w.start(1, 2, 3)
	s, err := orders.New(batontest.Connect(t, w.url), orders.Config{
		Cluster: cluster, Signer: w.signers[4], Keys: w.keys, Round: round, MaxOrders: 2, Clock: w.clock, Ephemeral: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Issue(w.ctx, "x"); !errors.Is(err, orders.ErrStopped) {
		t.Fatalf("Issue before Run: %v; want ErrStopped", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(w.ctx) }()
	t.Cleanup(func() {
		w.cancel()
		<-done
	})
	<-s.Ready()
	w.services[4] = s
	w.issue(4, "one")
	w.issue(4, "two")
	if _, err := s.Issue(w.ctx, "three"); !errors.Is(err, orders.ErrBusy) {
		t.Errorf("third Issue with MaxOrders 2: %v; want ErrBusy", err)
	}
	if _, err := s.Issue(w.ctx, string(make([]byte, protocol.MaxOrderValue+1))); err == nil {
		t.Error("Issue of an oversized value succeeded")
	}
	if _, err := s.Issue(w.ctx, "\xff"); err == nil {
		t.Error("Issue of invalid UTF-8 succeeded")
	}
	w.clock.Advance(2 * round) // the rounds of both orders are over
	if o, err := s.Issue(w.ctx, "three"); err != nil || o.Seq != 3 {
		t.Errorf("Issue after the orders' rounds = %+v, %v; want order 3", o, err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	signers, keys := batontest.MemberKeys(t, 1, 2, 3, 4)
	_, three := batontest.MemberKeys(t, 1, 2, 3)
	nc := batontest.Connect(t, batontest.StartNATS(t))
	good := orders.Config{Cluster: cluster, Signer: signers[1], Keys: keys, StateFile: filepath.Join(t.TempDir(), "orders.json")}
	cases := map[string]func(*orders.Config){
		// A member that keeps nothing can be made to contradict itself
		// after a restart: the state is kept unless a test opts out.
		"no state file": func(c *orders.Config) { c.StateFile = "" },
		"both":          func(c *orders.Config) { c.Ephemeral = true },
		"cluster":       func(c *orders.Config) { c.Cluster = "a.b" },
		"no signer":     func(c *orders.Config) { c.Signer = nil },
		"stranger":      func(c *orders.Config) { c.Signer = batontest.NewSigner(t, 1) },
		"three":         func(c *orders.Config) { c.Keys = three },
		"round":         func(c *orders.Config) { c.Round = -time.Second },
		"max orders":    func(c *orders.Config) { c.MaxOrders = orders.MaxMaxOrders + 1 },
		"default size":  func(c *orders.Config) { c.Default = string(make([]byte, protocol.MaxOrderValue+1)) },
	}
	for name, change := range cases {
		cfg := good
		change(&cfg)
		if _, err := orders.New(nc, cfg); !errors.Is(err, orders.ErrConfig) {
			t.Errorf("%s: New: %v; want ErrConfig", name, err)
		}
	}
	if _, err := orders.New(nc, good); err != nil {
		t.Errorf("New(%+v): %v", good, err)
	}
	ephemeral := good
	ephemeral.StateFile, ephemeral.Ephemeral = "", true
	if _, err := orders.New(nc, ephemeral); err != nil {
		t.Errorf("New(%+v): %v", ephemeral, err)
	}
}

// The wire's bounds are the agreement's.
func TestWireBoundsMatchTheAgreement(t *testing.T) {
	if protocol.MaxOrderValue != generals.MaxValueSize {
		t.Errorf("protocol.MaxOrderValue = %d; want generals.MaxValueSize %d", protocol.MaxOrderValue, generals.MaxValueSize)
	}
	if got, want := protocol.MaxOrderPath, generals.Faults(generals.MaxMembers)+1; got != want {
		t.Errorf("protocol.MaxOrderPath = %d; want the longest path, %d", got, want)
	}
	if protocol.MaxOrderRelays < generals.MaxMembers-1 {
		t.Errorf("protocol.MaxOrderRelays = %d; the leader's message to %d lieutenants must fit in one", protocol.MaxOrderRelays, generals.MaxMembers-1)
	}
}

// IssueAs takes the caller's own certified announcement: it issues at
// once on the leader, and refuses another member's announcement or a
// certificate that does not hold.
func TestIssueAs(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	w.start(1, 2, 3, 4)
	a := protocol.Announcement{Cluster: cluster, Leader: 4, Term: term, Algorithm: protocol.Byzantine,
		At: protocol.Timestamp{Time: time.Now()}, Certificate: w.cert}
	if _, err := w.services[1].IssueAs(w.ctx, a, "attack"); !errors.Is(err, orders.ErrNotLeader) {
		t.Errorf("IssueAs on member 1 with member 4's announcement: %v; want ErrNotLeader", err)
	}
	forged := a
	forged.Leader, forged.Term = 1, term+1
	forged.Certificate = certificate(t, map[uint64]*signing.Signer{1: w.signers[1], 2: batontest.NewSigner(t, 2), 3: batontest.NewSigner(t, 3)}, term+1, 1, 1, 2, 3)
	if _, err := w.services[1].IssueAs(w.ctx, forged, "attack"); !errors.Is(err, orders.ErrNotLeader) {
		t.Errorf("IssueAs with forged votes: %v; want ErrNotLeader", err)
	}
	o, err := w.services[4].IssueAs(w.ctx, a, "attack")
	if err != nil || o.Seq != 1 {
		t.Fatalf("IssueAs on the leader = %+v, %v; want order 1", o, err)
	}
	for id, v := range w.expectDecisions(decided, 1, 1, 2, 3, 4) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}
}

// A liar fills only its share of the buffer of early messages.
func TestEarlyMessagesBoundedPerSender(t *testing.T) {
	w := newWorld(t)
	w.start(1)
	const sent, share = 20, 64 / 4
	for seq := uint64(10); seq < 10+sent; seq++ {
		w.publish(w.signers[3], protocol.OrderSubject(cluster), relays(3, seq, nil, relay{1, []uint64{4, 3}, "junk"}))
	}
	batontest.CheckFor(t, wait, func() error {
		if s := w.services[1].Stats(); s.Dropped != sent-share {
			return fmt.Errorf("member 1: %+v; want %d dropped", s, sent-share)
		}
		return nil
	})
}

// OM(2) among seven members with two silent traitors: three rounds, the
// traitors' paths defaulted at the deadlines and relayed as such, and
// every honest member decides the leader's value (IC2).
func TestSevenMembersTwoSilentTraitors(t *testing.T) {
	w := newWorldOf(t, 7, false)
	decided := w.decisions()
	yielded := w.readOrders()
	w.start(1, 2, 3, 4, 7) // 5 and 6 say nothing
	if got := w.services[1].Rounds(); got != 3 {
		t.Fatalf("Rounds = %d; want f+1 = 3", got)
	}
	honest := []uint64{1, 2, 3, 4}
	received := func(want uint64) {
		t.Helper()
		batontest.CheckFor(t, wait, func() error {
			for _, id := range honest {
				if got := w.services[id].Stats().Received; got != want {
					return fmt.Errorf("member %d received %d messages; want %d", id, got, want)
				}
			}
			return nil
		})
	}
	w.issue(7, "attack")
	// [7], [7 j] from the 3 other honest lieutenants, [7 j k] from them.
	received(1 + 3 + 3*2)
	w.clock.Advance(round) // round 1: nothing missing
	w.clock.Advance(round) // round 2: [7 5] and [7 6] default, relayed
	received(1 + 3 + 3*2 + 3*2)
	w.clock.Advance(round) // round 3: the traitors' own relays default
	for id, v := range w.expectDecisions(decided, 1, 1, 2, 3, 4, 7) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}
	if d := w.expectOrder(yielded); d.Value != "attack" || len(d.Members) != 3 {
		t.Errorf("leader.Orders yielded %+v; want %q by f+1 = 3 members", d, "attack")
	}
}

// With the deployment's NATS users, the members' services stay within
// their permissions (their cluster's subjects, their own inbox prefix)
// and an application reads the decided orders as the app user.
func TestWithinTheDeploymentsPermissions(t *testing.T) {
	w := newWorldOf(t, 4, true)
	decided := w.decisions()
	yielded := w.readOrders()
	w.start(1, 2, 3, 4)
	w.issue(4, "attack") // member 4 learns it leads from the query, answered on its inbox
	for id, v := range w.expectDecisions(decided, 1, 1, 2, 3, 4) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}
	if d := w.expectOrder(yielded); d.Value != "attack" {
		t.Errorf("leader.Orders yielded %+v; want %q", d, "attack")
	}
}

// evidenceOf subscribes to the cluster's evidence subject and returns the
// proofs published there, each with the member whose signature the
// message bears (checked against the keys).
func (w *world) evidenceOf() <-chan signedEvidence {
	w.t.Helper()
	out := make(chan signedEvidence, 16)
	subject := protocol.BroadcastSubject(cluster, protocol.TypeBzEvidence)
	sub, err := w.nc.Subscribe(subject, func(m *nats.Msg) {
		signer, err := w.keys.Verify(m.Subject, m.Data, m.Header)
		if err != nil {
			w.t.Errorf("evidence not signed by a member: %v", err)
			return
		}
		msg, err := protocol.Decode(m.Data)
		if err == nil {
			err = signing.CheckSigner(signer, msg.From)
		}
		if err == nil {
			err = protocol.Validate(msg, w.keys.IDs())
		}
		if err != nil || msg.Type != protocol.TypeBzEvidence || msg.Evidence == nil {
			w.t.Errorf("evidence message %s: %v", m.Data, err)
			return
		}
		out <- signedEvidence{from: signer, e: *msg.Evidence}
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := w.nc.Flush(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

type signedEvidence struct {
	from uint64
	e    certify.Evidence
}

// A member that relays two values along one path of an order, one to
// member 1 and another to member 2, is found out by every member that
// runs (each sees both relays): each publishes, once, a bz_evidence
// message with the two signed relays, which holds under the keys and
// names the liar.
func TestRelayEquivocationPublishesEvidence(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	proofs := w.evidenceOf()
	w.start(1, 2, 4)

	w.issue(4, "attack")
	w.publish(w.signers[3], protocol.OrderSubject(cluster), relays(3, 1, nil, relay{1, []uint64{4, 3}, "retreat"}))
	w.publish(w.signers[3], protocol.OrderSubject(cluster), relays(3, 1, nil, relay{2, []uint64{4, 3}, "attack"}))
	w.publish(w.signers[3], protocol.OrderSubject(cluster), relays(3, 1, nil, relay{2, []uint64{4, 3}, "wait"}))
	got := map[uint64]certify.Evidence{}
	timeout := time.After(wait)
	for len(got) < 3 {
		select {
		case p := <-proofs:
			if _, twice := got[p.from]; twice {
				t.Errorf("member %d published two proofs against one liar in one order", p.from)
			}
			got[p.from] = p.e
		case <-timeout:
			t.Fatalf("evidence from members %v after %v; want from 1, 2 and 4", slices.Collect(maps.Keys(got)), wait)
		}
	}
	for from, e := range got {
		if e.Member() != 3 || e.First.Statement.Kind != certify.KindRelay {
			t.Errorf("member %d's evidence convicts %d with %ss; want member 3 with relays", from, e.Member(), e.First.Statement.Kind)
		}
		if err := certify.VerifyEvidence(w.keys.Members(), e); err != nil {
			t.Errorf("member %d's evidence does not hold: %v", from, err)
		}
	}
	w.clock.Advance(round)
	w.clock.Advance(round)
	for id, v := range w.expectDecisions(decided, 1, 1, 2, 4) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}
	for _, id := range []uint64{1, 2, 4} {
		if s := w.services[id].Stats(); s.Evidence != 1 {
			t.Errorf("member %d: Stats.Evidence = %d; want 1", id, s.Evidence)
		}
	}
}

// A pair of relays that proves nothing is not evidence: a second value
// whose relay signature is a stranger's (the message itself signed by
// the member), or the same value again to another member. The forged
// relay is rejected.
func TestNoEvidenceWithoutAContradiction(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	proofs := w.evidenceOf()
	w.start(1, 2, 4)

	w.issue(4, "attack")
	w.publish(w.signers[3], protocol.OrderSubject(cluster), relays(3, 1, nil, relay{1, []uint64{4, 3}, "attack"}))
	w.publish(w.signers[3], protocol.OrderSubject(cluster), relays(3, 1, nil, relay{2, []uint64{4, 3}, "attack"}))
	forged := signRelays(t, batontest.NewSigner(t, 3), relays(3, 1, nil, relay{2, []uint64{4, 3}, "retreat"}))
	w.publish(w.signers[3], protocol.OrderSubject(cluster), forged)
	for id, v := range w.expectDecisions(decided, 1, 1, 2, 4) {
		if v != "attack" {
			t.Errorf("member %d decided %q; want %q", id, v, "attack")
		}
	}
	// Every member has read the forged relay once it rejected it; it
	// counts its evidence before it publishes any.
	batontest.CheckFor(t, wait, func() error {
		for _, id := range []uint64{1, 2, 4} {
			if s := w.services[id].Stats(); s.Rejected != 1 {
				return fmt.Errorf("member %d: %+v; want the forged relay rejected", id, s)
			}
		}
		return nil
	})
	for _, id := range []uint64{1, 2, 4} {
		if s := w.services[id].Stats(); s.Evidence != 0 || s.Equivocations != 0 {
			t.Errorf("member %d: %+v; want no evidence, no equivocation", id, s)
		}
	}
	select {
	case p := <-proofs:
		t.Errorf("member %d published evidence %+v", p.from, p.e)
	default:
	}
}

// With StateFile a member keeps the greatest order it took part in: its
// service restarted, it does not open that order again when the leader's
// message is replayed (it would relay along its own paths a second time,
// and a liar could make it contradict itself), and takes part in the
// next one. The file holds the order.
func TestStateFileKeepsOrdersAcrossRestart(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	w.start(2, 4)
	path := filepath.Join(t.TempDir(), "orders.json")
	s, stop := w.runMember(1, path)
	received := func(want uint64, members ...*orders.Service) {
		t.Helper()
		batontest.CheckFor(t, wait, func() error {
			for _, m := range members {
				if got := m.Stats().Received; got != want {
					return fmt.Errorf("a member received %d messages; want %d", got, want)
				}
			}
			return nil
		})
	}
	w.issue(4, "attack")
	received(2, s, w.services[2]) // the leader's and the other's; 3 is silent
	w.clock.Advance(round)
	w.clock.Advance(round)
	w.expectDecisions(decided, 1, 1, 2, 4)
	stop()
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), `"term":7,"seq":1`) {
		t.Fatalf("the state file holds %s (%v); want order 1 of term 7", data, err)
	}

	s, _ = w.runMember(1, path)
	replay := relays(4, 1, w.cert, relay{1, []uint64{4}, "attack"}, relay{2, []uint64{4}, "attack"}, relay{3, []uint64{4}, "attack"})
	w.publish(w.signers[4], protocol.OrderSubject(cluster), replay)
	batontest.CheckFor(t, wait, func() error {
		if st := s.Stats(); st.Stale != 1 || st.Opened != 0 {
			return fmt.Errorf("member 1 after its restart: %+v; want the replay stale, nothing opened", st)
		}
		return nil
	})
	w.issue(4, "hold")
	received(2, s)
	w.clock.Advance(round)
	w.clock.Advance(round)
	if got := w.expectDecisions(decided, 2, 1)[1]; got != "hold" {
		t.Errorf("member 1 decided %q in order 2; want %q", got, "hold")
	}
}

// runMember runs member id's service with StateFile path, on a context
// of its own, and returns it and what stops it.
func (w *world) runMember(id uint64, path string) (*orders.Service, func()) {
	w.t.Helper()
	s, err := orders.New(batontest.Connect(w.t, w.url, w.opts(id)...), orders.Config{
		Cluster: cluster, Signer: w.signers[id], Keys: w.keys, Round: round, Default: "retreat", Clock: w.clock, StateFile: path,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				w.t.Errorf("member %d: Run: %v", id, err)
			}
		})
	}
	w.t.Cleanup(stop)
	select {
	case <-s.Ready():
	case <-time.After(wait):
		w.t.Fatalf("member %d not ready after %v", id, wait)
	}
	return s, stop
}

// A state file that cannot be read stops Run before it takes part in
// anything.
func TestStateFileCorrupt(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(t.TempDir(), "orders.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"term":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := orders.New(batontest.Connect(t, w.url), orders.Config{Cluster: cluster, Signer: w.signers[1], Keys: w.keys, StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(w.ctx); !errors.Is(err, orders.ErrStorage) {
		t.Errorf("Run with a state file of term 7 without a seq: %v; want ErrStorage", err)
	}
}

// jumpyClock is the world's clock for one member, whose time moves on
// by a round, once armed, while that member sets its next deadline: as
// when the test's Advance, or a pause of the process, falls between the
// member's reading of the time and its timer.
type jumpyClock struct {
	*fakeClock
	armed atomic.Bool
}

func (c *jumpyClock) Until(at time.Time) <-chan time.Time {
	if c.armed.CompareAndSwap(true, false) {
		c.Advance(round)
	}
	return c.fakeClock.Until(at)
}

// A round's deadline holds however late the member sets its timer: a
// member whose time moved past the deadline while it set the timer ends
// the round at once. (A relative timer ended it a round late: under
// load, a member then missed a round and its relays of the defaults
// never left within the test's wait.)
func TestRoundDeadlineSurvivesAJump(t *testing.T) {
	w := newWorld(t)
	decided := w.decisions()
	jumpy := &jumpyClock{fakeClock: w.clock}
	w.startWith(func(id uint64, c *orders.Config) {
		if id == 1 {
			c.Clock = jumpy
		}
	}, 1, 2, 4) // 3 says nothing
	w.issue(4, "attack")
	batontest.CheckFor(t, wait, func() error {
		if got := w.services[1].Stats().Received; got != 2 {
			return fmt.Errorf("member 1 received %d messages; want [4] and [4 2]", got)
		}
		return nil
	})
	jumpy.armed.Store(true)
	// Round 1 ends; while member 1 sets the deadline of round 2, the time
	// passes it.
	w.clock.Advance(round)
	if v := w.expectDecisions(decided, 1, 1)[1]; v != "attack" {
		t.Errorf("member 1 decided %q; want %q", v, "attack")
	}
}

// gatedClock is the world's clock, whose Now blocks while the gate is
// shut: the member's owner goroutine then takes no message from its
// inbox, as on a busy host.
type gatedClock struct {
	*fakeClock
	shut    atomic.Bool
	release chan struct{}
}

func (c *gatedClock) Now() time.Time {
	if c.shut.Load() {
		<-c.release
	}
	return c.fakeClock.Now()
}

// A member that floods a member's service fills only its own share of
// the inbox: the leader's message, which arrives after the flood while
// the member is busy, is still taken.
func TestFloodFillsOnlyTheSendersShare(t *testing.T) {
	w := newWorld(t)
	gated := &gatedClock{fakeClock: w.clock, release: make(chan struct{})}
	w.startWith(func(id uint64, c *orders.Config) { c.Clock = gated }, 1)
	gated.shut.Store(true)
	released := false
	release := func() {
		if !released {
			released = true
			gated.shut.Store(false)
			close(gated.release)
		}
	}
	defer release()
	// Member 3's flood: messages of an order not opened, more than the
	// whole inbox holds.
	flood := relays(3, 99, nil, relay{1, []uint64{4, 3}, "stall"})
	data, err := protocol.EncodeOrderMessage(signRelays(t, w.signers[3], flood))
	if err != nil {
		t.Fatal(err)
	}
	subject := protocol.OrderSubject(cluster)
	const sent = 4200 // more than the inbox holds; the share is less
	for range sent {
		if err := w.nc.PublishMsg(&nats.Msg{Subject: subject, Data: data, Header: w.signers[3].Header(subject, data)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The flood beyond member 3's share is dropped as it arrives.
	batontest.CheckFor(t, wait, func() error {
		if got := w.services[1].Stats().Dropped; got < 100 {
			return fmt.Errorf("member 1 dropped %d messages; want at least 100 of the flood", got)
		}
		return nil
	})
	w.publish(w.signers[4], subject, relays(4, 1, w.cert, relay{1, []uint64{4}, "attack"}, relay{2, []uint64{4}, "attack"}, relay{3, []uint64{4}, "attack"}))
	release()
	batontest.CheckFor(t, wait, func() error {
		if s := w.services[1].Stats(); s.Opened != 1 {
			return fmt.Errorf("member 1: %+v; want the leader's order opened", s)
		}
		return nil
	})
}
