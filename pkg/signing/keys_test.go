package signing

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/protocol"
)

// testSigner returns a signer for member id with a new user key.
func testSigner(t testing.TB, id uint64) *Signer {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(id, kp)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testKeys returns the member keys of signers.
func testKeys(t testing.TB, signers ...*Signer) *MemberKeys {
	t.Helper()
	public := make(map[uint64]string)
	for _, s := range signers {
		public[s.ID()] = s.PublicKey()
	}
	k, err := NewMemberKeys(public)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignatureOfTheNamedMember(t *testing.T) {
	five, four := testSigner(t, 5), testSigner(t, 4)
	keys := testKeys(t, five, four)
	subject := "election.c.heartbeat"
	payload := []byte(`{"v":1,"type":"heartbeat","from":5,"term":5}`)
	h := five.Header(subject, payload)
	if id, err := keys.Verify(subject, payload, h); err != nil || id != 5 {
		t.Fatalf("Verify(valid) = %d, %v; want 5, nil", id, err)
	}
	// Member 4 signs as itself a message that names 5: the signature is
	// 4's, so CheckSigner refuses it.
	byFour := four.Header(subject, payload)
	id, err := keys.Verify(subject, payload, byFour)
	if err != nil || id != 4 {
		t.Fatalf("Verify(by 4) = %d, %v; want 4, nil", id, err)
	}
	if err := CheckSigner(id, 5); protocol.ReasonOf(err) != protocol.ReasonSignature {
		t.Errorf("CheckSigner(4, 5) = %v, want %s", err, protocol.ReasonSignature)
	}
	// Member 4 claims to be 5 in the header: its signature is not 5's.
	claims := four.Header(subject, payload)
	claims.Set(SignerHeader, "5")
	outsider := testSigner(t, 5) // a key of nobody's, with 5's ID
	with := func(k, v string) nats.Header {
		c := nats.Header{}
		for name, vals := range h {
			c[name] = append([]string(nil), vals...)
		}
		c.Set(k, v)
		return c
	}
	bad := []struct {
		name, subject string
		payload       []byte
		h             nats.Header
	}{
		{"unsigned", subject, payload, nil},
		{"no signer", subject, payload, with(SignerHeader, "")},
		{"signer not a number", subject, payload, with(SignerHeader, "five")},
		{"signer without key", subject, payload, with(SignerHeader, "7")},
		{"signature not base64url", subject, payload, with(SignatureHeader, strings.Repeat("!", 86))},
		{"signature too short", subject, payload, with(SignatureHeader, "AAAA")},
		{"another member's key", subject, payload, claims},
		{"a key of no member", subject, payload, outsider.Header(subject, payload)},
		{"other subject", "election.d.heartbeat", payload, h},
		{"tampered", subject, []byte(`{"v":1,"type":"heartbeat","from":5,"term":50}`), h},
	}
	for _, b := range bad {
		if _, err := keys.Verify(b.subject, b.payload, b.h); protocol.ReasonOf(err) != protocol.ReasonSignature {
			t.Errorf("%s: Verify = %v, want %s", b.name, err, protocol.ReasonSignature)
		}
	}
}

// TestSignatureWorkedExample checks the worked example of docs/protocol.md:
// a signature is Ed25519 over subject, a zero byte and payload, sent in
// base64url without padding, and verifies with the bare public key.
func TestSignatureWorkedExample(t *testing.T) {
	seed := []byte("SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU")
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	public, _ := kp.PublicKey()
	s, err := NewSigner(5, kp)
	if err != nil {
		t.Fatal(err)
	}
	subject := "election.demo.heartbeat"
	payload := []byte(`{"v":2,"type":"heartbeat","from":5,"term":10,"inc":1795390891560813604,"n":42,"ts":1795390891612}`)
	h := s.Header(subject, payload)
	sig, err := base64.RawURLEncoding.DecodeString(h.Get(SignatureHeader))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(public))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 32 || len(sig) != 64 || h.Get(SignerHeader) != "5" {
		t.Fatalf("public key %d bytes, signature %d bytes, signer %q", len(raw), len(sig), h.Get(SignerHeader))
	}
	if !ed25519Verify(raw, []byte(subject+"\x00"+string(payload)), sig) {
		t.Error("the signature does not verify as docs/protocol.md says")
	}
	// The values of docs/protocol.md.
	if public != "UCK5N7N66OBOINFXAYC2ACJQYFSOD4VYNU6APEJTAVFZB2SVHLKGEW7L" {
		t.Errorf("public key: got %s, want the documented one", public)
	}
	if want := "4rE0nVLwljGuGdQPetiedYL8qmLmmBto6DEgvYhObT_xrwdChzG12hKkZNziDpBi-rxBt2tIot-Oyi8LacIKDg"; h.Get(SignatureHeader) != want {
		t.Errorf("heartbeat signature: got %s, want %s", h.Get(SignatureHeader), want)
	}
	announcement := []byte(`{"cluster":"demo","leader":5,"term":10,"algorithm":"bully","at":"2026-11-24T09:30:00.123456789Z"}`)
	if got, want := s.SignAnnouncement("demo", announcement).Get(SignatureHeader), "b2Wj56je9F8G_BWm2PDF4UDT4Q4vV58j47L0O2acB5NI7zfjEZj7E7PQYk0X-6pQ0rnMaBunaDJiA4v_yAYoDQ"; got != want {
		t.Errorf("announcement signature: got %s, want %s", got, want)
	}
}

func TestReadAnnouncement(t *testing.T) {
	five, four := testSigner(t, 5), testSigner(t, 4)
	keys := testKeys(t, five, four)
	data := []byte(`{"cluster":"c","leader":5,"term":12,"algorithm":"ring","at":"2026-11-21T22:00:00.123456789Z"}`)
	h := five.SignAnnouncement("c", data)
	a, err := ReadAnnouncementOf(keys, "c", protocol.Ring, data, h)
	if err != nil || a.Leader != 5 || a.Term != 12 {
		t.Fatalf("ReadAnnouncement(signed) = %+v, %v", a, err)
	}
	if a, err := ReadAnnouncement(nil, "c", data, nil); err != nil || a.Term != 12 {
		t.Fatalf("ReadAnnouncement(no keys, unsigned) = %+v, %v", a, err)
	}
	// A signature made for another cluster's leader subject, as a node of
	// that cluster would make it, does not pass for this one.
	moved := []byte(`{"cluster":"d","leader":5,"term":12,"algorithm":"ring","at":"2026-11-21T22:00:00.123456789Z"}`)
	bad := []struct {
		name, cluster string
		h             nats.Header
		data          []byte
	}{
		{"unsigned", "c", nil, data},
		{"signed by another member", "c", four.SignAnnouncement("c", data), data},
		{"signed by a key of no member", "c", testSigner(t, 5).SignAnnouncement("c", data), data},
		{"other cluster", "d", h, moved},
		{"asked for another cluster", "d", h, data},
		{"tampered term", "c", h, []byte(`{"cluster":"c","leader":5,"term":13,"algorithm":"ring","at":"2026-11-21T22:00:00.123456789Z"}`)},
	}
	for _, b := range bad {
		if _, err := ReadAnnouncement(keys, b.cluster, b.data, b.h); protocol.ReasonOf(err) != protocol.ReasonSignature {
			t.Errorf("%s: ReadAnnouncement = %v, want %s", b.name, err, protocol.ReasonSignature)
		}
	}
	malformed := []byte(`{"cluster":"c"}`)
	for _, tc := range []struct {
		name, cluster string
		keys          *MemberKeys
		data          []byte
		h             nats.Header
	}{
		{"malformed", "c", keys, malformed, five.SignAnnouncement("c", malformed)},
		{"term above the ceiling", "c", nil, []byte(`{"cluster":"c","leader":5,"term":18446744073709551615,"algorithm":"ring","at":"2026-11-21T22:00:00.123456789Z"}`), nil},
		{"asked for another cluster, no keys", "d", nil, data, nil},
	} {
		if _, err := ReadAnnouncement(tc.keys, tc.cluster, tc.data, tc.h); !errors.Is(err, protocol.ErrAnnouncement) {
			t.Errorf("%s: ReadAnnouncement = %v, want protocol.ErrAnnouncement", tc.name, err)
		}
	}
}

func TestParseMemberKeys(t *testing.T) {
	one, two := testSigner(t, 1), testSigner(t, 2)
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	accountKey, _ := account.PublicKey()
	good := "# the cluster's keys\n\n1 " + one.PublicKey() + "\n  # indented comment\n2\t" + two.PublicKey() + "  \n"
	k, err := ParseMemberKeys(strings.NewReader(good))
	if err != nil {
		t.Fatalf("ParseMemberKeys(good) = %v", err)
	}
	if p, _ := k.PublicKey(2); p != two.PublicKey() || k.Len() != 2 {
		t.Errorf("member 2: got %s of %d, want %s of 2", p, k.Len(), two.PublicKey())
	}
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "# nothing\n", "no member"},
		{"one field", "1\n", "line 1"},
		{"three fields", "1 " + one.PublicKey() + " extra\n", "line 1"},
		{"ID not a number", "x " + one.PublicKey() + "\n", `line 1: "x" is not a positive integer`},
		{"ID zero", "0 " + one.PublicKey() + "\n", "line 1: member ID 0"},
		{"duplicate ID", "1 " + one.PublicKey() + "\n\n1 " + two.PublicKey() + "\n", "line 3: duplicate member ID 1 (first on line 1)"},
		{"bad key", "1 " + one.PublicKey() + "\n2 UNOTAKEY\n", "line 2: member 2: \"UNOTAKEY\" is not a public key"},
		{"seed instead of key", "1 SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU\n", "line 1: member 1"},
		{"account key", "1 " + accountKey + "\n", "line 1: member 1: " + accountKey + " is not a user key"},
		{"duplicate key", "1 " + one.PublicKey() + "\n2 " + one.PublicKey() + "\n", "line 2: member 2 has the key of member 1"},
		{"too many", strings.Repeat("# x\n", 3) + manyMembers(t, MaxMemberKeys+1), fmt.Sprintf("line %d: more than %d members", 3+MaxMemberKeys+1, MaxMemberKeys)},
	} {
		_, err := ParseMemberKeys(strings.NewReader(tc.text))
		if !errors.Is(err, ErrKeys) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an ErrKeys containing %q", tc.name, err, tc.want)
		}
	}
}

