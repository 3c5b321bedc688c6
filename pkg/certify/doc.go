// Package certify holds the signed statements of a cluster's members, the
// certificates that make a leader's term believable, and the evidence that
// a member lied. It is pure: no I/O, no goroutines, no clock. Keys are
// Ed25519 user keys in the NATS nkeys format (public keys "U…", seeds
// "SU…"); the package takes them through the small interfaces Signer,
// Verifier and Members, so that any key store plugs in (Keys is the one
// built on nkeys key pairs).
//
// # Statements
//
// A Statement is what one member says, of one Kind, within one cluster:
//
//   - KindVote: the member votes for Leader in Term, under version
//     Version of the member set (0 for the configured set);
//   - KindTimeout: the member gives up on Term (its leader timed out);
//   - KindRelay: the member says that the value whose SHA-256 is Digest
//     reached it along Path as order Order of Term's leader (Path[0] is
//     the leader that issued it, the last member of Path is the member;
//     the leader's own issue is the relay along the path [leader]);
//   - KindAccept: the member accepts the member set whose digest is
//     Digest as version Version, proposed by the leader of Term;
//   - KindCommit: the member saw a quorum accept that member set, and
//     commits to it.
//
// A member signs the statement's canonical encoding (Encode), version 1,
// with Ed25519. Every number is big-endian of fixed width; a string is
// its length (uint16) and its bytes:
//
//	field        bytes         kinds
//	prefix       16            all: the ASCII "baton-certify-v1" (Prefix)
//	kind         1             all: 1 vote, 2 time-out, 3 relay, 4 accept, 5 commit
//	cluster      2 + len       all: uint16 length, then the name (1–255 bytes of [A-Za-z0-9_-])
//	member       8             all: uint64, ≥ 1
//	term         8             all: uint64, ≥ 1
//	leader       8             vote: uint64, ≥ 1
//	version      8             vote, present only when ≥ 1; accept, commit: uint64, ≥ 1
//	order        8             relay: uint64
//	path         2 + 8·len     relay: uint16 count (1–MaxMembers), then that many uint64 IDs, distinct, ≥ 1, the last = member
//	digest       32            relay: SHA-256 of the value (Digest); accept, commit: the member set's (MemberSet.Digest), not zero
//
// Nothing follows. A vote under the configured member set (version 0)
// has no version field, so its encoding is the one of votes before
// member sets had versions. The prefix keeps a signature over a
// statement from being read as anything else signed with the same key;
// the cluster name keeps it from counting in another cluster.
// DecodeStatement reads the encoding back and refuses anything Encode
// would not have produced (a vote's version 0 written out among them),
// so one statement has exactly one encoding. The example of the package
// prints an encoding and its signature, byte for byte, for other
// implementations to check theirs against; the example of a member-set
// change does the same for an accept and a member set's digest.
//
// # Writes
//
// A certified leader proves to a shared resource that a write is its own
// by signing a Write (cluster, term, leader and the SHA-256 of the write)
// with its key; the encoding starts with its own prefix, WritePrefix
// ("baton-write-v1"), so that it is never read as a statement nor a
// statement as it (see Write for the table). The certificate says who
// leads the term; the signature, which only the leader's seed makes, says
// that the writer is that leader (pkg/leader's ProveWrite and
// Fence.AdmitCertified).
//
// # Certificates
//
// With n members, at most F(n) = ⌊(n−1)/3⌋ of them may lie. A Certificate
// for (cluster, term, leader) holds the vote signatures of Quorum(n) =
// ⌈(n+f+1)/2⌉ distinct members, f = F(n), all cast under one version of
// the member set (Certificate.Version, 0 for the configured set; the n
// members are that version's). VerifyCertificate checks that every
// signer is a distinct known member, that there are at least Quorum(n)
// of them and at most n, that the leader is a member, and every
// signature.
//
// Why a certificate makes a leader unique per term: two quorums Q1 and Q2
// of the n members share |Q1| + |Q2| − n ≥ 2·⌈(n+f+1)/2⌉ − n ≥ f+1
// members. At most f members lie, so at least one member in both is
// honest, and an honest member signs at most one vote per term. Two
// certificates of one term for different leaders would need that member's
// votes for both, so whatever the f liars sign, no two certificates of
// one term name different leaders. (A quorum also needs no liar's vote to
// exist: n − f ≥ Quorum(n), so the honest members alone can form one.)
// With more than F(n) liars none of this holds.
// TestQuorumIntersection checks the count for every n from 4 to 13 over
// every pair of quorums; TestNoTwoCertifiedLeaders checks the conclusion
// for every set of liars and every way the honest members vote, n = 4 to
// 7, and once with signatures.
//
// A TimeoutCertificate holds the signed time-outs of one term by distinct
// members; VerifyTimeoutCertificate checks that there are as many as the
// caller's rule asks, F(n)+1 (one honest member gave up, so the liars
// alone cannot move terms on) or Quorum(n).
//
// # Evidence
//
// Two signed statements of one member that no honest member makes both
// of are Evidence of its lying (Contradicts): two votes in one term for
// different leaders, or two relays of one order along one path with
// different values. VerifyEvidence checks both signatures, so evidence
// convicts only the member whose key signed it.
//
// # Member sets and their changes
//
// The members of a cluster may change at run time. A MemberSet is version
// Version of them: version 0 is the members the cluster is configured
// with, and each later version differs from the one before by exactly one
// member added or removed (MemberSet.Next checks it; With and Without
// make the next version). A vote names the version it is cast under, and
// a certificate is checked with the members of its version.
//
// A set is known in a cluster by its digest (MemberSet.Digest), the
// SHA-256 of:
//
//	field        bytes         value
//	prefix       16            the ASCII "baton-members-v1" (MemberSetPrefix)
//	cluster      2 + len       uint16 length, then the name (1–255 bytes of [A-Za-z0-9_-])
//	version      8             uint64
//	count        2             uint16, the number of members (1–MaxMembers)
//	members      count · …     per member, in ascending order of ID: the ID (uint64, ≥ 1), then the key (uint16 length, then the ASCII "U…")
//
// A change is proposed by a term's leader, accepted then committed by a
// quorum of the set before it. A member accepts the proposed set with a
// KindAccept statement of the term, the new version and the set's
// digest; a QuorumCertificate of kind KindAccept holds the accepts of
// Quorum(n) of the n members of the set before, and is a prepared
// certificate. A member that holds one commits with a KindCommit
// statement of the same term, version and digest; a QuorumCertificate of
// kind KindCommit holds the commits of such a quorum, and makes the
// change final. VerifyQuorumCertificate checks either with the members of
// the version before the proposed one.
//
// A Step is one change: the new set and the commit certificate that made
// it final. VerifyStep checks that the set is the version after the one
// before it (MemberSet.Next) and that a quorum of the set before it
// committed to its digest; FollowChain checks steps one after the other,
// at most MaxSteps at once, from a set the reader already holds to the
// last step's.
//
// # JSON
//
// Certificates, signed statements, evidence, member sets, quorum
// certificates and steps have a JSON form for announcements and the
// observer (see the MarshalJSON and UnmarshalJSON methods for the field
// names). Numbers are JSON numbers, signatures standard base64 with
// padding (64 bytes), digests lower-case hex (32 bytes). The decoders
// refuse unknown fields, missing or misplaced fields, trailing data and
// inputs over MaxJSONSize; they check shapes, not signatures. Field names
// are written in lower case; reading, they match as Go's encoding/json
// matches them, ignoring case. The JSON form is not what is signed: a
// reader rebuilds the encoding from the fields.
//
// # What is assumed
//
// Each member's seed stays with that member: a lie signed with a member's
// key counts as that member's. The members' public keys are the same at
// every reader. A member that also authenticates to NATS with its key
// signs the server's nonce with it; statements cannot be forged that way
// by a server that sends an ordinary nonce, but one that chose the nonce
// could ask for any bytes, so the NATS servers are trusted not to.
package certify
