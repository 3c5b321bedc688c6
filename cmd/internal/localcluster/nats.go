// Package localcluster runs election clusters on one machine for the
// developer tools (cmd/devcluster, cmd/bench): node processes started from
// the built node binary, configured only by the environment variables of
// the public contract, and the credentials by which they and Go clients
// connect to the embedded NATS server that natsconf.StartLocal runs.
//
// It is a test harness, not a supervisor: nothing is restarted on its own,
// and every process that is started must be waited for with Node.Wait (or
// StopAll), which also reaps the goroutine that watches it.
package localcluster

import (
	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/natsconf"
)

// NodeEnv is the environment by which a node process connects to a
// server started by natsconf.StartLocal.
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
