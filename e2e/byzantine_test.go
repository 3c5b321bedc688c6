package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/testcontainers/testcontainers-go"

	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

const byzantine = "byzantine"

// TestByzantineLiar: a four-member byzantine cluster (f = 1) whose member
// 1 is the lying member's image (e2e/liar), with member 1's own key and
// NATS user: it equivocates, claims terms near the ceiling with forged
// certificates, announces itself, answers queries for the leader, signs
// time-outs at random, replays messages and tells each peer a different
// status. Checked, with the members' public keys:
//
//   - the honest leader, 4, is certified: its answer to a query holds
//     under the keys (signing.ReadAnnouncement), the liar's do not;
//   - the observer records member 1 as faulty with a proof that holds,
//     and every honest node counts the conviction (its metric);
//   - the leader is killed: with the liar convicted, two faults are more
//     than f = 1, so nodes 2 and 3 alone certify no one: they give the
//     term up and nobody leads (safety beyond f);
//   - the leader restarts, gives its own term up, and a certified
//     leader is elected: 3 while 4 is held back as a member that just
//     failed to lead, or 4 at once if its restart outlasts that; then
//     4, the highest live honest ID;
//   - throughout, every announcement that holds is an honest member's,
//     one leader per term, and neither a node's /status nor the
//     observer's history ever names member 1.
//
// What the liar was seen to do is logged with its counts.
func TestByzantineLiar(t *testing.T) {
	built := time.Now()
	buildImages(t) // once per test binary; timed apart from the scenario
	started := time.Now()
	t.Logf("images ready after %v", started.Sub(built).Round(time.Millisecond))
	d := deployClusters(t, []cluster{{alg: byzantine, size: 4, liar: 1}})
	w := d.watch(byzantine)
	t.Logf("deployed: 3 NATS servers, the observer, byzantine nodes 2-4 and the liar as member 1; leader 4 after %v", time.Since(started).Round(time.Millisecond))

	d.certifiedAndConvicted(w, 4, []uint64{2, 3, 4})

	// Kill the leader: a convicted liar and a dead leader are two
	// faults, one more than a cluster of four tolerates. Nodes 2 and 3
	// suspect 4 and give its term up, and must not certify anyone.
	t4 := d.waitAgreed(byzantine, 4, 0, converge, 1) // the latest term, if it moved since
	before := map[uint64]float64{}
	for _, id := range []uint64{2, 3} {
		before[id] = d.metric(byzantine, id, "election_leader_timeouts_total") + d.metric(byzantine, id, "election_leader_disconnects_total")
	}
	killed := time.Now()
	d.kill(d.nodes[byzantine][4])
	for _, id := range []uint64{2, 3} {
		d.waitFor(converge, fmt.Sprintf("node %d gives up leader 4", id), func() error {
			n := d.metric(byzantine, id, "election_leader_timeouts_total") + d.metric(byzantine, id, "election_leader_disconnects_total")
			if n <= before[id] {
				return fmt.Errorf("leader time-outs and disconnects %v", n)
			}
			return nil
		})
	}
	stuck := t4
	for _, id := range []uint64{2, 3} {
		s, err := d.statusOf(byzantine, id)
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		if s.State == "leader" || s.Leader != nil && *s.Leader == 1 {
			t.Errorf("node %d with the leader dead and the liar convicted: state %s, leader %v in term %d; want no leader", id, s.State, deref(s.Leader), s.Term)
		}
		stuck = max(stuck, s.Term)
	}
	if later := w.leadersSince(killed, 4); len(later) > 0 {
		t.Errorf("with two faults among four members, certified leaders (term → leader) %v were announced; want none", later)
	}
	t.Logf("leader 4 killed in term %d: nodes 2 and 3 gave it up after %v and certified no one (two faults, f = 1)", t4, time.Since(killed).Round(time.Millisecond))

	// The leader comes back: it gives its own term up, so a quorum of
	// honest time-outs moves the cluster on and an honest member is
	// certified: 3 while 4 is held back as a member that just failed to
	// lead, or 4 at once if its restart outlasts that.
	restarted := time.Now()
	d.start(d.nodes[byzantine][4])
	var firstTerm, firstLeader uint64
	d.waitFor(converge, "a certified leader after the restart", func() error {
		for term, l := range w.leadersSince(restarted, 0) {
			if firstTerm == 0 || term < firstTerm {
				firstTerm, firstLeader = term, l
			}
		}
		if firstTerm == 0 {
			return errors.New("none announced")
		}
		return nil
	})
	t.Logf("node 4 restarted: leader %d certified in term %d after %v", firstLeader, firstTerm, time.Since(restarted).Round(time.Millisecond))
	t4again := d.waitAgreed(byzantine, 4, stuck, converge, 1)
	d.waitRecorded(byzantine, 4, stuck, converge)
	t.Logf("then all agreed on 4 again (term %d), %v after the restart", t4again, time.Since(restarted).Round(time.Millisecond))
	d.queryCertified(w, byzantine, 4, t4again)

	// The history: one leader per term, none of them the liar, and the
	// first certified term after the restart among them.
	h := d.checkHistory(byzantine)
	var leaders []uint64
	sawFirst := false
	for _, rec := range h {
		leaders = append(leaders, rec.Leader)
		if rec.Leader == 1 {
			t.Errorf("observer history names the liar as leader in term %d", rec.Term)
		}
		sawFirst = sawFirst || rec.Leader == firstLeader && rec.Term == firstTerm
	}
	if !sawFirst {
		t.Errorf("observer history %v lacks leader %d in term %d (seen on %s)", h, firstLeader, firstTerm, w.source(firstTerm))
	}
	for _, id := range []uint64{2, 3, 4} {
		s, err := d.statusOf(byzantine, id)
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		if s.Leader != nil && *s.Leader == 1 {
			t.Errorf("node %d reports the liar as leader (term %d)", id, s.Term)
		}
	}
	w.check(t)

	// What the liar did, as seen on the wire and by the nodes, and as it
	// counted itself.
	seen := w.summary()
	t.Logf("the liar was seen to: %s", seen)
	var dropped []string
	for _, id := range []uint64{2, 3, 4} {
		dropped = append(dropped, fmt.Sprintf("node %d dropped %v replayed messages", id,
			d.metric(byzantine, id, `election_messages_dropped_total{reason="replayed"}`)))
	}
	t.Logf("the nodes: %s; observer history leaders %v", strings.Join(dropped, "; "), leaders)
	if own, err := d.liarCounts(byzantine, 1); err == nil {
		t.Logf("the liar's own counts: %v", own)
	}
	if w.count(func(w *watcher) int { return w.equivocations }) == 0 || w.count(func(w *watcher) int { return w.rejectedAnnouncements }) == 0 {
		t.Errorf("the liar's equivocations or false announcements were not seen: %s", seen)
	}
	t.Logf("TestByzantineLiar took %v", time.Since(started).Round(time.Second))
}

