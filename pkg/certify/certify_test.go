package certify_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/bits"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/certify"
)

// cluster is n members with fixed seeds: member i's seed is 32 bytes i.
type cluster struct {
	keys    *certify.Keys
	signers map[uint64]*certify.KeySigner
}

func newCluster(t testing.TB, n int) cluster {
	t.Helper()
	pairs := make(map[uint64]nkeys.KeyPair, n)
	c := cluster{signers: make(map[uint64]*certify.KeySigner, n)}
	for id := uint64(1); id <= uint64(n); id++ {
		pair, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{byte(id)}, 32))
		if err != nil {
			t.Fatal(err)
		}
		public, err := pair.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if pairs[id], err = nkeys.FromPublicKey(public); err != nil {
			t.Fatal(err)
		}
		if c.signers[id], err = certify.NewSigner(id, pair); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if c.keys, err = certify.NewKeys(pairs); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c cluster) sign(t testing.TB, st certify.Statement) certify.SignedStatement {
	t.Helper()
	s, err := certify.Sign(c.signers[st.Member], st)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// certificate signs votes of members for leader in term of "default".
func (c cluster) certificate(t testing.TB, term, leader uint64, members ...uint64) certify.Certificate {
	t.Helper()
	var votes []certify.SignedStatement
	for _, m := range members {
		votes = append(votes, c.sign(t, certify.Vote("default", m, term, leader)))
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// certificateIn signs votes of members for leader in term of "default"
// under member-set version version.
func (c cluster) certificateIn(t testing.TB, version, term, leader uint64, members ...uint64) certify.Certificate {
	t.Helper()
	var votes []certify.SignedStatement
	for _, m := range members {
		votes = append(votes, c.sign(t, certify.VoteIn("default", m, term, leader, version)))
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// wantErr fails unless err wraps target and mentions each of words.
func wantErr(t *testing.T, err, target error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("got %v, want an error wrapping %v", err, target)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("got %q, want it to mention %q", err, w)
		}
	}
}

func TestFAndQuorum(t *testing.T) {
	for _, tc := range []struct{ n, f, q int }{
		{0, 0, 0}, {1, 0, 1}, {2, 0, 2}, {3, 0, 2}, {4, 1, 3}, {5, 1, 4}, {6, 1, 4},
		{7, 2, 5}, {10, 3, 7}, {13, 4, 9}, {25, 8, 17}, {128, 42, 86},
	} {
		if f, q := certify.F(tc.n), certify.Quorum(tc.n); f != tc.f || q != tc.q {
			t.Errorf("n=%d: got f=%d quorum=%d, want f=%d quorum=%d", tc.n, f, q, tc.f, tc.q)
		}
	}
}

// TestQuorumIntersection checks the package doc's argument for every n
// from 4 to 13 over every pair of member sets of at least a quorum: they
// share at least f+1 members, so one honest member. It also checks that
// the honest members alone make a quorum, and that one vote fewer would
// not do: two sets of Quorum(n)−1 can share f members or fewer.
func TestQuorumIntersection(t *testing.T) {
	for n := 4; n <= 13; n++ {
		f, q := certify.F(n), certify.Quorum(n)
		if n < 3*f+1 {
			t.Fatalf("n=%d: f=%d breaks n ≥ 3f+1", n, f)
		}
		if n-f < q {
			t.Errorf("n=%d: the %d honest members are fewer than a quorum of %d", n, n-f, q)
		}
		var quorums []uint32
		for set := uint32(0); set < 1<<n; set++ {
			if bits.OnesCount32(set) >= q {
				quorums = append(quorums, set)
			}
		}
		minShared := n
		for _, a := range quorums {
			for _, b := range quorums {
				minShared = min(minShared, bits.OnesCount32(a&b))
			}
		}
		if minShared < f+1 {
			t.Errorf("n=%d: two quorums of %d share %d members, want ≥ f+1 = %d", n, q, minShared, f+1)
		}
		// Two disjoint-as-possible sets of q−1 members share 2(q−1)−n.
		if shared := max(0, 2*(q-1)-n); shared >= f+1 {
			t.Errorf("n=%d: quorum %d is not the smallest: sets of %d share %d ≥ f+1", n, q, q-1, shared)
		}
	}
}

// TestNoTwoCertifiedLeaders checks, for n = 4 … 7, every set of f liars
// and every way the honest members vote once or not at all in a term
// among leaders A and B, the liars voting for both: never do both
// leaders gather a quorum.
func TestNoTwoCertifiedLeaders(t *testing.T) {
	for n := 4; n <= 7; n++ {
		f, q := certify.F(n), certify.Quorum(n)
		for liars := uint32(0); liars < 1<<n; liars++ {
			if bits.OnesCount32(liars) != f {
				continue
			}
			honest := n - f
			ways := 1
			for range honest {
				ways *= 3
			}
			for way := range ways {
				forA, forB := f, f
				for w, i := way, 0; i < honest; i, w = i+1, w/3 {
					switch w % 3 {
					case 1:
						forA++
					case 2:
						forB++
					}
				}
				if forA >= q && forB >= q {
					t.Fatalf("n=%d liars=%b: %d votes for A and %d for B, quorum %d", n, liars, forA, forB, q)
				}
			}
		}
	}
	// With signatures: of four, liar 4 votes for both 1 and 2; honest 1
	// and 2 vote for 1, honest 3 for 2. Only 1 is certified.
	c := newCluster(t, 4)
	if err := certify.VerifyCertificate(c.keys, c.certificate(t, 5, 1, 1, 2, 4)); err != nil {
		t.Fatalf("certificate for 1: %v", err)
	}
	err := certify.VerifyCertificate(c.keys, c.certificate(t, 5, 2, 3, 4))
	wantErr(t, err, certify.ErrCertificate, "2 votes", "quorum")
}

func statements() []certify.Statement {
	return []certify.Statement{
		certify.Vote("default", 2, 7, 4),
		certify.Timeout("default", 2, 7),
		certify.Relay("default", 7, 1, []uint64{4, 3}, []byte("attack")),
		certify.Relay("a_B-9", 1<<63, 0, []uint64{3}, nil),
		certify.VoteIn("default", 2, 7, 4, 3),
		certify.Accept("default", 2, 7, 3, certify.Digest([]byte("members"))),
		certify.Commit("default", 2, 7, 3, certify.Digest([]byte("members"))),
	}
}

// The encodings of votes under the configured set, time-outs and relays
// are those from before member sets had versions, byte for byte, so that
// the signatures and certificates made then still hold. A vote under a
// later version appends it; an accept or a commit has it after the term,
// then the set's digest.
func TestStatementEncodings(t *testing.T) {
	const (
		prefix = "6261746f6e2d636572746966792d7631" // "baton-certify-v1"
		dflt   = "000764656661756c74"               // "default"
		m2t7   = "0000000000000002" + "0000000000000007"
	)
	digest := certify.Digest([]byte("members"))
	for _, tc := range []struct {
		st   certify.Statement
		want string
	}{
		{certify.Vote("default", 2, 7, 4), "6261746f6e2d636572746966792d763101000764656661756c74000000000000000200000000000000070000000000000004"},
		{certify.VoteIn("default", 2, 7, 4, 0), "6261746f6e2d636572746966792d763101000764656661756c74000000000000000200000000000000070000000000000004"},
		{certify.Timeout("default", 2, 7), "6261746f6e2d636572746966792d763102000764656661756c7400000000000000020000000000000007"},
		{certify.Relay("default", 7, 1, []uint64{4, 3}, []byte("attack")), "6261746f6e2d636572746966792d763103000764656661756c74000000000000000300000000000000070000000000000001000200000000000000040000000000000003fca30679635be3bbce1ca7d8a9ceb8f0daceaaa80e4cf645584db5ccc0dbf0b2"},
		{certify.VoteIn("default", 2, 7, 4, 3), prefix + "01" + dflt + m2t7 + "0000000000000004" + "0000000000000003"},
		{certify.Accept("default", 2, 7, 3, digest), prefix + "04" + dflt + m2t7 + "0000000000000003" + hex.EncodeToString(digest[:])},
		{certify.Commit("default", 2, 7, 3, digest), prefix + "05" + dflt + m2t7 + "0000000000000003" + hex.EncodeToString(digest[:])},
	} {
		data, err := tc.st.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(data); got != tc.want {
			t.Errorf("%s version %d: encoding\n%s, want\n%s", tc.st.Kind, tc.st.Version, got, tc.want)
		}
	}
	if !reflect.DeepEqual(certify.Vote("default", 2, 7, 4), certify.VoteIn("default", 2, 7, 4, 0)) {
		t.Errorf("Vote differs from VoteIn with version 0")
	}
}

func TestStatementRoundTrip(t *testing.T) {
	c := newCluster(t, 4)
	for _, st := range statements() {
		t.Run(st.Kind.String(), func(t *testing.T) {
			data, err := st.Encode()
			if err != nil {
				t.Fatal(err)
			}
			got, err := certify.DecodeStatement(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, st) {
				t.Fatalf("decoded %+v, want %+v", got, st)
			}
			signed := c.sign(t, st)
			if err := signed.Verify(c.keys); err != nil {
				t.Fatalf("verify: %v", err)
			}
			js, err := signed.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := certify.DecodeSignedStatement(js)
			if err != nil {
				t.Fatalf("decode %s: %v", js, err)
			}
			if !reflect.DeepEqual(back, signed) {
				t.Fatalf("JSON round trip: got %+v, want %+v", back, signed)
			}
			if err := back.Verify(c.keys); err != nil {
				t.Fatalf("verify after JSON: %v", err)
			}
		})
	}
}

func TestStatementInvalid(t *testing.T) {
	long := strings.Repeat("a", certify.MaxClusterLen+1)
	tooLong := make([]uint64, certify.MaxMembers+1)
	for i := range tooLong {
		tooLong[i] = uint64(i + 1)
	}
	for _, tc := range []struct {
		name string
		st   certify.Statement
		want string
	}{
		{"no kind", certify.Statement{Cluster: "c", Member: 1, Term: 1}, "unknown kind"},
		{"kind 9", certify.Statement{Kind: 9, Cluster: "c", Member: 1, Term: 1}, "unknown kind"},
		{"empty cluster", certify.Vote("", 1, 1, 1), "cluster name of 0 bytes"},
		{"long cluster", certify.Vote(long, 1, 1, 1), "cluster name of 256 bytes"},
		{"dotted cluster", certify.Vote("a.b", 1, 1, 1), "is not one of"},
		{"member 0", certify.Vote("c", 0, 1, 1), "member 0"},
		{"term 0", certify.Vote("c", 1, 0, 1), "term 0"},
		{"leader 0", certify.Vote("c", 1, 1, 0), "leader 0"},
		{"vote with order", certify.Statement{Kind: certify.KindVote, Cluster: "c", Member: 1, Term: 1, Leader: 1, Order: 2}, "outside a relay"},
		{"timeout with leader", certify.Statement{Kind: certify.KindTimeout, Cluster: "c", Member: 1, Term: 1, Leader: 1}, "leader 1 in a time-out"},
		{"timeout with path", certify.Statement{Kind: certify.KindTimeout, Cluster: "c", Member: 1, Term: 1, Path: []uint64{1}}, "outside a relay"},
		{"relay with leader", certify.Statement{Kind: certify.KindRelay, Cluster: "c", Member: 1, Term: 1, Leader: 1, Path: []uint64{1}}, "leader 1 in a relay"},
		{"empty path", certify.Statement{Kind: certify.KindRelay, Cluster: "c", Member: 1, Term: 1}, "path of 0 members"},
		{"long path", certify.Relay("c", 1, 1, tooLong, nil), "path of 129 members"},
		{"repeated member", certify.Relay("c", 1, 1, []uint64{1, 2, 1}, nil), "member 1 twice"},
		{"zero in path", certify.Relay("c", 1, 1, []uint64{0, 2}, nil), "member 0 in the path"},
		{"path of another", certify.Statement{Kind: certify.KindRelay, Cluster: "c", Member: 1, Term: 1, Path: []uint64{1, 2}}, "not with the member 1"},
		{"timeout with version", certify.Statement{Kind: certify.KindTimeout, Cluster: "c", Member: 1, Term: 1, Version: 2}, "version 2 in a time-out"},
		{"relay with version", certify.Statement{Kind: certify.KindRelay, Cluster: "c", Member: 1, Term: 1, Version: 2, Path: []uint64{1}}, "version 2 in a relay"},
		{"vote with digest", certify.Statement{Kind: certify.KindVote, Cluster: "c", Member: 1, Term: 1, Leader: 1, Version: 2, Digest: certify.Digest(nil)}, "outside a relay"},
		{"accept of version 0", certify.Accept("c", 1, 1, 0, certify.Digest(nil)), "version 0"},
		{"commit of version 0", certify.Commit("c", 1, 1, 0, certify.Digest(nil)), "version 0"},
		{"accept of no digest", certify.Accept("c", 1, 1, 1, [certify.DigestSize]byte{}), "zero digest"},
		{"commit of no digest", certify.Commit("c", 1, 1, 1, [certify.DigestSize]byte{}), "zero digest"},
		{"accept with leader", certify.Statement{Kind: certify.KindAccept, Cluster: "c", Member: 1, Term: 1, Leader: 2, Version: 1, Digest: certify.Digest(nil)}, "leader 2 in an accept"},
		{"commit with order", certify.Statement{Kind: certify.KindCommit, Cluster: "c", Member: 1, Term: 1, Order: 2, Version: 1, Digest: certify.Digest(nil)}, "order or path in a commit"},
		{"accept with path", certify.Statement{Kind: certify.KindAccept, Cluster: "c", Member: 1, Term: 1, Path: []uint64{1}, Version: 1, Digest: certify.Digest(nil)}, "order or path in an accept"},
		{"accept of member 0", certify.Accept("c", 0, 1, 1, certify.Digest(nil)), "member 0"},
		{"commit in term 0", certify.Commit("c", 1, 0, 1, certify.Digest(nil)), "term 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.st.Encode()
			wantErr(t, err, certify.ErrStatement, tc.want)
		})
	}
}

func TestDecodeStatementRefuses(t *testing.T) {
	relay, err := certify.Relay("default", 7, 1, []uint64{4, 3}, []byte("x")).Encode()
	if err != nil {
		t.Fatal(err)
	}
	for cut := range len(relay) {
		if _, err := certify.DecodeStatement(relay[:cut]); !errors.Is(err, certify.ErrStatement) {
			t.Fatalf("cut at %d of %d: got %v, want ErrStatement", cut, len(relay), err)
		}
	}
	with := func(at int, b ...byte) []byte {
		out := bytes.Clone(relay)
		copy(out[at:], b)
		return out
	}
	pathAt := len(certify.Prefix) + 1 + 2 + len("default") + 8 + 8 + 8
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"trailing byte", append(bytes.Clone(relay), 0), "1 bytes after the statement"},
		{"prefix", with(0, 'B'), "prefix"},
		{"kind", with(len(certify.Prefix), 9), "unknown kind 9"},
		{"kind changed", with(len(certify.Prefix), byte(certify.KindVote)), "after the statement"},
		{"cluster length", with(len(certify.Prefix)+1, 0xff, 0xff), "needs 65535"},
		{"path count 0", with(pathAt, 0, 0), "path of 0 members"},
		{"path count 129", with(pathAt, 0, 129), "path of 129 members"},
		{"path of another", with(pathAt+2+8+7, 9), "not with the member 3"},
		{"huge", make([]byte, 2000), "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.DecodeStatement(tc.data)
			wantErr(t, err, certify.ErrStatement, tc.want)
		})
	}
}

