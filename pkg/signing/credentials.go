package signing

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/protocol"
)

// Member credentials: with dynamic membership, a member may prove its ID
// with a credential issued by the cluster's authority instead of being
// listed in a member keys file. The credential is a NATS user JWT (see
// pkg/membercreds) that binds the member's cluster and ID to its public
// user key; the member signs as with member keys, and every signed
// message carries the credential in one more header:
//
//	Election-Credential: <the member's user JWT>
//
// A reader that holds only the authority's public key (NewAuthorityKeys)
// checks the credential, that it names the signer, and the signature
// with the key the credential binds. Nothing is learnt from a message
// that does not verify.
const CredentialHeader = "Election-Credential"

// CredentialChecker checks a member's credential at now, against the
// cluster's authority and the reader's own cluster: it returns the
// member ID and the public user key (U…) the credential binds, and when
// it expires (zero for never). pkg/membercreds implements it.
type CredentialChecker interface {
	CheckCredential(token string, now time.Time) (id uint64, userKey string, expires time.Time, err error)
}

// authority is the part of MemberKeys that takes the members' keys from
// their credentials.
type authority struct {
	checker CredentialChecker
	now     func() time.Time

	mu sync.Mutex
	// checked caches the credentials checked, by token; latest is each
	// member's key as its last verified message showed it. Both are
	// bounded: checked by maxCheckedCredentials (emptied when full),
	// latest by the IDs a checker accepts (DynamicMember).
	checked map[string]checkedCredential
	latest  map[uint64]string
}

type checkedCredential struct {
	id      uint64
	public  string
	kp      nkeys.KeyPair
	expires time.Time
}

// maxCheckedCredentials bounds the credentials a reader keeps checked.
const maxCheckedCredentials = 4096

// NewAuthorityKeys returns member keys that take each member's key from
// the credential its messages carry, checked by checker: the keys of a
// cluster with member credentials, for nodes, applications and the
// observer alike. now is the clock credentials are checked at (time.Now
// if nil).
func NewAuthorityKeys(checker CredentialChecker, now func() time.Time) *MemberKeys {
	if now == nil {
		now = time.Now
	}
	return &MemberKeys{auth: &authority{
		checker: checker,
		now:     now,
		checked: make(map[string]checkedCredential),
		latest:  make(map[uint64]string),
	}}
}

// Authority reports whether k takes the members' keys from their
// credentials (NewAuthorityKeys) rather than from a list.
func (k *MemberKeys) Authority() bool { return k != nil && k.auth != nil }

// credential returns the checked credential token.
func (a *authority) credential(token string) (checkedCredential, error) {
	if len(token) > protocol.MaxCredentialSize {
		return checkedCredential{}, reject(protocol.ReasonSignature, "credential of %d bytes, at most %d", len(token), protocol.MaxCredentialSize)
	}
	now := a.now()
	a.mu.Lock()
	c, ok := a.checked[token]
	a.mu.Unlock()
	if !ok {
		id, public, expires, err := a.checker.CheckCredential(token, now)
		if err != nil {
			return c, reject(protocol.ReasonSignature, "credential: %v", err)
		}
		kp, err := nkeys.FromPublicKey(public)
		if err != nil || !nkeys.IsValidPublicUserKey(public) {
			return c, reject(protocol.ReasonSignature, "credential binds %.60q, not a user key", public)
		}
		c = checkedCredential{id: id, public: public, kp: kp, expires: expires}
		a.mu.Lock()
		if len(a.checked) >= maxCheckedCredentials {
			clear(a.checked)
		}
		a.checked[token] = c
		a.mu.Unlock()
	}
	if !c.expires.IsZero() && !now.Before(c.expires) {
		return c, reject(protocol.ReasonSignature, "credential of member %d expired at %s", c.id, c.expires.UTC().Format(time.RFC3339))
	}
	return c, nil
}

// CheckCredential checks token, a member's credential, as k checks the
// credentials messages carry (k from NewAuthorityKeys): it returns the
// member ID and the public user key (U…) the credential binds. The error
// wraps ErrKeys if k takes no credentials.
func (k *MemberKeys) CheckCredential(token string) (uint64, string, error) {
	if !k.Authority() {
		return 0, "", fmt.Errorf("%w: these member keys take no credentials", ErrKeys)
	}
	c, err := k.auth.credential(token)
	if err != nil {
		return 0, "", err
	}
	return c.id, c.public, nil
}

// verify is MemberKeys.Verify with member credentials.
func (a *authority) verify(subject string, payload []byte, h nats.Header) (uint64, error) {
	signer, signature, token := h.Get(SignerHeader), h.Get(SignatureHeader), h.Get(CredentialHeader)
	if signer == "" || signature == "" {
		return 0, reject(protocol.ReasonSignature, "message is not signed")
	}
	if token == "" {
		return 0, reject(protocol.ReasonSignature, "message carries no credential")
	}
	id, err := strconv.ParseUint(signer, 10, 64)
	if err != nil {
		return 0, reject(protocol.ReasonSignature, "signer %.20q is not a member ID", signer)
	}
	c, err := a.credential(token)
	if err != nil {
		return 0, err
	}
	if c.id != id {
		return 0, reject(protocol.ReasonSignature, "signer %d carries the credential of member %d", id, c.id)
	}
	if base64.RawURLEncoding.DecodedLen(len(signature)) != signatureSize {
		return 0, reject(protocol.ReasonSignature, "signature is not %d bytes of base64url", signatureSize)
	}
	sig, err := base64.RawURLEncoding.DecodeString(signature)
	if err != nil {
		return 0, reject(protocol.ReasonSignature, "signature is not base64url")
	}
	if c.kp.Verify(signedBytes(subject, payload), sig) != nil {
		return 0, reject(protocol.ReasonSignature, "signature is not member %d's", id)
	}
	a.mu.Lock()
	a.latest[id] = c.public
	a.mu.Unlock()
	return id, nil
}

// publicKey is member id's key as its last verified message showed it.
func (a *authority) publicKey(id uint64) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.latest[id]
	return p, ok
}

// ids are the members whose messages verified, in increasing order.
func (a *authority) ids() []uint64 {
	a.mu.Lock()
	ids := make([]uint64, 0, len(a.latest))
	for id := range a.latest {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// WithCredential returns a signer that signs as s and adds token, its
// member credential, to every message it signs (CredentialHeader).
func (s *Signer) WithCredential(token string) (*Signer, error) {
	if len(token) == 0 || len(token) > protocol.MaxCredentialSize {
		return nil, fmt.Errorf("%w: credential of %d bytes, want 1 to %d", ErrKeys, len(token), protocol.MaxCredentialSize)
	}
	c := *s
	c.credential = token
	return &c, nil
}

// Credential is the member credential s adds to what it signs, "" if
// none.
func (s *Signer) Credential() string { return s.credential }
