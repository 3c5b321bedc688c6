// Package localcluster runs election clusters on one machine for the
// developer tools (cmd/devcluster, cmd/bench): an embedded NATS server and
// node processes started from the built node binary, configured only by the
// environment variables of the public contract.
//
// It is a test harness, not a supervisor: nothing is restarted on its own,
// and every process that is started must be waited for with Node.Wait (or
// StopAll), which also reaps the goroutine that watches it.
package localcluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/natsconf"
)

// ErrNATSNotReady is returned when the embedded server does not accept
// connections in time, typically because its port is taken.
var ErrNATSNotReady = errors.New("localcluster: nats server not ready")

// StartNATS starts an embedded NATS server listening on host:port (port -1
// picks a free port) and waits until it accepts connections. The caller
// stops it with StopNATS.
func StartNATS(host string, port int) (*server.Server, error) {
	return StartNATSWith(&server.Options{Host: host, Port: port})
}

// StartNATSWith is StartNATS with more options (JetStream, accounts); it
// sets NoLog and NoSigs.
func StartNATSWith(opts *server.Options) (*server.Server, error) {
	host, port := opts.Host, opts.Port
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("localcluster: nats server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		StopNATS(s)
		return nil, fmt.Errorf("%w on %s:%d (is the port in use?)", ErrNATSNotReady, host, port)
	}
	return s, nil
}

// StopNATS shuts the server down and waits until it has stopped.
func StopNATS(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// StartAccountsNATS starts an embedded NATS server configured as a
// deployment (internal/natsconf): a system account that delivers the
// application account's connection events, and users for the nodes, the
// observer and applications, with the local passwords. The configuration
// is written into dir; JetStream is stored in storeDir unless it is empty.
// Port -1 picks a free port. Processes connect with NodeEnv and
// ObserverEnv; Go clients with AsObserver or AsApp.
func StartAccountsNATS(dir, host string, port int, storeDir string) (*server.Server, error) {
	opts, err := natsconf.Options(dir, host, port, storeDir, natsconf.LocalPasswords)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	return StartNATSWith(opts)
}

// NodeEnv is the environment by which a node process connects to a
// server started by StartAccountsNATS.
func NodeEnv() []string {
	return []string{"NATS_USER=" + natsconf.NodeUser, "NATS_PASSWORD=" + natsconf.LocalPasswords.Node}
}

// ObserverEnv is NodeEnv for the observer.
func ObserverEnv() []string {
	return []string{"NATS_USER=" + natsconf.ObserverUser, "NATS_PASSWORD=" + natsconf.LocalPasswords.Observer}
}

// AsObserver authenticates a Go client as the observer user, which may
// subscribe to every subject and send queries.
func AsObserver() nats.Option {
	return nats.UserInfo(natsconf.ObserverUser, natsconf.LocalPasswords.Observer)
}

// AsApp authenticates a Go client as an application, which may follow
// the leader subjects and send queries.
func AsApp() nats.Option {
	return nats.UserInfo(natsconf.AppUser, natsconf.LocalPasswords.App)
}
