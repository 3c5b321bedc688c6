package certify_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/certify"
)

// workedPairs returns the key pairs of the worked example: member i's seed
// is the 32 bytes i, i, …, i.
func workedPairs(n int) map[uint64]nkeys.KeyPair {
	pairs := make(map[uint64]nkeys.KeyPair)
	for id := uint64(1); id <= uint64(n); id++ {
		pair, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{byte(id)}, 32))
		if err != nil {
			panic(err)
		}
		pairs[id] = pair
	}
	return pairs
}

// A leader's write, byte for byte: member 4, certified leader of term 7
// of "default", signs the write {"k":"v"}. The resource checks the
// signature with member 4's public key.
func ExampleWrite() {
	pairs := workedPairs(4)
	leader, err := certify.NewSigner(4, pairs[4])
	if err != nil {
		panic(err)
	}
	w := certify.WriteOf("default", 7, 4, []byte(`{"k":"v"}`))
	data, err := w.Encode()
	if err != nil {
		panic(err)
	}
	fmt.Println("encoding: ", hex.EncodeToString(data))
	sig, err := certify.SignWrite(leader, w)
	if err != nil {
		panic(err)
	}
	fmt.Println("signature:", hex.EncodeToString(sig))
	members, err := certify.NewKeys(pairs)
	if err != nil {
		panic(err)
	}
	fmt.Println("verified:", certify.VerifyWrite(members, w, sig))
	// Output:
	// encoding:  6261746f6e2d77726974652d7631000764656661756c7400000000000000070000000000000004666c1aa02e8068c6d5cc1d3295009432c16790bec28ec8ce119d0d1a18d61319
	// signature: 6df2bb0aadbde62783d2f5fa28816d8f004c00ce3300d081380ed0bcbab11cae5c2b6d578c23c2c9f85c88d3e7fa8a93fe454d6c0ad8f967992b7dc8c2178c0c
	// verified: <nil>
}

func TestWriteSignedByItsLeaderOnly(t *testing.T) {
	pairs := workedPairs(4)
	members, err := certify.NewKeys(pairs)
	if err != nil {
		t.Fatal(err)
	}
	signer := func(id uint64) certify.Signer {
		s, err := certify.NewSigner(id, pairs[id])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	w := certify.WriteOf("default", 7, 4, []byte("a"))
	sig, err := certify.SignWrite(signer(4), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := certify.VerifyWrite(members, w, sig); err != nil {
		t.Fatalf("VerifyWrite(the leader's) = %v", err)
	}
	if _, err := certify.SignWrite(signer(3), w); !errors.Is(err, certify.ErrStatement) {
		t.Errorf("member 3 signing leader 4's write: %v, want ErrStatement", err)
	}
	// Member 3's signature of the same write, claimed as the leader's.
	as3 := w
	as3.Leader = 3
	sig3, err := certify.SignWrite(signer(3), as3)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		w    certify.Write
		sig  []byte
		want error
	}{
		{"another member's signature", w, sig3, certify.ErrSignature},
		{"another write", certify.WriteOf("default", 7, 4, []byte("b")), sig, certify.ErrSignature},
		{"another term", certify.WriteOf("default", 8, 4, []byte("a")), sig, certify.ErrSignature},
		{"another cluster", certify.WriteOf("other", 7, 4, []byte("a")), sig, certify.ErrSignature},
		{"short signature", w, sig[:10], certify.ErrSignature},
		{"a leader who is no member", certify.WriteOf("default", 7, 9, []byte("a")), sig, certify.ErrUnknownMember},
		{"term 0", certify.WriteOf("default", 0, 4, []byte("a")), sig, certify.ErrStatement},
		{"bad cluster", certify.WriteOf("a.b", 7, 4, []byte("a")), sig, certify.ErrStatement},
	} {
		if err := certify.VerifyWrite(members, tc.w, tc.sig); !errors.Is(err, tc.want) {
			t.Errorf("%s: VerifyWrite = %v, want %v", tc.name, err, tc.want)
		}
	}
	// A vote's signature is not a write's, though both are member 4's.
	vote, err := certify.Sign(signer(4), certify.Vote("default", 4, 7, 4))
	if err != nil {
		t.Fatal(err)
	}
	if err := certify.VerifyWrite(members, w, vote.Signature); !errors.Is(err, certify.ErrSignature) {
		t.Errorf("a vote's signature as a write's: %v, want ErrSignature", err)
	}
}