func TestDecodeVersionedStatementRefuses(t *testing.T) {
	encode := func(st certify.Statement) []byte {
		t.Helper()
		data, err := st.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	vote := encode(certify.Vote("default", 2, 7, 4))
	voteIn := encode(certify.VoteIn("default", 2, 7, 4, 3))
	accept := encode(certify.Accept("default", 2, 7, 3, certify.Digest([]byte("members"))))
	for _, data := range [][]byte{voteIn, accept} {
		for cut := range len(data) {
			st, err := certify.DecodeStatement(data[:cut])
			if cut == len(vote) && bytes.Equal(data, voteIn) {
				// Cut after the leader: the same vote under the
				// configured set.
				if err != nil || st.Version != 0 {
					t.Fatalf("vote cut before its version: got %+v, %v", st, err)
				}
				continue
			}
			if !errors.Is(err, certify.ErrStatement) {
				t.Fatalf("cut at %d of %d: got %v, want ErrStatement", cut, len(data), err)
			}
		}
	}
	at := len(certify.Prefix) + 1 + 2 + len("default") + 8 + 8 // after the term
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"vote's version 0", append(bytes.Clone(vote), 0, 0, 0, 0, 0, 0, 0, 0), "version 0 encoded"},
		{"vote's trailing byte", append(bytes.Clone(vote), 1), "1 bytes after the statement"},
		{"vote's version and a byte", append(bytes.Clone(voteIn), 1), "9 bytes after the statement"},
		{"accept's trailing byte", append(bytes.Clone(accept), 0), "1 bytes after the statement"},
		{"accept of version 0", func() []byte { b := bytes.Clone(accept); copy(b[at:], make([]byte, 8)); return b }(), "version 0"},
		{"accept of no digest", func() []byte { b := bytes.Clone(accept); copy(b[at+8:], make([]byte, 32)); return b }(), "zero digest"},
		{"kind 6", func() []byte { b := bytes.Clone(accept); b[len(certify.Prefix)] = 6; return b }(), "unknown kind 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.DecodeStatement(tc.data)
			wantErr(t, err, certify.ErrStatement, tc.want)
		})
	}
}