// manyMembers is a member keys file of n members, each with its own key.
func manyMembers(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for id := 1; id <= n; id++ {
		fmt.Fprintf(&b, "%d %s\n", id, testSigner(t, uint64(id)).PublicKey())
	}
	return b.String()
}

// A file of MaxMemberKeys members is read; NewMemberKeys is bounded and
// refuses a shared key as the file does.
func TestMemberKeysBounds(t *testing.T) {
	k, err := ParseMemberKeys(strings.NewReader(manyMembers(t, MaxMemberKeys)))
	if err != nil || k.Len() != MaxMemberKeys {
		t.Fatalf("ParseMemberKeys(%d members) = %v", MaxMemberKeys, err)
	}
	one := testSigner(t, 1).PublicKey()
	if _, err := NewMemberKeys(map[uint64]string{1: one, 2: one}); err == nil || !strings.Contains(err.Error(), "has the key of member") {
		t.Errorf("NewMemberKeys with a shared key: %v; want refused", err)
	}
	public := make(map[uint64]string, MaxMemberKeys+1)
	for id := uint64(1); id <= MaxMemberKeys+1; id++ {
		public[id] = one
	}
	if _, err := NewMemberKeys(public); !errors.Is(err, ErrKeys) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("NewMemberKeys(%d members) = %v; want refused", len(public), err)
	}
}

