package byzantine

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Changes lets the member set change at run time.
type Changes struct {
	// Admit checks that the cluster's authority issued cred, binding
	// member id to the public key key ("U…"); nil admits it.
	Admit func(id uint64, key, cred string) error
	// Key and Cred are this member's own public key and credential, sent
	// while it asks to join.
	Key, Cred string
	// MinMembers is the fewest members a removal may leave; 0 means
	// DefaultMinMembers.
	MinMembers int
}

// DefaultMinMembers is the fewest members a removal leaves by default:
// four tolerate one liar.
const DefaultMinMembers = 4

// maxJoiners bounds the members asking to join that a member keeps.
const maxJoiners = 8

// stepsKept bounds the changes a member keeps to help others catch up.
const stepsKept = 16

// members is one version of the member set, as the machine uses it.
type members struct {
	version      uint64
	set          certify.MemberSet // empty for a set that never changes
	keys         certify.Members
	desc         []uint64 // highest rank first (election.Config.Rank)
	asc          []uint64 // lowest ID first
	n, f, quorum int
	// rank compares members, with the scores of this set's kept.
	rank *election.Ranker
}

func newMembers(version uint64, set certify.MemberSet, keys certify.Members, ids []uint64, rank election.Rank) members {
	asc := slices.Clone(ids)
	slices.Sort(asc)
	ranker := rank.Ranker(asc)
	desc := slices.Clone(asc)
	ranker.Sort(desc)
	slices.Reverse(desc)
	n := len(desc)
	return members{version: version, set: set, keys: keys, desc: desc, asc: asc, n: n, f: certify.F(n), quorum: certify.Quorum(n), rank: ranker}
}

// membersOf returns the machine's form of set, ranked by rank.
func membersOf(set certify.MemberSet, rank election.Rank) (members, error) {
	keys, err := set.Keys()
	if err != nil {
		return members{}, err
	}
	return newMembers(set.Version, set, keys, set.IDs(), rank), nil
}

func (s members) has(id uint64) bool { return slices.Contains(s.desc, id) }

// lockState is the set a member holds prepared, and its certificate.
type lockState struct {
	Set certify.MemberSet         `json:"set"`
	QC  certify.QuorumCertificate `json:"qc"`
}

// accepted is the last set a member accepted: of which term and version,
// and its digest (hex).
type accepted struct {
	Term    uint64 `json:"term"`
	Version uint64 `json:"version"`
	Digest  string `json:"digest"`
}

// joiner is a member that asks to join, its credential checked.
type joiner struct {
	key, cred string
	seen      int
	statusAt  int
}

// proposal is the change the leader proposes in its term.
type proposal struct {
	term     uint64
	set      certify.MemberSet
	digest   [certify.DigestSize]byte
	cred     string
	just     *certify.QuorumCertificate
	accepts  map[uint64]certify.SignedStatement
	prepared *certify.QuorumCertificate
	sentAt   int
}

// changing reports whether the member set may change.
func (m *Machine) changing() bool { return m.cfg.Changes != nil }

func (m *Machine) minMembers() int {
	if m.cfg.Changes.MinMembers > 0 {
		return m.cfg.Changes.MinMembers
	}
	return DefaultMinMembers
}

// knows reports whether id is a member of the current term's set or of
// the latest.
func (m *Machine) knows(id uint64) bool { return m.members.has(id) || m.latest.has(id) }

// participates reports whether this member takes part in the election:
// it is a member of the latest set or of its term's. A member of the
// latest set that its term's set lacks (added during the term, or
// following a leader certified under an earlier set) cannot vote in the
// term, but follows it, and times it out for itself if it is above its
// leader.
func (m *Machine) participates() bool { return m.members.has(m.id) || m.latest.has(m.id) }

// departed reports whether id left: its departure was reported
// (PeerDown) after the last message that came from it, or nothing came
// from it for the member time-out (election.MemberTimeoutFactor presence
// intervals; every member says it is present each interval).
func (m *Machine) departed(id uint64) bool {
	if g, ok := m.gone[id]; ok && g >= m.lastFrom[id] {
		return true
	}
	return m.now-m.lastFrom[id] >= election.MemberTimeoutFactor*m.timing.PresenceTicks
}

