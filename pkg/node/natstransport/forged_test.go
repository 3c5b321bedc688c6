package natstransport_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// TestForgedMessagesChangeNothing publishes garbage and forgeries on every
// election subject of a signed cluster: each is dropped and counted under
// its reason, and no node's leader or term moves.
func TestForgedMessagesChangeNothing(t *testing.T) {
	url := batontest.StartNATS(t)
	signers, keys := batontest.MemberKeys(t, 1, 2, 3)
	c := cluster{url: url, name: "signed", algorithm: protocol.Bully, members: []uint64{1, 2, 3}, signers: signers, keys: keys}
	leaders := announcements(t, url, c.name, stated(t, keys, c.algorithm))
	nodes := c.startAll(t)
	term := awaitAgreement(t, nodes, 3)
	// The leader signs its announcement, and its answers to queries.
	awaitAnnouncement(t, leaders, 3, term)
	if a := query(t, connect(t, url), c.name, stated(t, keys, c.algorithm)); a.Leader != 3 || a.Term != term {
		t.Fatalf("signed query: got %+v, want leader 3 term %d", a, term)
	}
	changes := make(map[uint64]float64)
	for id, n := range nodes {
		changes[id] = counter(t, n.Registry(), "election_leader_changes_total")
	}

	attacker := connect(t, url)
	publish := func(subject string, m any, signWith *signing.Signer) {
		t.Helper()
		var data []byte
		switch v := m.(type) {
		case string:
			data = []byte(v)
		default:
			var err error
			if data, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		if signWith != nil {
			msg.Header = signWith.Header(subject, data)
		}
		if err := attacker.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	// A takeover: a Coordinator from 1 with a huge term, on each subject
	// in the form that would pass routing there.
	takeover := func(subject string) protocol.Message {
		m := protocol.Message{V: protocol.Version, Type: protocol.TypeCoordinator, From: 1, Term: 1 << 40}
		for _, b := range protocol.BroadcastTypes {
			if subject == protocol.BroadcastSubject(c.name, b) {
				m.Type = b
			}
		}
		if strings.Contains(subject, ".node.") {
			m.Type, m.To = protocol.TypeStale, 3
			fmt.Sscanf(subject[strings.LastIndexByte(subject, '.')+1:], "%d", &m.To)
			m.From = 1
			if m.To == 1 {
				m.From = 2
			}
		}
		return m
	}
	subjects := protocol.BroadcastSubjects(c.name)
	for _, id := range c.members {
		subjects = append(subjects, protocol.InboxSubject(c.name, id))
	}
	for _, s := range subjects {
		good := takeover(s)
		stranger := good
		stranger.From = 99
		if stranger.To == 99 {
			stranger.To = 3
		}
		elsewhere := good
		elsewhere.Type, elsewhere.To = protocol.TypeHeartbeat, 0
		if s == protocol.BroadcastSubject(c.name, protocol.TypeHeartbeat) {
			elsewhere.Type = protocol.TypeCoordinator
		}
		own := signers[good.From]
		other := signers[3]
		if good.From == 3 {
			other = signers[2]
		}
		publish(s, `{"v":2,"type":"coordinator",`, own)                                  // malformed
		publish(s, `{"v":2,"type":"coordinator","from":"one","term":5}`, own)            // invalid_field
		publish(s, `{"v":2,"type":"surrender","from":1,"term":5}`, own)                  // unknown_type
		publish(s, `{"v":1,"type":"coordinator","from":1,"term":5}`, own)                // version
		publish(s, strings.Repeat(" ", protocol.MaxPayload)+`{"v":2}`, own)              // oversized
		publish(s, good, nil)                                                            // bad_signature: unsigned
		publish(s, good, batontest.NewSigner(t, good.From))                              // bad_signature: a stranger's key under the member's ID
		publish(s, good, other)                                                          // bad_signature: another member's key
		publish(s, stranger, batontest.NewSigner(t, stranger.From))                      // bad_signature: no member has the ID
		publish(s, elsewhere, own)                                                       // wrong_subject
		publish(protocol.BroadcastSubject("other", protocol.TypeCoordinator), good, own) // another cluster: not heard
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}

	// Every node hears the broadcast subjects and its own inbox.
	perSubject := map[protocol.Reason]float64{
		protocol.ReasonMalformed: 1, protocol.ReasonInvalidField: 1, protocol.ReasonUnknownType: 1,
		protocol.ReasonVersion: 1, protocol.ReasonOversized: 1, protocol.ReasonSignature: 4,
		protocol.ReasonWrongSubject: 1,
	}
	heard := float64(len(protocol.BroadcastSubjects(c.name)) + 1)
	for id, n := range nodes {
		batontest.CheckFor(t, 5*time.Second, func() error {
			for reason, k := range perSubject {
				if got := counter(t, n.Registry(), "election_messages_dropped_total", "reason", string(reason)); got != k*heard {
					return fmt.Errorf("node %d: dropped %s: got %v, want %v", id, reason, got, k*heard)
				}
			}
			return nil
		})
	}
	if got, err := agreement(nodes, 3); err != nil || got != term {
		t.Fatalf("after the forgeries: term %d, %v; want leader 3, term %d", got, err, term)
	}
	for id, n := range nodes {
		if got := counter(t, n.Registry(), "election_leader_changes_total"); got != changes[id] {
			t.Errorf("node %d: leader changes during the forgeries: got %v, want %v", id, got, changes[id])
		}
	}
}

// TestClustersAreIndependent runs two clusters with the same IDs on one
// server: a hand-over in one leaves the other alone.
func TestClustersAreIndependent(t *testing.T) {
	url := batontest.StartNATS(t)
	a := cluster{url: url, name: "a", algorithm: protocol.Ring, members: []uint64{1, 2, 3}}
	b := cluster{url: url, name: "b", algorithm: protocol.Bully, members: []uint64{1, 2, 3}}
	as := a.startAll(t)
	bs := b.startAll(t)
	termA := awaitAgreement(t, as, 3)
	awaitAgreement(t, bs, 3)
	changes := make(map[uint64]float64)
	for id, n := range as {
		changes[id] = counter(t, n.Registry(), "election_leader_changes_total")
	}

	if err := bs[3].stop(t); err != nil {
		t.Fatal(err)
	}
	delete(bs, 3)
	awaitAgreement(t, bs, 2)

	client := connect(t, url)
	if got := query(t, client, "a", nil); got.Leader != 3 || got.Term != termA || got.Cluster != "a" {
		t.Errorf("query a: got %+v, want leader 3 term %d", got, termA)
	}
	if got := query(t, client, "b", nil); got.Leader != 2 || got.Cluster != "b" {
		t.Errorf("query b: got %+v, want leader 2", got)
	}
	if got, err := agreement(as, 3); err != nil || got != termA {
		t.Fatalf("cluster a: term %d, %v; want leader 3, term %d", got, err, termA)
	}
	for id, n := range as {
		if got := counter(t, n.Registry(), "election_leader_changes_total"); got != changes[id] {
			t.Errorf("cluster a node %d: leader changes: got %v, want %v", id, got, changes[id])
		}
	}
}

// TestHTTP checks the node's endpoints against the contract.
func TestHTTP(t *testing.T) {
	url := batontest.StartNATS(t)
	nc := connect(t, url)
	n, err := natsnode.New(nc, natsnode.Config{
		Node: node.Config{
			Cluster:   "web",
			Algorithm: protocol.Bully,
			Election:  electionConfig(7, []uint64{3, 7}),
			DataDir:   t.TempDir(),
			Logger:    testLogger(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	if code, _ := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("healthz before Run: got %d, want 503", code)
	}
	if _, body := get("/status"); body != `{"id":7,"cluster":"web","algorithm":"bully","leader":null,"term":0,"state":"follower"}`+"\n" {
		t.Errorf("status before Run: got %s", body)
	}

	r := &running{Node: n, nc: nc, done: make(chan error, 1)}
	ctx, cancel := contextWithCancel()
	r.cancel = cancel
	go func() { r.done <- n.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	batontest.CheckFor(t, 5*time.Second, func() error {
		if code, body := get("/status"); !strings.Contains(body, `"leader":7,`) {
			return fmt.Errorf("status: %d %s", code, body)
		}
		return nil
	})
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("healthz while running: got %d, want 200", code)
	}
	var st map[string]any
	_, body := get("/status")
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st["state"] != "leader" || st["term"].(float64) < 1 || st["id"].(float64) != 7 {
		t.Errorf("status: got %s", body)
	}
	_, metrics := get("/metrics")
	for _, name := range []string{
		"election_elections_started_total", `election_messages_sent_total{type="coordinator"}`,
		`election_messages_received_total{type="answer"}`, `election_messages_dropped_total{reason="bad_signature"}`,
		"election_leader_changes_total", "election_leader_timeouts_total", "election_term", "election_is_leader 1",
	} {
		if !strings.Contains(metrics, name) {
			t.Errorf("metrics: no %s in\n%s", name, metrics)
		}
	}

	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("healthz after Run: got %d, want 503", code)
	}
}

// Terms are bounded: in an unsigned cluster, one otherwise valid Election
// with the largest 64-bit term is dropped as an invalid field and changes
// nothing; before the ceiling, such a message made the leader claim a term
// that wrapped round.
func TestTermAboveCeilingDropped(t *testing.T) {
	url := batontest.StartNATS(t)
	c := cluster{url: url, name: "ceiling", algorithm: protocol.Bully, members: []uint64{1, 2, 3}}
	nodes := c.startAll(t)
	term := awaitAgreement(t, nodes, 3)
	invalid := counters(t, nodes, "election_messages_dropped_total", "reason", string(protocol.ReasonInvalidField))
	attacker := connect(t, url)
	data := []byte(`{"v":2,"type":"election","from":1,"term":18446744073709551615,"inc":1,"n":1,"ts":` + fmt.Sprint(time.Now().UnixMilli()) + `}`)
	if err := attacker.Publish(protocol.BroadcastSubject(c.name, protocol.TypeElection), data); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{2, 3} { // node 1 does not hear its own name
		batontest.CheckFor(t, 5*time.Second, func() error {
			if got := counter(t, nodes[id].Registry(), "election_messages_dropped_total", "reason", string(protocol.ReasonInvalidField)); got != invalid[id]+1 {
				return fmt.Errorf("node %d: invalid_field drops: got %v, want %v", id, got, invalid[id]+1)
			}
			return nil
		})
	}
	if got, err := agreement(nodes, 3); err != nil || got != term {
		t.Fatalf("after the message: term %d, %v; want leader 3 with term %d", got, err, term)
	}
}

// A forged "no responders" status on a node's reply subject counts only if
// it names a message the node sent in the last second, and only once: an
// eavesdropper on the inboxes can make a node skip a live peer once per
// message it sees (the README says what that costs, and how NATS
// permissions close it), a status for any other subject is ignored, and
// the leader does not change.
func TestForgedNoRespondersIgnored(t *testing.T) {
	url := batontest.StartNATS(t)
	c := cluster{url: url, name: "replies", algorithm: protocol.Ring, members: []uint64{1, 2, 3}}
	// Capture a reply subject as an eavesdropper on the inboxes would.
	eve := connect(t, url)
	replySubjects := make(chan string, 64)
	if _, err := eve.Subscribe(protocol.Root+"."+c.name+"."+protocol.KindNode+".*", func(m *nats.Msg) {
		if m.Reply != "" {
			select {
			case replySubjects <- m.Reply:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	eve.Flush()
	nodes := c.startAll(t)
	term := awaitAgreement(t, nodes, 3)
	unreachable := counters(t, nodes, "election_peers_unreachable_total")
	var reply string
	select {
	case reply = <-replySubjects:
	case <-time.After(5 * time.Second):
		t.Fatal("no point-to-point message with a reply subject seen")
	}
	forged := &nats.Msg{Subject: reply, Header: nats.Header{}}
	forged.Header.Set("Status", "503")
	for range 3 {
		if err := eve.PublishMsg(forged); err != nil {
			t.Fatal(err)
		}
	}
	// A forged status for a reply subject never used.
	other := &nats.Msg{Subject: reply[:strings.LastIndexByte(reply, '.')] + ".999999", Header: forged.Header}
	if err := eve.PublishMsg(other); err != nil {
		t.Fatal(err)
	}
	if err := eve.Flush(); err != nil {
		t.Fatal(err)
	}
	// The node's own round trip to the server orders our check after the
	// forged statuses.
	for _, n := range nodes {
		if err := n.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var counted float64
	for id, v := range counters(t, nodes, "election_peers_unreachable_total") {
		counted += v - unreachable[id]
	}
	if counted > 1 {
		t.Errorf("forged statuses counted as unreachable peers: got %v, want at most 1 (three copies of one, one for no message)", counted)
	}
	if got, err := agreement(nodes, 3); err != nil || got != term {
		t.Fatalf("after the forged statuses: term %d, %v; want leader 3 with term %d", got, err, term)
	}
}
