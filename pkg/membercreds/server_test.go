package membercreds

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// TestServerAcceptsCredentials: a NATS server in operator mode that trusts
// the authority's account accepts a member's credentials file as it is,
// lets the member use its cluster's subjects and refuses it others.
func TestServerAcceptsCredentials(t *testing.T) {
	operator := must[nkeys.KeyPair](t)(nkeys.CreateOperator())
	operatorClaims := must[*jwt.OperatorClaims](t)(jwt.DecodeOperatorClaims(must[string](t)(jwt.NewOperatorClaims(must[string](t)(operator.PublicKey())).Encode(operator))))
	authority, authorityPublic := newAccount(t)
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(authorityPublic, must[string](t)(jwt.NewAccountClaims(authorityPublic).Encode(operator))); err != nil {
		t.Fatal(err)
	}
	srv := must[*server.Server](t)(server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, TrustedOperators: []*jwt.OperatorClaims{operatorClaims}, AccountResolver: resolver}))
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("the server did not start")
	}
	path, _ := writeMember(t, authority, t.TempDir(), "prod", 3)
	errs := make(chan error, 8)
	nc := must[*nats.Conn](t)(nats.Connect(srv.ClientURL(), nats.UserCredentials(path), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })))
	defer nc.Close()
	sub := must[*nats.Subscription](t)(nc.SubscribeSync("election.prod.leader"))
	if err := nc.Publish("election.prod.leader", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("own cluster's subject: %v", err)
	}
	if err := nc.Publish("election.test.leader", []byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("publishing to another cluster: %v; want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("publishing to another cluster was not refused")
	}
	// Credentials of an account the server does not know are refused.
	stranger, _ := newAccount(t)
	strangerPath, _ := writeMember(t, stranger, t.TempDir(), "prod", 4)
	if nc, err := nats.Connect(srv.ClientURL(), nats.UserCredentials(strangerPath)); err == nil {
		nc.Close()
		t.Error("credentials of an unknown authority were accepted")
	}
}