// TestByzantineLiarAmongSeven: a seven-member byzantine cluster (f = 2)
// whose member 1 is the lying member, as in TestByzantineLiar. With the
// liar convicted, killing the honest leader is the second fault of two
// that seven members tolerate, so the five honest members left elect a
// certified leader: 6, the highest live honest ID. Checked, with
// the members' public keys:
//
//   - leader 7 is certified; the observer convicts member 1 with a proof
//     that holds, and every honest node counts the conviction;
//   - 7 is killed: an honest member is certified in a later term, and
//     the live honest nodes settle on 6, certified, which the observer
//     records;
//   - 7 restarts and is the leader again, certified;
//   - throughout, one leader per term, never the liar.
func TestByzantineLiarAmongSeven(t *testing.T) {
	buildImages(t)
	started := time.Now()
	d := deployClusters(t, []cluster{{alg: byzantine, size: 7, liar: 1}})
	w := d.watch(byzantine)
	t.Logf("deployed: 3 NATS servers, the observer, byzantine nodes 2-7 and the liar as member 1; leader 7 after %v", time.Since(started).Round(time.Millisecond))
	d.certifiedAndConvicted(w, 7, []uint64{2, 3, 4, 5, 6, 7})

	// Kill the leader: the liar and the dead leader are two faults, as
	// many as seven members tolerate.
	t7 := d.waitAgreed(byzantine, 7, 0, converge, 1)
	killed := time.Now()
	d.kill(d.nodes[byzantine][7])
	var first map[uint64]uint64
	d.waitFor(converge, "a certified leader after the kill", func() error {
		if first = w.leadersSince(killed, 7); len(first) == 0 {
			return errors.New("none announced")
		}
		return nil
	})
	elected := time.Since(killed)
	t6 := d.waitAgreed(byzantine, 6, t7, converge, 1, 7)
	d.waitRecorded(byzantine, 6, t7, converge)
	a6 := d.queryCertified(w, byzantine, 6, t6)
	// At the fault limit every honest vote counts, so a member that is
	// late on a busy host can cost a term: the honest members may pass
	// through more than one certified leader (never two in one term, never
	// the liar: w.check) before they settle on 6.
	t.Logf("leader 7 killed in term %d: certified leaders (term → leader) %v announced first, %v after the kill; all live honest nodes agree on 6 in term %d, certified by members %v; announced since the kill: %v",
		t7, first, elected.Round(time.Millisecond), t6, voters(a6.Certificate), w.leadersSince(killed, 7))

	// The leader comes back and leads again.
	restarted := time.Now()
	d.start(d.nodes[byzantine][7])
	t7again := d.waitAgreed(byzantine, 7, t6, converge, 1)
	d.waitRecorded(byzantine, 7, t6, converge)
	d.queryCertified(w, byzantine, 7, t7again)
	t.Logf("node 7 restarted: certified leader again in term %d, %v after the restart", t7again, time.Since(restarted).Round(time.Millisecond))

	h := d.checkHistory(byzantine)
	var leaders []uint64
	for _, rec := range h {
		leaders = append(leaders, rec.Leader)
		if rec.Leader == 1 {
			t.Errorf("observer history names the liar as leader in term %d", rec.Term)
		}
	}
	w.check(t)
	t.Logf("the liar was seen to: %s; observer history leaders %v", w.summary(), leaders)
	if w.count(func(w *watcher) int { return w.equivocations }) == 0 {
		t.Errorf("the liar's equivocations were not seen: %s", w.summary())
	}
	t.Logf("TestByzantineLiarAmongSeven took %v", time.Since(started).Round(time.Second))
}

