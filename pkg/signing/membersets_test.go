package signing_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// changeOf returns the change of set that adds member m, committed by
// signers of set.
func changeOf(t *testing.T, cluster string, set certify.MemberSet, m certify.SetMember, signers map[uint64]*signing.Signer, term uint64) certify.Step {
	t.Helper()
	next, err := set.With(m)
	if err != nil {
		t.Fatal(err)
	}
	d := next.Digest(cluster)
	var commits []certify.SignedStatement
	for _, id := range set.IDs() {
		ss, err := certify.Sign(signers[id].Certify(), certify.Commit(cluster, id, term, next.Version, d))
		if err != nil {
			t.Fatal(err)
		}
		commits = append(commits, ss)
	}
	cc, err := certify.NewQuorumCertificate(commits)
	if err != nil {
		t.Fatal(err)
	}
	return certify.Step{Set: next, Commit: cc}
}

// certificate returns the certificate of leader in term under version,
// signed by every voter.
func certificate(t *testing.T, cluster string, voters []uint64, signers map[uint64]*signing.Signer, term, leader, version uint64) *certify.Certificate {
	t.Helper()
	var votes []certify.SignedStatement
	for _, id := range voters {
		ss, err := certify.Sign(signers[id].Certify(), certify.VoteIn(cluster, id, term, leader, version))
		if err != nil {
			t.Fatal(err)
		}
		votes = append(votes, ss)
	}
	c, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// A reader of a byzantine cluster with dynamic membership follows the
// member set through the changes announcements carry, and believes a
// leader only with a certificate of a set it could follow.
func TestMemberSetsFollowAnnouncements(t *testing.T) {
	const cluster = "bz"
	signers, all := batontest.MemberKeys(t, 1, 2, 3, 4, 5, 6)
	configured, err := signing.NewMemberKeys(map[uint64]string{
		1: signers[1].PublicKey(), 2: signers[2].PublicKey(), 3: signers[3].PublicKey(), 4: signers[4].PublicKey(),
	})
	if err != nil {
		t.Fatal(err)
	}
	sets, err := signing.NewMemberSets(cluster, configured)
	if err != nil {
		t.Fatal(err)
	}
	keys := all.WithMemberSets(sets)
	v0 := sets.Latest()
	add5 := changeOf(t, cluster, v0, certify.SetMember{ID: 5, Key: signers[5].PublicKey()}, signers, 3)
	add6 := changeOf(t, cluster, add5.Set, certify.SetMember{ID: 6, Key: signers[6].PublicKey()}, signers, 4)
	at := protocol.Timestamp{Time: time.Now()}

	announce := func(leader, term, version uint64, voters []uint64, steps ...certify.Step) protocol.Announcement {
		return protocol.Announcement{Cluster: cluster, Leader: leader, Term: term, Algorithm: protocol.Byzantine, At: at,
			Certificate: certificate(t, cluster, voters, signers, term, leader, version), Steps: steps}
	}
	// Version 0, the configured set: believed as it is.
	if err := signing.VerifyAnnouncementOf(keys, protocol.Byzantine, announce(4, 2, 0, []uint64{1, 2, 3})); err != nil {
		t.Fatalf("certificate of the configured set: %v", err)
	}
	// Version 2 without the changes: the reader cannot check it.
	lone := announce(6, 5, 2, []uint64{2, 3, 4, 5, 6})
	if err := signing.VerifyAnnouncementOf(keys, protocol.Byzantine, lone); !errors.Is(err, protocol.ErrUncertified) {
		t.Fatalf("certificate of version 2 without its changes: %v, want ErrUncertified", err)
	}
	// A forged change (committed by too few) is not followed.
	forged := add5
	forged.Commit.Sigs = forged.Commit.Sigs[:2]
	if err := signing.VerifyAnnouncementOf(keys, protocol.Byzantine, announce(5, 4, 1, []uint64{2, 3, 4, 5}, forged)); !errors.Is(err, protocol.ErrUncertified) {
		t.Fatalf("certificate with a forged change: %v, want ErrUncertified", err)
	}
	if v := sets.Latest().Version; v != 0 {
		t.Fatalf("after a forged change the reader follows version %d, want 0", v)
	}
	// With the changes: followed, then believed.
	lone.Steps = []certify.Step{add5, add6}
	if err := signing.VerifyAnnouncementOf(keys, protocol.Byzantine, lone); err != nil {
		t.Fatalf("certificate of version 2 with its changes: %v", err)
	}
	if got := sets.Latest(); got.Version != 2 || len(got.Members) != 6 {
		t.Fatalf("the reader follows %+v, want version 2 of 6 members", got)
	}
	// A quorum of version 0 is not one of version 2 (6 members need 5).
	if err := signing.VerifyAnnouncementOf(keys, protocol.Byzantine, announce(6, 6, 2, []uint64{1, 2, 3})); !errors.Is(err, protocol.ErrUncertified) {
		t.Fatalf("certificate of version 2 signed by 3: %v, want ErrUncertified", err)
	}
	if _, err := keys.MembersOf(1); err != nil {
		t.Fatalf("members of version 1: %v", err)
	}
	if _, err := configured.MembersOf(1); err == nil {
		t.Fatal("keys whose set does not change gave members of version 1")
	}
}
