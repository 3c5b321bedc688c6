package membercreds

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// TestAuthorityKeys: a reader that holds only the authority's key checks
// a member's messages by the credential they carry, and learns nothing
// from one that does not verify.
func TestAuthorityKeys(t *testing.T) {
	authority, authorityPub := newAccount(t)
	other, _ := newAccount(t)
	now := time.Now()
	signer := func(issuer nkeys.KeyPair, id uint64, expires time.Duration) *signing.Signer {
		kp, pub := newUser(t)
		token, err := Issue(issuer, "prod", id, pub, expires)
		if err != nil {
			t.Fatal(err)
		}
		s := must[*signing.Signer](t)(signing.NewSigner(id, kp))
		return must[*signing.Signer](t)(s.WithCredential(token))
	}
	checker := must[Checker](t)(NewChecker("prod", authorityPub))
	keys := signing.NewAuthorityKeys(checker, func() time.Time { return now })
	if !keys.Authority() || keys.Len() != 0 {
		t.Fatal("new authority keys must know no member")
	}
	subject := protocol.BroadcastSubject("prod", protocol.TypeHeartbeat)
	payload := []byte(`{"v":2}`)
	seven := signer(authority, 7, 0)
	if id, err := keys.Verify(subject, payload, seven.Header(subject, payload)); err != nil || id != 7 {
		t.Fatalf("member 7's message: %d, %v", id, err)
	}
	if pub, ok := keys.PublicKey(7); !ok || pub != seven.PublicKey() {
		t.Fatalf("member 7's key: %q, %t", pub, ok)
	}

	unsigned := nats.Header{}
	impostor := seven.Header(subject, payload)
	impostor.Set(signing.SignerHeader, "8") // 7's credential, claiming 8
	stolen := signer(authority, 8, 0).Header(subject, payload)
	stolen.Set(signing.CredentialHeader, seven.Credential()) // 8 signs, with 7's credential
	noCredKey, _ := newUser(t)
	noCred := must[*signing.Signer](t)(signing.NewSigner(9, noCredKey))
	for name, h := range map[string]nats.Header{
		"unsigned":             unsigned,
		"another signer":       impostor,
		"another's credential": stolen,
		"another authority":    signer(other, 10, 0).Header(subject, payload),
		"expired":              signer(authority, 11, time.Nanosecond).Header(subject, payload),
		"no credential":        noCred.Header(subject, payload),
		"another subject":      seven.Header(protocol.BroadcastSubject("prod", protocol.TypeResign), payload),
	} {
		if _, err := keys.Verify(subject, payload, h); protocol.ReasonOf(err) != protocol.ReasonSignature {
			t.Errorf("%s: %v, want a signature error", name, err)
		}
	}
	if ids := keys.IDs(); len(ids) != 1 || ids[0] != 7 {
		t.Fatalf("members learnt: %v, want only 7", ids)
	}
	if err := keys.Check(nil, noCred); err == nil {
		t.Fatal("a node without a credential passed the check of authority keys")
	}
	if err := keys.Check(nil, seven); err != nil {
		t.Fatal(err)
	}
}

// TestAuthorityAnnouncement: an application that holds only the
// authority's key, and knows its cluster's algorithm, believes the
// leader's announcement and refuses one signed with another member's
// credential or naming another leader.
func TestAuthorityAnnouncement(t *testing.T) {
	authority, authorityPub := newAccount(t)
	member := func(id uint64) *signing.Signer {
		kp, pub := newUser(t)
		token := must[string](t)(Issue(authority, "orders", id, pub, 0))
		return must[*signing.Signer](t)(must[*signing.Signer](t)(signing.NewSigner(id, kp)).WithCredential(token))
	}
	seven, eight := member(7), member(8)
	keys := must[Checker](t)(NewChecker("orders", authorityPub)).Keys()
	announce := func(leader uint64) []byte {
		return must[[]byte](t)(protocol.EncodeAnnouncement(protocol.Announcement{Cluster: "orders", Leader: leader, Term: leader, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: time.Now()}}))
	}
	data := announce(7)
	a, err := signing.ReadAnnouncementOf(keys, "orders", protocol.Bully, data, seven.SignAnnouncement("orders", data))
	if err != nil || a.Leader != 7 {
		t.Fatalf("member 7's announcement: %+v, %v", a, err)
	}
	if _, err := signing.ReadAnnouncementOf(keys, "orders", protocol.Bully, data, eight.SignAnnouncement("orders", data)); err == nil {
		t.Fatal("member 8 announced member 7's leadership")
	}
	forged := eight.SignAnnouncement("orders", data)
	forged.Set(signing.SignerHeader, "7")
	forged.Set(signing.CredentialHeader, seven.Credential())
	if _, err := signing.ReadAnnouncementOf(keys, "orders", protocol.Bully, data, forged); err == nil {
		t.Fatal("member 8 signed with member 7's credential")
	}
	// Without the algorithm, the reader knows from the authority keys that
	// the cluster is not byzantine.
	if _, err := signing.ReadAnnouncementOf(keys, "orders", "", data, seven.SignAnnouncement("orders", data)); err != nil {
		t.Fatalf("a reader that does not state the algorithm: %v", err)
	}
	byz := must[[]byte](t)(protocol.EncodeAnnouncement(protocol.Announcement{Cluster: "orders", Leader: 7, Term: 7, Algorithm: protocol.Byzantine, At: protocol.Timestamp{Time: time.Now()}}))
	if _, err := signing.ReadAnnouncementOf(keys, "orders", "", byz, seven.SignAnnouncement("orders", byz)); !errors.Is(err, protocol.ErrAnnouncement) {
		t.Fatalf("a byzantine announcement in a credentials cluster: %v, want a refusal", err)
	}
}

// TestLoad: a member's creds file and its authority make its signer and
// the cluster's keys; errors about the authority are told apart.
func TestLoad(t *testing.T) {
	authority, authorityPub := newAccount(t)
	user, userPub := newUser(t)
	seed := must[[]byte](t)(user.Seed())
	path := filepath.Join(t.TempDir(), CredsFile(7))
	if err := WriteCreds(path, must[string](t)(Issue(authority, "orders", 7, userPub, 0)), seed); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, authorityPub, "orders", time.Now())
	if err != nil || m.Credential.ID != 7 || m.Signer.ID() != 7 || m.Signer.Credential() == "" || !m.Keys.Authority() {
		t.Fatalf("Load = %+v, %v", m, err)
	}
	if _, err := Load(path, "not-a-key", "orders", time.Now()); !errors.Is(err, ErrAuthority) {
		t.Fatalf("a bad authority: %v, want ErrAuthority", err)
	}
	if _, err := Load(path, authorityPub, "other", time.Now()); err == nil || errors.Is(err, ErrAuthority) {
		t.Fatalf("another cluster: %v, want an error about the file", err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, authorityPub, "orders", time.Now()); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a file others may read: %v", err)
	}
}
