package natsconf

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/signing"
)

// member is a member's key pair, made for a test.
type member struct {
	cluster string
	id      uint64
	kp      nkeys.KeyPair
}

func newMember(t *testing.T, cluster string, id uint64) member {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	return member{cluster, id, kp}
}

func (m member) pub(t *testing.T) string {
	t.Helper()
	pub, err := m.kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// startMembers starts a server with the accounts of Render for members.
func startMembers(t *testing.T, members ...member) *server.Server {
	t.Helper()
	public := map[string]map[uint64]string{}
	for _, m := range members {
		if public[m.cluster] == nil {
			public[m.cluster] = map[uint64]string{}
		}
		public[m.cluster][m.id] = m.pub(t)
	}
	clusters := map[string]*signing.MemberKeys{}
	for cluster, p := range public {
		clusters[cluster] = keys(t, p)
	}
	opts, err := OptionsWithMembers(t.TempDir(), "127.0.0.1", -1, t.TempDir(), LocalPasswords, clusters)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Stop(s) })
	return s
}

// connectMember connects as the member's nkey user, with its inbox prefix.
func connectMember(t *testing.T, s *server.Server, m member) (*nats.Conn, chan error) {
	t.Helper()
	return connect(t, s, "", "", nats.Nkey(m.pub(t), m.kp.Sign), nats.CustomInboxPrefix(InboxPrefix(m.cluster, m.id)))
}

// refused publishes on subject and waits for the server's permissions
// violation naming it.
func refused(t *testing.T, who string, nc *nats.Conn, errs chan error, subject string) {
	t.Helper()
	if err := nc.Publish(subject, []byte("x")); err != nil {
		t.Fatal(err)
	}
	violation(t, who+" publish", nc, errs, subject)
}

func violation(t *testing.T, what string, nc *nats.Conn, errs chan error, subject string) {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-errs:
			if strings.Contains(err.Error(), "Permissions Violation") && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-deadline:
			t.Errorf("%s %s: no permissions violation; want it refused", what, subject)
			return
		}
	}
}

// delivered publishes on subject and waits until a subscriber of every
// subject (the observer user) receives it.
func delivered(t *testing.T, who string, nc *nats.Conn, watch *nats.Subscription, subject string) {
	t.Helper()
	if err := nc.Publish(subject, []byte(who)); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	for {
		m, err := watch.NextMsg(5 * time.Second)
		if err != nil {
			t.Errorf("%s publish %s: not delivered (%v); want it allowed", who, subject, err)
			return
		}
		if m.Subject == subject && string(m.Data) == who {
			return
		}
	}
}

// The server refuses what the app user and a member of one cluster may not
// publish, and delivers what they may.
func TestMemberAndAppPublish(t *testing.T) {
	a1, a2, b1 := newMember(t, "a", 1), newMember(t, "a", 2), newMember(t, "b", 1)
	s := startMembers(t, a1, a2, b1)
	obs, obsErrs := connect(t, s, ObserverUser, LocalPasswords.Observer)
	watch, err := obs.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	obs.Flush()

	node, nodeErrs := connectMember(t, s, a1)
	for _, subject := range []string{
		"election.a.heartbeat", "election.a.leader", "election.a.coordinator", "election.a.node.2",
		"election.a.order", "election.a.decided", "_INBOX.app.1", "_INBOX_BATON.a.2.x.1.1", "$JS.API.STREAM.NAMES",
	} {
		delivered(t, "member a/1", node, watch, subject)
	}
	for _, subject := range []string{
		// another cluster's subjects
		"election.b.heartbeat", "election.b.leader", "election.b.coordinator", "election.b.node.1", "election.b.query",
		"_INBOX_BATON.b.1.x",
		// nothing below its cluster's subjects, nothing else
		"election.a.node.2.x", "election.other", "$JS.API.STREAM.PURGE.ELECTION_LEADERS",
		"$JS.API.STREAM.DELETE.ELECTION_LEADERS", "$JS.API.CONSUMER.DELETE.ELECTION_LEADERS.observer",
		"$SYS.ACCOUNT.BATON.DISCONNECT",
	} {
		refused(t, "member a/1", node, nodeErrs, subject)
	}

	app, appErrs := connect(t, s, AppUser, LocalPasswords.App)
	delivered(t, "app", app, watch, "election.a.query")
	for _, subject := range []string{
		"election.a.heartbeat", "election.a.election", "election.a.coordinator", "election.a.resign",
		"election.a.prepare", "election.a.propose", "election.a.leader", "election.a.node.1",
		"election.b.heartbeat", "election.b.node.1",
		"_INBOX.someone.1", "_INBOX_BATON.a.1.x.1.1", "$SYS.ACCOUNT.BATON.DISCONNECT",
	} {
		refused(t, "app", app, appErrs, subject)
	}

	// The observer publishes on no inbox either.
	for _, subject := range []string{"_INBOX.someone.1", "_INBOX_BATON.a.1.x", "election.a.heartbeat"} {
		refused(t, "observer", obs, obsErrs, subject)
	}
}

// The app user reads the members' decisions on the leader's orders
// (leader.Orders), but neither their oral messages nor publishes a
// decision.
func TestAppReadsDecisions(t *testing.T) {
	a1 := newMember(t, "a", 1)
	s := startMembers(t, a1)
	node, _ := connectMember(t, s, a1)
	app, errs := connect(t, s, AppUser, LocalPasswords.App)
	decided, err := app.SubscribeSync("election.a.decided")
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Flush(); err != nil {
		t.Fatal(err)
	}
	delivered(t, "member a/1", node, decided, "election.a.decided")
	if _, err := app.SubscribeSync("election.a.order"); err != nil {
		t.Fatal(err)
	}
	violation(t, "app subscribe", app, errs, "election.a.order")
	refused(t, "app", app, errs, "election.a.decided")
}