// A missing file is os.ErrNotExist, and an error names the file.
func TestReadMemberKeysFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadMemberKeysFile(filepath.Join(dir, "none")); !errors.Is(err, ErrKeys) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v; want ErrKeys and os.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.keys")
	os.WriteFile(bad, []byte("1\n"), 0o600)
	if _, err := ReadMemberKeysFile(bad); !errors.Is(err, ErrKeys) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad file: %v; want its name and line", err)
	}
}

func TestMemberKeysCheck(t *testing.T) {
	one, two := testSigner(t, 1), testSigner(t, 2)
	k, err := ParseMemberKeys(strings.NewReader("1 " + one.PublicKey() + "\n2 " + two.PublicKey() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Check([]uint64{1, 2}, one); err != nil {
		t.Errorf("Check(good) = %v", err)
	}
	other := testSigner(t, 1)
	for _, tc := range []struct {
		name    string
		members []uint64
		signer  *Signer
		want    string
	}{
		{"not a peer", []uint64{1}, one, "line 2: member 2 is not one of the peers [1]"},
		{"peer without key", []uint64{1, 2, 3}, one, "no key for member 3"},
		{"own seed not listed", []uint64{1, 2}, other, "line 1: member 1 is listed with " + one.PublicKey()},
	} {
		if err := k.Check(tc.members, tc.signer); !errors.Is(err, ErrKeys) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an ErrKeys containing %q", tc.name, err, tc.want)
		}
	}
}

func TestReadSeedFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	user, _ := nkeys.CreateUser()
	seed, _ := user.Seed()
	public, _ := user.PublicKey()
	kp, err := ReadSeedFile(write("good", "# node 1\n"+string(seed)+"\n"))
	if err != nil {
		t.Fatalf("ReadSeedFile(good) = %v", err)
	}
	if got, _ := kp.PublicKey(); got != public {
		t.Errorf("public key: got %s, want %s", got, public)
	}
	account, _ := nkeys.CreateAccount()
	accountSeed, _ := account.Seed()
	for _, tc := range []struct{ name, path string }{
		{"missing", filepath.Join(dir, "none")},
		{"public key", write("public", public)},
		{"account seed", write("account", string(accountSeed))},
		{"corrupt seed", write("corrupt", corrupt(seed))},
		{"empty", write("empty", "")},
	} {
		if _, err := ReadSeedFile(tc.path); !errors.Is(err, ErrKeys) {
			t.Errorf("%s: got %v, want ErrKeys", tc.name, err)
		}
	}
}

