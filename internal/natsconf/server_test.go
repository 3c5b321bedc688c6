package natsconf

import (
	"errors"
	"net"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// StartLocal runs a server configured as the deployment: the node user
// connects with the local password, an unknown user is refused.
func TestStartLocal(t *testing.T) {
	s, err := StartLocal(t.TempDir(), "127.0.0.1", -1, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Stop(s) })
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(NodeUser, LocalPasswords.Node))
	if err != nil {
		t.Fatalf("node user: %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("nobody", "x")); err == nil {
		nc.Close()
		t.Fatal("an unknown user connected")
	}
}

// A server whose port is taken is not ready, and Start says so.
func TestStartPortTaken(t *testing.T) {
	first, err := Start(&server.Options{Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Stop(first) })
	addr, ok := first.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("address %v is not TCP", first.Addr())
	}
	second, err := Start(&server.Options{Host: "127.0.0.1", Port: addr.Port})
	if err == nil {
		Stop(second)
	}
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("Start on a taken port: %v, want ErrNotReady", err)
	}
}
