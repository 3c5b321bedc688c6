package natstransport_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
)

// drainAnnouncements returns the highest term among the announcements
// received so far.
func drainAnnouncements(ch <-chan protocol.Announcement) uint64 {
	var top uint64
	for {
		select {
		case a := <-ch:
			top = max(top, a.Term)
		default:
			return top
		}
	}
}

// Terms survive restarts: a whole cluster stopped and started again from
// its data directories, whether it left cleanly or crashed, announces a
// term above every term announced before.
func TestTermsSurviveWholeClusterRestarts(t *testing.T) {
	for _, algorithm := range protocol.CrashAlgorithms {
		t.Run(string(algorithm), func(t *testing.T) {
			url := batontest.StartNATS(t)
			c := cluster{url: url, name: "restart", algorithm: algorithm, members: five}
			leaders := announcements(t, url, c.name, nil)
			nodes := c.startAll(t)
			term := awaitAgreement(t, nodes, 5)
			awaitAnnouncement(t, leaders, 5, term)

			for round, how := range []string{"clean", "crash"} {
				for _, n := range nodes {
					if how == "clean" {
						n.stop(t)
					} else {
						n.crash(t)
					}
				}
				before := max(term, drainAnnouncements(leaders))
				nodes = c.startAll(t)
				term = awaitAgreement(t, nodes, 5)
				awaitAnnouncement(t, leaders, 5, term)
				if term <= before {
					t.Fatalf("round %d (%s restart): agreed term %d, want above %d, the highest announced before", round, how, term, before)
				}
			}
		})
	}
}

// A node whose data is lost (a new container) learns the cluster's term
// from the last announcement kept by the stream, even when no other node
// is running, and claims above it.
func TestFreshNodeLearnsTermFromStream(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	batontest.LeaderStream(t, connect(t, url))
	c := cluster{url: url, name: "fresh", algorithm: protocol.Bully, members: []uint64{1, 2, 3}}
	leaders := announcements(t, url, c.name, nil)
	nodes := c.startAll(t)
	term := awaitAgreement(t, nodes, 3)
	awaitAnnouncement(t, leaders, 3, term)
	for _, n := range nodes {
		n.stop(t)
	}
	before := max(term, drainAnnouncements(leaders))

	c.data = nil // every node loses its data
	alone := map[uint64]*running{2: c.start(t, 2)}
	got := awaitAgreement(t, alone, 2)
	if got <= before {
		t.Fatalf("fresh node 2 alone: claimed term %d, want above %d, the last announced", got, before)
	}
}

// A node whose data is lost learns the term from the leader's answer to a
// query when there is no stream.
func TestFreshNodeLearnsTermFromLeader(t *testing.T) {
	url := batontest.StartNATS(t)
	c := cluster{url: url, name: "query", algorithm: protocol.Ring, members: []uint64{1, 2, 3}}
	nodes := c.startAll(t)
	term := awaitAgreement(t, nodes, 3)
	nodes[1].stop(t)
	delete(c.data, 1)
	nodes[1] = c.start(t, 1)
	if got := awaitAgreement(t, nodes, 3); got < term {
		t.Fatalf("after node 1 came back without data: term %d, want at least %d", got, term)
	}
	// Node 1 learned the term before it started: the state on its new
	// disk is at least the leader's term.
	data, err := os.ReadFile(filepath.Join(c.data[1], "state.json"))
	if err != nil || !strings.Contains(string(data), `"max_term":`) {
		t.Fatalf("node 1's state file: %s, %v", data, err)
	}
	var st election.HardState
	if err := json.Unmarshal(data, &st); err != nil || st.MaxTerm < term {
		t.Errorf("node 1's stored max term: got %d (%v), want at least %d", st.MaxTerm, err, term)
	}
}

// Only the leader answers queries, and only the leader subscribes to the
// query subject: while no node leads, a request fails at once with "no
// responders" instead of waiting its whole time-out, and
// leader.Current then answers from the stream.
func TestQueryWithoutLeaderFailsFast(t *testing.T) {
	srv := batontest.StartNATSServer(t, batontest.WithJetStream())
	url := srv.ClientURL()
	batontest.LeaderStream(t, connect(t, url))
	c := cluster{url: url, name: "q", algorithm: protocol.Bully, members: []uint64{1, 2, 3}}
	leaders := announcements(t, url, c.name, nil)
	nodes := c.startAll(t)
	term := awaitAgreement(t, nodes, 3)
	awaitAnnouncement(t, leaders, 3, term)
	client := connect(t, url)
	if a := query(t, client, c.name, nil); a.Leader != 3 {
		t.Fatalf("query: got %+v, want leader 3", a)
	}

	// During a failover: the new leader answers, or nobody does; the
	// request never waits for its time-out. (Until the server has noticed
	// that the crashed leader's connection is gone, it still routes
	// requests there: wait for that first.)
	clients := srv.NumClients()
	nodes[3].crash(t)
	batontest.CheckFor(t, 5*time.Second, func() error {
		if n := srv.NumClients(); n != clients-1 {
			return fmt.Errorf("server clients: got %d, want %d", n, clients-1)
		}
		return nil
	})
	for range 20 {
		_, err := client.Request(protocol.QuerySubject(c.name), nil, 5*time.Second)
		if err != nil && !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("query during the failover: got %v, want an answer or %v", err, nats.ErrNoResponders)
		}
	}
	for _, n := range nodes {
		n.stop(t)
	}
	if _, err := client.Request(protocol.QuerySubject(c.name), nil, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("query with every node gone: got %v, want %v", err, nats.ErrNoResponders)
	}
	a, err := leader.Current(t.Context(), client, c.name)
	if err != nil || a.Term < term {
		t.Fatalf("leader.Current with every node gone: got %+v, %v; want the stream's last announcement", a, err)
	}
}

// A member's announcement near the ceiling, kept by the stream, does not
// leave a node that starts without data with no term to claim: what the
// cluster says moves its terms no further than a member's messages may.
func TestFreshNodeBoundsLearnedTerm(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := connect(t, url)
	batontest.LeaderStream(t, nc)
	c := cluster{url: url, name: "ceiling", algorithm: protocol.Bully, members: []uint64{1, 2, 3}}
	data, err := protocol.EncodeAnnouncement(protocol.Announcement{Cluster: c.name, Leader: 1, Term: protocol.MaxTerm - 2,
		Algorithm: protocol.Bully, At: protocol.Timestamp{Time: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(protocol.LeaderSubject(c.name), data); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	alone := map[uint64]*running{2: c.start(t, 2)}
	if got := awaitAgreement(t, alone, 2); got > protocol.MaxTerm/2 {
		t.Errorf("fresh node 2 after an announcement at %d: term %d, want one far from the ceiling", protocol.MaxTerm-2, got)
	}
}