// corrupt changes one character inside a seed's key bytes, which its
// checksum always catches (a change of the last characters may fall in
// the encoding's padding bits, or leave them as they were).
func corrupt(seed []byte) string {
	c := []byte(string(seed))
	if c[10] == 'A' {
		c[10] = 'B'
	} else {
		c[10] = 'A'
	}
	return string(c)
}

// ed25519Verify verifies as another language would: the standard library's
// Ed25519 with the raw 32-byte public key.
func ed25519Verify(public, message, sig []byte) bool {
	return ed25519.Verify(ed25519.PublicKey(public), message, sig)
}

func TestMemberKeysStatements(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	public, _ := kp.PublicKey()
	file := "# members\n#: cluster prod\n#: algorithm byzantine\n1 " + public + "\n"
	k, err := ParseMemberKeys(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if k.Cluster() != "prod" || k.Algorithm() != protocol.Byzantine {
		t.Fatalf("stated %q %q; want prod byzantine", k.Cluster(), k.Algorithm())
	}
	if got := k.Statements(); got != "#: cluster prod\n#: algorithm byzantine\n" {
		t.Fatalf("Statements() = %q", got)
	}
	plain, err := ParseMemberKeys(strings.NewReader("1 " + public + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Cluster() != "" || plain.Algorithm() != "" {
		t.Fatalf("a file without statements states %q %q", plain.Cluster(), plain.Algorithm())
	}
	stated, err := plain.State("prod", protocol.Paxos)
	if err != nil || stated.Cluster() != "prod" || stated.Algorithm() != protocol.Paxos || plain.Algorithm() != "" {
		t.Fatalf("State: %v, %q %q (original %q)", err, stated.Cluster(), stated.Algorithm(), plain.Algorithm())
	}
	if _, err := k.State("", protocol.Paxos); err == nil {
		t.Fatal("State accepted an algorithm that contradicts the file's")
	}
	if _, err := k.State("other", ""); err == nil {
		t.Fatal("State accepted a cluster that contradicts the file's")
	}
	for _, bad := range []string{
		"#: algorithm raft\n",
		"#: algorithm bully\n#: algorithm paxos\n",
		"#: cluster a.b\n",
		"#: cluster x\n#: cluster y\n",
		"#: leader 5\n",
		"#: cluster\n",
	} {
		if _, err := ParseMemberKeys(strings.NewReader(bad + "1 " + public + "\n")); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("%q: err = %v; want an error naming the line", bad, err)
		}
	}
}