// A member may subscribe to its cluster's subjects and its own inboxes
// only: not to another member's inbox, not to another cluster.
func TestMemberSubscribe(t *testing.T) {
	a1, a2, b1 := newMember(t, "a", 1), newMember(t, "a", 2), newMember(t, "b", 1)
	s := startMembers(t, a1, a2, b1)
	node, errs := connectMember(t, s, a1)
	for _, subject := range []string{"election.a.heartbeat", "election.a.query", "election.a.node.1", "$SYS.ACCOUNT.*.DISCONNECT", node.NewInbox()} {
		if _, err := node.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
	}
	for _, subject := range []string{"election.a.node.2", "election.a.node.*", "election.b.heartbeat", "election.>", "_INBOX.>", "_INBOX_BATON.a.2.>", ">"} {
		if _, err := node.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		violation(t, "member a/1 subscribe", node, errs, subject)
	}
	if !strings.HasPrefix(node.NewInbox(), "_INBOX_BATON.a.1.") {
		t.Errorf("inbox %s; want it under InboxPrefix", node.NewInbox())
	}
}

// A member answers a query on the requester's inbox, but a request cannot
// make it publish its answer anywhere else with its rights: not on another
// cluster's leader subject, not on a JetStream API subject.
func TestMemberAnswersOnlyInboxes(t *testing.T) {
	a1, b1 := newMember(t, "a", 1), newMember(t, "b", 1)
	s := startMembers(t, a1, b1)
	leader, errs := connectMember(t, s, a1)
	if _, err := leader.Subscribe("election.a.query", func(m *nats.Msg) { m.Respond([]byte(`{"leader":1}`)) }); err != nil {
		t.Fatal(err)
	}
	leader.Flush()

	app, _ := connect(t, s, AppUser, LocalPasswords.App)
	if m, err := app.Request("election.a.query", nil, 5*time.Second); err != nil || string(m.Data) != `{"leader":1}` {
		t.Fatalf("query as app: %v; want the answer on its inbox", err)
	}
	for _, reply := range []string{"election.b.leader", "$JS.API.STREAM.PURGE.ELECTION_LEADERS", "_INBOX_BATON.b.1.x"} {
		if err := app.PublishRequest("election.a.query", reply, nil); err != nil {
			t.Fatal(err)
		}
		app.Flush()
		violation(t, "member a/1 answer", leader, errs, reply)
	}
}

// A key that is not a member's is refused.
func TestUnknownKeyRefused(t *testing.T) {
	s := startMembers(t, newMember(t, "a", 1))
	stranger := newMember(t, "a", 1)
	_, err := nats.Connect(s.ClientURL(), nats.Nkey(stranger.pub(t), stranger.kp.Sign))
	if err == nil || !strings.Contains(err.Error(), "Authorization Violation") {
		t.Errorf("connect with a key that is not a member's: %v; want an authorization violation", err)
	}
}

// deployServer starts a server from deploy/nats.conf as Compose does, with
// the rendered accounts, on free ports of the loopback interface, routed
// to routes.
func deployServer(t *testing.T, name string, routes ...*url.URL) *server.Server {
	t.Helper()
	for k, v := range LocalPasswords.Env() {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	conf, err := os.ReadFile("../../deploy/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := Render(map[string]*signing.MemberKeys{"a": keys(t, map[uint64]string{1: newMember(t, "a", 1).pub(t)})})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "accounts.conf"), []byte(accounts), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if opts.HTTPHost != "127.0.0.1" || opts.HTTPPort != 8222 {
		t.Errorf("monitoring on %s:%d; want 127.0.0.1:8222 only", opts.HTTPHost, opts.HTTPPort)
	}
	if opts.Cluster.Username != RouteUser || opts.Cluster.Password != LocalPasswords.Route {
		t.Errorf("cluster authorization %q/%q; want the route user with NATS_ROUTE_PASSWORD", opts.Cluster.Username, opts.Cluster.Password)
	}
	opts.ServerName, opts.Host, opts.Port, opts.HTTPPort = name, "127.0.0.1", -1, -1
	opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", -1
	opts.JetStream, opts.Routes = false, routes
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Stop(s) })
	return s
}

// The routes between the servers of the deployment authenticate: a
// connection to the cluster port without the route user's password is
// refused, one with it is routed.
func TestRoutesAuthenticate(t *testing.T) {
	s := deployServer(t, "nats-1")
	addr := s.ClusterAddr().String()
	for _, connect := range []string{
		`CONNECT {"verbose":false,"pedantic":false,"tls_required":false,"name":"intruder","cluster":"baton"}`,
		`CONNECT {"verbose":false,"pedantic":false,"tls_required":false,"name":"intruder","cluster":"baton","user":"app","pass":"app-local"}`,
		`CONNECT {"verbose":false,"pedantic":false,"tls_required":false,"name":"intruder","cluster":"baton","user":"route","pass":"wrong"}`,
	} {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(conn)
		if _, err := r.ReadString('\n'); err != nil { // INFO
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "%s\r\nPING\r\n", connect)
		line, err := r.ReadString('\n')
		conn.Close()
		if !strings.Contains(line, "Authorization Violation") {
			t.Errorf("route %s: got %q, %v; want an authorization violation", connect, line, err)
		}
	}

	u, err := url.Parse(fmt.Sprintf("nats-route://%s:%s@%s", RouteUser, LocalPasswords.Route, addr))
	if err != nil {
		t.Fatal(err)
	}
	s2 := deployServer(t, "nats-2", u)
	deadline := time.Now().Add(10 * time.Second)
	for s.NumRoutes() == 0 || s2.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no route with the route user's password")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
