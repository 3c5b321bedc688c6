package nodetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collector records what a subscription's handler receives.
type collector struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (c *collector) handle(m *nats.Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
}

func (c *collector) subjects() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.msgs {
		out = append(out, m.Subject)
	}
	return out
}

func TestWildcardsAndNoEcho(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork()
		a, b := net.Connect("a"), net.Connect("b")
		defer a.Close()
		defer b.Close()
		var star, tail, exact, own collector
		for _, s := range []struct {
			subject string
			c       *collector
			conn    *Conn
		}{{"x.*.z", &star, b}, {"x.>", &tail, b}, {"x.y", &exact, b}, {"x.>", &own, a}} {
			if _, err := s.conn.Subscribe(s.subject, 10, 1<<10, s.c.handle); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []string{"x.y.z", "x.y", "x", "x.a.b.c", "y.y.z"} {
			if err := a.Publish(&nats.Msg{Subject: s}); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Publish(&nats.Msg{Subject: "x.*"}); err == nil {
			t.Error("published on a wildcard subject")
		}
		synctest.Wait()
		check := func(name string, got []string, want ...string) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: got %v, want %v", name, got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: got %v, want %v", name, got, want)
				}
			}
		}
		check("x.*.z", star.subjects(), "x.y.z")
		check("x.>", tail.subjects(), "x.y.z", "x.y", "x.a.b.c")
		check("x.y", exact.subjects(), "x.y")
		check("own", own.subjects())
	})
}

func TestPendingLimitsDropAndCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork()
		a, b := net.Connect("a"), net.Connect("b")
		defer a.Close()
		defer b.Close()
		release := make(chan struct{})
		var got collector
		sub, err := b.Subscribe("s", 3, 1<<10, func(m *nats.Msg) {
			<-release
			got.handle(m)
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			a.Publish(&nats.Msg{Subject: "s", Data: []byte("m")})
			if i == 0 {
				synctest.Wait() // the handler holds the first
			}
		}
		synctest.Wait()
		// The handler holds one; three wait; six are dropped.
		if d, _ := sub.Dropped(); d != 6 {
			t.Errorf("dropped %d, want 6", d)
		}
		close(release)
		synctest.Wait()
		if n := len(got.subjects()); n != 4 {
			t.Errorf("handled %d, want 4", n)
		}
	})
}

func TestNoRespondersAndRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork()
		a, b := net.Connect("a"), net.Connect("b")
		defer a.Close()
		defer b.Close()
		ctx := context.Background()
		if _, err := a.Request(ctx, "svc", nil); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("request without responder: %v, want no responders", err)
		}
		var status collector
		inbox := a.NewInbox()
		if _, err := a.Subscribe(inbox+".>", 10, 1<<10, status.handle); err != nil {
			t.Fatal(err)
		}
		a.Publish(&nats.Msg{Subject: "nobody", Reply: inbox + ".1"})
		synctest.Wait()
		status.mu.Lock()
		if len(status.msgs) != 1 || status.msgs[0].Header.Get("Status") != "503" || status.msgs[0].Subject != inbox+".1" {
			t.Errorf("no-responders status: got %v", status.msgs)
		}
		status.mu.Unlock()
		if _, err := b.Subscribe("svc", 10, 1<<10, func(m *nats.Msg) {
			b.Publish(&nats.Msg{Subject: m.Reply, Data: append([]byte("re:"), m.Data...)})
		}); err != nil {
			t.Fatal(err)
		}
		reply, err := a.Request(ctx, "svc", []byte("q"))
		if err != nil || string(reply.Data) != "re:q" {
			t.Fatalf("request: %v, %v", reply, err)
		}
	})
}

func TestDrainDeliversPendingThenCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork()
		a, b := net.Connect("a"), net.Connect("b")
		defer a.Close()
		release := make(chan struct{})
		var got collector
		if _, err := b.Subscribe("s", 10, 1<<10, func(m *nats.Msg) {
			<-release
			got.handle(m)
		}); err != nil {
			t.Fatal(err)
		}
		closed, stop := b.StatusChanged(nats.CLOSED)
		defer stop()
		for range 3 {
			a.Publish(&nats.Msg{Subject: "s"})
		}
		if err := b.Drain(); err != nil {
			t.Fatal(err)
		}
		a.Publish(&nats.Msg{Subject: "s"}) // after Drain: not received
		synctest.Wait()
		if b.IsClosed() || !b.Draining() || !b.IsConnected() {
			t.Fatal("closed before its handler took what was pending")
		}
		close(release)
		if st := <-closed; st != nats.CLOSED {
			t.Fatalf("status %v", st)
		}
		if n := len(got.subjects()); n != 3 {
			t.Errorf("handled %d, want 3", n)
		}
		if err := b.Publish(&nats.Msg{Subject: "s"}); !errors.Is(err, nats.ErrConnectionClosed) {
			t.Errorf("publish after close: %v", err)
		}
		if err := b.Drain(); !errors.Is(err, nats.ErrConnectionClosed) {
			t.Errorf("drain after close: %v", err)
		}
	})
}

func TestHoldStallsPublishUntilRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork()
		a, b := net.Connect("a"), net.Connect("b")
		defer a.Close()
		defer b.Close()
		var got collector
		b.Subscribe("s", 10, 1<<10, got.handle)
		a.Hold()
		done := make(chan error)
		go func() { done <- a.Publish(&nats.Msg{Subject: "s"}) }()
		synctest.Wait()
		if n := len(got.subjects()); n != 0 {
			t.Fatalf("received %d while held", n)
		}
		a.Release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := len(got.subjects()); n != 1 {
			t.Fatalf("received %d after release, want 1", n)
		}
	})
}

func TestUnreadWaitsForFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := NewNetwork()
		a, b := net.Connect("a"), net.Connect("b")
		defer a.Close()
		defer b.Close()
		var got collector
		b.Subscribe("s.*", 10, 1<<10, got.handle)
		b.Unread()
		for _, subject := range []string{"s.1", "s.2"} {
			if err := a.Publish(&nats.Msg{Subject: subject}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n := len(got.subjects()); n != 0 {
			t.Fatalf("received %d while unread", n)
		}
		if err := b.Flush(time.Second); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := got.subjects(); len(s) != 2 || s[0] != "s.1" || s[1] != "s.2" {
			t.Fatalf("after the flush: %v, want [s.1 s.2]", s)
		}
		a.Publish(&nats.Msg{Subject: "s.3"}) // still unread until Read
		synctest.Wait()
		if n := len(got.subjects()); n != 2 {
			t.Fatalf("received %d before Read, want 2", n)
		}
		b.Read()
		synctest.Wait()
		if n := len(got.subjects()); n != 3 {
			t.Fatalf("received %d after Read, want 3", n)
		}
	})
}
