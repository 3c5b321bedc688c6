package observer

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
	"github.com/baton-election/baton/services/observer/internal/history"
)

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	g.Write(&m)
	return m.GetGauge().GetValue()
}

// presenceOf is a presence broadcast of member id.
func presenceOf(id uint64) protocol.Message {
	return protocol.Message{Type: protocol.TypePresence, From: id, Term: 1}
}

// send publishes m on its subject in cluster, signed by s (nil:
// unsigned), and flushes.
func send(t *testing.T, nc *nats.Conn, cluster string, m protocol.Message, s *signing.Signer) {
	t.Helper()
	b, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: protocol.SubjectFor(cluster, m), Data: b}
	if s != nil {
		msg.Header = s.Header(msg.Subject, b)
	}
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// keepHeard publishes m every 50 ms, from its own goroutine, until the
// returned stop is called (and the test's end calls it at the latest).
func keepHeard(t *testing.T, nc *nats.Conn, cluster string, m protocol.Message) (stop func()) {
	t.Helper()
	b, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	subject := protocol.SubjectFor(cluster, m)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			nc.Publish(subject, b)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// membersOf returns the IDs GET …/members lists: none while the cluster
// is unknown.
func (r *running) membersOf(t *testing.T, cluster string) []uint64 {
	t.Helper()
	resp, err := http.Get("http://" + r.Addr() + "/api/clusters/" + cluster + "/members")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	var members []memberJSON
	if err := json.NewDecoder(resp.Body).Decode(&members); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET members of %s = %s, %v", cluster, resp.Status, err)
	}
	var ids []uint64
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	return ids
}

// eventsOf renders the member events GET …/membership lists as
// "member event reason": none while the cluster is unknown.
func (r *running) eventsOf(t *testing.T, cluster string) []string {
	t.Helper()
	resp, err := http.Get("http://" + r.Addr() + "/api/clusters/" + cluster + "/membership")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	var events []memberEventJSON
	if err := json.NewDecoder(resp.Body).Decode(&events); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET membership of %s = %s, %v", cluster, resp.Status, err)
	}
	return renderEvents(events)
}

func renderEvents(events []memberEventJSON) []string {
	var out []string
	for _, e := range events {
		out = append(out, strings.Join([]string{strconv.FormatUint(e.Member, 10), string(e.Event), e.Reason}, " "))
	}
	return out
}

// GET …/members lists the members present now, by ID, with when each
// joined and was last heard in UTC with nine fractional digits; [] for a
// cluster known without members; 404 for one never seen.
func TestMembersEndpoint(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0})
	a.apply(t, "static", history.Record{Kind: history.KindLeader, Term: 1, Leader: 3, Algorithm: protocol.Bully, At: ts(0)})
	a.membersMu.Lock()
	for _, id := range []uint64{9, 2, 7} {
		a.members.Presence("dyn", id, t0.Add(time.Duration(id)*time.Millisecond))
	}
	a.members.Heard("dyn", 7, t0.Add(1500*time.Millisecond))
	a.membersMu.Unlock()

	resp, body := a.do(t, http.MethodGet, "/api/clusters/dyn/members")
	want := `[{"id":2,"since":"2026-11-21T22:00:00.002000000Z","last_seen":"2026-11-21T22:00:00.002000000Z"},` +
		`{"id":7,"since":"2026-11-21T22:00:00.007000000Z","last_seen":"2026-11-21T22:00:01.500000000Z"},` +
		`{"id":9,"since":"2026-11-21T22:00:00.009000000Z","last_seen":"2026-11-21T22:00:00.009000000Z"}]`
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET dyn members = %d %s\nwant 200 %s", resp.StatusCode, body, want)
	}
	if resp, body := a.do(t, http.MethodGet, "/api/clusters/static/members"); resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "[]" {
		t.Errorf("GET members of a static cluster = %d %s, want 200 []", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{"/api/clusters/never/members", 404, `unknown cluster \"never\"`},
		{"/api/clusters/dyn/members?last=1", 400, "unknown query parameter"},
		{"/api/clusters/a.b/members", 400, "invalid cluster name"},
	} {
		resp, body := a.do(t, http.MethodGet, tc.path)
		if resp.StatusCode != tc.code || !strings.Contains(body, `"error":`) || !strings.Contains(body, tc.says) {
			t.Errorf("GET %s = %d %s, want %d and a JSON error saying %q", tc.path, resp.StatusCode, body, tc.code, tc.says)
		}
	}
}

