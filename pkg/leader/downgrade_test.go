package leader_test

import (
	"context"
	"errors"
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// downgrades are the algorithms a liar of a byzantine cluster names to
// escape the certificate: another algorithm, none, and one that does not
// exist.
var downgrades = []protocol.Algorithm{protocol.Paxos, "", "raft"}

// stated returns the keys of c as a members file of this project states
// them: cluster "default", algorithm byzantine.
func (c *byzCluster) stated(t *testing.T) *signing.MemberKeys {
	t.Helper()
	k, err := c.keys.State("default", protocol.Byzantine)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// downgraded is member 3's announcement of itself at the highest term,
// signed with its own key, naming algorithm and carrying no certificate.
func downgraded(algorithm protocol.Algorithm) protocol.Announcement {
	a := ann(3, protocol.MaxTerm)
	a.Algorithm = algorithm
	return a
}

// A reader of a byzantine cluster knows the algorithm from the members
// file, not from the message: a member that names another algorithm, or
// none, for its own uncertified leadership is refused on the query's
// answer.
func TestDowngradeRefusedByCurrent(t *testing.T) {
	for _, alg := range downgrades {
		t.Run(string(alg), func(t *testing.T) {
			url := batontest.StartNATS(t)
			c := newByzCluster(t)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			respondMsg(t, batontest.Connect(t, url), c.msg(downgraded(alg)))
			a, err := leader.Current(ctx, batontest.Connect(t, url), "default", leader.WithKeys(c.stated(t)), leader.WithoutStream())
			if err == nil {
				t.Fatalf("Current = leader %d in term %d (algorithm %q, no certificate), want an error", a.Leader, a.Term, a.Algorithm)
			}
		})
	}
}

// ... and on the leader subject: Watch never yields it, so the certified
// leader after it is still yielded.
func TestDowngradeRefusedByWatch(t *testing.T) {
	for _, alg := range downgrades {
		t.Run(string(alg), func(t *testing.T) {
			url := batontest.StartNATS(t)
			nc := batontest.Connect(t, url)
			c := newByzCluster(t)
			respondMsg(t, batontest.Connect(t, url), c.msg(byzAnn(4, 5, cert(t, c.signers, "default", 5, 4, 1, 2, 3))))
			w := watch(t, nc, "default", leader.WithKeys(c.stated(t)), leader.WithoutStream(), leader.WithResync(0))
			if got := w.next(t); got.Term != 5 {
				t.Fatalf("Watch first = leader %d in term %d, want term 5", got.Leader, got.Term)
			}
			publisher := batontest.Connect(t, url)
			for _, a := range []protocol.Announcement{downgraded(alg), byzAnn(2, 6, cert(t, c.signers, "default", 6, 2, 1, 2, 4))} {
				if err := publisher.PublishMsg(c.msg(a)); err != nil {
					t.Fatal(err)
				}
			}
			if got := w.next(t); got.Leader != 2 || got.Term != 6 {
				t.Fatalf("Watch after the downgrade = leader %d in term %d (algorithm %q), want leader 2 in term 6", got.Leader, got.Term, got.Algorithm)
			}
		})
	}
}

// ... and from the stream's last announcement.
func TestDowngradeRefusedByLastAnnounced(t *testing.T) {
	for _, alg := range downgrades {
		t.Run(string(alg), func(t *testing.T) {
			url := batontest.StartNATS(t, batontest.WithJetStream())
			nc := batontest.Connect(t, url)
			c := newByzCluster(t)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			js := batontest.LeaderStream(t, nc)
			if _, err := js.PublishMsg(ctx, c.msg(downgraded(alg))); err != nil {
				t.Fatal(err)
			}
			a, err := leader.LastAnnounced(ctx, nc, "default", leader.WithKeys(c.stated(t)))
			if err == nil {
				t.Fatalf("LastAnnounced = leader %d in term %d (algorithm %q, no certificate), want an error", a.Leader, a.Term, a.Algorithm)
			}
			if !errors.Is(err, protocol.ErrAnnouncement) {
				t.Errorf("LastAnnounced: %v, want an error wrapping ErrAnnouncement", err)
			}
		})
	}
}

// The algorithm comes from the reader's configuration: keys that state
// none need WithAlgorithm, and a contradiction is an error before any
// announcement is read.
func TestReaderKnowsTheAlgorithm(t *testing.T) {
	url := batontest.StartNATS(t)
	nc := batontest.Connect(t, url)
	c := newByzCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	valid := byzAnn(4, 5, cert(t, c.signers, "default", 5, 4, 1, 2, 3))
	respondMsg(t, batontest.Connect(t, url), c.msg(valid))

	if _, err := leader.Current(ctx, nc, "default", leader.WithKeys(c.keys), leader.WithoutStream()); !errors.Is(err, leader.ErrNoAlgorithm) {
		t.Errorf("keys stating no algorithm, no WithAlgorithm: %v, want ErrNoAlgorithm", err)
	}
	for _, tc := range []struct {
		name string
		opts []leader.Option
	}{
		{"WithAlgorithm", []leader.Option{leader.WithKeys(c.keys), leader.WithAlgorithm(protocol.Byzantine)}},
		{"stated", []leader.Option{leader.WithKeys(c.stated(t))}},
		{"stated and WithAlgorithm", []leader.Option{leader.WithKeys(c.stated(t)), leader.WithAlgorithm(protocol.Byzantine)}},
	} {
		a, err := leader.Current(ctx, nc, "default", append(tc.opts, leader.WithoutStream())...)
		if err != nil || a.Term != 5 {
			t.Errorf("%s: Current = term %d, %v; want term 5", tc.name, a.Term, err)
		}
	}
	for _, tc := range []struct {
		name    string
		cluster string
		opts    []leader.Option
	}{
		{"stated byzantine, WithAlgorithm paxos", "default", []leader.Option{leader.WithKeys(c.stated(t)), leader.WithAlgorithm(protocol.Paxos)}},
		{"unknown WithAlgorithm", "default", []leader.Option{leader.WithKeys(c.keys), leader.WithAlgorithm("raft")}},
		{"stated cluster default, read as other", "other", []leader.Option{leader.WithKeys(c.stated(t))}},
		{"byzantine without keys", "default", []leader.Option{leader.WithAlgorithm(protocol.Byzantine)}},
	} {
		if a, err := leader.Current(ctx, nc, tc.cluster, append(tc.opts, leader.WithoutStream())...); err == nil || errors.Is(err, leader.ErrNoLeader) {
			t.Errorf("%s: Current = %+v, %v; want a configuration error", tc.name, a, err)
		}
		for a, err := range leader.Watch(ctx, nc, tc.cluster, tc.opts...) {
			if err == nil {
				t.Errorf("%s: Watch yielded %+v, want a configuration error", tc.name, a)
			}
			break
		}
		if a, err := leader.LastAnnounced(ctx, nc, tc.cluster, tc.opts...); err == nil {
			t.Errorf("%s: LastAnnounced = %+v, want a configuration error", tc.name, a)
		}
	}
}

// A reader of a paxos cluster refuses a bully announcement, though signed
// by the leader it names.
func TestReaderRefusesAnotherAlgorithm(t *testing.T) {
	url := batontest.StartNATS(t)
	c := newByzCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	respondMsg(t, batontest.Connect(t, url), c.msg(ann(3, 5)))
	var rejected error
	a, err := leader.Current(ctx, batontest.Connect(t, url), "default", leader.WithKeys(c.keys), leader.WithAlgorithm(protocol.Paxos),
		leader.WithoutStream(), leader.WithRejected(func(err error) { rejected = err }))
	if !errors.Is(err, leader.ErrNoLeader) || !errors.Is(rejected, protocol.ErrAlgorithm) {
		t.Errorf("Current = %+v, %v (rejected %v); want ErrNoLeader, the announcement rejected with ErrAlgorithm", a, err, rejected)
	}
}