// switchMembers makes the latest set the current term's, on entering a
// term.
func (m *Machine) switchMembers() { m.useMembers(m.latest) }

// setOf returns the member set of version, if this member knows it: the
// latest, the current term's, one of the changes it keeps, or the
// configured set.
func (m *Machine) setOf(version uint64) (members, bool) {
	switch version {
	case m.latest.version:
		return m.latest, true
	case m.members.version:
		return m.members, true
	case 0:
		return m.genesis, true
	}
	for _, s := range m.steps {
		if s.Set.Version == version {
			set, err := membersOf(s.Set, m.cfg.Rank)
			return set, err == nil
		}
	}
	return members{}, false
}

// restoreCert takes back the stored certificate of the current term if
// it holds among the set of its version, which the term then uses.
func (m *Machine) restoreCert(c *certify.Certificate) bool {
	t := m.term()
	set, ok := m.setOf(c.Version)
	if !ok || certify.VerifyCertificateFor(set.keys, *c, m.cfg.Cluster, t, Designated(set.desc, t)) != nil {
		return false
	}
	m.useMembers(set)
	m.cert = c
	return true
}

// useMembers makes set the current term's: the set of the latest
// version when a term is entered, or the set whose quorum certified the
// term's leader, its voters not having adopted the latest yet (a vote
// added to a certificate that exists makes no other). It drops what
// came from members not in it.
func (m *Machine) useMembers(set members) {
	if m.members.version == set.version {
		return
	}
	m.members = set
	for _, byMember := range m.timeouts {
		for id := range byMember {
			if !m.members.has(id) {
				delete(byMember, id)
			}
		}
	}
	for id := range m.far {
		if !m.members.has(id) {
			delete(m.far, id)
		}
	}
	for id := range m.gone {
		if !m.latest.has(id) {
			delete(m.gone, id)
		}
	}
}

// digestOf returns set's digest in this cluster.
func (m *Machine) digestOf(set certify.MemberSet) [certify.DigestSize]byte {
	return set.Digest(m.cfg.Cluster)
}

// driveChange, in the leader, proposes the next change of the member
// set, or sends its proposal, or its prepared certificate, again each
// heartbeat interval until the change is final.
func (m *Machine) driveChange() {
	t := m.term()
	if !m.changing() || !m.leading || m.cert == nil {
		return
	}
	if m.cert.Version != m.latest.version || m.members.version != m.latest.version {
		if _, _, _, due := m.nextChange(); due && m.designated(t) == m.id {
			// A change is due, and needs a leader certified under the
			// latest set: a term entered after the last change.
			m.handOver()
		}
		return
	}
	if m.prop != nil && m.prop.term != t {
		m.prop = nil
	}
	if m.prop == nil {
		set, cred, just, ok := m.nextChange()
		if !ok {
			return
		}
		d := m.digestOf(set)
		if err := m.acceptable(m.id, t, set, d, cred, just); err != nil {
			if errors.Is(err, errAcceptedOther) {
				// It proposed another set in this term, which is no
				// longer due: this one needs a term of its own.
				m.handOver()
			}
			return
		}
		m.prop = &proposal{term: t, set: set, digest: d, cred: cred, just: just, accepts: map[uint64]certify.SignedStatement{}, sentAt: noTick}
		ss, ok := m.signAccept(t, set, d)
		if !ok {
			m.prop = nil
			return
		}
		m.prop.accepts[m.id] = ss
	} else if m.prop.prepared == nil && m.prop.just == nil && !m.wanted(m.prop.set) {
		// What it proposed is no longer due (the member that asked to
		// join left, the member that left came back): it gives the term
		// up if another change is due, since no member accepts a second
		// set in a term.
		m.prop = nil
		if _, _, _, due := m.nextChange(); due {
			m.handOver()
		}
		return
	} else if m.now-m.prop.sentAt < m.timing.HeartbeatTicks {
		return
	}
	p := m.prop
	p.sentAt = m.now
	set := p.set
	msg := protocol.Message{Type: protocol.TypeBzChange, Term: t, Set: &set, Cred: p.cred, QC: p.just}
	if p.prepared != nil {
		msg.QC, msg.Cred = p.prepared, ""
	}
	m.send(msg)
	m.checkPrepared()
}

