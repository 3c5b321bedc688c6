package certify_test

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/certify"
)

// The worked example: four members of cluster "default" (n = 4, f = 1,
// quorum 3), member i's seed the 32 bytes i, i, …, i. Members 1, 2 and 3
// vote for member 4 in term 7; their votes make a certificate. Another
// implementation rebuilds the encoding from the table in the package
// doc, checks the signature with member 1's public key, and reads the
// certificate's JSON. docs/protocol.md shows the same certificate carried
// by an announcement, and checks it in Python.
func Example() {
	pairs := make(map[uint64]nkeys.KeyPair)
	signers := make(map[uint64]*certify.KeySigner)
	for id := uint64(1); id <= 4; id++ {
		pair, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{byte(id)}, 32))
		if err != nil {
			panic(err)
		}
		pairs[id] = pair
		if signers[id], err = certify.NewSigner(id, pair); err != nil {
			panic(err)
		}
	}
	seed, _ := pairs[1].Seed()
	fmt.Println("member 1 seed:  ", string(seed))
	for id := uint64(1); id <= 4; id++ {
		public, _ := pairs[id].PublicKey()
		fmt.Printf("member %d public: %s\n", id, public)
	}

	vote := certify.Vote("default", 1, 7, 4)
	data, err := vote.Encode()
	if err != nil {
		panic(err)
	}
	fmt.Println("encoding: ", hex.EncodeToString(data))
	signed, err := certify.Sign(signers[1], vote)
	if err != nil {
		panic(err)
	}
	fmt.Println("signature:", hex.EncodeToString(signed.Signature))

	votes := []certify.SignedStatement{signed}
	for _, id := range []uint64{3, 2} {
		s, err := certify.Sign(signers[id], certify.Vote("default", id, 7, 4))
		if err != nil {
			panic(err)
		}
		votes = append(votes, s)
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		panic(err)
	}
	js, err := cert.MarshalJSON()
	if err != nil {
		panic(err)
	}
	fmt.Println("certificate:", string(js))

	members, err := certify.NewKeys(pairs)
	if err != nil {
		panic(err)
	}
	fmt.Println("f:", certify.F(members.Size()), "quorum:", certify.Quorum(members.Size()))
	fmt.Println("verified:", certify.VerifyCertificate(members, cert))
	cert.Votes = cert.Votes[:2]
	fmt.Println("two votes:", certify.VerifyCertificate(members, cert))
	// Output:
	// member 1 seed:   SUAACAIBAEAQCAIBAEAQCAIBAEAQCAIBAEAQCAIBAEAQCAIBAEAQCAN7EY
	// member 1 public: UCFIRY65OQE7DFP5KLNS2PF2LVZMUZYJX4OZIEQ36N2IQANUB5XVZ45L
	// member 2 public: UCATS5YOVB6ROX2WUNKGNQ2MP3GMXDMKSG2O4N5CLX3A6W4PZGZZJPJO
	// member 3 public: UDWUSKGGFDI4FRXK5EBTRECZSVQSSWJHHJOGH6JWG3AUMFFMQ435C2U4
	// member 4 public: UDFJHLAXAUMHA4OWPOB4P7YO72AQR2HMIUYFOXLXE2DZGM633K7HYREV
	// encoding:  6261746f6e2d636572746966792d763101000764656661756c74000000000000000100000000000000070000000000000004
	// signature: 3034a8e809bed1f9087538f18c99823beda300fb9d8935449f0c6aea00da240f7580dd51e670803db0b4a280e484b018edef020b9612abce2ed5a7200efd7d09
	// certificate: {"cluster":"default","term":7,"leader":4,"votes":[{"member":1,"signature":"MDSo6Am+0fkIdTjxjJmCO+2jAPudiTVEnwxq6gDaJA91gN1R5nCAPbC0ooDkhLAY7e8CC5YSq84u1acgDv19CQ=="},{"member":2,"signature":"l+bIM4DCFaobrUBJVyvVA4rphmKMYutXwBFZ+KNFrfmXbc/eDLkSqMDbndluOfTUrLiU4f51xc/VNEgFHLVOBw=="},{"member":3,"signature":"5GH5O4VQ1747b+bLAThzDzbfMMcsucGIhHppYizkrR8o0fXQNemuXRqANEj/aLYRcjPZvAgeXq07rMn/XRkvAw=="}]}
	// f: 1 quorum: 3
	// verified: <nil>
	// two votes: certify: invalid certificate: 2 votes, a quorum of 4 members is 3
}
