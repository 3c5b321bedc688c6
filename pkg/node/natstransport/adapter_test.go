package natstransport

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
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
	if got := len(lanes.Others()); got != burst {
		meter.mu.Lock()
		defer meter.mu.Unlock()
		t.Errorf("after Settle: %d messages on the lanes, want %d (dropped: %v)", got, burst, meter.dropped)
	}
}
