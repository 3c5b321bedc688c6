package observer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// liveTotal is how many live messages of the kinds the owner goroutine
// has taken in, whatever it made of them.
func (r *running) liveTotal(kinds ...string) float64 {
	var n float64
	for _, kind := range kinds {
		for _, result := range []string{"ok", "invalid", resultBadSignature, resultBadCertificate} {
			n += counter(r.metrics.live.WithLabelValues(kind, result))
		}
	}
	return n
}

// publishMessage publishes m on its subject of cluster, signed by s.
func publishMessage(t *testing.T, nc *nats.Conn, cluster string, m protocol.Message, s *signing.Signer) {
	t.Helper()
	data, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	publishSigned(t, nc, protocol.SubjectFor(cluster, m), data, s)
}

// In a byzantine cluster (its keys file states "#: algorithm
// byzantine"), a leader is alive only through its certified rounds: a
// liar's heartbeats and Paxos proposals, signed with its own key, with
// any term (the certified leader's, higher ones, up to 2^64 − 1), make no
// record, whatever their number: no split brain, no leadership, nothing
// asked for, and the history's file does not grow.
func TestByzantineLiarLivenessMakesNoRecord(t *testing.T) {
	nc, b, o, cfg := startStatedByzantine(t)

	cert := certificate(t, b.signers, 8, 4, 1, 2, 3)
	a := announcement("default", 4, 8, t0)
	a.Algorithm, a.Certificate = protocol.Byzantine, cert
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	publishSigned(t, nc, protocol.LeaderSubject("default"), data, b.signers[4])
	o.waitFor(t, "term 8", func() bool { return o.leaderships("default") == 1 })
	file := filepath.Join(cfg.DataDir, "default.jsonl")
	before, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}

	renew := func(seq uint64) {
		publishMessage(t, nc, "default", protocol.Message{Type: protocol.TypeBzPropose, From: 4, Term: 8, Seq: seq, Cert: cert}, b.signers[4])
	}
	const liar, lies = 2, 1000
	// The certified leader's term, a new higher one each time, and terms
	// at and beyond the protocol's ceiling.
	huge := []uint64{protocol.MaxTerm, protocol.MaxTerm + 1, 1<<64 - 1}
	renewals, claims := 0, 0
	for i := range lies {
		term := uint64(8 + i)
		switch {
		case i%10 == 0:
			term = 8
		case i%10 == 5:
			term = huge[i%len(huge)]
		}
		if i%100 == 0 {
			renewals++
			renew(uint64(renewals)) // the certified leader acts meanwhile
			// The liar announces itself in the certified term, naming
			// another algorithm and no certificate: the stream drops it
			// as a duplicate of term 8, the live intake as uncertified.
			claim := announcement("default", liar, 8, t0)
			claim.Algorithm = protocol.Paxos
			data, err := protocol.EncodeAnnouncement(claim)
			if err != nil {
				t.Fatal(err)
			}
			publishSigned(t, nc, protocol.LeaderSubject("default"), data, b.signers[liar])
			claims++
		}
		m := protocol.Message{Type: protocol.TypeHeartbeat, From: liar, Term: term}
		if i%2 == 1 {
			m = protocol.Message{Type: protocol.TypePropose, From: liar, Term: term, Candidate: liar}
		}
		publishMessage(t, nc, "default", m, b.signers[liar])
	}
	renewals++
	renew(uint64(renewals))
	o.waitFor(t, "every message taken in", func() bool {
		return o.liveTotal(protocol.KindHeartbeat, protocol.KindPropose, kindBzPropose) == float64(lies+renewals) &&
			o.liveTotal(protocol.KindLeader) == float64(1+claims)
	})

	c, _ := o.store.Cluster("default")
	if len(c.SplitBrains) != 0 {
		t.Errorf("%d split brains recorded, the first %+v; want none: the liar's heartbeats are not the certified leader's", len(c.SplitBrains), c.SplitBrains[0])
	}
	if l, ok := c.Current(); len(c.Leaderships) != 1 || !ok || l.Leader != 4 || l.Term != 8 {
		t.Errorf("leaderships %+v, want 4 in term 8 alone, current", c.Leaderships)
	}
	if got := o.liveCount(protocol.KindHeartbeat); got != float64(renewals) {
		t.Errorf("live heartbeats taken as a leader's: %v, want the certified leader's %d rounds", got, renewals)
	}
	if got := counter(o.metrics.live.WithLabelValues(protocol.KindHeartbeat, resultBadCertificate)) +
		counter(o.metrics.live.WithLabelValues(protocol.KindPropose, resultBadCertificate)); got != lies {
		t.Errorf("liar's messages refused as uncertified: %v, want %d", got, lies)
	}
	if got := counter(o.metrics.live.WithLabelValues(protocol.KindLeader, resultBadCertificate)); got != float64(claims) {
		t.Errorf("liar's announcements refused live as uncertified: %v, want %d", got, claims)
	}
	after, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() {
		t.Errorf("history file grew from %d to %d bytes", before.Size(), after.Size())
	}
}

// Without member keys, anyone can make split brains: a flood of them
// keeps the last history.MaxSplitBrains per cluster, the oldest dropped
// and counted in observer_history_records_dropped_total.
func TestSplitBrainFloodCapped(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	o := startObserver(t, testConfig(url, t.TempDir()), nil)
	announce(t, nc, announcement("default", 3, 7, t0))
	o.waitFor(t, "term 7", func() bool { return o.leaderships("default") == 1 })

	// Each node claims term 7 in turn: node k is a split brain with each
	// of the k−1 before it.
	const nodes = 60
	pairs := nodes * (nodes - 1) / 2
	for node := uint64(1); node <= nodes; node++ {
		broadcast(t, nc, "default", protocol.TypeHeartbeat, node, 7)
	}
	splits := o.metrics.splits.WithLabelValues("default", history.SplitSameTerm)
	o.waitFor(t, "every split brain", func() bool { return counter(splits) == float64(pairs) })

	c, _ := o.store.Cluster("default")
	if len(c.SplitBrains) != history.MaxSplitBrains {
		t.Errorf("%d split brains kept after %d, want %d", len(c.SplitBrains), pairs, history.MaxSplitBrains)
	}
	if got, want := counter(o.metrics.dropped.WithLabelValues("default", string(history.KindSplit))), float64(pairs-history.MaxSplitBrains); got != want {
		t.Errorf("split brains counted as dropped: %v, want %v", got, want)
	}
	if !c.SplitBrainOf(c.Leaderships[0]) {
		t.Errorf("term 7 not marked as a split brain: the newest split brains were not kept")
	}
}
