package certify_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
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

// A change of the worked example's member set: member 4, leader of term
// 7, proposes version 1, which adds member 5 (seed the 32 bytes 5).
// Members 1, 2 and 3, a quorum of version 0, accept it, then commit to
// it; their commits make the change final. Another implementation
// rebuilds the set's digest and the accept's encoding from the tables in
// the package doc, and checks the commits with the keys of version 0.
func Example_memberSetChange() {
	pairs := workedPairs(5)
	signers := make(map[uint64]*certify.KeySigner)
	configured := make(map[uint64]nkeys.KeyPair)
	for id, pair := range pairs {
		signer, err := certify.NewSigner(id, pair)
		if err != nil {
			panic(err)
		}
		signers[id] = signer
		if id <= 4 {
			configured[id] = pair
		}
	}
	keys, err := certify.NewKeys(configured)
	if err != nil {
		panic(err)
	}
	v0, err := certify.NewMemberSet(0, keys)
	if err != nil {
		panic(err)
	}
	public5, _ := pairs[5].PublicKey()
	v1, err := v0.With(certify.SetMember{ID: 5, Key: public5})
	if err != nil {
		panic(err)
	}
	set, err := json.Marshal(v1)
	if err != nil {
		panic(err)
	}
	fmt.Println("version 1:", string(set))
	digest := v1.Digest("default")
	fmt.Println("digest:   ", hex.EncodeToString(digest[:]))

	accept := certify.Accept("default", 1, 7, 1, digest)
	data, err := accept.Encode()
	if err != nil {
		panic(err)
	}
	fmt.Println("accept:   ", hex.EncodeToString(data))
	signed, err := certify.Sign(signers[1], accept)
	if err != nil {
		panic(err)
	}
	fmt.Println("signature:", hex.EncodeToString(signed.Signature))

	var commits []certify.SignedStatement
	for _, id := range []uint64{1, 2, 3} {
		s, err := certify.Sign(signers[id], certify.Commit("default", id, 7, 1, digest))
		if err != nil {
			panic(err)
		}
		commits = append(commits, s)
	}
	final, err := certify.NewQuorumCertificate(commits)
	if err != nil {
		panic(err)
	}
	js, err := final.MarshalJSON()
	if err != nil {
		panic(err)
	}
	fmt.Println("commits:", string(js))

	last, err := certify.FollowChain("default", v0, []certify.Step{{Set: v1, Commit: final}})
	fmt.Println("followed:", last.Version, last.IDs(), err)
	final.Sigs = final.Sigs[:2]
	_, err = certify.FollowChain("default", v0, []certify.Step{{Set: v1, Commit: final}})
	fmt.Println("two commits:", err)
	// Output:
	// version 1: {"version":1,"members":[{"id":1,"key":"UCFIRY65OQE7DFP5KLNS2PF2LVZMUZYJX4OZIEQ36N2IQANUB5XVZ45L"},{"id":2,"key":"UCATS5YOVB6ROX2WUNKGNQ2MP3GMXDMKSG2O4N5CLX3A6W4PZGZZJPJO"},{"id":3,"key":"UDWUSKGGFDI4FRXK5EBTRECZSVQSSWJHHJOGH6JWG3AUMFFMQ435C2U4"},{"id":4,"key":"UDFJHLAXAUMHA4OWPOB4P7YO72AQR2HMIUYFOXLXE2DZGM633K7HYREV"},{"id":5,"key":"UBXHUHG5FGYLPD6RHL2MKWMP572O6KUXCZXDZJXS4T57ZTMAKBN7CEDX"}]}
	// digest:    567206894e47df2dd138eb6e12ac0d3f6a60f625fb09e8b39f44cc1b05cbded4
	// accept:    6261746f6e2d636572746966792d763104000764656661756c74000000000000000100000000000000070000000000000001567206894e47df2dd138eb6e12ac0d3f6a60f625fb09e8b39f44cc1b05cbded4
	// signature: a90a8c5a986b3940e9934fd254447cb8a4b2274e6ae3b777ee24fb62e79539b3ac67c5fe889923620c9e94c0cf110ed83b7b35760997ff609168da917461040d
	// commits: {"kind":"commit","cluster":"default","term":7,"version":1,"digest":"567206894e47df2dd138eb6e12ac0d3f6a60f625fb09e8b39f44cc1b05cbded4","sigs":[{"member":1,"signature":"R+5gp3q7ve8kzGGulQFhdohDfb5aqriV+kTgFj5Cl0pS/qHm7QjQdenYM2w1ZrECjMii69KWLlc2XC5xGlIzBA=="},{"member":2,"signature":"1ScDXC11TJF5IipMIvYbDPXxZ8UIsuNIkM90UrG3fSoK797ThoVHMPcrsjNQrL2qB6dFgbUT2TkZizok21rDCg=="},{"member":3,"signature":"jaH2A8csFNTU39+mkd4bNBS9q/3kkaPg+apqvlKEQafBGycLBJVx9GWUTrQ7oRtCK0ZB5O5Eba+DGwJ0pK/8AA=="}]}
	// followed: 1 [1 2 3 4 5] <nil>
	// two commits: certify: invalid certificate: 2 commits, a quorum of 4 members is 3
}
