package membercreds

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func newAccount(t *testing.T) (nkeys.KeyPair, string) {
	kp := must[nkeys.KeyPair](t)(nkeys.CreateAccount())
	return kp, must[string](t)(kp.PublicKey())
}

func newUser(t *testing.T) (nkeys.KeyPair, string) {
	kp := must[nkeys.KeyPair](t)(nkeys.CreateUser())
	return kp, must[string](t)(kp.PublicKey())
}

// encode signs the credential of member id of cluster with an account
// key, after change alters its claims.
func encode(t *testing.T, signer nkeys.KeyPair, cluster string, id uint64, change func(*jwt.UserClaims)) string {
	_, user := newUser(t)
	c := claimsFor(cluster, id, user)
	if change != nil {
		change(c)
	}
	return must[string](t)(c.Encode(signer))
}

// forge signs a user JWT with a key of any kind, as the JWT library refuses
// to for keys other than accounts.
func forge(t *testing.T, signer nkeys.KeyPair) string {
	_, user := newUser(t)
	c := claimsFor("prod", 7, user)
	c.Issuer = must[string](t)(signer.PublicKey())
	c.Type = jwt.UserClaim
	c.Version = 2
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ed25519-nkey"}`))
	payload := base64.RawURLEncoding.EncodeToString(must[[]byte](t)(json.Marshal(c)))
	sig := must[[]byte](t)(signer.Sign([]byte(header + "." + payload)))
	return header + "." + payload + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// forgeV1 signs a user JWT of claims version 1, whose signature covers
// the claims alone, as the JWT library still reads them.
func forgeV1(t *testing.T, signer nkeys.KeyPair) string {
	_, user := newUser(t)
	c := claimsFor("prod", 7, user)
	c.Issuer = must[string](t)(signer.PublicKey())
	c.Type = jwt.UserClaim
	c.Version = 1
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ed25519"}`))
	payload := base64.RawURLEncoding.EncodeToString(must[[]byte](t)(json.Marshal(c)))
	sig := must[[]byte](t)(signer.Sign([]byte(payload)))
	return header + "." + payload + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// retouch replaces the payload of token by its claims altered by change,
// keeping the signature.
func retouch(t *testing.T, token string, change func(map[string]any)) string {
	parts := strings.Split(token, ".")
	var claims map[string]any
	if err := json.Unmarshal(must[[]byte](t)(base64.RawURLEncoding.DecodeString(parts[1])), &claims); err != nil {
		t.Fatal(err)
	}
	change(claims)
	parts[1] = base64.RawURLEncoding.EncodeToString(must[[]byte](t)(json.Marshal(claims)))
	return strings.Join(parts, ".")
}

func TestIssueVerifyRoundTrip(t *testing.T) {
	authority, authorityPublic := newAccount(t)
	_, user := newUser(t)
	for _, tc := range []struct {
		cluster string
		id      uint64
		expires time.Duration
	}{
		{"prod", 7, 0},
		{"Prod_2-x", 1, time.Hour},
		{"prod", MaxID, 720 * time.Hour},
	} {
		before := time.Now()
		token, err := Issue(authority, tc.cluster, tc.id, user, tc.expires)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		cred, err := Verify(token, []string{authorityPublic}, tc.cluster, time.Now())
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if cred.Cluster != tc.cluster || cred.ID != tc.id || cred.UserKey != user || cred.Issuer != authorityPublic || cred.JWT != token {
			t.Errorf("%+v: got %+v", tc, cred)
		}
		if tc.expires == 0 && !cred.Expires.IsZero() {
			t.Errorf("%+v: expires %v; want never", tc, cred.Expires)
		}
		if tc.expires != 0 && (cred.Expires.Before(before.Add(tc.expires).Truncate(time.Second)) || cred.Expires.After(time.Now().Add(tc.expires))) {
			t.Errorf("%+v: expires %v; want in %v", tc, cred.Expires, tc.expires)
		}
	}
}

// TestIssueClaims: the layout the package documents, which the NATS server
// and whoever lists an account's users read.
func TestIssueClaims(t *testing.T) {
	authority, authorityPublic := newAccount(t)
	_, user := newUser(t)
	token := must[string](t)(Issue(authority, "Prod", 42, user, time.Hour))
	c := must[*jwt.UserClaims](t)(jwt.DecodeUserClaims(token))
	if c.Subject != user || c.Issuer != authorityPublic || c.IssuerAccount != "" {
		t.Errorf("sub %s, iss %s, issuer_account %q; want %s, %s, none", c.Subject, c.Issuer, c.IssuerAccount, user, authorityPublic)
	}
	if c.Name != "baton Prod 42" {
		t.Errorf("name %q; want %q", c.Name, "baton Prod 42")
	}
	if !slices.Equal(c.Tags, jwt.TagList{"baton-cluster:prod", "baton-id:42"}) {
		t.Errorf("tags %v", c.Tags)
	}
	want := jwt.StringList{"election.Prod.>", "_INBOX.>", "$JS.API.>"}
	if !slices.Equal(c.Pub.Allow, want) || !slices.Equal(c.Sub.Allow, want) || len(c.Pub.Deny)+len(c.Sub.Deny) != 0 {
		t.Errorf("permissions %+v; want pub and sub allowed %v", c.Permissions, want)
	}
	if c.Expires == 0 || c.BearerToken {
		t.Errorf("exp %d, bearer %v; want an expiry and no bearer token", c.Expires, c.BearerToken)
	}
}

func TestIssueRejects(t *testing.T) {
	authority, authorityPublic := newAccount(t)
	_, user := newUser(t)
	operator := must[nkeys.KeyPair](t)(nkeys.CreateOperator())
	userKey, _ := newUser(t)
	publicOnly := must[nkeys.KeyPair](t)(nkeys.FromPublicKey(authorityPublic))
	for _, tc := range []struct {
		name      string
		authority nkeys.KeyPair
		cluster   string
		id        uint64
		user      string
		expires   time.Duration
		want      string
	}{
		{"bad cluster", authority, "a.b", 1, user, 0, "cluster name"},
		{"empty cluster", authority, "", 1, user, 0, "cluster name"},
		{"ID 0", authority, "prod", 0, user, 0, "member ID 0"},
		{"ID above MaxID", authority, "prod", MaxID + 1, user, 0, "member ID 65537"},
		{"account as user", authority, "prod", 1, authorityPublic, 0, "not a public user key"},
		{"garbage user", authority, "prod", 1, "Uxyz", 0, "not a public user key"},
		{"negative expiry", authority, "prod", 1, user, -time.Second, "negative"},
		{"user authority", userKey, "prod", 1, user, 0, "not a user key"},
		{"operator authority", operator, "prod", 1, user, 0, "not an operator key"},
		{"no seed", publicOnly, "prod", 1, user, 0, "has no seed"},
		{"nil authority", nil, "prod", 1, user, 0, "no authority"},
	} {
		token, err := Issue(tc.authority, tc.cluster, tc.id, tc.user, tc.expires)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q, %v; want an error with %q", tc.name, token, err, tc.want)
		}
	}
}

func TestVerify(t *testing.T) {
	authority, authorityPublic := newAccount(t)
	other, otherPublic := newAccount(t)
	signing, signingPublic := newAccount(t)
	userKey, user := newUser(t)
	operator := must[nkeys.KeyPair](t)(nkeys.CreateOperator())
	now := time.Now()
	good := must[string](t)(Issue(authority, "prod", 7, user, time.Hour))
	bySigningKey := encode(t, signing, "prod", 7, func(c *jwt.UserClaims) { c.IssuerAccount = authorityPublic })
	flipped := []byte(good)
	flipped[strings.IndexByte(good, '.')+10] ^= 'A' ^ 'B'

	for _, tc := range []struct {
		name        string
		token       string
		authorities []string
		cluster     string
		now         time.Time
		want        string // "" for accepted
	}{
		{"good", good, []string{authorityPublic}, "prod", now, ""},
		{"claims of version 1", forgeV1(t, authority), []string{authorityPublic}, "prod", now, "version 1"},
		{"among authorities", good, []string{otherPublic, authorityPublic}, "prod", now, ""},
		{"wrong authority", good, []string{otherPublic}, "prod", now, "not an authority"},
		{"no authorities", good, nil, "prod", now, "no authority"},
		{"other cluster", good, []string{authorityPublic}, "test", now, `cluster "prod", not "test"`},
		{"cluster differing in case", good, []string{authorityPublic}, "Prod", now, `cluster "prod", not "Prod"`},
		{"issued for Prod, checked for prod", encode(t, authority, "Prod", 7, nil), []string{authorityPublic}, "prod", now, `cluster "Prod", not "prod"`},
		{"just before expiry", good, []string{authorityPublic}, "prod", now.Add(time.Hour - 2*time.Second), ""},
		{"expired", good, []string{authorityPublic}, "prod", now.Add(time.Hour + time.Second), "expired"},
		{"expired by an hour", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Expires = now.Add(-time.Hour).Unix() }), []string{authorityPublic}, "prod", now, "expired"},
		{"not yet valid", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.NotBefore = now.Add(time.Hour).Unix() }), []string{authorityPublic}, "prod", now, "not valid before"},
		{"valid since", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.NotBefore = now.Add(-time.Hour).Unix() }), []string{authorityPublic}, "prod", now, ""},
		{"ID 0", encode(t, authority, "prod", 0, nil), []string{authorityPublic}, "prod", now, "member ID 0"},
		{"ID MaxID", encode(t, authority, "prod", MaxID, nil), []string{authorityPublic}, "prod", now, ""},
		{"ID above MaxID", encode(t, authority, "prod", MaxID+1, nil), []string{authorityPublic}, "prod", now, "member ID 65537"},
		{"ID not numeric", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Name = "baton prod x" }), []string{authorityPublic}, "prod", now, "not a decimal integer"},
		{"ID with a leading zero", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Name = "baton prod 07" }), []string{authorityPublic}, "prod", now, "not a decimal integer"},
		{"ID negative", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Name = "baton prod -7" }), []string{authorityPublic}, "prod", now, "not a decimal integer"},
		{"name of another project", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Name = "node prod 7" }), []string{authorityPublic}, "prod", now, "is not \"baton <cluster> <id>\""},
		{"name with extra fields", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Name = "baton prod 7 8" }), []string{authorityPublic}, "prod", now, "is not \"baton <cluster> <id>\""},
		{"no name", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Name = "" }), []string{authorityPublic}, "prod", now, "is not \"baton <cluster> <id>\""},
		{"tag of another ID", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Tags = jwt.TagList{"baton-cluster:prod", "baton-id:8"} }), []string{authorityPublic}, "prod", now, "contradicts the name"},
		{"tag of another cluster", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Tags.Add("baton-cluster:test") }), []string{authorityPublic}, "prod", now, "contradicts the name"},
		{"no tags", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Tags = nil }), []string{authorityPublic}, "prod", now, "no tag"},
		{"other tags kept", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.Tags.Add("team:ops") }), []string{authorityPublic}, "prod", now, ""},
		{"bearer token", encode(t, authority, "prod", 7, func(c *jwt.UserClaims) { c.BearerToken = true }), []string{authorityPublic}, "prod", now, "bearer"},
		{"tampered ID", retouch(t, good, func(c map[string]any) { c["name"] = "baton prod 8" }), []string{authorityPublic}, "prod", now, "signature"},
		{"tampered expiry", retouch(t, good, func(c map[string]any) { delete(c, "exp") }), []string{authorityPublic}, "prod", now, "signature"},
		{"byte flipped", string(flipped), []string{authorityPublic}, "prod", now, "not a user JWT"},
		{"signed by the member's user key", forge(t, userKey), []string{must[string](t)(userKey.PublicKey())}, "prod", now, "not a user JWT"},
		{"signed by an operator", forge(t, operator), []string{must[string](t)(operator.PublicKey())}, "prod", now, "not a user JWT"},
		{"account JWT", must[string](t)(jwt.NewAccountClaims(authorityPublic).Encode(operator)), []string{authorityPublic}, "prod", now, "not a user JWT"},
		{"garbage", "a.b.c", []string{authorityPublic}, "prod", now, "not a user JWT"},
		{"empty", "", []string{authorityPublic}, "prod", now, "not a user JWT"},
		{"oversized", good + "." + strings.Repeat("A", MaxTokenSize), []string{authorityPublic}, "prod", now, "more than 4096"},
		{"signing key and account listed", bySigningKey, []string{authorityPublic, signingPublic}, "prod", now, ""},
		{"signing key not listed", bySigningKey, []string{authorityPublic}, "prod", now, "not an authority"},
		{"account of the signing key not listed", bySigningKey, []string{signingPublic}, "prod", now, "for account"},
		{"another account's signing key", encode(t, signing, "prod", 7, func(c *jwt.UserClaims) { c.IssuerAccount = otherPublic }), []string{authorityPublic, signingPublic}, "prod", now, "for account"},
		{"other account", encode(t, other, "prod", 7, nil), []string{authorityPublic}, "prod", now, "not an authority"},
	} {
		cred, err := Verify(tc.token, tc.authorities, tc.cluster, tc.now)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want accepted", tc.name, err)
		case tc.want == "" && (cred.Cluster != tc.cluster || cred.ID == 0 || cred.JWT != tc.token):
			t.Errorf("%s: %+v", tc.name, cred)
		case tc.want != "" && (!errors.Is(err, ErrCredential) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %+v, %v; want an ErrCredential with %q", tc.name, cred, err, tc.want)
		case tc.want != "" && cred != (Credential{}):
			t.Errorf("%s: refused, yet returned %+v", tc.name, cred)
		}
	}
	if len(good) > MaxTokenSize/4 {
		t.Errorf("a credential is %d bytes, too close to MaxTokenSize", len(good))
	}
}

