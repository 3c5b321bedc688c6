package certify_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/certify"
)

// publicKey returns the public key of the user seed of 32 bytes b.
func publicKey(t testing.TB, b byte) string {
	t.Helper()
	pair, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	public, err := pair.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return public
}

// setOf returns version version of the set of members ids, member i with
// the key of seed bytes i (the keys of newCluster).
func setOf(t testing.TB, version uint64, ids ...uint64) certify.MemberSet {
	t.Helper()
	s := certify.MemberSet{Version: version}
	for _, id := range ids {
		s.Members = append(s.Members, certify.SetMember{ID: id, Key: publicKey(t, byte(id))})
	}
	return s
}

func TestMemberSet(t *testing.T) {
	c := newCluster(t, 4)
	s, err := certify.NewMemberSet(0, c.keys)
	if err != nil {
		t.Fatal(err)
	}
	if want := setOf(t, 0, 1, 2, 3, 4); !reflect.DeepEqual(s, want) {
		t.Fatalf("NewMemberSet: got %+v, want %+v", s, want)
	}
	if got := s.IDs(); !reflect.DeepEqual(got, []uint64{1, 2, 3, 4}) {
		t.Errorf("IDs: got %v, want [1 2 3 4]", got)
	}
	if got, ok := s.Key(3); !ok || got != publicKey(t, 3) {
		t.Errorf("Key(3): got %q, %v", got, ok)
	}
	if got, ok := s.Key(5); ok {
		t.Errorf("Key(5): got %q, true, want no key", got)
	}
	keys, err := s.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keys.IDs(), c.keys.IDs()) {
		t.Errorf("Keys: members %v, want %v", keys.IDs(), c.keys.IDs())
	}
	for _, id := range c.keys.IDs() {
		got, _ := keys.PublicKey(id)
		want, _ := c.keys.PublicKey(id)
		if got != want {
			t.Errorf("Keys: member %d's key %s, want %s", id, got, want)
		}
	}
	// The keys check the members' signatures.
	signed := c.sign(t, certify.Vote("default", 2, 7, 4))
	if err := signed.Verify(keys); err != nil {
		t.Errorf("a vote under the set's keys: %v", err)
	}
	if _, err := certify.NewMemberSet(0, nil); err == nil {
		t.Errorf("NewMemberSet of no keys: got no error")
	}
	_, err = certify.NewMemberSet(0, &certify.Keys{})
	wantErr(t, err, certify.ErrMemberSet, "0 members")
}

func TestMemberSetInvalid(t *testing.T) {
	account, err := nkeys.FromRawSeed(nkeys.PrefixByteAccount, bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	accountKey, _ := account.PublicKey()
	many := certify.MemberSet{}
	for i := range certify.MaxMembers + 1 {
		many.Members = append(many.Members, certify.SetMember{ID: uint64(i + 1), Key: publicKey(t, 1)})
	}
	with := func(alter func(*certify.MemberSet)) certify.MemberSet {
		s := setOf(t, 2, 1, 2, 3)
		alter(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		s    certify.MemberSet
		want string
	}{
		{"no members", certify.MemberSet{Version: 2}, "version 2: 0 members"},
		{"too many", many, "129 members"},
		{"member 0", setOf(t, 2, 0, 1), "member 0"},
		{"twice", with(func(s *certify.MemberSet) { s.Members[1].ID = 1 }), "member 1 twice"},
		{"out of order", setOf(t, 2, 1, 3, 2), "member 2 after member 3"},
		{"account key", with(func(s *certify.MemberSet) { s.Members[1].Key = accountKey }), "member 2: \"A"},
		{"no key", with(func(s *certify.MemberSet) { s.Members[2].Key = "" }), "member 3: \"\" is not a user public key"},
		{"long key", with(func(s *certify.MemberSet) { s.Members[2].Key = strings.Repeat("U", 1000) }), "a key of 1000 bytes"},
		{"shared key", with(func(s *certify.MemberSet) { s.Members[2].Key = s.Members[0].Key }), "members 1 and 3 share"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, tc.s.Validate(), certify.ErrMemberSet, tc.want)
			_, err := tc.s.Keys()
			wantErr(t, err, certify.ErrMemberSet, tc.want)
		})
	}
	if err := setOf(t, 0, 1).Validate(); err != nil {
		t.Errorf("one member: %v", err)
	}
	if err := setOf(t, math.MaxUint64, 1, 200).Validate(); err != nil {
		t.Errorf("the last version: %v", err)
	}
}

