// Package natsauth is the NATS server's check of member credentials: a
// responder to the server's authorization requests (auth callout,
// $SYS.REQ.USER.AUTH), so that a member of a cluster with dynamic
// membership connects to NATS with its own credential (pkg/membercreds)
// rather than as the shared node user, and the server itself checks who
// connects and confines each member to its cluster's subjects.
//
// The server runs with its accounts and users configured in its file
// (internal/natsconf): the password users (node, observer, app, sys) and
// the static members' nkey users authenticate as before, without the
// responder. A client the configuration does not know is handed to the
// responder, which admits it only if it presents a member credential:
//
//   - the client is a client, not a leaf node;
//   - the credential (the user JWT the client presents as its token: the
//     server discards a JWT presented as such in this configuration)
//     verifies with membercreds.Verify against the authority of the
//     cluster it names, which must be one of Config.Authorities:
//     signature, claims, not before, expiry;
//   - the client presents the credential's user key as its nkey and
//     signed the server's nonce with it, which proves it holds the seed
//     (the server checks no signature of a key it does not list: the
//     responder must);
//   - the credential's key is not revoked (Config.RevokedDir).
//
// It then answers with a user JWT for the server's user of the connection,
// in the application account, named MemberUser, whose permissions are a
// node's on its own cluster's subjects (Permissions) and which expires with
// the credential. Everything else is refused with an error the server
// logs.
//
// Revocation: <cluster>.revoked in RevokedDir lists revoked user keys, one
// a line; it is read again for every request (a few kilobytes at most, and
// members connect rarely), so a key added there is refused from its next
// connection on, reconnections included. A connection already open stays
// open until it closes or its credential expires: revoke with credentials
// that expire, or restart the member's connection.
package natsauth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
)

// Subject is the subject of the server's authorization requests, in the
// callout account.
const Subject = "$SYS.REQ.USER.AUTH"

// QueueGroup is the queue group of the responders: each server of a NATS
// cluster runs one, and each request is answered by one of them.
const QueueGroup = "baton-auth"

// MaxRequestSize bounds an authorization request the responder decodes,
// in bytes: the server's claims, the client's information and connect
// options with a credential of at most membercreds.MaxTokenSize.
const MaxRequestSize = 32 << 10

// maxRevokedSize bounds a <cluster>.revoked file.
const maxRevokedSize = 1 << 20

// File names in the authorities directory.
const (
	// AuthoritySuffix ends the name of a cluster's authority file,
	// <cluster>.authority: its public keys (A…), on lines or
	// comma-separated, as the observer reads them.
	AuthoritySuffix = ".authority"
	// RevokedSuffix ends the name of a cluster's revocations,
	// <cluster>.revoked: one user key (U…) a line; blank lines and lines
	// starting with # are ignored.
	RevokedSuffix = ".revoked"
)

// ErrConfig wraps the errors about the responder's configuration.
var ErrConfig = errors.New("natsauth: configuration")

// Config is what a responder trusts.
type Config struct {
	// Issuer is the callout issuer: an account key pair with its seed,
	// whose public key is auth_callout.issuer in the server's
	// configuration. The responder signs its answers with it.
	Issuer nkeys.KeyPair
	// Account is the application account the members are placed in.
	Account string
	// Authorities maps each cluster whose members are admitted to its
	// authority's public keys (A…).
	Authorities map[string][]string
	// RevokedDir is where <cluster>.revoked files are read; empty: no
	// revocations.
	RevokedDir string
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// Log gets a line for each decision; slog.Default() if nil.
	Log *slog.Logger
}

// Responder answers the server's authorization requests.
type Responder struct {
	cfg    Config
	issuer string
}