func TestParseAuthorities(t *testing.T) {
	_, a := newAccount(t)
	_, b := newAccount(t)
	_, user := newUser(t)
	operator := must[string](t)(must[nkeys.KeyPair](t)(nkeys.CreateOperator()).PublicKey())
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{a, []string{a}, ""},
		{a + "," + b, []string{a, b}, ""},
		{" " + a + " , " + b + " ", []string{a, b}, ""},
		{"", nil, "no authority"},
		{" ", nil, "no authority"},
		{a + ",", nil, `"" is not a public key`},
		{a + "," + user, nil, user + `" is a user key`},
		{operator, nil, operator + `" is an operator key`},
		{"Axyz", nil, `"Axyz" is not a public key`},
		{a + "," + a, nil, "listed twice"},
	} {
		got, err := ParseAuthorities(tc.in)
		if tc.err == "" && (err != nil || !slices.Equal(got, tc.want)) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}

// writeMember writes the credentials file of member id of cluster in dir
// and returns its path and public user key.
func writeMember(t *testing.T, authority nkeys.KeyPair, dir, cluster string, id uint64) (string, string) {
	kp, user := newUser(t)
	token := must[string](t)(Issue(authority, cluster, id, user, 0))
	path := filepath.Join(dir, CredsFile(id))
	if err := WriteCreds(path, token, must[[]byte](t)(kp.Seed())); err != nil {
		t.Fatal(err)
	}
	return path, user
}

