// Package natsconf holds the NATS accounts, users and permissions of a
// deployment (accounts.conf, which deploy/nats.conf includes; the NATS
// image copies it from here), rendered with the member users and, for
// clusters with member credentials, the server's check of them
// (RenderWith, internal/natsauth); and the one starter of embedded servers
// (Start, StartLocal, StartLocalWithCallout), so that the embedded servers
// of the local run, the benchmark and the tests run with the same
// configuration as Compose.
package natsconf

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/baton-election/baton/pkg/signing"
)

// Accounts is accounts.conf.
//
//go:embed accounts.conf
var Accounts string

// The users of Accounts.
const (
	SysUser      = "sys"
	NodeUser     = "node"
	ObserverUser = "observer"
	AppUser      = "app"
)

// Passwords are the passwords of the users, as the variables Accounts reads
// them from: NATS_SYS_PASSWORD, NATS_NODE_PASSWORD, NATS_OBSERVER_PASSWORD,
// NATS_APP_PASSWORD; and Route, NATS_ROUTE_PASSWORD, with which the servers
// of a NATS cluster authenticate their routes to each other (user
// RouteUser, deploy/nats.conf).
type Passwords struct {
	Sys, Node, Observer, App, Route string
}

// RouteUser is the user of the routes between the NATS servers of a
// cluster (deploy/nats.conf).
const RouteUser = "route"

// Env is the environment the server needs for Accounts.
func (p Passwords) Env() map[string]string {
	return map[string]string{
		"NATS_SYS_PASSWORD":      p.Sys,
		"NATS_NODE_PASSWORD":     p.Node,
		"NATS_OBSERVER_PASSWORD": p.Observer,
		"NATS_APP_PASSWORD":      p.App,
		"NATS_ROUTE_PASSWORD":    p.Route,
	}
}

// LocalPasswords are passwords for a server on this machine only.
var LocalPasswords = Passwords{Sys: "sys-local", Node: "node-local", Observer: "observer-local", App: "app-local", Route: "route-local"}

// Options returns the options of a server listening on host:port (port -1
// picks a free one) with the accounts of Accounts and passwords, and with
// JetStream stored in storeDir unless it is empty. It writes the
// configuration into dir, and the passwords into it rather than into the
// environment.
func Options(dir, host string, port int, storeDir string, passwords Passwords) (*server.Options, error) {
	return OptionsWithMembers(dir, host, port, storeDir, passwords, nil)
}

// OptionsWithMembers is Options with a user for each member of each cluster
// (cluster name → members), as Render writes them.
func OptionsWithMembers(dir, host string, port int, storeDir string, passwords Passwords, clusters map[string]*signing.MemberKeys) (*server.Options, error) {
	return OptionsWith(dir, host, port, storeDir, passwords, clusters, nil)
}

// OptionsWith is OptionsWithMembers with, unless callout is nil, the
// server's check of member credentials (RenderWith); its responder must
// then run (StartWithCallout).
func OptionsWith(dir, host string, port int, storeDir string, passwords Passwords, clusters map[string]*signing.MemberKeys, callout *Callout) (*server.Options, error) {
	accounts, err := RenderWith(clusters, callout)
	if err != nil {
		return nil, err
	}
	for name, value := range passwords.Env() {
		if strings.ContainsAny(value, "\"\\\n") {
			return nil, fmt.Errorf("natsconf: %s holds a quote, a backslash or a newline", name)
		}
		accounts = strings.ReplaceAll(accounts, "$"+name, `"`+value+`"`)
	}
	conf := fmt.Sprintf("host: %q\nport: %d\n", host, port)
	if storeDir != "" {
		conf += fmt.Sprintf("jetstream { store_dir: %q }\n", storeDir)
	}
	conf += accounts
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("natsconf: %w", err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("natsconf: %w", err)
	}
	opts.Port = port // ProcessConfigFile reads -1 as a port like any other
	return opts, nil
}