// New checks cfg and returns its responder.
func New(cfg Config) (*Responder, error) {
	if cfg.Issuer == nil {
		return nil, fmt.Errorf("%w: no callout issuer", ErrConfig)
	}
	issuer, err := cfg.Issuer.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(issuer) {
		return nil, fmt.Errorf("%w: the callout issuer must be an account key pair (seed SA…)", ErrConfig)
	}
	if _, err := cfg.Issuer.Seed(); err != nil {
		return nil, fmt.Errorf("%w: the callout issuer %s has no seed", ErrConfig, issuer)
	}
	if cfg.Account == "" {
		return nil, fmt.Errorf("%w: no account to place the members in", ErrConfig)
	}
	if len(cfg.Authorities) == 0 {
		return nil, fmt.Errorf("%w: no cluster's authority", ErrConfig)
	}
	for cluster, keys := range cfg.Authorities {
		if err := protocol.ValidateCluster(cluster); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		if _, err := membercreds.ParseAuthorities(strings.Join(keys, ",")); err != nil {
			return nil, fmt.Errorf("%w: cluster %s: %v", ErrConfig, cluster, err)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Responder{cfg: cfg, issuer: issuer}, nil
}

// Issuer is the public key of the callout issuer, auth_callout.issuer.
func (r *Responder) Issuer() string { return r.issuer }

// LoadAuthorities reads every <cluster>.authority file of dir: cluster
// name → its authority's public keys.
func LoadAuthorities(dir string) (map[string][]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	out := make(map[string][]string)
	for _, e := range entries {
		cluster, ok := strings.CutSuffix(e.Name(), AuthoritySuffix)
		if !ok || e.IsDir() {
			continue
		}
		if err := protocol.ValidateCluster(cluster); err != nil {
			return nil, fmt.Errorf("%w: %s: %q is not a cluster name ([A-Za-z0-9_-]+)", ErrConfig, e.Name(), cluster)
		}
		data, err := readBounded(filepath.Join(dir, e.Name()), membercreds.MaxTokenSize)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		var keys []string
		for _, f := range strings.FieldsFunc(string(data), func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
			if f = strings.TrimSpace(f); f != "" {
				keys = append(keys, f)
			}
		}
		if keys, err = membercreds.ParseAuthorities(strings.Join(keys, ",")); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrConfig, e.Name(), err)
		}
		out[cluster] = keys
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s holds no <cluster>%s file", ErrConfig, dir, AuthoritySuffix)
	}
	return out, nil
}

// readBounded reads the file at path, which may hold at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// Permissions are the subjects a member of cluster may publish and
// subscribe to on the server: a node's, on its own cluster's subjects
// only (the node user's of internal/natsconf, confined to one cluster).
func Permissions(cluster string) jwt.Permissions {
	var p jwt.Permissions
	own := protocol.Root + "." + cluster + ".>"
	p.Pub.Allow.Add(own, "_INBOX.>",
		"$JS.API.STREAM.NAMES", "$JS.API.STREAM.INFO.>",
		"$JS.API.STREAM.MSG.GET.>", "$JS.API.DIRECT.GET.>")
	p.Sub.Allow.Add(own, "_INBOX.>",
		"$SYS.ACCOUNT.*.CONNECT", "$SYS.ACCOUNT.*.DISCONNECT")
	return p
}

// Respond answers one authorization request, data, as the server sent it:
// the encoded response claims, or nil when the request cannot be read
// (the server then refuses the client: no reason supplied).
func (r *Responder) Respond(data []byte) []byte {
	req, err := r.request(data)
	if err != nil {
		r.cfg.Log.Warn("auth callout: unreadable request", "err", err)
		return nil
	}
	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	resp.Audience = req.Server.ID
	user, member, err := r.authorize(req)
	if err != nil {
		resp.Error = err.Error()
		r.cfg.Log.Info("auth callout: refused", "host", req.ClientInformation.Host, "name", clip(req.ClientInformation.Name), "err", err)
	} else {
		resp.Jwt = user
		r.cfg.Log.Debug("auth callout: admitted", "cluster", member.Cluster, "member", member.ID, "key", member.UserKey, "host", req.ClientInformation.Host)
	}
	out, err := resp.Encode(r.cfg.Issuer)
	if err != nil {
		r.cfg.Log.Error("auth callout: encode response", "err", err)
		return nil
	}
	return []byte(out)
}

