// Package membercreds issues and checks the credentials of the members of a
// cluster with dynamic membership. Such a cluster has no list of member
// keys: a member proves its ID with a credential that the cluster's
// authority issued, and whoever checks it holds only the authority's
// public key.
//
// The credentials are those of NATS decentralized authentication, which
// the deployment's NATS servers check themselves when a member connects
// with them (NATSOptions; internal/natsauth):
//
//   - The authority is a NATS account key pair (public key A…, seed SA…).
//   - A member's key is its Ed25519 user key pair (public key U…, seed
//     SU…), the one it signs its messages with.
//   - A member's credential is a NATS user JWT signed by the authority,
//     whose subject is the member's public user key.
//
// The claims of a credential:
//
//	sub                 the member's public user key, U…
//	iss                 the authority, A… (or one of its signing keys, with
//	                    nats.issuer_account the authority)
//	name                "baton <cluster> <id>", exactly: the cluster's name
//	                    as configured, case kept, and the member ID in
//	                    decimal
//	nats.tags           "baton-cluster:<cluster>" and "baton-id:<id>"
//	exp                 the expiry, if any
//	nats.pub.allow      election.<cluster>.>, _INBOX.>, $JS.API.>
//	nats.sub.allow      the same
//
// The name is what Verify reads the cluster and the ID from. The tags say
// the same for whoever lists the users of an account, but NATS lower-cases
// tags, so they cannot tell cluster "Prod" from "prod": Verify requires the
// tags to agree with the name, compared in lower case, and compares the
// cluster of the name with the expected one exactly.
//
// The permissions are what a node needs on the NATS server: its cluster's
// subjects, the inboxes of requests, and the JetStream API (a node reads a
// stream when it starts). The server enforces them; Verify does not read
// them, and a deployment may issue credentials with more.
//
// Member IDs of a cluster with dynamic membership are 1 to MaxID: the IDs
// partition the terms of the election among the members, so their range
// is bounded.
//
// A member's credential and seed are kept together in the standard NATS
// credentials file (WriteCreds, ReadCreds), which NATS clients read as
// they are (nats.UserCredentials).
//
// Revocation: the deployment's NATS servers refuse a new connection with a
// revoked key (a list of revoked keys per cluster, internal/natsauth);
// Verify, which holds only public keys, checks the signature, the expiry
// and the claims, and a connection already open stays until it closes or
// its credential expires. Issue credentials that expire where revocation
// must reach the readers and the open connections too.
package membercreds

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/internal/atomicfile"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// MaxID is the highest member ID of a cluster with dynamic membership:
// its members are 1 to MaxID. The IDs partition the terms of the election
// among the members.
const MaxID = protocol.MaxMemberID

// MaxTokenSize bounds the size of a credential, in bytes, that Verify
// decodes. What Issue makes is well under it.
const MaxTokenSize = 4096

// maxCredsFileSize bounds the size of a credentials file that ReadCreds
// reads: a token, a seed and their decoration.
const maxCredsFileSize = 4 * MaxTokenSize

// Names in the claims.
const (
	// namePrefix starts the name of a credential: "baton <cluster> <id>".
	namePrefix = "baton"
	// ClusterTag prefixes the tag that names the member's cluster.
	ClusterTag = "baton-cluster:"
	// IDTag prefixes the tag that names the member's ID.
	IDTag = "baton-id:"
)

// File names of a cluster's credentials in a directory.
const (
	// AuthoritySeedFile holds the authority's seed, SA…, one line.
	AuthoritySeedFile = "authority.seed"
	// AuthorityFile holds the authority's public key, A…, one line.
	AuthorityFile = "authority.pub"
)

// CredsFile is the name of member id's credentials file in a directory.
func CredsFile(id uint64) string { return fmt.Sprintf("node-%d.creds", id) }

// ErrCredential is wrapped by every error of Verify and by the errors of
// ReadCreds and WriteCreds about what a credential or a credentials file
// holds.
var ErrCredential = errors.New("membercreds: credential")

// ErrExists is wrapped by the error of WriteCreds when the file is already
// there.
var ErrExists = errors.New("membercreds: credentials are never overwritten")

