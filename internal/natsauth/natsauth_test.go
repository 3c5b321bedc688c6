package natsauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// records is a log handler that keeps the responder's decisions.
type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.Key + "=" + a.Value.String()
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}

func (r *records) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// env is a server configured as the deployment, with the callout
// trusting the authorities of clusters fleet and other, and a static
// cluster bully whose member 1 is an nkey user.
type env struct {
	t           *testing.T
	s           *server.Server
	log         *records
	authorities string
	fleet       nkeys.KeyPair // authority of fleet
	other       nkeys.KeyPair // authority of other
	bullyMember nkeys.KeyPair // bully member 1's key
}

func newEnv(t *testing.T, edit func(*server.Options)) *env {
	t.Helper()
	e := &env{t: t, log: &records{}, authorities: t.TempDir()}
	e.fleet, e.other = account(t), account(t)
	for cluster, kp := range map[string]nkeys.KeyPair{"fleet": e.fleet, "other": e.other} {
		public, _ := kp.PublicKey()
		if err := os.WriteFile(filepath.Join(e.authorities, cluster+natsauth.AuthoritySuffix), []byte(public+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.bullyMember, _ = nkeys.CreateUser()
	bullyPublic, _ := e.bullyMember.PublicKey()
	bully, err := signing.NewMemberKeys(map[uint64]string{1: bullyPublic})
	if err != nil {
		t.Fatal(err)
	}
	keysDir := t.TempDir()
	keys, _, err := natsauth.EnsureKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	files := natsauth.Files{
		IssuerSeed:  filepath.Join(keysDir, natsauth.IssuerSeedFile),
		UserSeed:    filepath.Join(keysDir, natsauth.UserSeedFile),
		Authorities: e.authorities,
		Account:     natsconf.MemberAccount,
	}
	r, user, err := files.Load(slog.New(e.log))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := natsconf.OptionsWith(t.TempDir(), "127.0.0.1", -1, "", natsconf.LocalPasswords,
		map[string]*signing.MemberKeys{"bully": bully}, &natsconf.Callout{Issuer: keys.Issuer, User: keys.User})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(opts)
	}
	s, stop, err := natsconf.StartWithCallout(opts, r, user)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	e.s = s
	return e
}

func account(t *testing.T) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// member is a member's credential and seed.
type member struct {
	token string
	kp    nkeys.KeyPair
}

func (m member) public() string { p, _ := m.kp.PublicKey(); return p }

func issue(t *testing.T, authority nkeys.KeyPair, cluster string, id uint64) member {
	t.Helper()
	kp, _ := nkeys.CreateUser()
	public, _ := kp.PublicKey()
	token, err := membercreds.Issue(authority, cluster, id, public, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return member{token: token, kp: kp}
}

// connect connects with opts; errs gets the connection's asynchronous
// errors (permission violations).
func (e *env) connect(opts ...nats.Option) (*nats.Conn, chan error, error) {
	errs := make(chan error, 16)
	opts = append([]nats.Option{nats.NoReconnect(), nats.Timeout(5 * time.Second),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		})}, opts...)
	nc, err := nats.Connect(e.s.ClientURL(), opts...)
	if err == nil {
		e.t.Cleanup(nc.Close)
	}
	return nc, errs, err
}

func (e *env) connectMember(m member, name string) (*nats.Conn, chan error, error) {
	return e.connect(append(membercreds.NATSOptions(m.token, m.kp), nats.Name(name))...)
}

func waitErr(t *testing.T, errs chan error, want string) {
	t.Helper()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("asynchronous error %v; want one with %q", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no asynchronous error with %q", want)
	}
}

// disconnectEvent is the part of a connection event the test reads.
type disconnectEvent struct {
	Client struct {
		Name string   `json:"name"`
		User string   `json:"user"`
		JWT  string   `json:"jwt"`
		Tags []string `json:"tags"`
	} `json:"client"`
}

func TestMemberAdmittedToItsClusterOnly(t *testing.T) {
	e := newEnv(t, nil)
	node, _, err := e.connect(nats.UserInfo(natsconf.NodeUser, natsconf.LocalPasswords.Node))
	if err != nil {
		t.Fatal(err)
	}
	fleetMsgs, _ := node.SubscribeSync("election.fleet.>")
	events, _ := node.SubscribeSync("$SYS.ACCOUNT.*.DISCONNECT")
	if err := node.Flush(); err != nil {
		t.Fatal(err)
	}

	m := issue(t, e.fleet, "fleet", 3)
	nc, errs, err := e.connectMember(m, protocol.ConnectionName("fleet", 3))
	if err != nil {
		t.Fatalf("member with a valid credential: %v", err)
	}
	// Its own cluster's subjects.
	if err := nc.Publish("election.fleet.heartbeat", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if msg, err := fleetMsgs.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "hi" {
		t.Fatalf("the member's message on its cluster's subject: %v, %v", msg, err)
	}
	own, err := nc.SubscribeSync("election.fleet.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := node.Publish("election.fleet.leader", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := own.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the member's subscription to its cluster: %v", err)
	}
	// Another cluster's subjects, and the JetStream API beyond reading.
	for _, subject := range []string{"election.other.heartbeat", "election.bully.node.1", "$JS.API.STREAM.PURGE.ELECTION_LEADERS"} {
		if err := nc.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		waitErr(t, errs, "Permissions Violation for Publish to \""+subject+"\"")
	}
	if _, err := nc.SubscribeSync("election.other.>"); err != nil {
		t.Fatal(err)
	}
	waitErr(t, errs, "Permissions Violation for Subscription to \"election.other.>\"")

	// Its connection events carry the user the callout named it, which
	// binds its cluster, ID and key.
	nc.Close()
	msg, err := events.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ev disconnectEvent
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		t.Fatal(err)
	}
	if want := protocol.MemberUser("fleet", 3, m.public()); ev.Client.User != want || ev.Client.Name != protocol.ConnectionName("fleet", 3) {
		t.Errorf("disconnect event of the member: user %q, name %q; want %q, %q", ev.Client.User, ev.Client.Name, want, protocol.ConnectionName("fleet", 3))
	}
	// What the server reports besides, on this version: the JWT the
	// client presented is not kept, nor the issued user's tags.
	t.Logf("event: jwt %d bytes, tags %v", len(ev.Client.JWT), ev.Client.Tags)
}