func TestCredsFileRoundTrip(t *testing.T) {
	authority, authorityPublic := newAccount(t)
	dir := t.TempDir()
	path, user := writeMember(t, authority, dir, "prod", 3)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v; want mode 0600", path, fi, err)
	}
	data := must[[]byte](t)(os.ReadFile(path))
	for _, want := range []string{"-----BEGIN NATS USER JWT-----", "-----BEGIN USER NKEY SEED-----"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q", path, want)
		}
	}
	token, kp, err := ReadCreds(path)
	if err != nil {
		t.Fatal(err)
	}
	if public := must[string](t)(kp.PublicKey()); public != user {
		t.Errorf("key %s; want %s", public, user)
	}
	cred, err := Verify(token, []string{authorityPublic}, "prod", time.Now())
	if err != nil || cred.ID != 3 || cred.UserKey != user {
		t.Errorf("%+v, %v; want member 3, key %s", cred, err, user)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in %s; want the credentials only", len(entries), dir)
	}

	// Never overwritten.
	other, _ := newUser(t)
	otherToken := must[string](t)(Issue(authority, "prod", 3, must[string](t)(other.PublicKey()), 0))
	if err := WriteCreds(path, otherToken, must[[]byte](t)(other.Seed())); !errors.Is(err, ErrExists) {
		t.Errorf("second write: %v; want ErrExists", err)
	}
	if after := must[[]byte](t)(os.ReadFile(path)); string(after) != string(data) {
		t.Error("the refused write changed the file")
	}
}