// nextChange picks the change to propose: the set this member holds
// prepared, else the highest member that asks to join, else the highest
// member whose departure was reported.
func (m *Machine) nextChange() (certify.MemberSet, string, *certify.QuorumCertificate, bool) {
	if l := m.lock; l != nil {
		qc := l.QC
		return l.Set, "", &qc, true
	}
	var best uint64
	for id, j := range m.joiners {
		if id > best && !m.latest.has(id) && !m.liars[id] && m.now-j.seen < m.timing.LeaderTimeoutTicks {
			best = id
		}
	}
	if best != 0 {
		j := m.joiners[best]
		set, err := m.latest.set.With(certify.SetMember{ID: best, Key: j.key})
		return set, j.cred, nil, err == nil
	}
	if m.latest.n-1 < m.minMembers() {
		return certify.MemberSet{}, "", nil, false
	}
	for _, id := range m.latest.desc {
		if id != m.id && m.departed(id) {
			set, err := m.latest.set.Without(id)
			return set, "", nil, err == nil
		}
	}
	return certify.MemberSet{}, "", nil, false
}

// wanted reports whether the change to set is still due here: the
// member it adds asks to join, the member it removes is gone.
func (m *Machine) wanted(set certify.MemberSet) bool {
	added, removed, err := set.Next(m.latest.set)
	switch {
	case err != nil:
		return false
	case added != 0:
		j, ok := m.joiners[added]
		return ok && m.now-j.seen < m.timing.LeaderTimeoutTicks
	}
	return m.departed(removed)
}

// errAcceptedOther: the member accepted another set in the term.
var errAcceptedOther = errors.New("it accepted another set in this term")

// errLocked: the member holds another set prepared.
var errLocked = errors.New("another set is prepared")

// acceptable checks a proposal of set by from, the leader of term t.
func (m *Machine) acceptable(from, t uint64, set certify.MemberSet, d [certify.DigestSize]byte, cred string, just *certify.QuorumCertificate) error {
	switch {
	case t != m.term():
		return errors.New("not this member's term")
	case m.cert == nil || m.cert.Leader != from || m.cert.Version != m.latest.version || m.members.version != m.latest.version:
		return errors.New("not the certified leader of the latest set")
	case m.accepted.Term == t && m.accepted.Digest != hex.EncodeToString(d[:]):
		return errAcceptedOther
	}
	added, removed, err := set.Next(m.latest.set)
	if err != nil {
		return err
	}
	if just != nil {
		if just.Kind != certify.KindAccept || just.Cluster != m.cfg.Cluster || just.Version != set.Version || just.Digest != d || just.Term >= t {
			return errors.New("the justification is not a prepared certificate of the set")
		}
		if m.lock == nil || m.lock.QC.Term != just.Term || m.lock.QC.Digest != just.Digest {
			if err := certify.VerifyQuorumCertificate(m.latest.keys, *just); err != nil {
				return err
			}
		}
	}
	if m.lock != nil && m.lock.QC.Digest != d && (just == nil || just.Term <= m.lock.QC.Term) {
		return errLocked
	}
	if just != nil {
		return nil // a quorum checked the set when it accepted it
	}
	switch {
	case added != 0:
		key, _ := set.Key(added)
		if m.liars[added] {
			return fmt.Errorf("member %d lied", added)
		}
		if err := m.cfg.Changes.Admit(added, key, cred); err != nil {
			return fmt.Errorf("member %d: %w", added, err)
		}
	case removed != 0:
		if removed == m.id || removed == from || !m.departed(removed) {
			return fmt.Errorf("member %d was not seen leave", removed)
		}
		if len(set.Members) < m.minMembers() {
			return fmt.Errorf("%d members, fewer than %d", len(set.Members), m.minMembers())
		}
	}
	return nil
}

