package observer

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconn"
)

// On a NATS that requires credentials, the observer connects with
// NATS_USER and NATS_PASSWORD and records what an authenticated node
// announces.
func TestAuthenticatedNATS(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream(), batontest.WithUser("observer", "pw"))
	if _, err := nats.Connect(url); err == nil {
		t.Fatal("the server accepted a client without credentials")
	}
	cfg := testConfig(url, t.TempDir())
	cfg.NATS = natsconn.Config{URL: url, User: "observer", Password: "pw"}
	o := startObserver(t, cfg, nil)

	node := batontest.Connect(t, url, nats.UserInfo("observer", "pw"))
	announce(t, node, announcement("default", 3, 4, time.Now()))
	o.waitFor(t, "the announcement to be recorded", func() bool { return o.leaderships("default") == 1 })
}
