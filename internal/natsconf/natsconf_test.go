package natsconf

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func start(t *testing.T) *server.Server {
	t.Helper()
	opts, err := Options(t.TempDir(), "127.0.0.1", -1, t.TempDir(), LocalPasswords)
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

func connect(t *testing.T, s *server.Server, user, password string, opts ...nats.Option) (*nats.Conn, chan error) {
	t.Helper()
	errs := make(chan error, 16)
	opts = append(opts, nats.UserInfo(user, password), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// A client of the application account hears the connection events of the
// others, with their connection names.
func TestConnectionEvents(t *testing.T) {
	s := start(t)
	node, _ := connect(t, s, NodeUser, LocalPasswords.Node)
	events := make(chan *nats.Msg, 16)
	if _, err := node.ChanSubscribe("$SYS.ACCOUNT.*.DISCONNECT", events); err != nil {
		t.Fatal(err)
	}
	node.Flush()
	other, _ := connect(t, s, NodeUser, LocalPasswords.Node, nats.Name("baton-node c/7"))
	other.Close()
	select {
	case m := <-events:
		var ev server.DisconnectEventMsg
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Client.Name != "baton-node c/7" {
			t.Fatalf("disconnect event: %s, %v; want the client named baton-node c/7", m.Data, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no disconnect event")
	}
}

// Applications may follow and query the leader and read the stream, but
// publish nowhere else under election.
func TestAppPermissions(t *testing.T) {
	s := start(t)
	app, errs := connect(t, s, AppUser, LocalPasswords.App)
	if _, err := app.SubscribeSync("election.c.leader"); err != nil {
		t.Fatal(err)
	}
	if err := app.Publish("election.c.heartbeat", []byte("x")); err != nil {
		t.Fatal(err)
	}
	app.Flush()
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(err.Error(), "Permissions Violation") {
			t.Fatalf("publish on a heartbeat subject: got %v, want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("publish on a heartbeat subject: no permissions violation reported")
	}
	if _, err := app.Request("election.c.query", nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("query: got %v, want no responders (it may query)", err)
	}
}

// The system user can ask the servers for reports.
func TestSysUser(t *testing.T) {
	s := start(t)
	sys, _ := connect(t, s, SysUser, LocalPasswords.Sys)
	if _, err := sys.Request("$SYS.REQ.SERVER.PING.JSZ", nil, 2*time.Second); err != nil {
		t.Errorf("server report as sys: %v", err)
	}
}

// An application reads the observer's stream through a consumer of its
// own, as `nats sub 'election.*.leader' --last-per-subject` does, but can
// neither read from nor delete the observer's consumer, nor purge the
// stream.
func TestAppReadsTheStream(t *testing.T) {
	s := start(t)
	obs, _ := connect(t, s, ObserverUser, LocalPasswords.Observer)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(obs)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ELECTION_LEADERS", Subjects: []string{"election.*.leader"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "observer"}); err != nil {
		t.Fatal(err)
	}
	node, _ := connect(t, s, NodeUser, LocalPasswords.Node)
	if err := node.Publish("election.c.leader", []byte(`{"term":1}`)); err != nil {
		t.Fatal(err)
	}
	node.Flush()

	app, _ := connect(t, s, AppUser, LocalPasswords.App)
	ajs, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	ordered, err := ajs.OrderedConsumer(ctx, "ELECTION_LEADERS", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"election.*.leader"}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		t.Fatalf("an ordered consumer of its own: %v", err)
	}
	msg, err := ordered.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || string(msg.Data()) != `{"term":1}` {
		t.Fatalf("last announcement through its own consumer: %v", err)
	}

	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	if err := ajs.DeleteConsumer(short, "ELECTION_LEADERS", "observer"); err == nil {
		t.Error("the application deleted the observer's consumer")
	}
	if err := app.Publish("$JS.API.STREAM.PURGE.ELECTION_LEADERS", nil); err != nil {
		t.Fatal(err)
	}
	app.Flush()
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Errorf("the stream after the application's purge request: %+v, %v; want 1 message", info, err)
	}
	if c, err := stream.Consumer(ctx, "observer"); err != nil {
		t.Errorf("the observer's consumer: %v", err)
	} else if info, err := c.Info(ctx); err != nil || info.NumPending != 1 {
		t.Errorf("the observer's consumer: %d pending, want 1 (nobody else took it)", info.NumPending)
	}
}