// The digest is the SHA-256 of the encoding in the package doc, and
// changes with the cluster, the version, and any member's ID or key.
func TestMemberSetDigest(t *testing.T) {
	s := setOf(t, 3, 1, 2, 5)
	var b []byte
	b = append(b, "baton-members-v1"...)
	b = append(b, 0, 7)
	b = append(b, "default"...)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 3)
	b = append(b, 0, 3)
	for _, id := range []uint64{1, 2, 5} {
		b = binary.BigEndian.AppendUint64(b, id)
		b = append(b, 0, 56)
		b = append(b, publicKey(t, byte(id))...)
	}
	digest := s.Digest("default")
	if digest != sha256.Sum256(b) {
		t.Fatalf("digest %x, want the SHA-256 of %x", digest, b)
	}
	if again := setOf(t, 3, 1, 2, 5).Digest("default"); again != digest {
		t.Errorf("the same set: digest %x, want %x", again, digest)
	}
	for name, other := range map[string][certify.DigestSize]byte{
		"cluster": s.Digest("defaulu"),
		"version": setOf(t, 4, 1, 2, 5).Digest("default"),
		"members": setOf(t, 3, 1, 2, 6).Digest("default"),
		"key": func() [certify.DigestSize]byte {
			x := setOf(t, 3, 1, 2, 5)
			x.Members[2].Key = publicKey(t, 9)
			return x.Digest("default")
		}(),
		"ID": func() [certify.DigestSize]byte {
			x := setOf(t, 3, 1, 2, 5)
			x.Members[2].ID = 6
			return x.Digest("default")
		}(),
		"a member fewer": setOf(t, 3, 1, 2).Digest("default"),
	} {
		if other == digest {
			t.Errorf("another %s, the same digest", name)
		}
	}
}

func TestMemberSetNext(t *testing.T) {
	v3 := setOf(t, 3, 1, 2, 4)
	for _, tc := range []struct {
		name           string
		next           certify.MemberSet
		added, removed uint64
	}{
		{"add in the middle", setOf(t, 4, 1, 2, 3, 4), 3, 0},
		{"add at the end", setOf(t, 4, 1, 2, 4, 9), 9, 0},
		{"remove the first", setOf(t, 4, 2, 4), 0, 1},
		{"remove the last", setOf(t, 4, 1, 2), 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			added, removed, err := tc.next.Next(v3)
			if err != nil {
				t.Fatal(err)
			}
			if added != tc.added || removed != tc.removed {
				t.Errorf("added %d, removed %d, want %d and %d", added, removed, tc.added, tc.removed)
			}
		})
	}
	otherKey := setOf(t, 4, 1, 2, 4, 5)
	otherKey.Members[1].Key = publicKey(t, 7)
	for _, tc := range []struct {
		name string
		next certify.MemberSet
		prev certify.MemberSet
		want string
	}{
		{"same version", setOf(t, 3, 1, 2, 3, 4), v3, "version 3 does not follow version 3"},
		{"a version skipped", setOf(t, 5, 1, 2, 3, 4), v3, "version 5 does not follow version 3"},
		{"an older version", setOf(t, 2, 1, 2, 3, 4), v3, "version 2 does not follow version 3"},
		{"after the last", setOf(t, 0, 1, 2), setOf(t, math.MaxUint64, 1, 2, 3), "version 0 does not follow version 18446744073709551615"},
		{"unchanged", setOf(t, 4, 1, 2, 4), v3, "adds no member and removes no member"},
		{"two added", setOf(t, 4, 1, 2, 3, 4, 5), v3, "adds members 3, 5 and removes no member of version 3"},
		{"two removed", setOf(t, 4, 4), v3, "adds no member and removes members 1, 2"},
		{"one for another", setOf(t, 4, 1, 2, 5), v3, "adds member 5 and removes member 4"},
		{"a key changed", otherKey, v3, "member 2 has another key than in version 3"},
		{"invalid", setOf(t, 4, 1, 4, 2), v3, "version 4: member 2 after member 4"},
		{"invalid before", setOf(t, 4, 1, 2), setOf(t, 3, 1, 1), "version 3: member 1 twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.next.Next(tc.prev)
			wantErr(t, err, certify.ErrMemberSet, tc.want)
		})
	}
}

