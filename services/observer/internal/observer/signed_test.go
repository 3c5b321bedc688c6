package observer

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/batontest/clustertest"
	"github.com/baton-election/baton/pkg/protocol"
)

// With ELECTION_SECRET, the observer records a signed cluster's leaders
// and drops unsigned and wrongly signed announcements and heartbeats,
// whether they come through the stream or live: a forger can neither
// name a leader nor fake a split brain.
func TestSignedClusterIgnoresForgeries(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	secret := []byte("s3cret")
	cfg := testConfig(url, t.TempDir())
	cfg.Secret = string(secret)
	cfg.LeaderTimeout = time.Second // above the nodes' 200 ms, for a loaded machine
	o := startObserver(t, cfg, nil)

	clustertest.Start(t, url, "default", protocol.Bully, []uint64{1, 2, 3}, clustertest.WithSecret(secret))
	var term uint64
	o.waitFor(t, "node 3 to lead", func() bool {
		c, ok := o.store.Cluster("default")
		if !ok {
			return false
		}
		l, ok := c.Current()
		term = l.Term
		return ok && l.Leader == 3
	})
	heartbeats := o.liveCount(protocol.KindHeartbeat)
	o.waitFor(t, "signed heartbeats", func() bool { return o.liveCount(protocol.KindHeartbeat) > heartbeats })
	leaderships := o.leaderships("default")

	forger := batontest.Connect(t, url)
	publish := func(subject string, data []byte, sig string) {
		t.Helper()
		m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		if sig != "" {
			m.Header.Set(protocol.SignatureHeader, sig)
		}
		if err := forger.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	claim, err := protocol.EncodeAnnouncement(announcement("default", 2, term+1000, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	beat, err := protocol.Encode(protocol.Message{Type: protocol.TypeHeartbeat, From: 2, Term: term + 1000})
	if err != nil {
		t.Fatal(err)
	}
	leaderSubject := protocol.LeaderSubject("default")
	beatSubject := protocol.BroadcastSubject("default", protocol.TypeHeartbeat)
	guess := []byte("guess")
	publish(leaderSubject, claim, "")
	publish(leaderSubject, claim, protocol.SignAnnouncement(guess, "default", claim))
	publish(beatSubject, beat, "")
	publish(beatSubject, beat, protocol.Sign(guess, beatSubject, beat))
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}

	o.waitFor(t, "every forgery to be dropped", func() bool {
		return counter(o.metrics.announcements.WithLabelValues(resultBadSignature)) == 2 &&
			counter(o.metrics.live.WithLabelValues(protocol.KindLeader, resultBadSignature)) == 2 &&
			counter(o.metrics.live.WithLabelValues(protocol.KindHeartbeat, resultBadSignature)) == 2
	})
	c, _ := o.store.Cluster("default")
	if l, ok := c.Current(); !ok || l.Leader != 3 || l.Term != term {
		t.Errorf("after the forgeries the current leadership is %+v (%v), want node 3 term %d", l, ok, term)
	}
	if got := o.leaderships("default"); got != leaderships {
		t.Errorf("%d leaderships after the forgeries, want %d", got, leaderships)
	}
	if len(c.SplitBrains) != 0 {
		t.Errorf("forgeries were taken for a split brain: %+v", c.SplitBrains)
	}
	if n := counter(o.metrics.live.WithLabelValues(protocol.KindHeartbeat, "invalid")); n != 0 {
		t.Errorf("%v heartbeats rejected as invalid", n)
	}
}
