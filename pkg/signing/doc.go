// Package signing signs and checks what election nodes publish over NATS,
// beside the wire format of package protocol, which it does not change:
//
//   - member keys (keys.go): a member's Signer (its seed, ELECTION_KEY_FILE)
//     and MemberKeys, the public keys of every member (ELECTION_KEYS_FILE,
//     read by ReadMemberKeysFile), with the cluster and algorithm the file
//     states;
//   - the NATS headers that carry a signature (SignerHeader,
//     SignatureHeader) and a credential (CredentialHeader):
//     Signer.Header signs, MemberKeys.Verify checks;
//   - member credentials (credentials.go): MemberKeys that an authority's
//     key stands for (NewAuthorityKeys), for dynamic membership;
//   - the member sets of a byzantine cluster with dynamic membership
//     (membersets.go);
//   - reading an announcement with its headers (ReadAnnouncement) and
//     checking its certificate against the members' keys
//     (VerifyAnnouncement).
//
// Every reader of the cluster's subjects (the node's NATS adapter,
// pkg/leader, pkg/orders, the observer) checks what it receives here.
package signing