func TestMemberSetWithWithout(t *testing.T) {
	v3 := setOf(t, 3, 1, 2, 4)
	v4, err := v3.With(certify.SetMember{ID: 3, Key: publicKey(t, 3)})
	if err != nil {
		t.Fatal(err)
	}
	if want := setOf(t, 4, 1, 2, 3, 4); !reflect.DeepEqual(v4, want) {
		t.Fatalf("With: got %+v, want %+v", v4, want)
	}
	if !reflect.DeepEqual(v3, setOf(t, 3, 1, 2, 4)) {
		t.Errorf("With changed the set it was called on: %+v", v3)
	}
	if added, removed, err := v4.Next(v3); err != nil || added != 3 || removed != 0 {
		t.Errorf("With's next: added %d, removed %d, %v", added, removed, err)
	}
	v5, err := v4.Without(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := setOf(t, 5, 2, 3, 4); !reflect.DeepEqual(v5, want) {
		t.Fatalf("Without: got %+v, want %+v", v5, want)
	}
	if !reflect.DeepEqual(v4, setOf(t, 4, 1, 2, 3, 4)) {
		t.Errorf("Without changed the set it was called on: %+v", v4)
	}
	if added, removed, err := v5.Next(v4); err != nil || added != 0 || removed != 1 {
		t.Errorf("Without's next: added %d, removed %d, %v", added, removed, err)
	}

	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"a member added", func() error { _, err := v3.With(certify.SetMember{ID: 2, Key: publicKey(t, 9)}); return err }, "2 is already a member"},
		{"a member's key", func() error { _, err := v3.With(certify.SetMember{ID: 9, Key: publicKey(t, 4)}); return err }, "is already member 4's"},
		{"member 0", func() error { _, err := v3.With(certify.SetMember{ID: 0, Key: publicKey(t, 9)}); return err }, "member 0"},
		{"a bad key", func() error { _, err := v3.With(certify.SetMember{ID: 9, Key: "U"}); return err }, "member 9: \"U\" is not a user public key"},
		{"one too many", func() error {
			full := certify.MemberSet{}
			for id := range uint64(certify.MaxMembers) {
				full.Members = append(full.Members, certify.SetMember{ID: id + 1, Key: publicKey(t, byte(id+1))})
			}
			_, err := full.With(certify.SetMember{ID: 200, Key: publicKey(t, 200)})
			return err
		}, "129 members"},
		{"not a member", func() error { _, err := v3.Without(3); return err }, "3 is not a member"},
		{"the last member", func() error { _, err := setOf(t, 3, 2).Without(2); return err }, "would leave no member"},
		{"with, after the last version", func() error {
			_, err := setOf(t, math.MaxUint64, 1).With(certify.SetMember{ID: 2, Key: publicKey(t, 2)})
			return err
		}, "is the last"},
		{"without, after the last version", func() error { _, err := setOf(t, math.MaxUint64, 1, 2).Without(2); return err }, "is the last"},
		{"with, to an invalid set", func() error {
			_, err := setOf(t, 3, 2, 1).With(certify.SetMember{ID: 3, Key: publicKey(t, 3)})
			return err
		}, "member 1 after member 2"},
		{"without, from an invalid set", func() error { _, err := setOf(t, 3, 2, 1).Without(1); return err }, "member 1 after member 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, tc.err(), certify.ErrMemberSet, tc.want)
		})
	}
}

func TestMemberSetJSON(t *testing.T) {
	s := setOf(t, 3, 1, 2, 5)
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":3,"members":[{"id":1,"key":"` + publicKey(t, 1) + `"},{"id":2,"key":"` + publicKey(t, 2) + `"},{"id":5,"key":"` + publicKey(t, 5) + `"}]}`
	if string(js) != want {
		t.Fatalf("JSON %s, want %s", js, want)
	}
	back, err := certify.DecodeMemberSet(js)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip: got %+v, want %+v", back, s)
	}
	var viaJSON certify.MemberSet
	if err := json.Unmarshal(js, &viaJSON); err != nil || !reflect.DeepEqual(viaJSON, s) {
		t.Fatalf("json.Unmarshal: got %+v, %v", viaJSON, err)
	}
	largest := certify.MemberSet{Version: math.MaxUint64}
	for i := range uint64(certify.MaxMembers) {
		largest.Members = append(largest.Members, certify.SetMember{ID: math.MaxUint64 - certify.MaxMembers + 1 + i, Key: publicKey(t, byte(i+1))})
	}
	if js, err := json.Marshal(largest); err != nil {
		t.Fatal(err)
	} else if _, err := certify.DecodeMemberSet(js); err != nil {
		t.Fatalf("the largest set, %d bytes: %v", len(js), err)
	}
	k1 := `"` + publicKey(t, 1) + `"`
	for _, tc := range []struct{ name, in, want string }{
		{"not JSON", `{`, "unexpected EOF"},
		{"no version", `{"members":[{"id":1,"key":` + k1 + `}]}`, `"version" missing`},
		{"no members", `{"version":1}`, "0 members"},
		{"unknown field", `{"version":1,"members":[{"id":1,"key":` + k1 + `}],"cluster":"c"}`, `unknown field "cluster"`},
		{"unknown member field", `{"version":1,"members":[{"id":1,"key":` + k1 + `,"name":"a"}]}`, `unknown field "name"`},
		{"no key", `{"version":1,"members":[{"id":1}]}`, "is not a user public key"},
		{"no ID", `{"version":1,"members":[{"key":` + k1 + `}]}`, "member 0"},
		{"out of order", `{"version":1,"members":[{"id":2,"key":"` + publicKey(t, 2) + `"},{"id":1,"key":` + k1 + `}]}`, "member 1 after member 2"},
		{"negative version", `{"version":-1,"members":[{"id":1,"key":` + k1 + `}]}`, "version"},
		{"trailing", `{"version":1,"members":[{"id":1,"key":` + k1 + `}]} {}`, "data after"},
		{"huge", `{"version":1,"members":[` + strings.Repeat(" ", certify.MaxJSONSize) + `]}`, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.DecodeMemberSet([]byte(tc.in))
			wantErr(t, err, certify.ErrMemberSet, tc.want)
			if json.Valid([]byte(tc.in)) { // else encoding/json refuses it first
				var s certify.MemberSet
				wantErr(t, json.Unmarshal([]byte(tc.in), &s), certify.ErrMemberSet, tc.want)
			}
		})
	}
}