// signAccept records and signs this member's accept of set in term t.
func (m *Machine) signAccept(t uint64, set certify.MemberSet, d [certify.DigestSize]byte) (certify.SignedStatement, bool) {
	ss, err := certify.Sign(m.cfg.Signer, certify.Accept(m.cfg.Cluster, m.id, t, set.Version, d))
	if err != nil {
		return certify.SignedStatement{}, false
	}
	a := accepted{Term: t, Version: set.Version, Digest: hex.EncodeToString(d[:])}
	if m.accepted != a {
		m.accepted = a
		m.saveProof() // stored before the accept leaves
	}
	return ss, true
}

// onChange handles the leader's proposal, or its prepared certificate.
func (m *Machine) onChange(msg protocol.Message) {
	if !m.changing() || msg.Set == nil || !m.participates() {
		return
	}
	set := *msg.Set
	if msg.QC != nil && msg.QC.Term == msg.Term {
		m.onPrepared(set, *msg.QC, false)
		if l := m.lock; l != nil && m.committed && l.QC.Term == msg.QC.Term && l.QC.Digest == msg.QC.Digest && m.now-m.commitSent >= m.timing.HeartbeatTicks {
			// The leader sends its prepared certificate again while the
			// change is not final: commits were lost, or some members
			// missed them. The commit goes again, once an interval.
			m.sendCommit()
		}
		return
	}
	d := m.digestOf(set)
	err := m.acceptable(msg.From, msg.Term, set, d, msg.Cred, msg.QC)
	if errors.Is(err, errLocked) {
		l := m.lock
		held, qc := l.Set, l.QC
		m.send(protocol.Message{Type: protocol.TypeBzLock, To: msg.From, Set: &held, QC: &qc})
		return
	}
	if err != nil {
		return
	}
	if ss, ok := m.signAccept(msg.Term, set, d); ok {
		m.send(protocol.Message{Type: protocol.TypeBzAccept, To: msg.From, Statement: &ss})
	}
}

// onAccept counts a member's accept of the leader's proposal.
func (m *Machine) onAccept(msg protocol.Message) {
	p := m.prop
	if p == nil || msg.Statement == nil || p.prepared != nil || p.term != m.term() {
		return
	}
	ss := *msg.Statement
	s := ss.Statement
	if s.Kind != certify.KindAccept || s.Cluster != m.cfg.Cluster || s.Term != p.term || s.Version != p.set.Version || s.Digest != p.digest || !m.latest.has(s.Member) {
		return
	}
	if _, ok := p.accepts[s.Member]; ok || ss.Verify(m.latest.keys) != nil {
		return
	}
	p.accepts[s.Member] = ss
	m.checkPrepared()
}

// checkPrepared makes the prepared certificate of the leader's proposal
// once a quorum accepted it, and sends it.
func (m *Machine) checkPrepared() {
	p := m.prop
	if p == nil || p.prepared != nil || len(p.accepts) < m.latest.quorum {
		return
	}
	all := make([]certify.SignedStatement, 0, len(p.accepts))
	for _, ss := range p.accepts {
		all = append(all, ss)
	}
	qc, err := certify.NewQuorumCertificate(all)
	if err != nil {
		return
	}
	p.prepared = &qc
	p.sentAt = m.now
	set := p.set
	m.send(protocol.Message{Type: protocol.TypeBzChange, Term: p.term, Set: &set, QC: &qc})
	m.onPrepared(set, qc, true)
}

// onPrepared locks set, prepared by qc, unless this member holds a set
// prepared in a later term, and commits it.
func (m *Machine) onPrepared(set certify.MemberSet, qc certify.QuorumCertificate, verified bool) {
	if qc.Kind != certify.KindAccept || qc.Cluster != m.cfg.Cluster || set.Version != m.latest.version+1 || qc.Version != set.Version {
		return
	}
	same := m.lock != nil && m.lock.QC.Term == qc.Term && m.lock.QC.Digest == qc.Digest
	if m.lock != nil && !same && qc.Term <= m.lock.QC.Term {
		return
	}
	if !same {
		d := m.digestOf(set)
		if qc.Digest != d {
			return
		}
		if _, _, err := set.Next(m.latest.set); err != nil {
			return
		}
		if !verified && certify.VerifyQuorumCertificate(m.latest.keys, qc) != nil {
			return
		}
		m.lock = &lockState{Set: set, QC: qc}
		m.committed = false
		clear(m.commits)
		m.saveProof() // stored before the commit leaves
	}
	if !m.latest.has(m.id) {
		return
	}
	if m.committed {
		return
	}
	ss, err := certify.Sign(m.cfg.Signer, certify.Commit(m.cfg.Cluster, m.id, qc.Term, set.Version, qc.Digest))
	if err != nil {
		return
	}
	m.committed, m.commitSig = true, ss.Signature
	m.sendCommit()
	m.addCommit(m.id, ss.Signature)
}