func TestSignaturesForgedOrAltered(t *testing.T) {
	c := newCluster(t, 4)
	good := c.sign(t, certify.Vote("default", 2, 7, 4))

	// Member 3 signs a vote and claims it is member 2's.
	forged := c.sign(t, certify.Vote("default", 3, 7, 4))
	forged.Statement.Member = 2
	wantErr(t, forged.Verify(c.keys), certify.ErrSignature, "member 2")

	flipped := good
	flipped.Signature = bytes.Clone(good.Signature)
	flipped.Signature[10] ^= 1
	wantErr(t, flipped.Verify(c.keys), certify.ErrSignature)

	for name, alter := range map[string]func(*certify.Statement){
		"leader":  func(s *certify.Statement) { s.Leader = 3 },
		"term":    func(s *certify.Statement) { s.Term = 8 },
		"cluster": func(s *certify.Statement) { s.Cluster = "other" },
		"kind":    func(s *certify.Statement) { s.Kind, s.Leader = certify.KindTimeout, 0 },
		"version": func(s *certify.Statement) { s.Version = 1 },
	} {
		altered := good
		alter(&altered.Statement)
		if err := altered.Verify(c.keys); !errors.Is(err, certify.ErrSignature) {
			t.Errorf("altered %s: got %v, want ErrSignature", name, err)
		}
	}

	short := good
	short.Signature = good.Signature[:63]
	wantErr(t, short.Verify(c.keys), certify.ErrSignature, "63 bytes")
	none := good
	none.Signature = nil
	wantErr(t, none.Verify(c.keys), certify.ErrSignature, "0 bytes")

	stranger := c.sign(t, certify.Vote("default", 2, 7, 4))
	stranger.Statement.Member = 9
	wantErr(t, stranger.Verify(c.keys), certify.ErrUnknownMember, "9")

	if _, err := certify.Sign(c.signers[1], certify.Vote("default", 2, 7, 4)); !errors.Is(err, certify.ErrStatement) {
		t.Errorf("member 1 signing member 2's vote: got %v, want ErrStatement", err)
	}
	if _, err := certify.Sign(c.signers[1], certify.Vote("default", 1, 0, 4)); !errors.Is(err, certify.ErrStatement) {
		t.Errorf("signing an invalid vote: got %v, want ErrStatement", err)
	}
}

