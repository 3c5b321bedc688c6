package natstransport_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// TestQueryAnsweredOnlyToInboxes: a request whose reply subject is the
// cluster's leader subject gets no answer there (before, the leader
// published its announcement again on the leader subject, with its own
// rights and signature, for anyone who asked); it is dropped and counted,
// and a request from an inbox is still answered.
func TestQueryAnsweredOnlyToInboxes(t *testing.T) {
	url := batontest.StartNATS(t)
	c := cluster{url: url, name: "replies", algorithm: protocol.Bully, members: []uint64{1}}
	leaders := announcements(t, url, c.name, nil)
	nodes := c.startAll(t)
	term := awaitAgreement(t, nodes, 1)
	awaitAnnouncement(t, leaders, 1, term)

	client := connect(t, url)
	watch := make(chan *nats.Msg, 16)
	if _, err := client.ChanSubscribe(protocol.LeaderSubject(c.name), watch); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := client.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	for _, reply := range []string{protocol.LeaderSubject(c.name), "election." + c.name + ".node.1", "app.events"} {
		if err := client.PublishMsg(&nats.Msg{Subject: protocol.QuerySubject(c.name), Reply: reply}); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	// The node takes the queries in order, and the server passes on what
	// it publishes in order: once the answer to a request from an inbox is
	// here, an answer on the leader subject would be too.
	if a := query(t, client, c.name, nil); a.Leader != 1 || a.Term != term {
		t.Fatalf("query from an inbox: got %+v, want leader 1 term %d", a, term)
	}
	select {
	case m := <-watch:
		t.Fatalf("an answer to a query was published on the leader subject: %q", m.Data)
	default:
	}
	if got := counter(t, nodes[1].Registry(), "election_messages_dropped_total", "reason", string(node.ReasonReplyNotInbox)); got != 3 {
		t.Errorf("queries dropped for their reply subject: got %v, want 3", got)
	}
}