// memberRecs are member events of cluster dyn: seq 1 to 6, a second
// apart from t0.
func memberRecs() []history.Record {
	rec := func(s int, member uint64, event history.MemberEventKind, reason string) history.Record {
		return history.Record{Kind: history.KindMember, Member: member, Event: event, Reason: reason, At: ts(s * 1000)}
	}
	return []history.Record{
		rec(1, 7, history.MemberJoined, "presence"),
		rec(2, 8, history.MemberJoined, "presence"),
		rec(3, 8, history.MemberLeft, "resign"),
		rec(4, 9, history.MemberJoined, "presence"),
		rec(5, 9, history.MemberLeft, "disconnected"),
		rec(6, 7, history.MemberLeft, "silent"),
	}
}

// GET …/membership lists the joins and leaves, oldest first, with the
// paging and filters of the other lists placed by seq.
func TestMembershipEndpoint(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0.Add(10 * time.Second)})
	a.apply(t, "dyn", memberRecs()...)
	a.apply(t, "static", history.Record{Kind: history.KindLeader, Term: 1, Leader: 3, Algorithm: protocol.Bully, At: ts(0)})

	_, body := a.do(t, http.MethodGet, "/api/clusters/dyn/membership?limit=1")
	if want := `[{"member":7,"event":"joined","reason":"presence","at":"2026-11-21T22:00:01.000000000Z","seq":1}]`; strings.TrimSpace(body) != want {
		t.Errorf("the first member event: %s\nwant %s", body, want)
	}
	all, link, _ := a.items(t, "/api/clusters/dyn/membership")
	if len(all) != 6 || link != "" {
		t.Fatalf("the whole list: %d items, Link %q; want 6 and none", len(all), link)
	}
	// Forwards and backwards by every page size, the Links visit each
	// event once, in order.
	for limit := 1; limit <= 7; limit++ {
		for _, start := range []string{"limit", "last"} {
			var got []string
			next := "/api/clusters/dyn/membership?" + start + "=" + strconv.Itoa(limit)
			for pages := 0; next != ""; pages++ {
				if pages > len(all) {
					t.Fatalf("%s: more pages than items", next)
				}
				page, link, rel := a.items(t, next)
				if len(page) == 0 || len(page) > limit || rel != "" && rel != map[string]string{"limit": "next", "last": "prev"}[start] {
					t.Fatalf("%s: %d items, rel %q", next, len(page), rel)
				}
				if start == "limit" {
					got = append(got, page...)
				} else {
					got = append(page, got...)
				}
				next = link
			}
			if !slices.Equal(got, all) {
				t.Errorf("by %s=%d: %v, want %v", start, limit, got, all)
			}
		}
	}
	_, link, rel := a.items(t, "/api/clusters/dyn/membership?since=2026-11-21T22:00:02Z&limit=2")
	u, err := url.Parse(link)
	if err != nil || rel != "next" || u.Path != "/api/clusters/dyn/membership" || u.Query().Get("after_seq") != "3" || u.Query().Get("since") == "" {
		t.Errorf("Link %q rel %q, want the next page after seq 3, since kept", link, rel)
	}
	for _, tc := range []struct {
		query string
		want  int
	}{{"after_seq=4", 2}, {"before_seq=3", 2}, {"after_seq=1&before_seq=6", 4}, {"until=2026-11-21T22:00:02Z", 2}, {"limit=2&before_seq=6", 2}} {
		if page, _, _ := a.items(t, "/api/clusters/dyn/membership?"+tc.query); len(page) != tc.want {
			t.Errorf("membership?%s: %d items, want %d", tc.query, len(page), tc.want)
		}
	}
	if resp, body := a.do(t, http.MethodGet, "/api/clusters/static/membership"); resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "[]" {
		t.Errorf("GET membership of a static cluster = %d %s, want 200 []", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		query string
		code  int
		says  string
	}{
		{"?after_seq=x", 400, "after_seq: \\\"x\\\" is not a sequence number"},
		{"?after_term=1", 400, "unknown query parameter"},
		{"?limit=1&last=1", 400, "give either limit or last"},
	} {
		resp, body := a.do(t, http.MethodGet, "/api/clusters/dyn/membership"+tc.query)
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("GET membership%s = %d %s, want %d saying %q", tc.query, resp.StatusCode, body, tc.code, tc.says)
		}
	}
	if resp, _ := a.do(t, http.MethodGet, "/api/clusters/never/membership"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET membership of an unknown cluster = %d, want 404", resp.StatusCode)
	}
}

