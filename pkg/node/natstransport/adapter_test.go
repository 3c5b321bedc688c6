package natstransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Each member has its own bucket per queue: a burst, then the steady rate;
// another member's share, and the same member's other queue, are untouched.
func TestSendersAdmit(t *testing.T) {
	var s senders
	now := time.Unix(1000, 0)
	for i := range claimBurst {
		if !s.admit(1, true, 5, now) {
			t.Fatalf("claim %d of the burst refused", i+1)
		}
	}
	if s.admit(1, true, 5, now) {
		t.Errorf("claim beyond the burst admitted")
	}
	if !s.admit(2, true, 5, now) {
		t.Errorf("another member's claim refused")
	}
	if !s.admit(1, false, 5, now) {
		t.Errorf("the same member's other message refused")
	}
	later := now.Add(time.Second / claimRate)
	if !s.admit(1, true, 5, later) {
		t.Errorf("claim after a refill interval refused")
	}
	if s.admit(1, true, 5, later) {
		t.Errorf("second claim within one refill interval admitted")
	}
	if got, want := s.buckets[senderLane{from: 1, claim: false}].tokens, float64(otherBurstBase+otherBurstPerMember*5-1); got != want {
		t.Errorf("other messages' bucket after one: %v tokens, want %v", got, want)
	}
}

// TestStaleDisconnect checks that the close of a member's old connection,
// reported after its newer connection opened, does not count as the
// member going down.
func TestStaleDisconnect(t *testing.T) {
	c := &connections{latest: make(map[uint64]time.Time)}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	if c.down(2, t1, true) {
		t.Fatal("a connect reported down")
	}
	if c.down(2, t0, false) {
		t.Error("the old connection's close, after the newer connection opened, reported down")
	}
	if !c.down(2, t1, false) {
		t.Error("the current connection's close not reported down")
	}
	if !c.down(3, t0, false) {
		t.Error("the close of a member with no connect seen not reported down")
	}
	if c.down(2, t0, true) {
		t.Error("a connect reported down")
	}
	if !c.down(2, t1, false) {
		t.Error("an old connect lowered the newest known connection")
	}
}

// TestInboxReply lists the reply subjects a leader answers on.
func TestInboxReply(t *testing.T) {
	for subject, want := range map[string]bool{
		"_INBOX.abc":                          true,
		"_INBOX.abc.def":                      true,
		"_INBOX_app.abc":                      true,
		"_INBOX":                              false,
		"_INBOX.":                             false,
		"_INBOX..x":                           false,
		"_INBOX.*":                            false,
		"_INBOX.>":                            false,
		"_INBOXES.x":                          false,
		"election.c.leader":                   false,
		"election.c.node.1":                   false,
		"x._INBOX.abc":                        false,
		"_INBOX.a b":                          false,
		"":                                    false,
		"_INBOX." + string(make([]byte, 300)): false,
	} {
		if got := inboxReply(subject); got != want {
			t.Errorf("inboxReply(%q): got %v, want %v", subject, got, want)
		}
	}
}

// countingMeter counts what the adapter reports.
type countingMeter struct {
	mu       sync.Mutex
	received map[protocol.Type]int
	dropped  map[protocol.Reason]int
}

func newCountingMeter() *countingMeter {
	return &countingMeter{received: map[protocol.Type]int{}, dropped: map[protocol.Reason]int{}}
}

func (m *countingMeter) Received(t protocol.Type) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.received[t]++
}

func (m *countingMeter) Dropped(r protocol.Reason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropped[r]++
}
func (m *countingMeter) EventsDelivered()  {}
func (m *countingMeter) PeerDisconnected() {}
func (m *countingMeter) SignatureChecked() {}