// request decodes and checks the request claims.
func (r *Responder) request(data []byte) (*jwt.AuthorizationRequestClaims, error) {
	if len(data) > MaxRequestSize {
		return nil, fmt.Errorf("%d bytes, more than %d", len(data), MaxRequestSize)
	}
	if !bytes.HasPrefix(data, []byte("eyJ")) {
		return nil, errors.New("not a JWT (an encrypted request? the responder takes none: configure no xkey)")
	}
	req, err := jwt.DecodeAuthorizationRequestClaims(string(data))
	if err != nil {
		return nil, err
	}
	vr := jwt.CreateValidationResults()
	req.Validate(vr)
	if vr.IsBlocking(true) {
		return nil, fmt.Errorf("invalid claims: %v", vr.Errors())
	}
	if req.Expires > 0 && !r.cfg.Now().Before(time.Unix(req.Expires, 0)) {
		return nil, errors.New("expired")
	}
	if !nkeys.IsValidPublicServerKey(req.Issuer) {
		return nil, fmt.Errorf("issued by %.60q, not a server", req.Issuer)
	}
	if !nkeys.IsValidPublicUserKey(req.UserNkey) {
		return nil, fmt.Errorf("user_nkey %.60q is not a public user key", req.UserNkey)
	}
	if req.Server.ID == "" {
		return nil, errors.New("no server ID")
	}
	return req, nil
}

// authorize checks the client of req and returns the user JWT that admits
// it.
func (r *Responder) authorize(req *jwt.AuthorizationRequestClaims) (string, membercreds.Credential, error) {
	// A server with its users in its configuration discards the JWT a
	// client presents before it asks: a member presents its credential
	// as the connection's token, and its user key as its nkey, with
	// which it signs the nonce (membercreds.NATSOptions).
	if kind := req.ClientInformation.Kind; kind != "Client" {
		return "", membercreds.Credential{}, fmt.Errorf("baton: a connection of kind %.20q: members connect as clients", kind)
	}
	token := req.ConnectOptions.Token
	if token == "" {
		token = req.ConnectOptions.JWT
	}
	if token == "" {
		return "", membercreds.Credential{}, errors.New("baton: not a configured user, and no member credential presented (as the token)")
	}
	if len(token) > membercreds.MaxTokenSize {
		return "", membercreds.Credential{}, fmt.Errorf("baton: credential of %d bytes, more than %d", len(token), membercreds.MaxTokenSize)
	}
	// The cluster the credential names picks the authority; Verify then
	// checks everything against it.
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "", membercreds.Credential{}, fmt.Errorf("baton: the token is not a member credential (a user JWT): %v", err)
	}
	fields := strings.Split(claims.Name, " ")
	if len(fields) != 3 {
		return "", membercreds.Credential{}, fmt.Errorf("baton: the presented JWT, named %.80q, is not a member credential", claims.Name)
	}
	cluster := fields[1]
	authorities, ok := r.cfg.Authorities[cluster]
	if !ok {
		return "", membercreds.Credential{}, fmt.Errorf("baton: a credential of cluster %.40q, whose authority this server does not trust", cluster)
	}
	now := r.cfg.Now()
	cred, err := membercreds.Verify(token, authorities, cluster, now)
	if err != nil {
		return "", cred, fmt.Errorf("baton: %v", err)
	}
	if nkey := req.ConnectOptions.Nkey; nkey != cred.UserKey {
		return "", cred, fmt.Errorf("baton: member %s/%d: the client presents key %.60q, not the credential's %s", cluster, cred.ID, nkey, cred.UserKey)
	}
	if err := checkNonce(req, cred.UserKey); err != nil {
		return "", cred, fmt.Errorf("baton: member %s/%d: %v", cluster, cred.ID, err)
	}
	if err := r.checkRevoked(cluster, cred.UserKey); err != nil {
		return "", cred, fmt.Errorf("baton: member %s/%d: %v", cluster, cred.ID, err)
	}
	user := jwt.NewUserClaims(req.UserNkey)
	user.Audience = r.cfg.Account
	user.Name = protocol.MemberUser(cluster, cred.ID, cred.UserKey)
	user.Tags.Add(membercreds.ClusterTag+cluster, fmt.Sprintf("%s%d", membercreds.IDTag, cred.ID))
	user.Permissions = Permissions(cluster)
	if !cred.Expires.IsZero() {
		user.Expires = cred.Expires.Unix()
	}
	out, err := user.Encode(r.cfg.Issuer)
	if err != nil {
		return "", cred, fmt.Errorf("baton: encode the user: %v", err)
	}
	return out, cred, nil
}