// The page shows, for a cluster with members, those present now with the
// leader marked, and the last joins and leaves; nothing of it for a
// static cluster.
func TestMembersOnThePage(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0.Add(10 * time.Second)})
	a.apply(t, "dyn", history.Record{Kind: history.KindLeader, Term: 4, Leader: 9, Algorithm: protocol.Bully, At: ts(0)})
	a.apply(t, "dyn", memberRecs()...)
	a.apply(t, "static", history.Record{Kind: history.KindLeader, Term: 1, Leader: 3, Algorithm: protocol.Bully, At: ts(0)})
	a.membersMu.Lock()
	a.members.Presence("dyn", 9, t0)
	a.members.Presence("dyn", 4, t0)
	a.membersMu.Unlock()
	_, page := a.do(t, http.MethodGet, "/")
	dyn := page[strings.Index(page, `id="cluster-dyn"`):strings.Index(page, `id="cluster-static"`)]
	for _, want := range []string{"2 present:", `class="member" data-member="4"`, `class="member leader" data-member="9"`, "★ node 9",
		`<tr class="left" data-seq="6">`, `<td>silent</td>`, `<tr class="joined" data-seq="1">`, `href="/api/clusters/dyn/membership"`} {
		if !strings.Contains(dyn, want) {
			t.Errorf("the section of dyn lacks %q", want)
		}
	}
	if strings.Index(dyn, `data-seq="6"`) > strings.Index(dyn, `data-seq="1"`) {
		t.Error("the joins and leaves are not newest first")
	}
	if static := page[strings.Index(page, `id="cluster-static"`):]; strings.Contains(static, `class="members"`) {
		t.Error("the static cluster shows members")
	}
}