// certifiedAndConvicted checks the start of a byzantine cluster whose
// member 1 lies: leader is certified (its answer to a query holds under
// the keys), the observer records member 1 as faulty with a proof that
// holds, and every honest node counts the conviction.
func (d *deployment) certifiedAndConvicted(w *watcher, leader uint64, honest []uint64) {
	d.t.Helper()
	term := d.leaderTerm(byzantine, leader, 1)
	a := d.queryCertified(w, byzantine, leader, term)
	d.t.Logf("leader %d certified in term %d by members %v", leader, a.Term, voters(a.Certificate))
	f := d.waitFaulty(byzantine, 1)
	if err := certify.VerifyEvidence(d.members[byzantine].Members(), *f.Evidence); err != nil {
		d.t.Fatalf("the observer's evidence against member 1 does not hold: %v", err)
	}
	d.t.Logf("observer: member 1 faulty, proof: its %s and its %s", describe(f.Evidence.First.Statement), describe(f.Evidence.Second.Statement))
	for _, id := range honest {
		d.waitMetric(byzantine, id, "election_members_lied_total", 1)
	}
}

// describe renders a vote or time-out for the log.
func describe(s certify.Statement) string {
	if s.Kind == certify.KindVote {
		return fmt.Sprintf("signed vote for %d in term %d", s.Leader, s.Term)
	}
	return fmt.Sprintf("signed %s of term %d", s.Kind, s.Term)
}

// voters lists the members whose votes a certificate holds.
func voters(c *certify.Certificate) []uint64 {
	if c == nil {
		return nil
	}
	var ids []uint64
	for _, v := range c.Votes {
		ids = append(ids, v.Member)
	}
	return ids
}

