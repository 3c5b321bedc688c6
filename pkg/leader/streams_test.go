package leader_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
)

// Readers that share a leader.Streams find the stream once for all their
// clusters, and find it again once it is gone.
func TestStreamsFoundOnce(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	js := batontest.LeaderStream(t, nc)
	// The lookups, as the server delivers them: on a channel, so that
	// once the spy's flush returns, every lookup made before is on it.
	lookups := make(chan *nats.Msg, 64)
	spy := batontest.Connect(t, url)
	if _, err := spy.ChanSubscribe("$JS.API.STREAM.NAMES", lookups); err != nil {
		t.Fatal(err)
	}
	spy.Flush()
	of := func(cluster string, term uint64) protocol.Announcement {
		a := ann(term, term)
		a.Cluster = cluster
		return a
	}
	announce := func(as ...protocol.Announcement) {
		t.Helper()
		for _, a := range as {
			if _, err := js.Publish(ctx, protocol.LeaderSubject(a.Cluster), mustEncode(a)); err != nil {
				t.Fatal(err)
			}
		}
	}
	announce(of("shard-0", 2), of("shard-1", 3), of("shard-2", 4))
	streams := &leader.Streams{}
	read := func(want protocol.Announcement) {
		t.Helper()
		got, err := leader.LastAnnounced(ctx, nc, want.Cluster, leader.WithStreams(streams))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("LastAnnounced(%s) = %+v, %v; want %+v", want.Cluster, got, err, want)
		}
	}
	for _, a := range []protocol.Announcement{of("shard-0", 2), of("shard-1", 3), of("shard-2", 4)} {
		read(a)
	}
	spy.Flush()
	if n := len(lookups); n != 1 {
		t.Errorf("three clusters' reads looked the stream up %d times, want once", n)
	}

	// The stream is replaced by another one under another name.
	if err := js.DeleteStream(ctx, "LEADERS"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LEADERS_2", Subjects: []string{protocol.AllLeaders}}); err != nil {
		t.Fatal(err)
	}
	announce(of("shard-1", 5))
	read(of("shard-1", 5))
	spy.Flush()
	if n := len(lookups); n != 2 {
		t.Errorf("the stream was looked up %d times in all, want once more after it was replaced", n)
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		filter, subject string
		want            bool
	}{
		{"election.*.leader", "election.shard-0.leader", true},
		{"election.*.leader", "election.shard-0.batch", false},
		{"election.*.leader", "election.leader", false},
		{"election.*.leader", "election.a.b.leader", false},
		{"election.>", "election.shard-0.leader", true},
		{"election.>", "election", false},
		{"election.shard-0.leader", "election.shard-0.leader", true},
		{"election.shard-0.leader", "election.shard-1.leader", false},
	} {
		if got := leader.SubjectMatches(c.filter, c.subject); got != c.want {
			t.Errorf("SubjectMatches(%q, %q) = %v, want %v", c.filter, c.subject, got, c.want)
		}
	}
}