// Over NATS: members join with their presence, stay while any broadcast
// of theirs is heard, and leave by resign, by a closed connection (the
// server's event) and by silence; the endpoints, the metrics and the
// history say so.
func TestMembershipOverNATS(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithAccounts(), batontest.WithJetStream())
	cfg := testConfig(url, t.TempDir())
	cfg.NATS = natsconn.Config{URL: url, User: natsconf.ObserverUser, Password: natsconf.LocalPasswords.Observer}
	cfg.MemberTimeout = time.Second
	o := startObserver(t, cfg, nil)
	nodeUser := nats.UserInfo(natsconf.NodeUser, natsconf.LocalPasswords.Node)
	nc := batontest.Connect(t, url, nodeUser, nats.Name("members 1 to 3"))
	page := openEvents(t, o, nil, "/events", nil)

	for _, id := range []uint64{3, 1, 2} {
		send(t, nc, "dyn", presenceOf(id), nil)
	}
	o.waitFor(t, "members 1, 2 and 3", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{1, 2, 3}) })
	// Member 1 goes on with its presence, member 3 with other broadcasts
	// (elections), which refresh it too.
	stop1 := keepHeard(t, nc, "dyn", presenceOf(1))
	stop3 := keepHeard(t, nc, "dyn", protocol.Message{Type: protocol.TypeElection, From: 3, Term: 1})
	// The page updates itself: its stream brings the section of dyn with
	// the three members.
	for {
		e := page.event(t)
		if e.name == "cluster" && strings.Contains(e.data, `id="cluster-dyn"`) && strings.Contains(e.data, "3 present:") {
			break
		}
	}

	send(t, nc, "dyn", protocol.Message{Type: protocol.TypeResign, From: 2, Term: 1}, nil)
	o.waitFor(t, "member 2 to resign", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{1, 3}) })
	member4 := batontest.Connect(t, url, batontest.AsNode("dyn", 4)...)
	send(t, member4, "dyn", presenceOf(4), nil)
	o.waitFor(t, "member 4", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{1, 3, 4}) })
	member4.Close()
	o.waitFor(t, "member 4's connection to close", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{1, 3}) })

	stop1()
	o.waitFor(t, "member 1 to fall silent", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{3}) })
	if o.liveCount(protocol.KindElection) == 0 {
		t.Error("no election broadcast counted")
	}
	stop3()
	o.waitFor(t, "member 3 to fall silent", func() bool { return len(o.membersOf(t, "dyn")) == 0 })

	// The members present change before the history is written: wait
	// for the last leave there.
	o.waitFor(t, "the last leave recorded", func() bool { return len(o.eventsOf(t, "dyn")) == 8 })
	want := []string{"3 joined presence", "1 joined presence", "2 joined presence", "2 left resign",
		"4 joined presence", "4 left disconnected", "1 left silent", "3 left silent"}
	if got := o.eventsOf(t, "dyn"); !slices.Equal(got, want) {
		t.Errorf("membership %v, want %v", got, want)
	}
	for _, c := range []struct {
		event, reason string
		want          float64
	}{{"joined", "presence", 4}, {"left", "resign", 1}, {"left", "disconnected", 1}, {"left", "silent", 2}} {
		if got := counter(o.metrics.memberChanges.WithLabelValues("dyn", c.event, c.reason)); got != c.want {
			t.Errorf("observer_membership_changes_total{event=%q,reason=%q} = %v, want %v", c.event, c.reason, got, c.want)
		}
	}
	o.waitFor(t, "observer_cluster_members to follow", func() bool { return gaugeValue(o.metrics.members.WithLabelValues("dyn")) == 0 })
	var clusters []string
	o.get(t, "/api/clusters", &clusters)
	if !slices.Contains(clusters, "dyn") {
		t.Errorf("clusters %v lack dyn, whose joins and leaves are recorded", clusters)
	}
}