// sendCommit broadcasts this member's commit of its locked set.
func (m *Machine) sendCommit() {
	l := m.lock
	ss := certify.SignedStatement{Statement: certify.Commit(m.cfg.Cluster, m.id, l.QC.Term, l.Set.Version, l.QC.Digest), Signature: m.commitSig}
	held, prepared := l.Set, l.QC
	m.commitSent = m.now
	m.send(protocol.Message{Type: protocol.TypeBzCommit, Statement: &ss, Set: &held, QC: &prepared})
}

// onCommit counts a member's commit, after locking the set it commits.
func (m *Machine) onCommit(msg protocol.Message) {
	if !m.changing() || msg.Statement == nil || msg.Set == nil || msg.QC == nil {
		return
	}
	m.onPrepared(*msg.Set, *msg.QC, false)
	ss := *msg.Statement
	s := ss.Statement
	l := m.lock
	if l == nil || s.Kind != certify.KindCommit || s.Cluster != m.cfg.Cluster || s.Term != l.QC.Term || s.Version != l.Set.Version || s.Digest != l.QC.Digest || !m.latest.has(s.Member) {
		return
	}
	if _, ok := m.commits[s.Member]; ok || ss.Verify(m.latest.keys) != nil {
		return
	}
	m.addCommit(s.Member, ss.Signature)
}

// addCommit counts a commit of the locked set, and adopts the set on a
// quorum of them.
func (m *Machine) addCommit(member uint64, sig []byte) {
	l := m.lock
	m.commits[member] = sig
	if len(m.commits) < m.latest.quorum {
		return
	}
	all := make([]certify.SignedStatement, 0, len(m.commits))
	for id, s := range m.commits {
		all = append(all, certify.SignedStatement{Statement: certify.Commit(m.cfg.Cluster, id, l.QC.Term, l.Set.Version, l.QC.Digest), Signature: s})
	}
	cc, err := certify.NewQuorumCertificate(all)
	if err != nil {
		return
	}
	m.adopt(certify.Step{Set: l.Set, Commit: cc}, true)
}

// adopt makes step's set the latest: used from the next term this
// member enters.
func (m *Machine) adopt(step certify.Step, verified bool) bool {
	if step.Set.Version != m.latest.version+1 {
		return false
	}
	if !verified && certify.VerifyStep(m.cfg.Cluster, m.latest.set, step) != nil {
		return false
	}
	next, err := membersOf(step.Set, m.cfg.Rank)
	if err != nil {
		return false
	}
	added, removed, err := step.Set.Next(m.latest.set)
	if err != nil {
		return false
	}
	wasMember := m.latest.has(m.id)
	m.latest = next
	m.steps = append(m.steps, step)
	if len(m.steps) > stepsKept {
		m.steps = slices.Delete(m.steps, 0, len(m.steps)-stepsKept)
	}
	m.lock, m.prop, m.committed = nil, nil, false
	m.accepted = accepted{}
	clear(m.commits)
	delete(m.joiners, added)
	if added != 0 {
		// It asked to join just now: heard, not gone (it has said
		// nothing as a member yet).
		m.lastFrom[added] = m.now
		delete(m.gone, added)
	}
	m.saveProof()
	if added != 0 {
		m.event(election.Event{Kind: election.MemberAdded, Member: added, Term: m.term()})
	} else {
		m.event(election.Event{Kind: election.MemberRemoved, Member: removed, Term: m.term()})
	}
	m.driveChange() // the leader hands its term over if another change is due
	if wasMember && !m.latest.has(m.id) {
		m.hello() // removed while it was away: it asks to join again
	}
	if !wasMember && m.latest.has(m.id) {
		// Added: it takes part from the next term it enters, which the
		// others' answers to its Hello justify.
		if m.term() == 0 {
			m.enter(1, nil, nil)
		}
		m.send(protocol.Message{Type: protocol.TypeBzHello, Term: m.term(), Version: m.latest.version})
	}
	return true
}

