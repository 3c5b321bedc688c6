package observer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/batontest/clustertest"
	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// With member keys, the observer records a signed cluster's leaders and
// drops announcements and heartbeats not signed by the member they name
// (unsigned, signed by another member, signed by a stranger's key under
// the member's ID), whether they come through the stream or live: a
// forger, member or not, can neither name a leader nor fake a split brain.
// A cluster it holds no keys for is refused altogether.
func TestSignedClusterIgnoresForgeries(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	signers, keys := batontest.MemberKeys(t, 1, 2, 3)
	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"default": stated(t, keys, protocol.Bully)}
	cfg.LeaderTimeout = time.Second // above the nodes' 200 ms, for a loaded machine
	o := startObserver(t, cfg, nil)

	clustertest.Start(t, url, "default", protocol.Bully, []uint64{1, 2, 3}, clustertest.WithKeys(signers, keys))
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
	publish := func(subject string, data []byte, s *signing.Signer) {
		t.Helper()
		m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		if s != nil {
			m.Header = s.Header(subject, data)
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
	stranger := batontest.NewSigner(t, 2)
	for _, s := range []*signing.Signer{nil, signers[1], stranger} {
		publish(leaderSubject, claim, s)
		publish(beatSubject, beat, s)
	}
	// A cluster without keys: even a well-formed announcement is refused.
	other, err := protocol.EncodeAnnouncement(announcement("other", 2, 1, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	publish(protocol.LeaderSubject("other"), other, signers[2])
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}

	o.waitFor(t, "every forgery to be dropped", func() bool {
		return counter(o.metrics.announcements.WithLabelValues(resultBadSignature)) == 4 &&
			counter(o.metrics.live.WithLabelValues(protocol.KindLeader, resultBadSignature)) == 4 &&
			counter(o.metrics.live.WithLabelValues(protocol.KindHeartbeat, resultBadSignature)) == 3
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
	if _, ok := o.store.Cluster("other"); ok {
		t.Error("the cluster without keys was recorded")
	}
	if n := counter(o.metrics.live.WithLabelValues(protocol.KindHeartbeat, "invalid")); n != 0 {
		t.Errorf("%v heartbeats rejected as invalid", n)
	}
}

// TestLoadKeys: OBSERVER_KEYS_DIR holds a <cluster>.keys file per
// cluster; a bad file is an error that names the variable, the file and
// the line.
func TestLoadKeys(t *testing.T) {
	_, keys := batontest.MemberKeys(t, 1, 2)
	var members strings.Builder
	for _, id := range keys.IDs() {
		public, _ := keys.PublicKey(id)
		fmt.Fprintf(&members, "%d %s\n", id, public)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "OBSERVER_KEYS_DIR") {
		t.Errorf("LoadKeys(empty dir) = %v, want an error naming OBSERVER_KEYS_DIR", err)
	}
	write("prod.keys", members.String())
	write("README", "not a keys file")
	got, err := LoadKeys(dir)
	if err != nil || len(got) != 1 || got["prod"].Len() != 2 {
		t.Fatalf("LoadKeys = %v, %v; want the keys of prod", got, err)
	}
	write("staging.keys", members.String()+"1 UNOTAKEY\n")
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "OBSERVER_KEYS_DIR: staging.keys: line 3: duplicate member ID 1") {
		t.Errorf("LoadKeys(duplicate) = %v, want it to name the variable, file and line", err)
	}
	os.Remove(filepath.Join(dir, "staging.keys"))
	write("a.b.keys", members.String())
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "not a cluster name") {
		t.Errorf("LoadKeys(a.b.keys) = %v, want a bad cluster name", err)
	}
	// A file states its cluster and algorithm; a cluster other than the
	// file's name is refused.
	os.Remove(filepath.Join(dir, "a.b.keys"))
	write("staging.keys", "#: cluster staging\n#: algorithm paxos\n"+members.String())
	got, err = LoadKeys(dir)
	if err != nil || got["staging"].Cluster() != "staging" || got["staging"].Algorithm() != protocol.Paxos || got["prod"].Cluster() != "prod" || got["prod"].Algorithm() != "" {
		t.Fatalf("LoadKeys(stating) = %v, %v; want staging stating paxos, prod stating its name only", got, err)
	}
	write("staging.keys", "#: cluster prod\n"+members.String())
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "OBSERVER_KEYS_DIR: staging.keys") || !strings.Contains(err.Error(), `"prod"`) {
		t.Errorf("LoadKeys(staging.keys stating prod) = %v, want an error naming the variable, the file and the cluster it states", err)
	}
	os.Remove(filepath.Join(dir, "staging.keys"))
	if err := (Config{Secret: "s", NATS: natsconn.Config{URL: "nats://127.0.0.1:4222"}}).Validate(); err == nil || !strings.Contains(err.Error(), "ELECTION_SECRET: the shared secret was replaced by member keys") {
		t.Errorf("Validate(ELECTION_SECRET) = %v, want a refusal naming it", err)
	}
}

// stated returns keys stating algorithm, as a keys file written by this
// project does.
func stated(t *testing.T, keys *signing.MemberKeys, algorithm protocol.Algorithm) *signing.MemberKeys {
	t.Helper()
	k, err := keys.State("", algorithm)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