// With member keys, only a presence signed by the member it names makes
// a member, only its signed resign makes it leave, and only the close of
// a connection authenticated with its key counts: a forger can neither
// add, nor remove, a member.
func TestSignedMembership(t *testing.T) {
	signers, keys := batontest.MemberKeys(t, 1, 2)
	url := batontest.StartNATS(t, batontest.WithAccounts(), batontest.WithMemberUsers(keys), batontest.WithJetStream())
	cfg := testConfig(url, t.TempDir())
	cfg.NATS = natsconn.Config{URL: url, User: natsconf.ObserverUser, Password: natsconf.LocalPasswords.Observer}
	cfg.Keys = map[string]*signing.MemberKeys{"dyn": stated(t, keys, protocol.Bully)}
	o := startObserver(t, cfg, nil)
	forger := batontest.Connect(t, url, nats.UserInfo(natsconf.NodeUser, natsconf.LocalPasswords.Node))

	send(t, forger, "dyn", presenceOf(1), nil)                       // unsigned
	send(t, forger, "dyn", presenceOf(1), signers[2])                // signed by another member
	send(t, forger, "dyn", presenceOf(2), batontest.NewSigner(t, 2)) // a stranger's key under 2's ID
	send(t, forger, "dyn", presenceOf(protocol.MaxMemberID+1), nil)  // outside a dynamic membership
	send(t, forger, "other", presenceOf(1), signers[1])              // a cluster without keys
	o.waitFor(t, "the forged presences to be refused", func() bool {
		return counter(o.metrics.live.WithLabelValues(protocol.KindPresence, resultBadSignature)) == 5
	})
	member2 := batontest.Connect(t, url, batontest.AsMember("dyn", signers[2])...)
	send(t, member2, "dyn", presenceOf(2), signers[2])
	o.waitFor(t, "member 2", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{2}) })

	send(t, forger, "dyn", protocol.Message{Type: protocol.TypeResign, From: 2, Term: 1}, nil)
	o.waitFor(t, "the forged resign to be refused", func() bool {
		return counter(o.metrics.live.WithLabelValues(protocol.KindResign, resultBadSignature)) == 1
	})
	// A connection named after member 2, authenticated as the node user.
	impostor := batontest.Connect(t, url, batontest.AsNode("dyn", 2)...)
	impostor.Close()
	o.waitFor(t, "the impostor's close to be refused", func() bool {
		return counter(o.metrics.live.WithLabelValues(kindConnection, resultBadSignature)) >= 1
	})
	if got := o.membersOf(t, "dyn"); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("members %v after the forgeries, want [2]", got)
	}
	if _, ok := o.store.Cluster("other"); ok {
		t.Error("the cluster without keys was recorded")
	}
	member2.Close()
	o.waitFor(t, "member 2's own connection to close", func() bool { return len(o.eventsOf(t, "dyn")) == 2 })
	if got, want := o.eventsOf(t, "dyn"), []string{"2 joined presence", "2 left disconnected"}; !slices.Equal(got, want) {
		t.Errorf("membership %v, want %v", got, want)
	}
	if got := o.membersOf(t, "dyn"); len(got) != 0 {
		t.Errorf("members %v after member 2 left, want none", got)
	}
}

// The joins and leaves survive a restart. A member present when the
// observer stopped and heard again keeps its place with no second join;
// one not heard again leaves silent a time-out after the observer
// listens again.
func TestMembershipSurvivesRestart(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	dir := t.TempDir()
	cfg := testConfig(url, dir)
	o := startObserver(t, cfg, nil)
	send(t, nc, "dyn", presenceOf(1), nil)
	send(t, nc, "dyn", presenceOf(2), nil)
	o.waitFor(t, "members 1 and 2", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{1, 2}) })
	var before []memberJSON
	o.get(t, "/api/clusters/dyn/members", &before)
	o.stop()

	cfg.MemberTimeout = time.Second
	// Member 1 is heard from the moment the observer listens again.
	keepHeard(t, nc, "dyn", presenceOf(1))
	o = startObserver(t, cfg, nil)
	o.waitFor(t, "member 2 to leave silent", func() bool {
		return slices.Equal(o.eventsOf(t, "dyn"), []string{"1 joined presence", "2 joined presence", "2 left silent"})
	})
	var after []memberJSON
	o.get(t, "/api/clusters/dyn/members", &after)
	if len(after) != 1 || after[0].ID != 1 || !after[0].Since.Equal(before[0].Since.Time) || !after[0].LastSeen.After(before[0].LastSeen.Time) {
		t.Errorf("members after the restart %+v, want member 1 since %v, heard since", after, before[0].Since)
	}
}