// follow adopts the changes of steps that come after the latest set.
func (m *Machine) follow(steps []certify.Step) {
	for _, s := range steps {
		if s.Set.Version <= m.latest.version {
			continue
		}
		if !m.adopt(s, false) {
			return
		}
	}
}

// stepsAfter returns the changes kept after version v, if they reach back
// to it.
func (m *Machine) stepsAfter(v uint64) []certify.Step {
	if v >= m.latest.version || len(m.steps) == 0 || m.steps[0].Set.Version > v+1 {
		return nil
	}
	steps := m.steps[v+1-m.steps[0].Set.Version:]
	// As many as fit a message (protocol.MaxCertifiedPayload), oldest
	// first: the member follows them, and asks again for the rest.
	size := 0
	for i, s := range steps {
		data, err := json.Marshal(s)
		if err != nil {
			return slices.Clone(steps[:i])
		}
		if size += len(data); size > maxStepsSize && i > 0 {
			return slices.Clone(steps[:i])
		}
	}
	return slices.Clone(steps)
}

// maxStepsSize bounds the changes a Status carries, in bytes of JSON:
// with the rest of the message, within protocol.MaxCertifiedPayload.
const maxStepsSize = 32 << 10

// heardVersion asks for the changes it lacks when a member shows a later
// set: a Hello, at most once a heartbeat interval.
func (m *Machine) heardVersion(v uint64) {
	if !m.changing() || v <= m.latest.version || m.now-m.askedAt < m.timing.HeartbeatTicks {
		return
	}
	m.askedAt = m.now
	m.hello()
}

// hello broadcasts a Hello: with this member's key and credential while
// it is not a member of the latest set.
func (m *Machine) hello() {
	msg := protocol.Message{Type: protocol.TypeBzHello, Term: m.term()}
	if m.changing() {
		msg.Version = m.latest.version
		if !m.latest.has(m.id) {
			msg.Key, msg.Cred = m.cfg.Changes.Key, m.cfg.Changes.Cred
		}
	}
	m.send(msg)
}

// onJoin notes a member that asks to join, its credential checked, and
// tells it the changes and the term it needs.
func (m *Machine) onJoin(msg protocol.Message) {
	if !m.changing() || msg.Type != protocol.TypeBzHello || msg.Key == "" || !m.started || m.left {
		return
	}
	j, known := m.joiners[msg.From]
	if !known || j.key != msg.Key || j.cred != msg.Cred {
		if m.cfg.Changes.Admit(msg.From, msg.Key, msg.Cred) != nil {
			return
		}
		if !known && len(m.joiners) >= maxJoiners {
			var oldest uint64
			for id, o := range m.joiners {
				if oldest == 0 || o.seen < m.joiners[oldest].seen {
					oldest = id
				}
			}
			delete(m.joiners, oldest)
		}
		j = joiner{key: msg.Key, cred: msg.Cred, statusAt: noTick}
	}
	j.seen = m.now
	if m.now-j.statusAt >= m.timing.HeartbeatTicks {
		j.statusAt = m.now
		m.send(m.statusMessage(msg.From, msg.Version))
	}
	m.joiners[msg.From] = j
	m.driveChange()
}

