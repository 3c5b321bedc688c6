package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The work runs while node 3 leads and stops when node 5 takes over.
func TestWorkOnlyWhileLeading(t *testing.T) {
	nc := batontest.Connect(t, batontest.StartNATS(t))

	ann := func(leader, term uint64) []byte {
		b, _ := protocol.EncodeAnnouncement(protocol.Announcement{Cluster: "default", Leader: leader, Term: term, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: time.Now()}})
		return b
	}
	// Node 3 leads with term 1 and answers the leader query, as a real
	// node does.
	sub, err := nc.Subscribe(protocol.QuerySubject("default"), func(m *nats.Msg) { m.Respond(ann(3, 1)) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	started, stopped := make(chan uint64, 4), make(chan uint64, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nc, "default", 3, func(ctx context.Context, term uint64) {
			started <- term
			<-ctx.Done()
			stopped <- term
		})
	}()
	defer func() { cancel(); <-done }()

	await := func(ch chan uint64, what string) uint64 {
		t.Helper()
		select {
		case term := <-ch:
			return term
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for the work to %s", what)
			return 0
		}
	}
	if got := await(started, "start"); got != 1 {
		t.Fatalf("work started with term %d, want 1", got)
	}
	// The watcher subscribed before it asked, so it sees the takeover.
	nc.Publish(protocol.LeaderSubject("default"), ann(5, 2))
	if got := await(stopped, "stop"); got != 1 {
		t.Fatalf("work of term %d stopped, want term 1", got)
	}
	select {
	case term := <-started:
		t.Errorf("work restarted with term %d while node 5 leads", term)
	default:
	}
}