func TestKeysRefused(t *testing.T) {
	user := func(b byte) nkeys.KeyPair {
		pair, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{b}, 32))
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	account, err := nkeys.FromRawSeed(nkeys.PrefixByteAccount, bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	many := make(map[uint64]nkeys.KeyPair)
	for i := range certify.MaxMembers + 1 {
		many[uint64(i+1)] = user(1)
	}
	for _, tc := range []struct {
		name  string
		pairs map[uint64]nkeys.KeyPair
		want  string
	}{
		{"none", nil, "0 members"},
		{"too many", many, "129 members"},
		{"member 0", map[uint64]nkeys.KeyPair{0: user(1)}, "member 0"},
		{"nil pair", map[uint64]nkeys.KeyPair{1: nil}, "member 1 has no key"},
		{"account key", map[uint64]nkeys.KeyPair{1: account}, "not a user public key"},
		{"shared key", map[uint64]nkeys.KeyPair{1: user(1), 2: user(2), 3: user(1)}, "members 1 and 3 share"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.NewKeys(tc.pairs)
			wantErr(t, err, certify.ErrKeys, tc.want)
		})
	}
	public, _ := user(1).PublicKey()
	publicOnly, err := nkeys.FromPublicKey(public)
	if err != nil {
		t.Fatal(err)
	}
	_, err = certify.NewSigner(1, publicOnly)
	wantErr(t, err, certify.ErrKeys, "cannot sign")
	_, err = certify.NewSigner(1, account)
	wantErr(t, err, certify.ErrKeys, "not a user key")
	_, err = certify.NewSigner(0, user(1))
	wantErr(t, err, certify.ErrKeys, "member 0")
	keys, err := certify.NewKeys(map[uint64]nkeys.KeyPair{5: user(5), 2: user(2)})
	if err != nil {
		t.Fatal(err)
	}
	if got := keys.IDs(); !reflect.DeepEqual(got, []uint64{2, 5}) {
		t.Errorf("IDs: got %v, want [2 5]", got)
	}
	want, _ := user(5).PublicKey()
	if got, ok := keys.PublicKey(5); !ok || got != want {
		t.Errorf("PublicKey(5): got %q, %v, want %q, true", got, ok, want)
	}
	if got, ok := keys.PublicKey(3); ok {
		t.Errorf("PublicKey(3): got %q, true, want no key", got)
	}
}