// watcher reads everything published on a cluster's subjects (as the
// observer's NATS user, which may subscribe to all of them), checks every
// announcement with the members' keys and counts what member 1, the
// liar, sends.
type watcher struct {
	cluster string
	keys    *signing.MemberKeys
	nc      *nats.Conn

	mu                    sync.Mutex
	announced             map[uint64]uint64    // term → certified leader
	heardOn               map[uint64]string    // term → the subject its certified leader was first seen on
	seenAt                map[uint64]time.Time // term → when its certified leader was first seen
	violations            []string
	rejectedAnnouncements int
	rejectedAnswers       int
	fromLiar              map[protocol.Type]int
	liarVotes             map[uint64]map[uint64]bool // term → leaders it voted for
	equivocations         int
	ceilingClaims         int
	forged                int
	statuses              map[uint64]map[string]bool // receiver → distinct stories told
	seen                  map[[32]byte]bool
	replays               int
}

// maxSeen bounds the message digests a watcher keeps to spot replays.
const maxSeen = 200_000

func (d *deployment) watch(cluster string) *watcher {
	d.t.Helper()
	w := &watcher{cluster: cluster, keys: d.members[cluster], announced: map[uint64]uint64{}, heardOn: map[uint64]string{}, seenAt: map[uint64]time.Time{},
		fromLiar: map[protocol.Type]int{}, liarVotes: map[uint64]map[uint64]bool{}, statuses: map[uint64]map[string]bool{}, seen: map[[32]byte]bool{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host, err := d.nats[0].Host(ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	port, err := d.nats[0].MappedPort(ctx, "4222/tcp")
	if err != nil {
		d.t.Fatal(err)
	}
	nc, err := nats.Connect(fmt.Sprintf("nats://%s:%s", host, port.Port()),
		nats.UserInfo(natsconf.ObserverUser, natsconf.LocalPasswords.Observer))
	if err != nil {
		d.t.Fatalf("connect as the observer: %v", err)
	}
	d.t.Cleanup(nc.Close)
	w.nc = nc
	if _, err := nc.Subscribe(protocol.Root+"."+cluster+".>", w.onMsg); err != nil {
		d.t.Fatal(err)
	}
	// The answers to queries for the leader, the test's and the nodes'
	// (a node that starts asks): every one is checked with the keys.
	for _, inbox := range []string{"_INBOX.>", protocol.InboxRoot + "." + cluster + ".>"} {
		if _, err := nc.Subscribe(inbox, w.onAnswer); err != nil {
			d.t.Fatal(err)
		}
	}
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		d.t.Fatal(err)
	}
	return w
}

// onAnswer checks a message on a reply inbox that reads as an
// announcement of the cluster: an answer to a query for the leader.
func (w *watcher) onAnswer(m *nats.Msg) {
	if a, err := protocol.DecodeAnnouncement(m.Data); err != nil && !errors.Is(err, protocol.ErrUncertified) || err == nil && a.Cluster != w.cluster {
		return // not an answer of this cluster
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.announcement(m.Subject, m.Data, m.Header, true)
}

func (w *watcher) onMsg(m *nats.Msg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m.Subject == protocol.LeaderSubject(w.cluster) {
		w.announcement(m.Subject, m.Data, m.Header, false)
		return
	}
	if m.Subject == protocol.QuerySubject(w.cluster) {
		return
	}
	digest := sha256.Sum256(append([]byte(m.Subject+"\x00"+m.Header.Get(signing.SignatureHeader)+"\x00"), m.Data...))
	if w.seen[digest] {
		w.replays++
		return
	}
	if len(w.seen) < maxSeen {
		w.seen[digest] = true
	}
	msg, err := protocol.Decode(m.Data)
	if err != nil || msg.From != 1 {
		return
	}
	w.fromLiar[msg.Type]++
	if msg.Term > protocol.MaxTerm/2 {
		w.ceilingClaims++
	}
	members := w.keys.Members()
	if c := msg.Cert; c != nil && certify.VerifyCertificate(members, *c) != nil {
		w.forged++
	}
	if c := msg.TC; c != nil && certify.VerifyTimeoutCertificate(members, *c, certify.Quorum(members.Size())) != nil {
		w.forged++
	}
	switch msg.Type {
	case protocol.TypeBzVote:
		if s := msg.Statement; s != nil && s.Verify(members) == nil {
			byLeader := w.liarVotes[s.Statement.Term]
			if byLeader == nil {
				byLeader = map[uint64]bool{}
				w.liarVotes[s.Statement.Term] = byLeader
			}
			if !byLeader[s.Statement.Leader] && len(byLeader) > 0 {
				w.equivocations++
			}
			byLeader[s.Statement.Leader] = true
		}
	case protocol.TypeBzStatus:
		told := w.statuses[msg.To]
		if told == nil {
			told = map[string]bool{}
			w.statuses[msg.To] = told
		}
		if len(told) < 1000 {
			told[fmt.Sprintf("%d/%d", msg.Term, msg.Candidate)] = true
		}
	}
}

// announcement checks one announcement (or, answer, a query's answer)
// with the keys: one that holds must name an honest member, one leader a
// term. Called with w.mu held.
func (w *watcher) announcement(subject string, data []byte, h nats.Header, answer bool) (protocol.Announcement, bool) {
	a, err := signing.ReadAnnouncement(w.keys, w.cluster, data, h)
	if err != nil {
		// Only the liar's may fail: an honest leader's always holds.
		if signer := h.Get(signing.SignerHeader); signer != "1" {
			w.violations = append(w.violations, fmt.Sprintf("an announcement signed by %q fails the keys: %v", signer, err))
		}
		if answer {
			w.rejectedAnswers++
		} else {
			w.rejectedAnnouncements++
		}
		return a, false
	}
	if a.Leader == 1 {
		w.violations = append(w.violations, fmt.Sprintf("a certified announcement of the liar in term %d", a.Term))
	}
	if l, ok := w.announced[a.Term]; ok && l != a.Leader {
		w.violations = append(w.violations, fmt.Sprintf("certified leaders %d and %d in term %d", l, a.Leader, a.Term))
	}
	w.announced[a.Term] = a.Leader
	if _, ok := w.heardOn[a.Term]; !ok {
		w.heardOn[a.Term], w.seenAt[a.Term] = subject, time.Now()
	}
	return a, true
}

// leadersSince returns the certified leaders other than except first
// seen since t, by term.
func (w *watcher) leadersSince(t time.Time, except uint64) map[uint64]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[uint64]uint64{}
	for term, l := range w.announced {
		if l != except && !w.seenAt[term].Before(t) {
			out[term] = l
		}
	}
	return out
}

// source is the subject term's certified leader was first seen on.
func (w *watcher) source(term uint64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.heardOn[term]
}

// logsOf logs the last lines of a container's output.
func (d *deployment) logsOf(c testcontainers.Container, lines int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Logs(ctx)
	if err != nil {
		d.t.Logf("logs: %v", err)
		return
	}
	defer r.Close()
	data, _ := io.ReadAll(io.LimitReader(r, 4<<20))
	all := strings.Split(strings.TrimSpace(string(data)), "\n")
	name, _ := c.Name(ctx)
	d.t.Logf("the last %d lines of %s:\n%s", lines, name, strings.Join(all[max(0, len(all)-lines):], "\n"))
}

// dumpNode logs a node's status and its message counters, for a failure.
func (d *deployment) dumpNode(alg string, id uint64) {
	d.t.Helper()
	u, err := d.url(d.nodes[alg][id], "/status")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var st map[string]any
	if err := getJSON(ctx, u, &st); err != nil {
		d.t.Logf("node %d: status: %v", id, err)
		return
	}
	var counters []string
	for _, typ := range []string{"bz_propose", "bz_vote", "bz_ack", "bz_timeout", "bz_status"} {
		counters = append(counters, fmt.Sprintf("%s sent %v received %v", typ,
			d.metric(alg, id, `election_messages_sent_total{type="`+typ+`"}`), d.metric(alg, id, `election_messages_received_total{type="`+typ+`"}`)))
	}
	d.t.Logf("node %d: status %v; %s; stepped down %v", id, st, strings.Join(counters, ", "), d.metric(alg, id, "election_stepped_down_total"))
}

// check fails the test with what the watcher saw that must not be.
func (w *watcher) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		t.Error(v)
	}
}

