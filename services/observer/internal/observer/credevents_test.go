package observer

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// A member with a credential, on a NATS server that checks it
// (internal/natsauth), leaves when its own connection closes: the server
// reports it under the user its check named it, which binds the key of
// its messages. A client of the node user that takes its connection name
// proves nothing.
func TestCredentialMemberDisconnects(t *testing.T) {
	authority := accountKey(t)
	public, _ := authority.PublicKey()
	authDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(authDir, "dyn"+natsauth.AuthoritySuffix), []byte(public+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, stop, err := natsconf.StartLocalWithCallout(t.TempDir(), "127.0.0.1", -1, t.TempDir(), nil, t.TempDir(), authDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	url := s.ClientURL()
	checker, err := membercreds.NewChecker("dyn", public)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(url, t.TempDir())
	cfg.NATS = natsconn.Config{URL: url, User: natsconf.ObserverUser, Password: natsconf.LocalPasswords.Observer}
	cfg.Keys = map[string]*signing.MemberKeys{"dyn": checker.Keys()}
	o := startObserver(t, cfg, nil)

	kp, _ := nkeys.CreateUser()
	userPublic, _ := kp.PublicKey()
	token, err := membercreds.Issue(authority, "dyn", 7, userPublic, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signing.NewSigner(7, kp)
	if err == nil {
		signer, err = signer.WithCredential(token)
	}
	if err != nil {
		t.Fatal(err)
	}
	member := batontest.Connect(t, url, append(membercreds.NATSOptions(token, kp), nats.Name(protocol.ConnectionName("dyn", 7)))...)
	send(t, member, "dyn", presenceOf(7), signer)
	o.waitFor(t, "member 7", func() bool { return slices.Equal(o.membersOf(t, "dyn"), []uint64{7}) })

	impostor := batontest.Connect(t, url, batontest.AsNode("dyn", 7)...)
	impostor.Close()
	o.waitFor(t, "the impostor's close to be refused", func() bool {
		return counter(o.metrics.live.WithLabelValues(kindConnection, resultBadSignature)) >= 1
	})
	if got := o.membersOf(t, "dyn"); !slices.Equal(got, []uint64{7}) {
		t.Fatalf("members %v after the impostor, want [7]", got)
	}
	member.Close()
	o.waitFor(t, "member 7's own connection to close", func() bool { return len(o.eventsOf(t, "dyn")) == 2 })
	if got, want := o.eventsOf(t, "dyn"), []string{"7 joined presence", "7 left disconnected"}; !slices.Equal(got, want) {
		t.Errorf("membership %v, want %v", got, want)
	}
}