func TestCertificate(t *testing.T) {
	c := newCluster(t, 4)
	good := c.certificate(t, 7, 4, 3, 1, 2)
	if err := certify.VerifyCertificate(c.keys, good); err != nil {
		t.Fatalf("good certificate: %v", err)
	}
	if got := []uint64{good.Votes[0].Member, good.Votes[1].Member, good.Votes[2].Member}; !reflect.DeepEqual(got, []uint64{1, 2, 3}) {
		t.Errorf("votes in order %v, want [1 2 3]", got)
	}
	if err := certify.VerifyCertificateFor(c.keys, good, "default", 7, 4); err != nil {
		t.Errorf("VerifyCertificateFor: %v", err)
	}
	if err := certify.VerifyCertificate(c.keys, c.certificate(t, 7, 4, 4, 3, 2, 1)); err != nil {
		t.Errorf("all four: %v", err)
	}
	// Order does not matter to the check.
	reversed := c.certificate(t, 7, 4, 1, 2, 3)
	reversed.Votes[0], reversed.Votes[2] = reversed.Votes[2], reversed.Votes[0]
	if err := certify.VerifyCertificate(c.keys, reversed); err != nil {
		t.Errorf("votes out of order: %v", err)
	}

	five := newCluster(t, 5)
	for _, tc := range []struct {
		name    string
		members certify.Members
		cert    func() certify.Certificate
		targets []error
		want    string
	}{
		{"too few", c.keys, func() certify.Certificate { return c.certificate(t, 7, 4, 1, 2) }, nil, "2 votes, a quorum of 4 members is 3"},
		{"duplicate signer", c.keys, func() certify.Certificate {
			x := c.certificate(t, 7, 4, 1, 2)
			x.Votes = append(x.Votes, x.Votes[1])
			return x
		}, nil, "member 2 signs twice"},
		{"unknown signer", c.keys, func() certify.Certificate { return five.certificate(t, 7, 4, 1, 2, 5) }, []error{certify.ErrUnknownMember}, "signer"},
		{"more votes than members", c.keys, func() certify.Certificate { return five.certificate(t, 7, 4, 1, 2, 3, 4, 5) }, nil, "5 votes among 4 members"},
		{"unknown leader", c.keys, func() certify.Certificate { return c.certificate(t, 7, 9, 1, 2, 3) }, []error{certify.ErrUnknownMember}, "leader"},
		{"wrong term", c.keys, func() certify.Certificate { x := c.certificate(t, 7, 4, 1, 2, 3); x.Term = 8; return x }, []error{certify.ErrSignature}, "term 8"},
		{"wrong leader", c.keys, func() certify.Certificate { x := c.certificate(t, 7, 4, 1, 2, 3); x.Leader = 3; return x }, []error{certify.ErrSignature}, "vote for 3"},
		{"wrong cluster", c.keys, func() certify.Certificate { x := c.certificate(t, 7, 4, 1, 2, 3); x.Cluster = "other"; return x }, []error{certify.ErrSignature}, "vote for 4"},
		{"forged vote", c.keys, func() certify.Certificate {
			x := c.certificate(t, 7, 4, 1, 2, 3)
			x.Votes[2].Signature = bytes.Clone(x.Votes[2].Signature)
			x.Votes[2].Signature[0] ^= 0x80
			return x
		}, []error{certify.ErrSignature}, "member 3"},
		{"another member's vote", c.keys, func() certify.Certificate {
			x := c.certificate(t, 7, 4, 1, 2, 3)
			x.Votes[2].Member = 4
			return x
		}, []error{certify.ErrSignature}, "member 4"},
		{"short signature", c.keys, func() certify.Certificate {
			x := c.certificate(t, 7, 4, 1, 2, 3)
			x.Votes[0].Signature = x.Votes[0].Signature[:10]
			return x
		}, nil, "10 bytes"},
		{"member 0", c.keys, func() certify.Certificate { x := c.certificate(t, 7, 4, 1, 2, 3); x.Votes[0].Member = 0; return x }, nil, "member 0"},
		{"term 0", c.keys, func() certify.Certificate { x := c.certificate(t, 7, 4, 1, 2, 3); x.Term = 0; return x }, nil, "term 0"},
		{"leader 0", c.keys, func() certify.Certificate { x := c.certificate(t, 7, 4, 1, 2, 3); x.Leader = 0; return x }, nil, "leader 0"},
		{"no votes", c.keys, func() certify.Certificate { return certify.Certificate{Cluster: "default", Term: 1, Leader: 1} }, nil, "0 votes"},
		{"no members", &certify.Keys{}, func() certify.Certificate { return c.certificate(t, 7, 4, 1, 2, 3) }, nil, "0 members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := certify.VerifyCertificate(tc.members, tc.cert())
			wantErr(t, err, certify.ErrCertificate, tc.want)
			for _, target := range tc.targets {
				wantErr(t, err, target)
			}
		})
	}

	err := certify.VerifyCertificateFor(c.keys, good, "default", 8, 4)
	wantErr(t, err, certify.ErrCertificate, "not 4 in term 8")
}

