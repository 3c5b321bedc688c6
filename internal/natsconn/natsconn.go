// Package natsconn is how the services connect to NATS: the NATS_*
// environment variables they share, the checks of those variables, the
// connection options they imply, and the first connection (Dial), which
// logs why each failed attempt failed and gives up a member key that the
// server cannot check.
package natsconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
)

// Config is the NATS part of a service's configuration, read from the
// environment with caarlos0/env (embed it in the service's Config).
type Config struct {
	// URL is the NATS server URL, or several separated by commas.
	URL string `env:"NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	// Creds is a NATS credentials file (JWT and NKey seed).
	Creds string `env:"NATS_CREDS"`
	// User and Password authenticate with a user and password.
	User string `env:"NATS_USER"`
	// Password goes with User.
	Password string `env:"NATS_PASSWORD"`
	// Token authenticates with a token, instead of a user.
	Token string `env:"NATS_TOKEN"`
	// TLSCA is a PEM file of the CAs that sign the server's certificate.
	TLSCA string `env:"NATS_TLS_CA"`
	// TLSCert and TLSKey are the PEM client certificate and key for
	// mutual TLS.
	TLSCert string `env:"NATS_TLS_CERT"`
	// TLSKey goes with TLSCert.
	TLSKey string `env:"NATS_TLS_KEY"`
}

// VarError is a problem with one environment variable.
type VarError struct {
	Name    string // the variable, such as NATS_URL
	Problem string
}

func (e *VarError) Error() string { return e.Name + ": " + e.Problem }

func invalid(name, format string, args ...any) error {
	return &VarError{Name: name, Problem: fmt.Sprintf(format, args...)}
}

// Validate checks the URLs, that the credentials go together and that the
// files they name can be read. Its error is a *VarError.
func (c Config) Validate() error {
	if _, err := c.URLs(); err != nil {
		return err
	}
	switch {
	case c.User != "" && c.Password == "":
		return invalid("NATS_PASSWORD", "required with NATS_USER")
	case c.Password != "" && c.User == "":
		return invalid("NATS_USER", "required with NATS_PASSWORD")
	case c.Token != "" && c.User != "":
		return invalid("NATS_TOKEN", "cannot be combined with NATS_USER")
	case c.TLSCert != "" && c.TLSKey == "":
		return invalid("NATS_TLS_KEY", "required with NATS_TLS_CERT")
	case c.TLSKey != "" && c.TLSCert == "":
		return invalid("NATS_TLS_CERT", "required with NATS_TLS_KEY")
	}
	for _, f := range []struct{ name, path string }{
		{"NATS_CREDS", c.Creds}, {"NATS_TLS_CA", c.TLSCA},
		{"NATS_TLS_CERT", c.TLSCert}, {"NATS_TLS_KEY", c.TLSKey},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.ReadFile(f.path); err != nil {
			return invalid(f.name, "cannot read %q: %v", f.path, errors.Unwrap(err))
		}
	}
	if c.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey); err != nil {
			return invalid("NATS_TLS_CERT", "with NATS_TLS_KEY: %v", err)
		}
	}
	return nil
}

// URLs returns the server URLs of URL, trimmed, or a *VarError naming
// NATS_URL.
func (c Config) URLs() ([]string, error) {
	var urls []string
	for raw := range strings.SplitSeq(c.URL, ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		switch {
		case raw == "":
			return nil, invalid("NATS_URL", "empty URL in %q", c.URL)
		case err != nil || u.Host == "":
			return nil, invalid("NATS_URL", "%q is not a URL such as nats://host:4222", raw)
		case !slices.Contains([]string{"nats", "tls", "ws", "wss"}, u.Scheme):
			return nil, invalid("NATS_URL", "%q: scheme must be nats, tls, ws or wss", raw)
		}
		urls = append(urls, raw)
	}
	return urls, nil
}

// Servers is the validated URLs joined for nats.Connect.
func (c Config) Servers() string {
	urls, err := c.URLs()
	if err != nil {
		return c.URL // Validate reports it; nats.Connect will too
	}
	return strings.Join(urls, ",")
}

// AuthOptions are the options that authenticate as configured: a
// credentials file, a user and password or a token, and TLS.
func (c Config) AuthOptions() []nats.Option {
	var opts []nats.Option
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts
}