func TestWriteCredsRejects(t *testing.T) {
	authority, _ := newAccount(t)
	_, user := newUser(t)
	stranger, _ := newUser(t)
	account, _ := newAccount(t)
	token := must[string](t)(Issue(authority, "prod", 3, user, 0))
	for name, seed := range map[string][]byte{
		"seed of another user": must[[]byte](t)(stranger.Seed()),
		"account seed":         must[[]byte](t)(account.Seed()),
		"no seed":              nil,
	} {
		path := filepath.Join(t.TempDir(), "node-3.creds")
		if err := WriteCreds(path, token, seed); !errors.Is(err, ErrCredential) {
			t.Errorf("%s: %v; want ErrCredential", name, err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	if err := WriteCreds(filepath.Join(t.TempDir(), "x.creds"), "a.b.c", must[[]byte](t)(stranger.Seed())); !errors.Is(err, ErrCredential) {
		t.Errorf("garbage token: %v; want ErrCredential", err)
	}
}

func TestReadCredsRejects(t *testing.T) {
	authority, _ := newAccount(t)
	_, user := newUser(t)
	stranger, _ := newUser(t)
	token := must[string](t)(Issue(authority, "prod", 3, user, 0))
	decorated := func(token string, seed []byte) string {
		return "-----BEGIN NATS USER JWT-----\n" + token + "\n------END NATS USER JWT------\n\n" + string(must[[]byte](t)(jwt.DecorateSeed(seed)))
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"seed of another user", decorated(token, must[[]byte](t)(stranger.Seed())), "the seed is the key of"},
		{"account seed", string(must[[]byte](t)(jwt.DecorateJWT(token))) + "\n" + string(must[[]byte](t)(authority.Seed())) + "\n", "not a user seed"},
		{"no seed", string(must[[]byte](t)(jwt.DecorateJWT(token))), "no nkey seed"},
		{"no JWT", string(must[[]byte](t)(jwt.DecorateSeed(must[[]byte](t)(stranger.Seed())))), "not a NATS credentials file"},
		{"a seed file", string(must[[]byte](t)(stranger.Seed())) + "\n", "not a NATS credentials file"},
		{"tampered JWT", decorated(retouch(t, token, func(c map[string]any) { c["name"] = "baton prod 4" }), must[[]byte](t)(stranger.Seed())), "signature"},
		{"oversized", decorated(token, must[[]byte](t)(stranger.Seed())) + strings.Repeat("#", maxCredsFileSize), "larger than"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".creds")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, kp, err := ReadCreds(path)
		if !errors.Is(err, ErrCredential) || !strings.Contains(err.Error(), tc.want) || kp != nil {
			t.Errorf("%s: %v, %v; want an ErrCredential with %q", tc.name, kp, err, tc.want)
		}
	}
	if _, _, err := ReadCreds(filepath.Join(dir, "missing.creds")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v; want ErrNotExist", err)
	}
}
