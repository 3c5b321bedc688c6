package natsconf

import (
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/signing"
)

// keys returns the member keys of public, member ID to public key.
func keys(t *testing.T, public map[uint64]string) *signing.MemberKeys {
	t.Helper()
	k, err := signing.NewMemberKeys(public)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRenderRefuses(t *testing.T) {
	const key = "UATDRDH3U7URFCT34LEE5UAAJW7UWE72SEXB5ASN3YC4LDKLQWEVRPL2"
	one := keys(t, map[uint64]string{1: key})
	for _, c := range []struct {
		clusters map[string]*signing.MemberKeys
		want     string
	}{
		{map[string]*signing.MemberKeys{"a b": one}, "cluster name"},
		{map[string]*signing.MemberKeys{"a": nil}, "no member keys"},
		{map[string]*signing.MemberKeys{"a": one, "b": one}, "has the key of a/1"},
	} {
		if _, err := Render(c.clusters); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Render(%v): %v; want an error with %q", c.clusters, err, c.want)
		}
	}
	plain, err := Render(nil)
	if err != nil || strings.Contains(plain, "nkey:") || strings.Contains(plain, memberMarker) {
		t.Errorf("Render(nil): %v; want the password users alone", err)
	}
}

func TestRenderCallout(t *testing.T) {
	const (
		issuer = "ABJHLOVMPA4CI6R5KLNGOB4GSLNIY7IOUPAJC4YFNDLQVIOBYQGUWVLA"
		user   = "UATDRDH3U7URFCT34LEE5UAAJW7UWE72SEXB5ASN3YC4LDKLQWEVRPL2"
	)
	plain, err := Render(nil)
	if err != nil || strings.Contains(plain, "auth_callout {") || strings.Contains(plain, CalloutAccount+" {") {
		t.Fatalf("Render(nil): %v; want no callout", err)
	}
	conf, err := RenderWith(nil, &Callout{Issuer: issuer, User: user})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		CalloutAccount + " {\n    users = [ { nkey: " + user + " } ]",
		"issuer: " + issuer, "account: " + CalloutAccount, "auth_users: [ " + user + " ]",
		"allowed_accounts: [ " + CalloutAccount + " ]",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("RenderWith: no %q in\n%s", want, conf)
		}
	}
	for _, c := range []Callout{{Issuer: user, User: user}, {Issuer: issuer, User: issuer}} {
		if _, err := RenderWith(nil, &c); err == nil {
			t.Errorf("RenderWith(%+v): no error", c)
		}
	}
}