func TestNewCertificateRefuses(t *testing.T) {
	c := newCluster(t, 4)
	vote := func(m, term, leader uint64) certify.SignedStatement {
		return c.sign(t, certify.Vote("default", m, term, leader))
	}
	for _, tc := range []struct {
		name  string
		votes []certify.SignedStatement
		want  string
	}{
		{"none", nil, "0 votes"},
		{"twice", []certify.SignedStatement{vote(1, 7, 4), vote(1, 7, 4)}, "member 1 votes twice"},
		{"other term", []certify.SignedStatement{vote(1, 7, 4), vote(2, 8, 4)}, "member 2 votes for 4 in term 8"},
		{"other leader", []certify.SignedStatement{vote(1, 7, 4), vote(2, 7, 3)}, "member 2 votes for 3"},
		{"a time-out", []certify.SignedStatement{vote(1, 7, 4), c.sign(t, certify.Timeout("default", 2, 7))}, "a timeout of member 2"},
		{"invalid", []certify.SignedStatement{{Statement: certify.Vote("default", 1, 0, 4)}}, "term 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.NewCertificate(tc.votes)
			wantErr(t, err, certify.ErrCertificate, tc.want)
		})
	}
}

// A certificate's votes are of one member-set version, which the
// certificate carries: its votes hold under it and no other.
func TestCertificateVersion(t *testing.T) {
	c := newCluster(t, 4)
	cert := c.certificateIn(t, 3, 7, 4, 3, 1, 2)
	if cert.Version != 3 {
		t.Fatalf("version %d, want 3", cert.Version)
	}
	if got, want := cert.Vote(2), certify.VoteIn("default", 2, 7, 4, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("Vote(2): got %+v, want %+v", got, want)
	}
	if err := certify.VerifyCertificateFor(c.keys, cert, "default", 7, 4); err != nil {
		t.Fatalf("certificate of version 3: %v", err)
	}
	for _, version := range []uint64{0, 2, 4} {
		moved := cert
		moved.Version = version
		wantErr(t, certify.VerifyCertificate(c.keys, moved), certify.ErrSignature, "vote for 4 in term 7")
	}
	// A certificate of the configured set is the one of before.
	if got := c.certificate(t, 7, 4, 1, 2, 3); got.Version != 0 || !reflect.DeepEqual(got.Vote(1), certify.Vote("default", 1, 7, 4)) {
		t.Errorf("certificate of the configured set: version %d, vote %+v", got.Version, got.Vote(1))
	}

	mixed := []certify.SignedStatement{
		c.sign(t, certify.VoteIn("default", 1, 7, 4, 3)),
		c.sign(t, certify.VoteIn("default", 2, 7, 4, 2)),
	}
	_, err := certify.NewCertificate(mixed)
	wantErr(t, err, certify.ErrCertificate, "member 2 votes under member-set version 2, not 3")
	mixed[1] = c.sign(t, certify.Vote("default", 2, 7, 4))
	_, err = certify.NewCertificate(mixed)
	wantErr(t, err, certify.ErrCertificate, "member 2 votes under member-set version 0, not 3")

	js, err := cert.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"leader":4,"version":3,"votes":`)) {
		t.Errorf("JSON %s: want \"version\":3 after the leader", js)
	}
	back, err := certify.DecodeCertificate(js)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, cert) {
		t.Fatalf("round trip: got %+v, want %+v", back, cert)
	}
	plain, err := c.certificate(t, 7, 4, 1, 2, 3).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte("version")) {
		t.Errorf("JSON of the configured set's certificate %s has a version", plain)
	}
	zero := bytes.Replace(plain, []byte(`"leader":4,`), []byte(`"leader":4,"version":0,`), 1)
	_, err = certify.DecodeCertificate(zero)
	wantErr(t, err, certify.ErrCertificate, `no "version"`)
}

func TestCertificateJSON(t *testing.T) {
	c := newCluster(t, 4)
	cert := c.certificate(t, 7, 4, 1, 2, 3)
	js, err := cert.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := certify.DecodeCertificate(js)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, cert) {
		t.Fatalf("round trip: got %+v, want %+v", back, cert)
	}
	if err := certify.VerifyCertificate(c.keys, back); err != nil {
		t.Fatal(err)
	}
	sig := `"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="`
	for _, tc := range []struct{ name, in, want string }{
		{"not JSON", `{`, "unexpected EOF"},
		{"unknown field", `{"cluster":"c","term":1,"leader":1,"votes":[],"x":1}`, `unknown field "x"`},
		{"trailing", `{"cluster":"c","term":1,"leader":1,"votes":[{"member":1,"signature":` + sig + `}]} {}`, "data after"},
		{"no votes", `{"cluster":"c","term":1,"leader":1,"votes":[]}`, "0 votes"},
		{"negative term", `{"cluster":"c","term":-1,"leader":1,"votes":[]}`, "term"},
		{"bad base64", `{"cluster":"c","term":1,"leader":1,"votes":[{"member":1,"signature":"!!"}]}`, "illegal base64"},
		{"short signature", `{"cluster":"c","term":1,"leader":1,"votes":[{"member":1,"signature":"AAAA"}]}`, "3 bytes"},
		{"duplicate", `{"cluster":"c","term":1,"leader":1,"votes":[{"member":1,"signature":` + sig + `},{"member":1,"signature":` + sig + `}]}`, "member 1 signs twice"},
		{"bad cluster", `{"cluster":"a b","term":1,"leader":1,"votes":[{"member":1,"signature":` + sig + `}]}`, "cluster name"},
		{"huge", `{"cluster":"` + strings.Repeat("a", certify.MaxJSONSize) + `"}`, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.DecodeCertificate([]byte(tc.in))
			wantErr(t, err, certify.ErrCertificate, tc.want)
		})
	}
}

func TestSignedStatementJSONRefuses(t *testing.T) {
	sig := `"signature":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="`
	digest := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, in string
		target   error
		want     string
	}{
		{"unknown kind", `{"kind":"promise","cluster":"c","member":1,"term":1,` + sig + `}`, certify.ErrStatement, `unknown kind "promise"`},
		{"vote without leader", `{"kind":"vote","cluster":"c","member":1,"term":1,` + sig + `}`, certify.ErrStatement, `"leader" missing`},
		{"timeout with leader", `{"kind":"timeout","cluster":"c","member":1,"term":1,"leader":2,` + sig + `}`, certify.ErrStatement, `"leader" does not belong`},
		{"vote with path", `{"kind":"vote","cluster":"c","member":1,"term":1,"leader":2,"path":[1],` + sig + `}`, certify.ErrStatement, `"path" does not belong`},
		{"vote with digest", `{"kind":"vote","cluster":"c","member":1,"term":1,"leader":2,"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, `"digest" does not belong`},
		{"relay without order", `{"kind":"relay","cluster":"c","member":1,"term":1,"path":[1],"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, `"order" missing`},
		{"relay without path", `{"kind":"relay","cluster":"c","member":1,"term":1,"order":1,"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, `"path" missing`},
		{"relay without digest", `{"kind":"relay","cluster":"c","member":1,"term":1,"order":1,"path":[1],` + sig + `}`, certify.ErrStatement, `"digest" missing`},
		{"upper-case digest", `{"kind":"relay","cluster":"c","member":1,"term":1,"order":1,"path":[1],"digest":"` + strings.ToUpper(digest) + `",` + sig + `}`, certify.ErrStatement, "lower-case hex"},
		{"short digest", `{"kind":"relay","cluster":"c","member":1,"term":1,"order":1,"path":[1],"digest":"abcd",` + sig + `}`, certify.ErrStatement, "lower-case hex"},
		{"relay of another", `{"kind":"relay","cluster":"c","member":1,"term":1,"order":1,"path":[2],"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, "not with the member 1"},
		{"no signature", `{"kind":"timeout","cluster":"c","member":1,"term":1}`, certify.ErrSignature, "0 bytes"},
		{"unknown field", `{"kind":"timeout","cluster":"c","member":1,"term":1,"extra":true,` + sig + `}`, certify.ErrStatement, `unknown field "extra"`},
		{"term 0", `{"kind":"timeout","cluster":"c","member":1,"term":0,` + sig + `}`, certify.ErrStatement, "term 0"},
		{"vote of version 0", `{"kind":"vote","cluster":"c","member":1,"term":1,"leader":2,"version":0,` + sig + `}`, certify.ErrStatement, `no "version"`},
		{"timeout with version", `{"kind":"timeout","cluster":"c","member":1,"term":1,"version":2,` + sig + `}`, certify.ErrStatement, `"version" does not belong`},
		{"relay with version", `{"kind":"relay","cluster":"c","member":1,"term":1,"version":2,"order":1,"path":[1],"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, `"version" does not belong`},
		{"accept without version", `{"kind":"accept","cluster":"c","member":1,"term":1,"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, `"version" missing`},
		{"commit without digest", `{"kind":"commit","cluster":"c","member":1,"term":1,"version":2,` + sig + `}`, certify.ErrStatement, `"digest" missing`},
		{"accept with leader", `{"kind":"accept","cluster":"c","member":1,"term":1,"leader":1,"version":2,"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, `"leader" does not belong`},
		{"commit with path", `{"kind":"commit","cluster":"c","member":1,"term":1,"version":2,"path":[1],"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, `"path" does not belong`},
		{"commit with order", `{"kind":"commit","cluster":"c","member":1,"term":1,"version":2,"order":0,"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, `"order" does not belong`},
		{"accept of version 0", `{"kind":"accept","cluster":"c","member":1,"term":1,"version":0,"digest":"` + digest + `",` + sig + `}`, certify.ErrStatement, "version 0"},
		{"accept of a short digest", `{"kind":"accept","cluster":"c","member":1,"term":1,"version":2,"digest":"abcd",` + sig + `}`, certify.ErrStatement, "accept: digest"},
		{"commit of no digest", `{"kind":"commit","cluster":"c","member":1,"term":1,"version":2,"digest":"` + strings.Repeat("0", 64) + `",` + sig + `}`, certify.ErrStatement, "zero digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.DecodeSignedStatement([]byte(tc.in))
			wantErr(t, err, tc.target, tc.want)
		})
	}
	if _, err := (certify.SignedStatement{}).MarshalJSON(); !errors.Is(err, certify.ErrStatement) {
		t.Errorf("marshal of an empty statement: got %v, want ErrStatement", err)
	}
}

func TestEvidence(t *testing.T) {
	c := newCluster(t, 4)
	vote := func(m, term, leader uint64) certify.SignedStatement {
		return c.sign(t, certify.Vote("default", m, term, leader))
	}
	relay := func(term, order uint64, path []uint64, value string) certify.SignedStatement {
		return c.sign(t, certify.Relay("default", term, order, path, []byte(value)))
	}
	for _, e := range []certify.Evidence{
		{First: vote(3, 7, 4), Second: vote(3, 7, 2)},
		{First: relay(7, 1, []uint64{4, 3}, "attack"), Second: relay(7, 1, []uint64{4, 3}, "retreat")},
		{First: relay(7, 1, []uint64{3}, "attack"), Second: relay(7, 1, []uint64{3}, "retreat")},
	} {
		if !certify.Contradicts(e.First.Statement, e.Second.Statement) {
			t.Fatalf("%+v: got no contradiction", e)
		}
		if err := certify.VerifyEvidence(c.keys, e); err != nil {
			t.Fatalf("%+v: %v", e, err)
		}
		if e.Member() != 3 {
			t.Errorf("convicted %d, want 3", e.Member())
		}
		js, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := certify.DecodeEvidence(js)
		if err != nil {
			t.Fatalf("decode %s: %v", js, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("round trip: got %+v, want %+v", back, e)
		}
	}

	forged := vote(2, 7, 2)
	forged.Statement.Member = 3 // member 2's signature over a vote "of 3"
	other := c.sign(t, certify.Vote("other", 3, 7, 2))
	for _, tc := range []struct {
		name   string
		e      certify.Evidence
		target error
		want   string
	}{
		{"same vote", certify.Evidence{First: vote(3, 7, 4), Second: vote(3, 7, 4)}, certify.ErrEvidence, "same leader"},
		{"other terms", certify.Evidence{First: vote(3, 7, 4), Second: vote(3, 8, 2)}, certify.ErrEvidence, "terms 7 and 8"},
		{"two members", certify.Evidence{First: vote(3, 7, 4), Second: vote(2, 7, 2)}, certify.ErrEvidence, "members 3 and 2"},
		{"two clusters", certify.Evidence{First: vote(3, 7, 4), Second: other}, certify.ErrEvidence, "clusters"},
		{"vote and time-out", certify.Evidence{First: vote(3, 7, 4), Second: c.sign(t, certify.Timeout("default", 3, 7))}, certify.ErrEvidence, "a vote and a timeout"},
		{"two time-outs", certify.Evidence{First: c.sign(t, certify.Timeout("default", 3, 7)), Second: c.sign(t, certify.Timeout("default", 3, 7))}, certify.ErrEvidence, "timeouts do not contradict"},
		{"relays of two orders", certify.Evidence{First: relay(7, 1, []uint64{3}, "a"), Second: relay(7, 2, []uint64{3}, "b")}, certify.ErrEvidence, "orders 1 and 2"},
		{"relays along two paths", certify.Evidence{First: relay(7, 1, []uint64{4, 3}, "a"), Second: relay(7, 1, []uint64{2, 3}, "b")}, certify.ErrEvidence, "different paths"},
		{"one value twice", certify.Evidence{First: relay(7, 1, []uint64{4, 3}, "a"), Second: relay(7, 1, []uint64{4, 3}, "a")}, certify.ErrEvidence, "same value"},
		{"invalid", certify.Evidence{First: vote(3, 7, 4), Second: certify.SignedStatement{Statement: certify.Vote("default", 3, 0, 2)}}, certify.ErrStatement, "second"},
		{"forged", certify.Evidence{First: vote(3, 7, 4), Second: forged}, certify.ErrSignature, "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := certify.VerifyEvidence(c.keys, tc.e)
			wantErr(t, err, certify.ErrEvidence, tc.want)
			wantErr(t, err, tc.target)
			if certify.Contradicts(tc.e.First.Statement, tc.e.Second.Statement) && tc.name != "forged" {
				t.Errorf("Contradicts: got true, want false")
			}
		})
	}
}

func TestEvidenceJSONRefuses(t *testing.T) {
	c := newCluster(t, 4)
	a, err := c.sign(t, certify.Vote("default", 3, 7, 4)).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.sign(t, certify.Vote("default", 3, 7, 2)).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"no second", `{"member":3,"first":` + string(a) + `}`, `needs "first" and "second"`},
		{"same twice", `{"member":3,"first":` + string(a) + `,"second":` + string(a) + `}`, "same leader"},
		{"wrong member", `{"member":2,"first":` + string(a) + `,"second":` + string(b) + `}`, "member 2, but"},
		{"bad statement", `{"member":3,"first":{"kind":"x"},"second":` + string(b) + `}`, "unknown kind"},
		{"unknown field", `{"member":3,"first":` + string(a) + `,"second":` + string(b) + `,"third":1}`, `unknown field "third"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.DecodeEvidence([]byte(tc.in))
			wantErr(t, err, certify.ErrEvidence, tc.want)
		})
	}
}
