package sim

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
)

// setLiar is the traitor of a byzantine churn run: a Traitor, whose
// shadow's member set changes, that also lies about the member set. It
// proposes changes the authority never allowed: a member of the pool
// added with a forged credential, an ID outside the set (of the pool or
// made up) added with a key of its own making and a forged credential,
// an honest member that runs removed; it accepts and commits sets at
// random; it carries prepared certificates it forged (its own signature
// alone, or bytes that are not signatures from a quorum) on changes,
// commits and locks; and it tells members changes it forged (a status
// whose steps carry forged commits).
type setLiar struct {
	*Traitor
	shadow  MemberSets
	cluster string
	signer  certify.Signer
	rng     *rand.Rand
	// keys are the pool's members' own keys; forged are keys of the
	// traitor's making, for every ID of the pool and the made-up ones.
	keys, forged map[uint64]string
	pool, madeUp []uint64
	// running returns the honest members that run.
	running func() []uint64
	lies    int
}

// Tick advances the traitor by one tick: its shadow's output bent and
// the Traitor's lies, then up to one lie about the member set.
func (l *setLiar) Tick() []Lie {
	out := l.Traitor.Tick()
	if l.rng.IntN(2) == 0 {
		l.lie()
		l.lies += len(l.out)
		out = append(out, l.out...)
		l.out = nil
	}
	return out
}

// SetLies is how many copies of lies about the member set it sent.
func (l *setLiar) SetLies() int { return l.lies }

// lie tells one lie about the member set, in the traitor's term or in
// another.
func (l *setLiar) lie() {
	latest, _ := l.shadow.MemberSet()
	term := l.term()
	switch l.rng.IntN(4) {
	case 1:
		term = l.ownTerm(term)
	case 2:
		term += 1 + l.rng.Uint64N(3)
	}
	set, cred, ok := l.change(latest)
	if !ok {
		return
	}
	switch l.rng.IntN(6) {
	case 0, 1: // a change it has no right to, with a forged credential or prepared certificate
		m := protocol.Message{Type: protocol.TypeBzChange, Term: term, Set: &set, Cred: cred}
		switch l.rng.IntN(3) {
		case 1: // "prepared in this term: commit it"
			m.QC, m.Cred = l.forgedQC(certify.KindAccept, term, set, latest), ""
		case 2: // "prepared in an earlier term: accept it"
			if term > 1 {
				m.QC = l.forgedQC(certify.KindAccept, term-1-l.rng.Uint64N(term-1), set, latest)
			}
		}
		l.some(m)
	case 2: // an accept of a set at random, to one member
		ss, err := certify.Sign(l.signer, certify.Accept(l.cluster, l.ID(), term, set.Version, set.Digest(l.cluster)))
		if err == nil {
			to := l.someone()
			l.emit(protocol.Message{Type: protocol.TypeBzAccept, To: to, Term: term, Statement: &ss}, to)
		}
	case 3: // a commit of a set at random, with a forged prepared certificate
		qc := l.forgedQC(certify.KindAccept, term, set, latest)
		ss, err := certify.Sign(l.signer, certify.Commit(l.cluster, l.ID(), term, set.Version, qc.Digest))
		if err == nil {
			l.some(protocol.Message{Type: protocol.TypeBzCommit, Term: term, Statement: &ss, Set: &set, QC: qc})
		}
	case 4: // a lock on a set at random, with a forged prepared certificate
		to := l.someone()
		l.emit(protocol.Message{Type: protocol.TypeBzLock, To: to, Term: term, Set: &set, QC: l.forgedQC(certify.KindAccept, term, set, latest)}, to)
	case 5: // changes with forged commits, to a member or one that asks to join
		steps := []certify.Step{{Set: set, Commit: *l.forgedQC(certify.KindCommit, term, set, latest)}}
		if next, _, ok := l.change(set); ok && l.rng.IntN(2) == 0 {
			steps = append(steps, certify.Step{Set: next, Commit: *l.forgedQC(certify.KindCommit, term, next, set)})
		}
		to := l.pool[l.rng.IntN(len(l.pool))]
		l.emit(protocol.Message{Type: protocol.TypeBzStatus, To: to, Term: term, Version: steps[len(steps)-1].Set.Version, Steps: steps}, to)
	}
}