// changeDue is how many ticks until the leader's next step in changing
// the member set: sending its proposal again, or proposing one.
func (m *Machine) changeDue() int {
	if m.cert == nil {
		return 1 << 30
	}
	if p := m.prop; p != nil && p.term == m.term() {
		if p.prepared == nil && p.just == nil && !m.wanted(p.set) {
			return 1 // dropped, and perhaps the term handed over
		}
		due := p.sentAt + m.timing.HeartbeatTicks - m.now
		if added, _, err := p.set.Next(m.latest.set); err == nil && added != 0 {
			if j, ok := m.joiners[added]; ok {
				due = min(due, j.seen+m.timing.LeaderTimeoutTicks-m.now) // it is no longer due then
			}
		}
		return max(1, due)
	}
	if _, _, _, ok := m.nextChange(); ok {
		return 1 // proposed, or the term handed over for it
	}
	// When a member silent so far counts as gone.
	due := 1 << 30
	for _, id := range m.latest.desc {
		if end := m.lastFrom[id] + election.MemberTimeoutFactor*m.timing.PresenceTicks - m.now; id != m.id && end > 0 {
			due = min(due, end)
		}
	}
	return due
}

// MemberSet returns the latest member set this member knows (version 0,
// the configured set, until a change), and the member set of its term.
// Without Config.Changes both are empty sets of version 0.
func (m *Machine) MemberSet() (latest, term certify.MemberSet) {
	return m.latest.set, m.members.set
}

// Steps returns the last changes of the member set this member adopted,
// oldest first (at most stepsKept): each step's commit certificate is signed by
// a quorum of the set before it.
func (m *Machine) Steps() []certify.Step { return slices.Clone(m.steps) }

// Members returns the members of the latest member set, sorted
// (election.Membership): replaced, never changed, by a change.
func (m *Machine) Members() []uint64 { return m.latest.asc }

// handOver ends the leader's term so that the next change can be made:
// a change to the version after the latest needs a leader certified in
// it, that is a term entered after the change. The leader stops leading,
// releases its grants (its Resign of the term) and gives the term up.
func (m *Machine) handOver() {
	t := m.term()
	if m.leading {
		m.stepDown()
	}
	clear(m.acked) // the grants it gathered lead no more: its lease ends here
	if m.grant.leader == m.id {
		m.grant.until = 0
	}
	m.quit = t
	m.handedOver, m.handedAt = t, m.now
	m.send(protocol.Message{Type: protocol.TypeResign, Term: t})
	m.timeout(t)
}

// resignAgain sends the Resign of a term it handed over again each
// heartbeat interval while it is still in it: the first may be lost,
// or dropped after a stall, and the members would then wait for their
// own time-outs.
func (m *Machine) resignAgain() {
	if m.handedOver != m.term() || m.now-m.handedAt < m.timing.HeartbeatTicks {
		return
	}
	m.handedAt = m.now
	m.send(protocol.Message{Type: protocol.TypeResign, Term: m.term()})
}

// onStranger answers the Hello of a member of no set this member knows
// that lacks changes (one removed while it was away, that came back
// with its disk) with the changes, at most once a heartbeat interval
// each and for at most maxJoiners of them at once.
func (m *Machine) onStranger(msg protocol.Message) {
	if !protocol.DynamicMember(msg.From) {
		return
	}
	if at, ok := m.strangers[msg.From]; ok && m.now-at < m.timing.HeartbeatTicks {
		return
	}
	if _, ok := m.strangers[msg.From]; !ok && len(m.strangers) >= maxJoiners {
		var oldest uint64
		for id, at := range m.strangers {
			if oldest == 0 || at < m.strangers[oldest] {
				oldest = id
			}
		}
		delete(m.strangers, oldest)
	}
	m.strangers[msg.From] = m.now
	m.send(m.statusMessage(msg.From, msg.Version))
}

// timeoutProven reports whether tc holds the time-outs of a quorum of the
// current term's set, of the latest, or of the set before the latest:
// its signers may have formed it under any of them, members not all
// adopting a change at once. (A time-out certificate moves terms on; it
// certifies no leader.)
func (m *Machine) timeoutProven(tc *certify.TimeoutCertificate) bool {
	versions := []uint64{m.version, m.latest.version}
	if m.latest.version > 0 {
		versions = append(versions, m.latest.version-1)
	}
	for i, v := range versions {
		if slices.Contains(versions[:i], v) {
			continue
		}
		if set, ok := m.setOf(v); ok && certify.VerifyTimeoutCertificate(set.keys, *tc, set.quorum) == nil {
			return true
		}
	}
	return false
}