func (w *watcher) count(f func(*watcher) int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f(w)
}

// summary says what the liar was seen to do.
func (w *watcher) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var types []string
	for _, typ := range protocol.Types {
		if n := w.fromLiar[typ]; n > 0 {
			types = append(types, fmt.Sprintf("%s %d", typ, n))
		}
	}
	split := 0
	for _, told := range w.statuses {
		split += len(told)
	}
	return fmt.Sprintf("send %s; vote for two leaders in %d terms; claim %d terms near the ceiling; carry %d forged certificates; "+
		"tell %d different statuses to %d peers; replay %d messages; publish %d announcements and %d query answers that failed the keys",
		strings.Join(types, ", "), w.equivocations, w.ceilingClaims, w.forged, split, len(w.statuses), w.replays, w.rejectedAnnouncements, w.rejectedAnswers)
}

// queryCertified asks the cluster for its leader until an answer that
// holds under the members' keys names want in a term of at least
// minTerm; answers that do not hold (the liar's) are counted.
func (d *deployment) queryCertified(w *watcher, cluster string, want, minTerm uint64) protocol.Announcement {
	d.t.Helper()
	var got protocol.Announcement
	d.waitFor(converge, fmt.Sprintf("a certified answer naming leader %d", want), func() error {
		inbox := nats.NewInbox()
		sub, err := w.nc.SubscribeSync(inbox)
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
		if err := w.nc.PublishRequest(protocol.QuerySubject(cluster), inbox, nil); err != nil {
			return err
		}
		deadline := time.Now().Add(time.Second)
		var answers []string
		for {
			m, err := sub.NextMsg(time.Until(deadline))
			if err != nil {
				return fmt.Errorf("answers %v: %w", answers, err)
			}
			a, err := signing.ReadAnnouncement(w.keys, cluster, m.Data, m.Header)
			ok := err == nil
			answers = append(answers, fmt.Sprintf("%d/%d certified=%t", a.Leader, a.Term, ok))
			if ok && a.Leader == want && a.Term >= minTerm {
				got = a
				return nil
			}
		}
	})
	return got
}