// Credential is a member's credential that Verify accepted.
type Credential struct {
	// Cluster is the cluster's name, as the credential states it.
	Cluster string
	// ID is the member's ID, 1 to MaxID.
	ID uint64
	// UserKey is the member's public user key, U…: what its messages
	// are signed with.
	UserKey string
	// Issuer is the key that signed the credential: the authority or one
	// of its signing keys.
	Issuer string
	// Expires is when the credential expires; zero if never.
	Expires time.Time
	// JWT is the credential, the encoded user JWT.
	JWT string
}

// Permissions returns the subjects a member of cluster may publish and
// subscribe to: its cluster's subjects, the inboxes of requests and the
// JetStream API.
func Permissions(cluster string) []string {
	return []string{protocol.Root + "." + cluster + ".>", "_INBOX.>", "$JS.API.>"}
}

// claimsFor returns the claims of the credential of member id of cluster
// whose public user key is userPublic.
func claimsFor(cluster string, id uint64, userPublic string) *jwt.UserClaims {
	c := jwt.NewUserClaims(userPublic)
	idText := strconv.FormatUint(id, 10)
	c.Name = namePrefix + " " + cluster + " " + idText
	c.Tags.Add(ClusterTag+cluster, IDTag+idText)
	c.Pub.Allow.Add(Permissions(cluster)...)
	c.Sub.Allow.Add(Permissions(cluster)...)
	return c
}

// Issue returns the credential of member id of cluster, whose public user
// key is userPublic (U…), signed by authority, an account key pair with
// its seed (SA…). The credential expires after expires, or never if
// expires is 0.
func Issue(authority nkeys.KeyPair, cluster string, id uint64, userPublic string, expires time.Duration) (string, error) {
	if err := protocol.ValidateCluster(cluster); err != nil {
		return "", fmt.Errorf("membercreds: %w", err)
	}
	if id < 1 || id > MaxID {
		return "", fmt.Errorf("membercreds: member ID %d: the members of a cluster with dynamic membership are 1 to %d", id, MaxID)
	}
	if !nkeys.IsValidPublicUserKey(userPublic) {
		return "", fmt.Errorf("membercreds: %.60q is not a public user key (U…)", userPublic)
	}
	if expires < 0 {
		return "", fmt.Errorf("membercreds: expiry %v is negative; 0 is never", expires)
	}
	if err := checkAuthority(authority); err != nil {
		return "", err
	}
	c := claimsFor(cluster, id, userPublic)
	if expires > 0 {
		c.Expires = time.Now().Add(expires).Unix()
	}
	token, err := c.Encode(authority)
	if err != nil {
		return "", fmt.Errorf("membercreds: %w", err)
	}
	return token, nil
}

// checkAuthority reports whether kp is an account key pair with its seed.
func checkAuthority(kp nkeys.KeyPair) error {
	if kp == nil {
		return errors.New("membercreds: no authority")
	}
	public, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("membercreds: authority: %w", err)
	}
	if !nkeys.IsValidPublicAccountKey(public) {
		return fmt.Errorf("membercreds: the authority must be an account key (seed SA…), not %s (%.1s…)", keyKind(public), public)
	}
	if _, err := kp.Seed(); err != nil {
		return fmt.Errorf("membercreds: the authority %s has no seed: %w", public, err)
	}
	return nil
}

// keyKind names the kind of the public key public, with its article.
func keyKind(public string) string {
	switch {
	case nkeys.IsValidPublicUserKey(public):
		return "a user key"
	case nkeys.IsValidPublicOperatorKey(public):
		return "an operator key"
	case nkeys.IsValidPublicServerKey(public):
		return "a server key"
	case nkeys.IsValidPublicClusterKey(public):
		return "a cluster key"
	case nkeys.IsValidPublicCurveKey(public):
		return "a curve key"
	case nkeys.IsValidPublicAccountKey(public):
		return "an account key"
	}
	return "a key of unknown kind"
}