func TestRefused(t *testing.T) {
	e := newEnv(t, nil)
	rogue := account(t)
	expired := func() member {
		kp, _ := nkeys.CreateUser()
		public, _ := kp.PublicKey()
		c := jwt.NewUserClaims(public)
		c.Name = "baton fleet 5"
		c.Tags.Add(membercreds.ClusterTag+"fleet", membercreds.IDTag+"5")
		c.Expires = time.Now().Add(-time.Minute).Unix()
		token, err := c.Encode(e.fleet)
		if err != nil {
			t.Fatal(err)
		}
		return member{token: token, kp: kp}
	}()
	revoked := issue(t, e.fleet, "fleet", 6)
	if err := os.WriteFile(filepath.Join(e.authorities, "fleet"+natsauth.RevokedSuffix), []byte("# revoked\n"+revoked.public()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stolen := issue(t, e.fleet, "fleet", 7)
	thief, _ := nkeys.CreateUser()

	cases := []struct {
		name string
		opts []nats.Option
		want string
	}{
		{"unknown authority", memberOpts(issue(t, rogue, "fleet", 2)), "not an authority of the cluster"},
		{"cluster not trusted", memberOpts(issue(t, e.fleet, "rogue", 2)), "does not trust"},
		{"expired", memberOpts(expired), "expired"},
		{"revoked", memberOpts(revoked), "is revoked"},
		{"credential without its seed", []nats.Option{nats.Token(stolen.token),
			nats.Nkey(stolen.public(), thief.Sign)}, "does not hold its seed"},
		{"credential with another key", membercreds.NATSOptions(stolen.token, thief), "not the credential's"},
		{"credential as a JWT", []nats.Option{nats.UserJWTAndSeed(stolen.token, func() string { s, _ := stolen.kp.Seed(); return string(s) }())}, "no member credential"},
		{"no credential", []nats.Option{nats.UserInfo("stranger", "secret")}, "no member credential"},
		{"wrong node password", []nats.Option{nats.UserInfo(natsconf.NodeUser, "wrong")}, "no member credential"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(e.log.all())
			_, _, err := e.connect(c.opts...)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("connect: %v; want an authorization violation", err)
			}
			// The responder decided before the server answered the
			// client: its refusal is logged.
			lines := e.log.all()[before:]
			if len(lines) != 1 || !strings.Contains(lines[0], "refused") || !strings.Contains(lines[0], c.want) {
				t.Fatalf("responder's log %q; want one refusal with %q", lines, c.want)
			}
		})
	}
	// The revocation file is read for each request: removed, the key is
	// admitted again.
	if err := os.Remove(filepath.Join(e.authorities, "fleet"+natsauth.RevokedSuffix)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.connect(memberOpts(revoked)...); err != nil {
		t.Fatalf("no longer revoked: %v", err)
	}
}

func memberOpts(m member) []nats.Option { return membercreds.NATSOptions(m.token, m.kp) }

// The users of the configuration authenticate as before: the server hands
// none of them to the callout, because allowed_accounts lists the callout
// account alone. Without it, the server hands them all over.
func TestConfiguredUsersBypassCallout(t *testing.T) {
	users := func(e *env) map[string][]nats.Option {
		seed, _ := e.bullyMember.Seed()
		public, _ := e.bullyMember.PublicKey()
		kp, _ := nkeys.FromSeed(seed)
		return map[string][]nats.Option{
			"node":     {nats.UserInfo(natsconf.NodeUser, natsconf.LocalPasswords.Node)},
			"observer": {nats.UserInfo(natsconf.ObserverUser, natsconf.LocalPasswords.Observer)},
			"app":      {nats.UserInfo(natsconf.AppUser, natsconf.LocalPasswords.App)},
			"sys":      {nats.UserInfo(natsconf.SysUser, natsconf.LocalPasswords.Sys)},
			"member nkey user": {nats.Nkey(public, kp.Sign),
				nats.CustomInboxPrefix(protocol.InboxPrefix("bully", 1))},
		}
	}
	t.Run("allowed_accounts", func(t *testing.T) {
		e := newEnv(t, nil)
		for name, opts := range users(e) {
			if _, _, err := e.connect(opts...); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if lines := e.log.all(); len(lines) != 0 {
			t.Errorf("the callout was asked about configured users: %q", lines)
		}
		// The permissions are those of the configuration, not the
		// callout's: the node user publishes on any cluster.
		nc, errs, err := e.connect(nats.UserInfo(natsconf.NodeUser, natsconf.LocalPasswords.Node))
		if err != nil {
			t.Fatal(err)
		}
		sub, _ := nc.SubscribeSync("election.bully.>")
		if err := nc.Publish("election.bully.leader", nil); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("node user on election.bully: %v", err)
		}
		select {
		case err := <-errs:
			t.Fatalf("node user: %v", err)
		default:
		}
	})
	t.Run("without allowed_accounts", func(t *testing.T) {
		e := newEnv(t, func(o *server.Options) { o.AuthCallout.AllowedAccounts = nil })
		for name, opts := range users(e) {
			if _, _, err := e.connect(opts...); err == nil {
				t.Errorf("%s connected; want it handed to the callout and refused", name)
			}
		}
		if n := len(e.log.all()); n != len(users(e)) {
			t.Errorf("%d callout decisions; want one per configured user", n)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	issuer := account(t)
	user, _ := nkeys.CreateUser()
	ok := map[string][]string{"fleet": {func() string { p, _ := issuer.PublicKey(); return p }()}}
	for _, c := range []struct {
		cfg  natsauth.Config
		want string
	}{
		{natsauth.Config{Account: "BATON", Authorities: ok}, "no callout issuer"},
		{natsauth.Config{Issuer: user, Account: "BATON", Authorities: ok}, "account key pair"},
		{natsauth.Config{Issuer: issuer, Authorities: ok}, "no account"},
		{natsauth.Config{Issuer: issuer, Account: "BATON"}, "no cluster"},
		{natsauth.Config{Issuer: issuer, Account: "BATON", Authorities: map[string][]string{"a.b": ok["fleet"]}}, "cluster name"},
		{natsauth.Config{Issuer: issuer, Account: "BATON", Authorities: map[string][]string{"fleet": {"UABC"}}}, "not an account public key"},
	} {
		if _, err := natsauth.New(c.cfg); !errors.Is(err, natsauth.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v; want a configuration error with %q", c.cfg, err, c.want)
		}
	}
	dir := t.TempDir()
	if _, err := natsauth.LoadAuthorities(dir); err == nil || !strings.Contains(err.Error(), "holds no") {
		t.Errorf("empty directory: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "fleet.authority"), []byte("nonsense\n"), 0o644)
	if _, err := natsauth.LoadAuthorities(dir); err == nil || !strings.Contains(err.Error(), "fleet.authority") {
		t.Errorf("bad authority file: %v", err)
	}
}

// A request that is not the server's is not answered with an admission.
func TestRespondUnreadable(t *testing.T) {
	issuer := account(t)
	public, _ := issuer.PublicKey()
	r, err := natsauth.New(natsauth.Config{Issuer: issuer, Account: "BATON", Authorities: map[string][]string{"fleet": {public}},
		Log: slog.New(&records{})})
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{nil, []byte("garbage"), []byte("eyJ" + strings.Repeat("a", natsauth.MaxRequestSize))} {
		if out := r.Respond(data); out != nil {
			t.Errorf("Respond(%.20q): %q; want nothing", data, out)
		}
	}
}

// The user the responder admits a member as: for the server's user key,
// in the members' account, named after the member and its key, confined
// to its cluster, and expiring with the credential.
func TestRespondAdmits(t *testing.T) {
	issuer, authority := account(t), account(t)
	authorityPublic, _ := authority.PublicKey()
	r, err := natsauth.New(natsauth.Config{Issuer: issuer, Account: "BATON",
		Authorities: map[string][]string{"fleet": {authorityPublic}}, Log: slog.New(&records{})})
	if err != nil {
		t.Fatal(err)
	}
	m := issue(t, authority, "fleet", 4)
	credential, err := jwt.DecodeUserClaims(m.token)
	if err != nil {
		t.Fatal(err)
	}
	serverKey, _ := nkeys.CreateServer()
	connUser, _ := nkeys.CreateUser()
	connPublic, _ := connUser.PublicKey()
	serverPublic, _ := serverKey.PublicKey()
	req := jwt.NewAuthorizationRequestClaims(serverPublic)
	req.UserNkey = connPublic
	req.Server.ID = "server-1"
	req.ClientInformation.Nonce = "nonce-123"
	req.ClientInformation.Kind = "Client"
	sig, _ := m.kp.Sign([]byte(req.ClientInformation.Nonce))
	req.ConnectOptions.SignedNonce = base64.RawURLEncoding.EncodeToString(sig)
	req.ConnectOptions.Nkey = m.public()
	req.ConnectOptions.Token = m.token
	token, err := req.Encode(serverKey)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := jwt.DecodeAuthorizationResponseClaims(string(r.Respond([]byte(token))))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Subject != connPublic || resp.Audience != "server-1" || resp.Issuer != r.Issuer() || resp.Error != "" {
		t.Fatalf("response for %s, to %s, by %s, error %q; want for %s, to server-1, by %s, no error",
			resp.Subject, resp.Audience, resp.Issuer, resp.Error, connPublic, r.Issuer())
	}
	user, err := jwt.DecodeUserClaims(resp.Jwt)
	if err != nil {
		t.Fatal(err)
	}
	if user.Subject != connPublic || user.Issuer != r.Issuer() || user.IssuerAccount != "" || user.Audience != "BATON" {
		t.Errorf("user %s by %s (account %q) in %q; want %s by the issuer, in BATON", user.Subject, user.Issuer, user.IssuerAccount, user.Audience, connPublic)
	}
	if want := protocol.MemberUser("fleet", 4, m.public()); user.Name != want {
		t.Errorf("user named %q, want %q", user.Name, want)
	}
	if user.Expires == 0 || user.Expires != credential.Expires {
		t.Errorf("user expires at %d, want the credential's %d", user.Expires, credential.Expires)
	}
	if !user.Pub.Allow.Contains("election.fleet.>") || user.Pub.Allow.Contains("election.>") || user.Pub.Allow.Contains("$JS.API.>") ||
		!user.Sub.Allow.Contains("$SYS.ACCOUNT.*.DISCONNECT") || user.Sub.Allow.Contains(">") {
		t.Errorf("permissions pub %v, sub %v; want the fleet's subjects and a node's", user.Pub.Allow, user.Sub.Allow)
	}
	// A leaf node with a member's credential is refused.
	req.ClientInformation.Kind = "Leafnode"
	leaf, err := req.Encode(serverKey)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := jwt.DecodeAuthorizationResponseClaims(string(r.Respond([]byte(leaf)))); err != nil || resp.Jwt != "" || !strings.Contains(resp.Error, "members connect as clients") {
		t.Errorf("a leaf node: %+v, %v; want a refusal", resp, err)
	}
	// Too big a request is not read.
	if out := r.Respond([]byte(token + strings.Repeat("x", natsauth.MaxRequestSize))); out != nil {
		t.Errorf("an oversized request was answered")
	}
}
