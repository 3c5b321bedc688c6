package signing_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// A byzantine announcement carries its leader's certificate, and a reader
// with the members' public keys checks it. The members, seeds and votes
// are those of pkg/certify's example (member i's seed the 32 bytes i, i,
// …, i; members 1, 2 and 3 vote for 4 in term 7 of "default"), so the
// certificate is the one printed there; docs/protocol.md checks it in
// Python.
func ExampleVerifyAnnouncement() {
	public := make(map[uint64]string)
	var votes []certify.SignedStatement
	for id := uint64(1); id <= 4; id++ {
		pair, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{byte(id)}, 32))
		if err != nil {
			panic(err)
		}
		public[id], _ = pair.PublicKey()
		if id == 4 {
			continue // the leader does not vote here
		}
		signer, err := certify.NewSigner(id, pair)
		if err != nil {
			panic(err)
		}
		vote, err := certify.Sign(signer, certify.Vote("default", id, 7, 4))
		if err != nil {
			panic(err)
		}
		votes = append(votes, vote)
	}
	keys, err := signing.NewMemberKeys(public)
	if err != nil {
		panic(err)
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		panic(err)
	}
	a := protocol.Announcement{Cluster: "default", Leader: 4, Term: 7, Algorithm: protocol.Byzantine,
		At: protocol.Timestamp{Time: time.Date(2026, 11, 24, 9, 30, 0, 123456789, time.UTC)}, Certificate: &cert}
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(data))

	read, err := protocol.DecodeAnnouncement(data)
	if err != nil {
		panic(err)
	}
	fmt.Println("verified:", signing.VerifyAnnouncement(keys, read))
	read.Certificate.Votes = read.Certificate.Votes[1:]
	fmt.Println("two votes:", signing.VerifyAnnouncement(keys, read))
	fmt.Println("no keys:", signing.VerifyAnnouncement(nil, read))
	// Output:
	// {"cluster":"default","leader":4,"term":7,"algorithm":"byzantine","at":"2026-11-24T09:30:00.123456789Z","certificate":{"cluster":"default","term":7,"leader":4,"votes":[{"member":1,"signature":"MDSo6Am+0fkIdTjxjJmCO+2jAPudiTVEnwxq6gDaJA91gN1R5nCAPbC0ooDkhLAY7e8CC5YSq84u1acgDv19CQ=="},{"member":2,"signature":"l+bIM4DCFaobrUBJVyvVA4rphmKMYutXwBFZ+KNFrfmXbc/eDLkSqMDbndluOfTUrLiU4f51xc/VNEgFHLVOBw=="},{"member":3,"signature":"5GH5O4VQ1747b+bLAThzDzbfMMcsucGIhHppYizkrR8o0fXQNemuXRqANEj/aLYRcjPZvAgeXq07rMn/XRkvAw=="}]}}
	// verified: <nil>
	// two votes: protocol: invalid announcement: protocol: leader without a valid certificate: certify: invalid certificate: 2 votes, a quorum of 4 members is 3
	// no keys: protocol: invalid announcement: protocol: a byzantine leader is believed only with the members' keys
}
