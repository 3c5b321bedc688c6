package leader_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait of these tests.
const waitTimeout = 10 * time.Second

var t0 = time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)

func ann(leader, term uint64) protocol.Announcement {
	return protocol.Announcement{Cluster: "default", Leader: leader, Term: term, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: t0.Add(time.Duration(term) * time.Second)}}
}

func publish(t *testing.T, nc *nats.Conn, a protocol.Announcement) {
	t.Helper()
	b, _ := protocol.EncodeAnnouncement(a)
	if err := nc.Publish(protocol.LeaderSubject(a.Cluster), b); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// respond answers leader queries of cluster "default" with a, as the
// leading node does.
func respond(t *testing.T, nc *nats.Conn, a protocol.Announcement) {
	t.Helper()
	b, _ := protocol.EncodeAnnouncement(a)
	sub, err := nc.Subscribe(protocol.QuerySubject("default"), func(m *nats.Msg) { m.Respond(b) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// respondMsg answers every query of cluster "default" with reply's data and
// headers.
func respondMsg(t *testing.T, nc *nats.Conn, reply *nats.Msg) {
	t.Helper()
	sub, err := nc.Subscribe(protocol.QuerySubject("default"), func(m *nats.Msg) {
		m.RespondMsg(&nats.Msg{Data: reply.Data, Header: reply.Header})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// watcher runs leader.Watch in a goroutine and hands over what it yields.
type watcher struct {
	got  chan protocol.Announcement
	stop func()
}

func watch(t *testing.T, nc *nats.Conn, cluster string, opts ...leader.Option) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{got: make(chan protocol.Announcement, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for a, err := range leader.Watch(ctx, nc, cluster, opts...) {
			if err != nil {
				t.Errorf("Watch: %v", err)
				return
			}
			select {
			case w.got <- a:
			case <-ctx.Done():
				return
			}
		}
	}()
	w.stop = func() { cancel(); <-done }
	t.Cleanup(w.stop)
	return w
}

func (w *watcher) next(t *testing.T) protocol.Announcement {
	t.Helper()
	select {
	case a := <-w.got:
		return a
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for a leader")
		return protocol.Announcement{}
	}
}

func TestWatchStartsWithTheCurrentLeaderThenFollowsChanges(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	node := batontest.Connect(t, url)
	respond(t, node, ann(3, 4))

	w := watch(t, batontest.Connect(t, url), "default", leader.WithoutStream())
	if got := w.next(t); !reflect.DeepEqual(got, ann(3, 4)) {
		t.Fatalf("first leader = %+v, want the answer to the query %+v", got, ann(3, 4))
	}
	publish(t, node, ann(5, 6))
	publish(t, node, ann(4, 5)) // older than term 6: never yielded
	publish(t, node, ann(2, 7))
	// A slow consumer may skip term 6; it never goes back.
	last := uint64(4)
	for last != 7 {
		got := w.next(t)
		if got.Term <= last || got.Term == 5 {
			t.Fatalf("leader after term %d = %+v, want a newer term than 4's successors seen", last, got)
		}
		last = got.Term
	}
}

func TestCurrentFallsBackToTheStream(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	js := batontest.LeaderStream(t, nc)
	if _, err := leader.Current(ctx, nc, "default"); !errors.Is(err, leader.ErrNoLeader) {
		t.Fatalf("Current before any announcement = %v, want leader.ErrNoLeader", err)
	}
	for _, a := range []protocol.Announcement{ann(3, 1), ann(5, 2)} {
		if _, err := js.Publish(ctx, protocol.LeaderSubject("default"), mustEncode(a)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := leader.Current(ctx, nc, "default")
	if err != nil || !reflect.DeepEqual(got, ann(5, 2)) {
		t.Fatalf("Current = %+v, %v; want the stream's last %+v", got, err, ann(5, 2))
	}
	if _, err := leader.Current(ctx, nc, "default", leader.WithoutStream()); !errors.Is(err, leader.ErrNoLeader) {
		t.Errorf("Current without the stream = %v, want leader.ErrNoLeader", err)
	}
	// A watcher that starts long after the election still gets it.
	w := watch(t, nc, "default")
	if got := w.next(t); !reflect.DeepEqual(got, ann(5, 2)) {
		t.Errorf("Watch first = %+v, want %+v", got, ann(5, 2))
	}
	if _, err := leader.Current(ctx, nc, "no.such"); err == nil {
		t.Error("Current accepted an invalid cluster name")
	}
}

// signed returns a as a message on its leader subject, signed by s
// (unsigned if s is nil).
func signed(a protocol.Announcement, s *signing.Signer) *nats.Msg {
	data := mustEncode(a)
	m := &nats.Msg{Subject: protocol.LeaderSubject(a.Cluster), Data: data, Header: nats.Header{}}
	if s != nil {
		m.Header = s.SignAnnouncement(a.Cluster, data)
	}
	return m
}

// With leader.WithKeys, announcements not signed by the leader they name
// are ignored on every path: the query's answer, the stream and the leader
// subject. The application holds public keys only.
func TestKeysRejectForgedAnnouncements(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	signers, keys := batontest.MemberKeys(t, 5, 6, 8, 9)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	js := batontest.LeaderStream(t, nc)
	if _, err := js.PublishMsg(ctx, signed(ann(5, 2), signers[5])); err != nil {
		t.Fatal(err)
	}
	// A forger answers queries with a claim for 9 signed by member 8.
	respondMsg(t, batontest.Connect(t, url), signed(ann(9, 100), signers[8]))

	if got, err := leader.Current(ctx, nc, "default"); err != nil || !reflect.DeepEqual(got, ann(9, 100)) {
		t.Fatalf("Current without keys = %+v, %v; want the forger's answer %+v", got, err, ann(9, 100))
	}
	got, err := leader.Current(ctx, nc, "default", leader.WithKeys(keys), leader.WithAlgorithm(protocol.Bully))
	if err != nil || !reflect.DeepEqual(got, ann(5, 2)) {
		t.Fatalf("Current with keys = %+v, %v; want the stream's signed %+v", got, err, ann(5, 2))
	}

	var mu sync.Mutex
	var rejected []error
	w := watch(t, nc, "default", leader.WithKeys(keys), leader.WithAlgorithm(protocol.Bully), leader.WithRejected(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		rejected = append(rejected, err)
	}))
	if got := w.next(t); !reflect.DeepEqual(got, ann(5, 2)) {
		t.Fatalf("Watch first = %+v, want %+v", got, ann(5, 2))
	}
	forger := batontest.Connect(t, url)
	for _, m := range []*nats.Msg{
		signed(ann(8, 50), nil),                       // unsigned
		signed(ann(8, 51), signers[6]),                // another member's key
		signed(ann(8, 52), batontest.NewSigner(t, 8)), // a stranger's key claiming 8
		signed(ann(6, 7), signers[6]),
	} {
		if err := forger.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.next(t); !reflect.DeepEqual(got, ann(6, 7)) {
		t.Errorf("Watch after the forgeries = %+v, want the signed %+v", got, ann(6, 7))
	}
	// The forged query answer and the three forged announcements were
	// reported.
	mu.Lock()
	defer mu.Unlock()
	signatures := 0
	for _, err := range rejected {
		if protocol.ReasonOf(err) == protocol.ReasonSignature {
			signatures++
		}
	}
	if signatures < 4 {
		t.Errorf("rejections reported to WithRejected: %v, want the 4 forgeries (bad signature)", rejected)
	}
}

func TestFence(t *testing.T) {
	var f leader.Fence
	for _, tc := range []struct {
		term uint64
		ok   bool
	}{{3, true}, {3, true}, {5, true}, {4, false}, {6, true}} {
		err := f.Admit(tc.term)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, leader.ErrStaleTerm)) {
			t.Errorf("Admit(%d) = %v, want ok %v", tc.term, err, tc.ok)
		}
	}
	if f.Term() != 6 {
		t.Errorf("Term = %d, want 6", f.Term())
	}
	if !leader.Newer(ann(1, 9), ann(9, 8)) || leader.Newer(ann(9, 8), ann(1, 9)) {
		t.Error("Newer must compare terms only")
	}
}

func mustEncode(a protocol.Announcement) []byte {
	b, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		panic(err)
	}
	return b
}

// Watch ends with ErrConnectionClosed when its connection closes, rather
// than going quiet as if the leader never changed; on a connection already
// closed it fails at once.
func TestWatchEndsWhenTheConnectionCloses(t *testing.T) {
	url := batontest.StartNATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for _, err := range leader.Watch(context.Background(), nc, "default", leader.WithoutStream()) {
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// Close once Watch has subscribed: the server then counts its
	// subscription.
	batontest.CheckFor(t, 5*time.Second, func() error {
		if nc.NumSubscriptions() == 0 {
			return errors.New("not subscribed yet")
		}
		return nil
	})
	nc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, leader.ErrConnectionClosed) {
			t.Fatalf("Watch after the connection closed: %v, want ErrConnectionClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not end after its connection closed")
	}
	var errs []error
	for _, err := range leader.Watch(context.Background(), nc, "default") {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], leader.ErrConnectionClosed) {
		t.Fatalf("Watch on a closed connection yielded %v, want ErrConnectionClosed once", errs)
	}
}

// RunWhileLeader runs the work while the given node is the announced leader, stops
// it for a successor, starts it again with the new term when the node
// leads again, and stops it and returns ErrConnectionClosed when the
// connection closes.
func TestRunWhileLeaderBesideANode(t *testing.T) {
	url := batontest.StartNATS(t)
	node := batontest.Connect(t, url)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan uint64, 8)
	ended := make(chan uint64, 8)
	done := make(chan error, 1)
	go func() {
		done <- leader.RunWhileLeader(context.Background(), nc, "default", 3, func(ctx context.Context, term uint64) {
			started <- term
			<-ctx.Done()
			ended <- term
		}, leader.WithoutStream())
	}()
	await := func(ch <-chan uint64, what string) uint64 {
		t.Helper()
		select {
		case term := <-ch:
			return term
		case <-time.After(waitTimeout):
			t.Fatalf("%s: nothing", what)
			return 0
		}
	}
	batontest.CheckFor(t, waitTimeout, func() error {
		if nc.NumSubscriptions() == 0 {
			return errors.New("RunWhileLeader not subscribed yet")
		}
		return nil
	})
	publish(t, node, ann(3, 5))
	if term := await(started, "work for term 5"); term != 5 {
		t.Fatalf("work started with term %d, want 5", term)
	}
	publish(t, node, ann(4, 6))
	if term := await(ended, "work ended by leader 4"); term != 5 {
		t.Fatalf("work of term %d ended, want 5", term)
	}
	publish(t, node, ann(3, 7))
	if term := await(started, "work for term 7"); term != 7 {
		t.Fatalf("work started with term %d, want 7", term)
	}
	nc.Close()
	if term := await(ended, "work ended by the closed connection"); term != 7 {
		t.Fatalf("work of term %d ended, want 7", term)
	}
	select {
	case err := <-done:
		if !errors.Is(err, leader.ErrConnectionClosed) {
			t.Fatalf("RunWhileLeader: %v, want ErrConnectionClosed", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("RunWhileLeader did not return")
	}
}
