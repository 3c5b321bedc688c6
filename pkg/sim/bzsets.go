package sim

import (
	"fmt"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// MemberSets is implemented by a machine whose member set changes at run
// time (byzantine with Changes): the latest set it knows and the set of
// its term, and the last changes it adopted, oldest first, each with the
// commits of a quorum of the set before it.
type MemberSets interface {
	MemberSet() (latest, term certify.MemberSet)
	Steps() []certify.Step
}

// setChecker follows the member sets the honest machines of a byzantine
// churn run adopt, and the certificates the cluster sees, against the
// set of their versions. It is one of the cluster's checks (check),
// after every step:
//
//   - no two valid certificates of one term name different leaders,
//     whatever the versions they were voted under: a certificate is
//     checked against the set of its version, learned from the honest
//     machines' changes, each verified (certify.VerifyStep) against the
//     set before it, version 0 being the configured set;
//   - no two different sets of one version are adopted by honest
//     machines;
//   - every member a change adds holds a credential the authority issued
//     for its key, and no set has fewer than minMembers members; no
//     honest member even accepts or commits to a set that breaks this;
//   - no node's term goes back, even across restarts.
type setChecker struct {
	noCheck
	c       *Cluster
	cluster string
	// issued reports whether the authority issued member id a
	// credential for key.
	issued     func(id uint64, key string) bool
	minMembers int
	sets       map[uint64]certify.MemberSet // version → the set honest machines adopted
	digests    map[uint64][certify.DigestSize]byte
	keys       map[uint64]*verifyCache // version → its members' keys
	top        uint64                  // the highest version adopted
	leaders    map[uint64]uint64       // term → the leader its valid certificates name
	refused    map[string]bool         // certificates found invalid, bounded by maxRefused
	// pending are valid-looking certificates of versions no honest
	// machine adopted yet, checked once one does (bounded by
	// maxPending).
	pending  []pendingCert
	seen     map[uint64]uint64 // node → the latest version it held at its last step
	accepted acceptedTerms
	// latest is each honest node's latest set as it last held it: what
	// its disk keeps once it is down.
	latest map[uint64]certify.MemberSet
	added  []uint64 // per version from 1, the member it added (0 for a removal)
	// forbidden are the digests of sets seen on the network that no
	// honest member may accept or commit to, and why: a change that adds
	// a member with a key the authority issued no credential for, or
	// leaves fewer than minMembers (bounded by maxRefused).
	forbidden map[[certify.DigestSize]byte]string
}

// pendingCert is a certificate of a version not adopted yet, and where it
// was seen.
type pendingCert struct {
	cert certify.Certificate
	how  string
	who  uint64
}

// maxPending bounds the certificates of unknown versions kept.
const maxPending = 256

func newSetChecker(c *Cluster, cluster string, configured certify.MemberSet, issued func(uint64, string) bool, minMembers int) (*setChecker, error) {
	k := &setChecker{c: c, cluster: cluster, issued: issued, minMembers: minMembers,
		sets: map[uint64]certify.MemberSet{}, digests: map[uint64][certify.DigestSize]byte{}, keys: map[uint64]*verifyCache{},
		leaders: map[uint64]uint64{}, refused: map[string]bool{}, seen: map[uint64]uint64{}, accepted: acceptedTerms{},
		latest: map[uint64]certify.MemberSet{}, forbidden: map[[certify.DigestSize]byte]string{}}
	if err := k.learn(configured); err != nil {
		return nil, err
	}
	return k, nil
}

// learn records set as the set of its version.
func (k *setChecker) learn(set certify.MemberSet) error {
	keys, err := set.Keys()
	if err != nil {
		return err
	}
	v := set.Version
	k.sets[v], k.digests[v] = set, set.Digest(k.cluster)
	k.keys[v] = &verifyCache{Members: keys, seen: map[string]error{}}
	k.top = max(k.top, v)
	kept := k.pending[:0]
	for _, p := range k.pending {
		if p.cert.Version == v {
			k.check(&p.cert, p.how, p.who)
		} else {
			kept = append(kept, p)
		}
	}
	k.pending = kept
	return nil
}

// newest returns the set of the highest version an honest machine
// adopted.
func (k *setChecker) newest() certify.MemberSet { return k.sets[k.top] }

// versions is how many changes of the member set honest machines adopted:
// the highest version.
func (k *setChecker) versions() uint64 { return k.top }

// sent checks the certificate a message on the network carries, and that
// no honest node accepts or commits to a set that adds a member without a
// credential or leaves too few (forbidden).
func (k *setChecker) sent(m protocol.Message, how string, from uint64) {
	k.check(m.Cert, how, from)
	if m.Set != nil {
		k.judge(*m.Set)
	}
	for _, s := range m.Steps {
		k.judge(s.Set)
	}
	if st := m.Statement; how == "sent by" && st != nil && (st.Statement.Kind == certify.KindAccept || st.Statement.Kind == certify.KindCommit) {
		if why, ok := k.forbidden[st.Statement.Digest]; ok {
			k.c.fail("node %d %ss version %d of the member set, which %s", from, st.Statement.Kind, st.Statement.Version, why)
		}
	}
}

// judge notes set as forbidden if it is a change no honest member may
// accept or commit to: it adds a member with a key the authority issued
// no credential for, or leaves fewer than minMembers.
func (k *setChecker) judge(set certify.MemberSet) {
	prev, ok := k.sets[set.Version-1]
	if !ok || set.Version == 0 {
		return
	}
	added, _, err := set.Next(prev)
	if err != nil {
		return
	}
	var why string
	switch key, _ := set.Key(added); {
	case added != 0 && !k.issued(added, key):
		why = fmt.Sprintf("adds %d with key %s, for which the authority issued no credential", added, key)
	case len(set.Members) < k.minMembers:
		why = fmt.Sprintf("leaves %d members, fewer than %d", len(set.Members), k.minMembers)
	default:
		return
	}
	if len(k.forbidden) >= maxRefused {
		clear(k.forbidden)
	}
	k.forbidden[set.Digest(k.cluster)] = why
}

// started forgets what node n's last incarnation held: its new machine
// reads its disk.
func (k *setChecker) started(n *node) { delete(k.seen, n.id) }

// stepped follows the member sets of node n's machine and checks the
// certificate it holds.
func (k *setChecker) stepped(n *node, _ driver.Step) {
	if ms, ok := n.m.(MemberSets); ok {
		latest, _ := ms.MemberSet()
		if v, ok := k.seen[n.id]; !ok || v != latest.Version {
			k.seen[n.id] = latest.Version
			k.follow(n.id, latest, ms.Steps())
		}
	}
	if cm, ok := n.m.(Certified); ok {
		if cert, held := cm.Certificate(); held {
			k.check(&cert, "held by", n.id)
		}
	}
}

// follow checks the changes node id adopted and its latest set, and
// learns the versions no honest machine adopted before.
func (k *setChecker) follow(id uint64, latest certify.MemberSet, steps []certify.Step) {
	for _, s := range steps {
		k.step(id, s)
	}
	if d, ok := k.digests[latest.Version]; !ok || d != latest.Digest(k.cluster) {
		k.c.fail("node %d holds version %d of the member set %v, which is not the one the honest members adopted", id, latest.Version, latest.IDs())
		return
	}
	k.latest[id] = latest
}

// step checks one change node id adopted.
func (k *setChecker) step(id uint64, s certify.Step) {
	v := s.Set.Version
	if d, ok := k.digests[v]; ok {
		if d != s.Set.Digest(k.cluster) {
			k.c.fail("two member sets of version %d adopted: %v, and %v by node %d", v, k.sets[v].IDs(), s.Set.IDs(), id)
		}
		return
	}
	prev, ok := k.sets[v-1]
	if !ok {
		k.c.fail("node %d adopted version %d of the member set, %v, after no version %d an honest member adopted", id, v, s.Set.IDs(), v-1)
		return
	}
	if err := certify.VerifyStep(k.cluster, prev, s); err != nil {
		k.c.fail("node %d adopted version %d of the member set, %v, which does not follow version %d, %v: %v", id, v, s.Set.IDs(), v-1, prev.IDs(), err)
		return
	}
	added, removed, _ := s.Set.Next(prev)
	if added != 0 {
		if key, _ := s.Set.Key(added); !k.issued(added, key) {
			k.c.fail("node %d adopted version %d of the member set, which adds %d with key %s: the authority issued no credential for it", id, v, added, key)
			return
		}
	}
	if len(s.Set.Members) < k.minMembers {
		k.c.fail("node %d adopted version %d of the member set, %v: %d members, fewer than %d", id, v, s.Set.IDs(), len(s.Set.Members), k.minMembers)
		return
	}
	if err := k.learn(s.Set); err != nil {
		k.c.fail("version %d of the member set: %v", v, err)
		return
	}
	k.added = append(k.added, added)
	what := fmt.Sprintf("adds %d", added)
	if added == 0 {
		what = fmt.Sprintf("removes %d", removed)
	}
	k.c.logf("member set version %d (%s, commits of term %d): %v, first adopted by %d", v, what, s.Commit.Term, s.Set.IDs(), id)
}

// status checks that node n's term does not go back (acceptedTerms).
func (k *setChecker) status(n *node, st election.SoftState) { k.accepted.check(k.c, n, st) }

// check checks a certificate seen on the network or held by a node (how,
// who: where it was seen): if it is valid against the set of its version,
// no valid certificate of its term, of any version, may name another
// leader. A certificate of a version no honest machine adopted yet waits
// until one does.
func (k *setChecker) check(cert *certify.Certificate, how string, who uint64) {
	if cert == nil {
		return
	}
	if l, ok := k.leaders[cert.Term]; ok && l == cert.Leader {
		return
	}
	keys, ok := k.keys[cert.Version]
	if !ok {
		if len(k.pending) < maxPending {
			k.pending = append(k.pending, pendingCert{cert: *cert, how: how, who: who})
		}
		return
	}
	key := fmt.Sprint(cert.Cluster, cert.Term, cert.Leader, cert.Version, len(cert.Votes))
	if len(cert.Votes) > 0 {
		key += string(cert.Votes[0].Signature)
	}
	if k.refused[key] {
		return
	}
	if cert.Cluster != k.cluster || certify.VerifyCertificate(keys, *cert) != nil {
		if len(k.refused) >= maxRefused {
			clear(k.refused)
		}
		k.refused[key] = true
		return
	}
	if l, ok := k.leaders[cert.Term]; ok {
		k.c.fail("two certified leaders in term %d: %d and %d (a certificate of version %d %s %d)", cert.Term, l, cert.Leader, cert.Version, how, who)
		return
	}
	k.leaders[cert.Term] = cert.Leader
	k.c.logf("certified: %d leads term %d under version %d (a certificate %s %d)", cert.Leader, cert.Term, cert.Version, how, who)
}

// latestOf returns the latest member set node id held at its last step,
// and whether it ran with one.
func (k *setChecker) latestOf(id uint64) (certify.MemberSet, bool) {
	s, ok := k.latest[id]
	return s, ok
}

// changes returns how many of the changes honest machines adopted added
// a member, and how many removed one.
func (k *setChecker) changes() (adds, removes int) {
	for _, id := range k.added {
		if id != 0 {
			adds++
		} else {
			removes++
		}
	}
	return adds, removes
}