// faulty is one entry of the observer's GET /api/clusters/{c}/faulty.
type faulty struct {
	Member   uint64            `json:"member"`
	Evidence *certify.Evidence `json:"evidence"`
}

// waitFaulty waits until the observer lists member as faulty, with a
// proof.
func (d *deployment) waitFaulty(cluster string, member uint64) faulty {
	d.t.Helper()
	var found faulty
	d.waitFor(converge, fmt.Sprintf("observer records member %d of %s as faulty", member, cluster), func() error {
		u, err := d.url(d.observer, "/api/clusters/"+cluster+"/faulty")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var list []faulty
		if err := getJSON(ctx, u, &list); err != nil {
			return err
		}
		for _, f := range list {
			if f.Member == member && f.Evidence != nil {
				found = f
				return nil
			}
		}
		return fmt.Errorf("faulty members %v", list)
	})
	if found.Evidence.Member() != member {
		d.t.Fatalf("the evidence against member %d is of member %d", member, found.Evidence.Member())
	}
	return found
}

// metric reads one sample of a node's /metrics (name with its labels as
// Prometheus prints them); 0 if absent or unreachable.
func (d *deployment) metric(cluster string, id uint64, sample string) float64 {
	v, _ := d.readMetric(cluster, id, sample)
	return v
}

func (d *deployment) readMetric(cluster string, id uint64, sample string) (float64, error) {
	u, err := d.url(d.nodes[cluster][id], "/metrics")
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no sample %s", sample)
}

// waitMetric waits until a node's metric reaches at least want.
func (d *deployment) waitMetric(cluster string, id uint64, sample string, want float64) {
	d.t.Helper()
	d.waitFor(converge, fmt.Sprintf("node %d: %s ≥ %v", id, sample, want), func() error {
		v, err := d.readMetric(cluster, id, sample)
		if err != nil {
			return err
		}
		if v < want {
			return fmt.Errorf("%s = %v", sample, v)
		}
		return nil
	})
}

// liarCounts reads the lying member's own counts (GET /lies).
func (d *deployment) liarCounts(cluster string, id uint64) (map[string]int, error) {
	u, err := d.url(d.nodes[cluster][id], "/lies")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var counts map[string]int
	if err := getJSON(ctx, u, &counts); err != nil {
		return nil, err
	}
	if len(counts) == 0 {
		return nil, errors.New("no counts")
	}
	return counts, nil
}