// checkNonce checks that the client signed the server's nonce with the
// credential's key userKey: that it holds the seed.
func checkNonce(req *jwt.AuthorizationRequestClaims, userKey string) error {
	nonce, sig := req.ClientInformation.Nonce, req.ConnectOptions.SignedNonce
	if sig == "" || nonce == "" {
		return errors.New("no signed nonce: a credential proves nothing without its seed (is a nonce sent? the server sends one when it has nkey users, as the callout user is)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return errors.New("the signed nonce is not base64")
		}
	}
	kp, err := nkeys.FromPublicKey(userKey)
	if err != nil {
		return err
	}
	if err := kp.Verify([]byte(nonce), raw); err != nil {
		return errors.New("the nonce is not signed with the credential's key: the client does not hold its seed")
	}
	return nil
}

// checkRevoked reads <cluster>.revoked and refuses userKey if it is
// listed. An unreadable or malformed file refuses every member of the
// cluster: revocations that cannot be read are not ignored.
func (r *Responder) checkRevoked(cluster, userKey string) error {
	if r.cfg.RevokedDir == "" {
		return nil
	}
	path := filepath.Join(r.cfg.RevokedDir, cluster+RevokedSuffix)
	data, err := readBounded(path, maxRevokedSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("revocations unreadable, so refused: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !nkeys.IsValidPublicUserKey(line) {
			return fmt.Errorf("revocations unreadable, so refused: %s:%d is not a user key (U…)", path, n)
		}
		if line == userKey {
			return fmt.Errorf("key %s is revoked (%s:%d)", userKey, path, n)
		}
	}
	return sc.Err()
}

// clip shortens a client-chosen string for a log line.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Serve answers the authorization requests that reach nc, in QueueGroup,
// until ctx ends; it returns nil then, or the error that stopped it (the
// connection closed).
func (r *Responder) Serve(ctx context.Context, nc *nats.Conn) error {
	sub, err := r.subscribe(nc)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	return r.serve(ctx, sub)
}

// subscribe subscribes nc to the requests, and returns once the server
// has the subscription.
func (r *Responder) subscribe(nc *nats.Conn) (*nats.Subscription, error) {
	sub, err := nc.QueueSubscribeSync(Subject, QueueGroup)
	if err != nil {
		return nil, fmt.Errorf("natsauth: subscribe %s: %w", Subject, err)
	}
	// A request is a few kilobytes; allow a burst of reconnecting clients.
	if err := sub.SetPendingLimits(1024, 1024*MaxRequestSize); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	if err := nc.Flush(); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	return sub, nil
}

// serve answers the requests of sub until ctx ends or sub's connection
// closes.
func (r *Responder) serve(ctx context.Context, sub *nats.Subscription) error {
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("natsauth: %w", err)
		}
		if msg.Reply == "" {
			continue
		}
		if err := msg.Respond(r.Respond(msg.Data)); err != nil {
			r.cfg.Log.Warn("auth callout: respond", "err", err)
		}
	}
}