// some sends a broadcast m to every other member, or to some of them only.
func (l *setLiar) some(m protocol.Message) {
	if l.rng.IntN(2) == 0 {
		l.emit(m, 0)
		return
	}
	peers := l.others()
	for _, to := range peers[:1+l.rng.IntN(len(peers))] {
		l.emit(m, to)
	}
}

// someone is a member to send a lie to: most often its term's designated
// leader, which gathers the accepts.
func (l *setLiar) someone() uint64 {
	desc := l.descending()
	if lead := desc[(l.term()-1)%uint64(len(desc))]; lead != l.ID() && l.rng.IntN(2) == 0 {
		return lead
	}
	return l.others()[0]
}

// change returns a change of set that the authority never allowed, and
// the credential it comes with: a pool member outside set with its own
// key and a forged credential; an ID outside set, of the pool or made up,
// with a key of the traitor's making and a forged credential; or set
// without an honest member that runs.
func (l *setLiar) change(set certify.MemberSet) (certify.MemberSet, string, bool) {
	var out []uint64
	for _, id := range append(slices.Clone(l.pool), l.madeUp...) {
		if _, in := set.Key(id); !in {
			out = append(out, id)
		}
	}
	var present []uint64
	for _, id := range l.running() {
		if _, in := set.Key(id); in {
			present = append(present, id)
		}
	}
	switch r := l.rng.IntN(3); {
	case r == 2 && len(present) > 0:
		next, err := set.Without(present[l.rng.IntN(len(present))])
		return next, "", err == nil
	case len(out) > 0:
		id := out[l.rng.IntN(len(out))]
		key, own := l.keys[id]
		if r == 1 || !own {
			key = l.forged[id]
		}
		next, err := set.With(certify.SetMember{ID: id, Key: key})
		return next, l.forgedCred(id, key), err == nil
	}
	return certify.MemberSet{}, "", false
}

// forgedCred is a credential the authority did not issue: the traitor's
// own signature over what the authority signs, or bytes that are none.
func (l *setLiar) forgedCred(id uint64, key string) string {
	if l.rng.IntN(2) == 0 {
		sig, err := l.signer.Sign([]byte(credentialText(l.cluster, id, key)))
		if err == nil {
			return hex.EncodeToString(sig)
		}
	}
	b := make([]byte, 64)
	for i := range b {
		b[i] = byte(l.rng.UintN(256))
	}
	return hex.EncodeToString(b)
}

// forgedQC returns a certificate of kind (accepts or commits) of set in
// term that no quorum of prev signed: the traitor's own signature alone,
// or bytes that are not signatures, as from a quorum of prev.
func (l *setLiar) forgedQC(kind certify.Kind, term uint64, set, prev certify.MemberSet) *certify.QuorumCertificate {
	d := set.Digest(l.cluster)
	st := certify.Accept(l.cluster, l.ID(), term, set.Version, d)
	if kind == certify.KindCommit {
		st = certify.Commit(l.cluster, l.ID(), term, set.Version, d)
	}
	if l.rng.IntN(2) == 0 {
		if ss, err := certify.Sign(l.signer, st); err == nil {
			if qc, err := certify.NewQuorumCertificate([]certify.SignedStatement{ss}); err == nil {
				return &qc
			}
		}
	}
	qc := certify.QuorumCertificate{Kind: kind, Cluster: l.cluster, Term: term, Version: set.Version, Digest: d}
	members := prev.IDs()
	for _, i := range l.rng.Perm(len(members))[:certify.Quorum(len(members))] {
		sig := make([]byte, certify.SignatureSize)
		for j := range sig {
			sig[j] = byte(l.rng.UintN(256))
		}
		qc.Sigs = append(qc.Sigs, certify.MemberSignature{Member: members[i], Signature: sig})
	}
	slices.SortFunc(qc.Sigs, func(a, b certify.MemberSignature) int { return cmp.Compare(a.Member, b.Member) })
	return &qc
}

// credentialText is what the authority of a byzantine churn run signs
// for member id's key: the cluster, the ID and the key.
func credentialText(cluster string, id uint64, key string) string {
	return fmt.Sprintf("%s %d %s", cluster, id, key)
}