// With the connection events off, the adapter does not subscribe to them;
// with them on, it subscribes to connects and disconnects.
func TestConnectionEventsSubscriptions(t *testing.T) {
	url := batontest.StartNATS(t)
	for _, on := range []bool{false, true} {
		nc := batontest.Connect(t, url)
		a, err := New(nc, Config{Cluster: "c", ID: 1, Members: []uint64{1, 2}, ConnectionEvents: on, Meter: newCountingMeter(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Connect(t.Context(), transport.NewLanes(8, newCountingMeter())); err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		subs := len(a.subs)
		a.mu.Unlock()
		if want := map[bool]int{false: 0, true: 2}[on]; subs != want {
			t.Errorf("connection events %v: %d subscriptions, want %d", on, subs, want)
		}
		a.Close()
	}
}

// Settle returns once what the server sent before it is on the lanes:
// messages published to the node just before, and still in its socket or
// its subscriptions' queues, are all there, in the lanes, when it returns.
func TestSettleDeliversWhatWasSent(t *testing.T) {
	url := batontest.StartNATS(t)
	const cluster, burst = "settle", 50 // within the sender's share (fair.go)
	members := []uint64{1, 2}
	nc := batontest.Connect(t, url, nats.NoEcho())
	a, err := New(nc, Config{Cluster: cluster, ID: 1, Members: members, MaxMessageAge: time.Minute, Meter: newCountingMeter(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	meter := newCountingMeter()
	lanes := transport.NewLanes(burst, meter)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := a.Connect(ctx, lanes); err != nil {
		t.Fatal(err)
	}
	if err := a.Open(transport.Self{Incarnation: 1, Started: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	sender := batontest.Connect(t, url)
	stamp := protocol.NewStamp(1)
	for i := range burst {
		m := protocol.Message{V: protocol.Version, Type: protocol.TypeElection, From: 2, Term: uint64(i + 1)}
		stamp.Apply(&m, time.Now())
		data, err := protocol.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := sender.Publish(protocol.SubjectFor(cluster, m), data); err != nil {
			t.Fatal(err)
		}
	}
	// The server has them all before the adapter's flush reaches it.
	if err := sender.Flush(); err != nil {
		t.Fatal(err)
	}
	a.Settle()
	if _, got := lanes.Len(); got != burst {
		meter.mu.Lock()
		defer meter.mu.Unlock()
		t.Errorf("after Settle: %d messages on the lanes, want %d (dropped: %v)", got, burst, meter.dropped)
	}
}

// open returns an adapter of member id of cluster on url, open, and its
// lanes.
func open(t *testing.T, url, cluster string, id uint64, members []uint64) (*Adapter, *transport.Lanes) {
	t.Helper()
	nc := batontest.Connect(t, url, nats.NoEcho())
	a, err := New(nc, Config{Cluster: cluster, ID: id, Members: members, MaxMessageAge: time.Minute,
		Meter: newCountingMeter(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	lanes := transport.NewLanes(64, newCountingMeter())
	if err := a.Connect(t.Context(), lanes); err != nil {
		t.Fatal(err)
	}
	if err := a.Open(transport.Self{Incarnation: 1, Started: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	return a, lanes
}

// The adapter answers queries with the announcement Lead gave it, while
// its lease holds, and nobody answers once Lead is given nil.
func TestLeadAnswersQueries(t *testing.T) {
	url := batontest.StartNATS(t)
	a, _ := open(t, url, "lead", 1, []uint64{1, 2})
	client := batontest.Connect(t, url)
	ask := func() (protocol.Announcement, error) {
		msg, err := client.Request(protocol.QuerySubject("lead"), nil, 200*time.Millisecond)
		if err != nil {
			return protocol.Announcement{}, err
		}
		return signing.ReadAnnouncement(nil, "lead", msg.Data, msg.Header)
	}
	if _, err := ask(); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("query before Lead: %v, want no responders", err)
	}
	an := &protocol.Announcement{Cluster: "lead", Leader: 1, Term: 3, Algorithm: protocol.Paxos, At: protocol.Timestamp{Time: time.Now().UTC()}}
	a.Lead(an, time.Time{})
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, err := ask(); err != nil || got.Leader != 1 || got.Term != 3 {
		t.Fatalf("query while leading: %+v, %v; want leader 1 at term 3", got, err)
	}
	a.Lead(an, time.Now().Add(-time.Millisecond)) // a lease that has ended
	if got, err := ask(); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("query after the lease ended: %+v, %v; want no answer", got, err)
	}
	a.Lead(nil, time.Time{})
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("query after Lead(nil): %v, want no responders", err)
	}
}

// A point-to-point message to a member that is not subscribed comes back
// as that member unreachable; one to a member that is arrives on its
// lanes, checked and decoded.
func TestSendPointToPoint(t *testing.T) {
	url := batontest.StartNATS(t)
	members := []uint64{1, 2, 3}
	a, aLanes := open(t, url, "p2p", 1, members)
	_, bLanes := open(t, url, "p2p", 2, members)
	stamp := protocol.NewStamp(1)
	for _, to := range []uint64{2, 3} {
		m := protocol.Message{V: protocol.Version, Type: protocol.TypeAnswer, From: 1, To: to, Term: 1}
		stamp.Apply(&m, time.Now())
		if err := a.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if in, _, err := bLanes.Wait(ctx); err != nil {
		t.Fatal("member 2 did not get the Answer")
	} else if in.Kind != transport.Message || in.Msg.From != 1 || in.Msg.To != 2 {
		t.Errorf("member 2 got %+v, want the Answer from 1", in)
	}
	if in, _, err := aLanes.Wait(ctx); err != nil {
		t.Fatal("member 1 did not hear that 3 is unreachable")
	} else if in.Kind != transport.Unreachable || in.Peer != 3 {
		t.Errorf("member 1 got %+v, want 3 unreachable", in)
	}
}

// lockedBuffer is a log destination safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// While the connection is not up, Connect says why: a member key that a
// server without nkey users refuses is named, not waited on in silence.
func TestConnectLogsWhyItWaits(t *testing.T) {
	url := batontest.StartNATS(t)
	signer := batontest.NewSigner(t, 1)
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.Nkey(signer.PublicKey(), signer.KeyPair().Sign))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var logs lockedBuffer
	a, err := New(nc, Config{Cluster: "c", ID: 1, Members: []uint64{1, 2}, Meter: newCountingMeter(),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Connect(ctx, transport.NewLanes(8, newCountingMeter())) }()
	batontest.CheckFor(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), nats.ErrNkeysNotSupported.Error()) {
			return fmt.Errorf("log does not name %q:\n%s", nats.ErrNkeysNotSupported, logs.String())
		}
		return nil
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Connect: got %v, want %v", err, context.Canceled)
	}
	if n := strings.Count(logs.String(), nats.ErrNkeysNotSupported.Error()); n != 1 {
		t.Errorf("the reason is logged %d times at info level and above, want once:\n%s", n, logs.String())
	}
}

// On a Shared connection, elections that settle at once share rounds of
// flush and barrier, and each still finds on its lanes what was sent to
// it before its call.
func TestSharedSettleDeliversWhatWasSent(t *testing.T) {
	url := batontest.StartNATS(t)
	const elections, burst = 8, 20
	members := []uint64{1, 2}
	nc := batontest.Connect(t, url, nats.NoEcho())
	shared, err := NewShared(nc, SharedConfig{Conn: "settle-0", ID: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.Start(); err != nil {
		t.Fatal(err)
	}
	defer shared.Stop()
	sender := batontest.Connect(t, url)
	stamp := protocol.NewStamp(1)
	adapters := make([]*Adapter, elections)
	lanes := make([]*transport.Lanes, elections)
	for i := range elections {
		cluster := fmt.Sprintf("settle-%d", i)
		a, err := New(nc, Config{Cluster: cluster, ID: 1, Members: members, MaxMessageAge: time.Minute, Meter: newCountingMeter(),
			Logger: slog.New(slog.DiscardHandler), Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		lanes[i] = transport.NewLanes(burst, newCountingMeter())
		if err := a.Connect(t.Context(), lanes[i]); err != nil {
			t.Fatal(err)
		}
		if err := a.Open(transport.Self{Incarnation: 1, Started: time.Now().Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
		adapters[i] = a
	}
	for round := range 3 {
		for i := range elections {
			for j := range burst / 3 {
				m := protocol.Message{V: protocol.Version, Type: protocol.TypeElection, From: 2, Term: uint64(round*burst + j + 1)}
				stamp.Apply(&m, time.Now())
				data, err := protocol.Encode(m)
				if err != nil {
					t.Fatal(err)
				}
				if err := sender.Publish(protocol.SubjectFor(fmt.Sprintf("settle-%d", i), m), data); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := sender.Flush(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, a := range adapters {
			wg.Go(a.Settle)
		}
		wg.Wait()
		for i, l := range lanes {
			if _, got := l.Len(); got != (round+1)*(burst/3) {
				t.Fatalf("round %d, election %d: %d messages on the lanes after Settle, want %d", round, i, got, (round+1)*(burst/3))
			}
		}
	}
	shared.settleMu.Lock()
	rounds := shared.rounds
	shared.settleMu.Unlock()
	if rounds > 3*elections {
		t.Errorf("%d rounds for %d settles", rounds, 3*elections)
	}
}

// Elections that enqueue at once, each message large, never make a batch
// larger than a reader takes: each that leaves reads whole, and every
// message is in one.
func TestSharedBatchesStayWithinBounds(t *testing.T) {
	url := batontest.StartNATS(t)
	nc := batontest.Connect(t, url, nats.NoEcho())
	reader := batontest.Connect(t, url)
	got := make(chan *nats.Msg, 1024)
	if _, err := reader.ChanSubscribe(protocol.BatchSubject("bounds-0"), got); err != nil {
		t.Fatal(err)
	}
	reader.Flush()
	shared, err := NewShared(nc, SharedConfig{Conn: "bounds-0", ID: 1, Batch: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("x"), 60<<10)
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for range each {
				shared.enqueue(fmt.Sprintf("bounds-%d", w), msg)
			}
		})
	}
	wg.Wait()
	shared.flush()
	nc.Flush()
	entries := 0
	for entries < writers*each {
		select {
		case m := <-got:
			if err := protocol.ReadBatch(m.Data, protocol.MaxCertifiedPayload, func(string, []byte) bool { entries++; return true }); err != nil {
				t.Fatalf("a batch of %d bytes does not read: %v", len(m.Data), err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d messages arrived in batches", entries, writers*each)
		}
	}
}
