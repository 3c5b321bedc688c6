package natsconn

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		name string // the variable the error must name, "" for none
		says string
	}{
		{Config{URL: "nats://a:4222"}, "", ""},
		{Config{URL: " nats://a:4222 , tls://b:4443"}, "", ""},
		{Config{URL: ""}, "NATS_URL", "empty URL"},
		{Config{URL: "nats://a:4222,,nats://b:4222"}, "NATS_URL", "empty URL"},
		{Config{URL: "a:4222"}, "NATS_URL", "not a URL"},
		{Config{URL: "http://a:80"}, "NATS_URL", "scheme"},
		{Config{URL: "nats://a:4222", User: "alice"}, "NATS_PASSWORD", "required with NATS_USER"},
		{Config{URL: "nats://a:4222", Password: "pw"}, "NATS_USER", "required with NATS_PASSWORD"},
		{Config{URL: "nats://a:4222", User: "alice", Password: "pw", Token: "t"}, "NATS_TOKEN", "cannot be combined"},
		{Config{URL: "nats://a:4222", TLSCert: "c.pem"}, "NATS_TLS_KEY", "required with NATS_TLS_CERT"},
		{Config{URL: "nats://a:4222", TLSKey: "k.pem"}, "NATS_TLS_CERT", "required with NATS_TLS_KEY"},
		{Config{URL: "nats://a:4222", Creds: "/nonexistent/x.creds"}, "NATS_CREDS", "cannot read"},
		{Config{URL: "nats://a:4222", TLSCA: "/nonexistent/ca.pem"}, "NATS_TLS_CA", "cannot read"},
	} {
		err := tc.cfg.Validate()
		if tc.name == "" {
			if err != nil {
				t.Errorf("%+v: %v, want valid", tc.cfg, err)
			}
			continue
		}
		var v *VarError
		if !errors.As(err, &v) || v.Name != tc.name || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want a *VarError naming %s and saying %q", tc.cfg, err, tc.name, tc.says)
		}
	}
}

func TestServers(t *testing.T) {
	c := Config{URL: " nats://a:4222 , tls://b:4443"}
	if got := c.Servers(); got != "nats://a:4222,tls://b:4443" {
		t.Errorf("Servers = %q", got)
	}
}

func TestAuthOptions(t *testing.T) {
	apply := func(c Config) nats.Options {
		o := nats.GetDefaultOptions()
		for _, opt := range c.AuthOptions() {
			if err := opt(&o); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	if o := apply(Config{URL: "nats://a:4222"}); o.User != "" || o.Token != "" || o.UserJWT != nil || o.Secure {
		t.Errorf("no credentials configured, but options set %+v", o)
	}
	if o := apply(Config{User: "alice", Password: "pw"}); o.User != "alice" || o.Password != "pw" {
		t.Errorf("user and password: got %q/%q", o.User, o.Password)
	}
	if o := apply(Config{Token: "t0k"}); o.Token != "t0k" {
		t.Errorf("token: got %q", o.Token)
	}
}