// With keys of member credentials (signing.NewAuthorityKeys, as
// membercreds gives them), the same checks take each member's key from
// the credential its messages carry: a member with a credential of the
// cluster's authority joins, one whose credential names another ID or
// comes from another authority does not.
func TestCredentialMembership(t *testing.T) {
	authority, other := accountKey(t), accountKey(t)
	public, err := authority.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	checker, err := membercreds.NewChecker("dyn", public)
	if err != nil {
		t.Fatal(err)
	}
	credentialed := func(issuer nkeys.KeyPair, id, claimed uint64) *signing.Signer {
		t.Helper()
		s := batontest.NewSigner(t, claimed)
		token, err := membercreds.Issue(issuer, "dyn", id, s.PublicKey(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if s, err = s.WithCredential(token); err != nil {
			t.Fatal(err)
		}
		return s
	}
	url := batontest.StartNATS(t, batontest.WithJetStream())
	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"dyn": checker.Keys()}
	o := startObserver(t, cfg, nil)
	nc := batontest.Connect(t, url)

	send(t, nc, "dyn", presenceOf(8), credentialed(authority, 7, 8)) // 7's credential, signing as 8
	send(t, nc, "dyn", presenceOf(9), credentialed(other, 9, 9))     // another authority's
	o.waitFor(t, "the presences without a good credential to be refused", func() bool {
		return counter(o.metrics.live.WithLabelValues(protocol.KindPresence, resultBadSignature)) == 2
	})
	send(t, nc, "dyn", presenceOf(7), credentialed(authority, 7, 7))
	o.waitFor(t, "member 7", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{7}) })
}

// accountKey is a new NATS account key pair, as an authority's.
func accountKey(t *testing.T) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// In a byzantine cluster with dynamic membership (an authority and the
// configured members), a member's Hello is its presence, a Hello that
// asks to join is not, and a Resign (a leader hands its term over) does
// not make a member leave.
func TestByzantineMembership(t *testing.T) {
	authority := accountKey(t)
	public, err := authority.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	checker, err := membercreds.NewChecker("bz", public)
	if err != nil {
		t.Fatal(err)
	}
	signers := map[uint64]*signing.Signer{}
	listed := map[uint64]string{}
	for id := uint64(1); id <= 5; id++ {
		s := batontest.NewSigner(t, id)
		token, err := membercreds.Issue(authority, "bz", id, s.PublicKey(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if signers[id], err = s.WithCredential(token); err != nil {
			t.Fatal(err)
		}
		if id <= 4 {
			listed[id] = s.PublicKey()
		}
	}
	configured, err := signing.NewMemberKeys(listed)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := signing.NewMemberSets("bz", configured)
	if err != nil {
		t.Fatal(err)
	}
	url := batontest.StartNATS(t, batontest.WithJetStream())
	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"bz": checker.Keys().WithMemberSets(sets)}
	o := startObserver(t, cfg, nil)
	nc := batontest.Connect(t, url)

	hello := func(id uint64) protocol.Message {
		return protocol.Message{Type: protocol.TypeBzHello, From: id, Term: 3, Version: 0}
	}
	send(t, nc, "bz", hello(2), signers[2])
	send(t, nc, "bz", hello(3), signers[3])
	join := protocol.Message{Type: protocol.TypeBzHello, From: 5, Key: signers[5].PublicKey(), Cred: signers[5].Credential()}
	send(t, nc, "bz", join, signers[5])
	o.waitFor(t, "members 2 and 3", func() bool { return slices.Equal(o.membersOf(t, "bz"), []uint64{2, 3}) })
	send(t, nc, "bz", protocol.Message{Type: protocol.TypeResign, From: 3, Term: 3}, signers[3])
	send(t, nc, "bz", hello(4), signers[4])
	o.waitFor(t, "members 2, 3 and 4", func() bool { return slices.Equal(o.membersOf(t, "bz"), []uint64{2, 3, 4}) })
	if slices.Contains(o.membersOf(t, "bz"), 5) {
		t.Fatal("a member that asks to join is listed")
	}
}