// Verify checks the credential token of a member of cluster at now and
// returns what it states. It accepts only a user JWT
//
//   - whose signature holds, made by a key of authorities: the account
//     public keys (A…) of the cluster's authority, and of its signing keys
//     if it issues with them. A credential signed by a signing key names
//     its account (issuer_account), which must be in authorities too;
//   - valid at now: not before its start, if any, and before its expiry,
//     if any;
//   - whose subject is a public user key, which is not a bearer token;
//   - whose name states cluster, exactly (case included), and an ID of 1 to
//     MaxID in decimal, with tags that agree.
//
// Every error wraps ErrCredential.
func Verify(token string, authorities []string, cluster string, now time.Time) (Credential, error) {
	if len(token) > MaxTokenSize {
		return Credential{}, fmt.Errorf("%w: %d bytes, more than %d", ErrCredential, len(token), MaxTokenSize)
	}
	if len(authorities) == 0 {
		return Credential{}, fmt.Errorf("%w: no authority to check it with", ErrCredential)
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return Credential{}, fmt.Errorf("%w: not a user JWT signed by an account: %v", ErrCredential, err)
	}
	if claims.Version != 2 {
		// Version 1 signs the claims alone; a reader written from the
		// protocol checks version 2's signature over header and claims.
		return Credential{}, fmt.Errorf("%w: claims of version %d, want 2", ErrCredential, claims.Version)
	}
	if !slices.Contains(authorities, claims.Issuer) {
		return Credential{}, fmt.Errorf("%w: signed by %s, which is not an authority of the cluster", ErrCredential, claims.Issuer)
	}
	if claims.IssuerAccount != "" && !slices.Contains(authorities, claims.IssuerAccount) {
		return Credential{}, fmt.Errorf("%w: signed by %s for account %s, which is not an authority of the cluster", ErrCredential, claims.Issuer, claims.IssuerAccount)
	}
	vr := jwt.CreateValidationResults()
	claims.Validate(vr)
	if vr.IsBlocking(false) {
		return Credential{}, fmt.Errorf("%w: invalid claims: %v", ErrCredential, vr.Errors())
	}
	if claims.NotBefore > 0 && now.Before(time.Unix(claims.NotBefore, 0)) {
		return Credential{}, fmt.Errorf("%w: not valid before %s", ErrCredential, time.Unix(claims.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	var expires time.Time
	if claims.Expires > 0 {
		expires = time.Unix(claims.Expires, 0)
		if !now.Before(expires) {
			return Credential{}, fmt.Errorf("%w: expired at %s", ErrCredential, expires.UTC().Format(time.RFC3339))
		}
	}
	if !nkeys.IsValidPublicUserKey(claims.Subject) {
		return Credential{}, fmt.Errorf("%w: subject %.60q is not a public user key (U…)", ErrCredential, claims.Subject)
	}
	if claims.BearerToken {
		return Credential{}, fmt.Errorf("%w: a bearer token, which proves nothing of its holder", ErrCredential)
	}
	stated, id, err := parseName(claims.Name)
	if err != nil {
		return Credential{}, err
	}
	if stated != cluster {
		return Credential{}, fmt.Errorf("%w: a member of cluster %q, not %q", ErrCredential, stated, cluster)
	}
	if err := checkTags(claims.Tags, stated, id); err != nil {
		return Credential{}, err
	}
	return Credential{
		Cluster: stated,
		ID:      id,
		UserKey: claims.Subject,
		Issuer:  claims.Issuer,
		Expires: expires,
		JWT:     token,
	}, nil
}

// parseName reads the cluster and the ID of a credential's name,
// "baton <cluster> <id>".
func parseName(name string) (string, uint64, error) {
	fields := strings.Split(name, " ")
	if len(fields) != 3 || fields[0] != namePrefix {
		return "", 0, fmt.Errorf("%w: name %.80q is not \"%s <cluster> <id>\"", ErrCredential, name, namePrefix)
	}
	if err := protocol.ValidateCluster(fields[1]); err != nil {
		return "", 0, fmt.Errorf("%w: name %.80q: %v", ErrCredential, name, err)
	}
	id, err := strconv.ParseUint(fields[2], 10, 64)
	if err != nil || strconv.FormatUint(id, 10) != fields[2] {
		return "", 0, fmt.Errorf("%w: name %.80q: the ID %.20q is not a decimal integer", ErrCredential, name, fields[2])
	}
	if id < 1 || id > MaxID {
		return "", 0, fmt.Errorf("%w: member ID %d: the members of a cluster with dynamic membership are 1 to %d", ErrCredential, id, MaxID)
	}
	return fields[1], id, nil
}

// checkTags reports whether the baton tags of a credential are those of
// member id of cluster, in lower case as NATS keeps tags.
func checkTags(tags jwt.TagList, cluster string, id uint64) error {
	want := map[string]string{
		ClusterTag: strings.ToLower(ClusterTag + cluster),
		IDTag:      IDTag + strconv.FormatUint(id, 10),
	}
	for prefix, tag := range want {
		found := false
		for _, t := range tags {
			if !strings.HasPrefix(t, prefix) {
				continue
			}
			if t != tag {
				return fmt.Errorf("%w: tag %.80q contradicts the name, which states %q", ErrCredential, t, tag)
			}
			found = true
		}
		if !found {
			return fmt.Errorf("%w: no tag %q", ErrCredential, tag)
		}
	}
	return nil
}

// ParseAuthorities reads a comma-separated list of account public keys
// (A…): a cluster's authority and, if it issues with them, its signing
// keys. Blanks around the keys are ignored.
func ParseAuthorities(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("membercreds: no authority: want account public keys (A…), comma-separated")
	}
	var keys []string
	for raw := range strings.SplitSeq(s, ",") {
		key := strings.TrimSpace(raw)
		if !nkeys.IsValidPublicAccountKey(key) {
			what := "not a public key"
			if nkeys.IsValidPublicKey(key) {
				what = keyKind(key)
			}
			return nil, fmt.Errorf("membercreds: authority %.60q is %s, not an account public key (A…)", key, what)
		}
		if slices.Contains(keys, key) {
			return nil, fmt.Errorf("membercreds: authority %s is listed twice", key)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// WriteCreds writes the credentials file of a member at path: its
// credential token and its user seed, in the standard NATS format. The
// file has mode 0600 and is written whole and synced before it appears
// at path; WriteCreds never replaces a file already there (ErrExists).
func WriteCreds(path string, token string, seed []byte) error {
	data, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCredential, path, err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		if err == nil {
			return fmt.Errorf("%w: %s exists", ErrExists, path)
		}
		return fmt.Errorf("membercreds: %w", err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("membercreds: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("membercreds: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("membercreds: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("membercreds: fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("membercreds: close %s: %w", tmp, err)
	}
	// A link, unlike a rename, fails if path exists.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s exists", ErrExists, path)
		}
		return fmt.Errorf("membercreds: %w", err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("membercreds: %w", err)
	}
	return nil
}

// ReadCreds reads the credentials file at path (WriteCreds, or any NATS
// credentials file): the credential token and the member's user key pair,
// whose public key must be the token's subject. It checks the token's own
// signature, not its issuer nor its claims: Verify does.
func ReadCreds(path string) (token string, kp nkeys.KeyPair, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, fmt.Errorf("membercreds: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCredsFileSize+1))
	if err != nil {
		return "", nil, fmt.Errorf("membercreds: %w", err)
	}
	defer clear(data)
	if len(data) > maxCredsFileSize {
		return "", nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCredential, path, maxCredsFileSize)
	}
	if !bytes.Contains(data, []byte("-----BEGIN NATS USER JWT-----")) {
		return "", nil, fmt.Errorf("%w: %s is not a NATS credentials file (no user JWT)", ErrCredential, path)
	}
	token, err = jwt.ParseDecoratedJWT(data)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s: %v", ErrCredential, path, err)
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s: not a user JWT signed by an account: %v", ErrCredential, path, err)
	}
	kp, err = jwt.ParseDecoratedNKey(data)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s: %v", ErrCredential, path, err)
	}
	public, err := kp.PublicKey()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s: %v", ErrCredential, path, err)
	}
	if !nkeys.IsValidPublicUserKey(public) {
		return "", nil, fmt.Errorf("%w: %s holds the seed of %s, not a user seed (SU…)", ErrCredential, path, keyKind(public))
	}
	if public != claims.Subject {
		return "", nil, fmt.Errorf("%w: %s: the seed is the key of %s, but the credential is %s's", ErrCredential, path, public, claims.Subject)
	}
	return token, kp, nil
}

// Checker checks the credentials of one cluster's members against its
// authorities: it implements signing.CredentialChecker, so that
// signing.NewAuthorityKeys(checker, nil) are the member keys of a
// cluster with member credentials, for whoever reads it (a node, an
// application, the observer).
type Checker struct {
	// Authorities are the authority's public account keys (A…),
	// ParseAuthorities's answer.
	Authorities []string
	// Cluster is the reader's own cluster: a credential of another
	// cluster is refused.
	Cluster string
}

// NewChecker returns the checker of cluster's credentials against
// authorities, a comma-separated list of account public keys.
func NewChecker(cluster, authorities string) (Checker, error) {
	if err := protocol.ValidateCluster(cluster); err != nil {
		return Checker{}, fmt.Errorf("%w: %v", ErrCredential, err)
	}
	keys, err := ParseAuthorities(authorities)
	if err != nil {
		return Checker{}, err
	}
	return Checker{Authorities: keys, Cluster: cluster}, nil
}

// CheckCredential implements signing.CredentialChecker with Verify.
func (c Checker) CheckCredential(token string, now time.Time) (uint64, string, time.Time, error) {
	cred, err := Verify(token, c.Authorities, c.Cluster, now)
	if err != nil {
		return 0, "", time.Time{}, err
	}
	return cred.ID, cred.UserKey, cred.Expires, nil
}

// Keys returns the member keys of the checker's cluster: every key comes
// from the credential a message carries (signing.NewAuthorityKeys).
func (c Checker) Keys() *signing.MemberKeys { return signing.NewAuthorityKeys(c, nil) }

// Member is what a member of a cluster with credentials runs with: its
// credential, the signer that adds it to everything it signs, and the
// member keys that check every other member's with the authority's keys
// alone.
type Member struct {
	Credential Credential
	Signer     *signing.Signer
	Keys       *signing.MemberKeys
}

// ErrAuthority wraps Load's errors about the authority's keys, as
// opposed to the creds file.
var ErrAuthority = errors.New("membercreds: authority")

// Load reads the creds file at path (readable by its owner only: the
// seed is the member's identity), checks the credential at now against
// authorities (ParseAuthorities's form) and cluster, and returns the
// member it makes. Errors about authorities wrap ErrAuthority; the others
// are about the file.
func Load(path, authorities, cluster string, now time.Time) (Member, error) {
	checker, err := NewChecker(cluster, authorities)
	if err != nil {
		return Member{}, fmt.Errorf("%w: %w", ErrAuthority, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return Member{}, err
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return Member{}, fmt.Errorf("%s may be read or written by group or others (mode %04o), and its seed is the member's identity: chmod 600 it (0400 for a Kubernetes Secret)", path, mode)
	}
	token, kp, err := ReadCreds(path)
	if err != nil {
		return Member{}, err
	}
	cred, err := Verify(token, checker.Authorities, cluster, now)
	if err != nil {
		return Member{}, fmt.Errorf("%s: %w", path, err)
	}
	signer, err := signing.NewSigner(cred.ID, kp)
	if err == nil {
		signer, err = signer.WithCredential(token)
	}
	if err != nil {
		return Member{}, fmt.Errorf("%s: %w", path, err)
	}
	return Member{Credential: cred, Signer: signer, Keys: checker.Keys()}, nil
}

// NATSOptions are the options by which a member connects to a NATS server
// that checks member credentials (the deployment's, whose users are in its
// configuration and which hands the clients it does not know to its
// credential check): the member's user key as the connection's nkey, with
// which the client signs the server's nonce, proving it holds the seed;
// and its credential token as the connection's token, since such a server
// discards a JWT a client presents as one. The server then names the
// connection's user protocol.MemberUser and confines it to its cluster's
// subjects.
func NATSOptions(token string, kp nkeys.KeyPair) []nats.Option {
	public, _ := kp.PublicKey()
	return []nats.Option{nats.Nkey(public, kp.Sign), nats.Token(token)}
}

// NATSOptionsFile is NATSOptions with the credential and seed of the creds
// file at path (ReadCreds).
func NATSOptionsFile(path string) ([]nats.Option, error) {
	token, kp, err := ReadCreds(path)
	if err != nil {
		return nil, err
	}
	return NATSOptions(token, kp), nil
}
