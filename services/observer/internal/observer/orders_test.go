package observer

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/orders"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// A member that relays two values along one path of the leader's order
// is found out by the members that run pkg/orders, which publish the
// evidence; the observer records it as faulty with a proof that holds,
// and shows it on its page. Before that, relay evidence that proves
// nothing is refused: a second relay signed with a key not the member's,
// two relays of the same value.
func TestOrdersRelayEvidenceRecorded(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	b := newByzantine(t)
	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"default": b.keys}
	o := startObserver(t, cfg, nil)

	// Relay evidence that proves nothing, published by member 2.
	evidenceSubject := protocol.SubjectFor("default", protocol.Message{Type: protocol.TypeBzEvidence, From: 2})
	relay := func(s *signing.Signer, value string) certify.SignedStatement {
		return sign(t, s, certify.Relay("default", 7, 1, []uint64{4, 3}, []byte(value)))
	}
	for _, e := range []certify.Evidence{
		{First: relay(b.signers[3], "attack"), Second: relay(batontest.NewSigner(t, 3), "retreat")},
		{First: relay(b.signers[3], "attack"), Second: relay(b.signers[3], "attack")},
	} {
		data, err := protocol.Encode(protocol.Message{Type: protocol.TypeBzEvidence, From: 2, Evidence: &e})
		if err != nil {
			t.Fatal(err)
		}
		publishSigned(t, nc, evidenceSubject, data, b.signers[2])
	}
	o.waitFor(t, "the two refusals", func() bool {
		return counter(o.metrics.live.WithLabelValues(protocol.KindEvidence, resultBadSignature))+
			counter(o.metrics.live.WithLabelValues(protocol.KindEvidence, "invalid")) == 2
	})
	if c, ok := o.store.Cluster("default"); ok && len(c.Faulty) != 0 {
		t.Fatalf("faulty members %+v after evidence that proves nothing; want none", c.Faulty)
	}

	// Members 1, 2 and 4 run pkg/orders; 4 leads term 7.
	cert := certificate(t, b.signers, 7, 4, 1, 2, 3)
	lead := protocol.Announcement{Cluster: "default", Leader: 4, Term: 7, Algorithm: protocol.Byzantine,
		At: protocol.Timestamp{Time: time.Now()}, Certificate: cert}
	follow := func(ctx context.Context) iter.Seq2[protocol.Announcement, error] {
		return func(yield func(protocol.Announcement, error) bool) {
			if yield(lead, nil) {
				<-ctx.Done()
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	services := map[uint64]*orders.Service{}
	for _, id := range []uint64{1, 2, 4} {
		s, err := orders.New(batontest.Connect(t, url), orders.Config{Cluster: "default", Signer: b.signers[id], Keys: b.keys,
			Round: time.Minute, Leaders: follow, Ephemeral: true})
		if err != nil {
			t.Fatal(err)
		}
		services[id] = s
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				t.Errorf("member %d: Run: %v", id, err)
			}
		})
		<-s.Ready()
	}
	if _, err := services[4].IssueAs(ctx, lead, "scale to 5"); err != nil {
		t.Fatal(err)
	}
	// Member 3 tells 1 one thing and 2 another along its path [4 3].
	for _, to := range []uint64{1, 2} {
		value := map[uint64]string{1: "scale to 5", 2: "scale to 0"}[to]
		r := relay(b.signers[3], value)
		om := protocol.OrderMessage{Cluster: "default", Term: 7, Seq: 1, From: 3, Values: []string{value},
			Relays: []protocol.OrderRelay{{To: to, Path: []uint64{4, 3}}}, Signatures: [][]byte{r.Signature}}
		data, err := protocol.EncodeOrderMessage(om)
		if err != nil {
			t.Fatal(err)
		}
		publishSigned(t, nc, protocol.OrderSubject("default"), data, b.signers[3])
	}

	o.waitFor(t, "member 3 recorded as faulty", func() bool {
		c, ok := o.store.Cluster("default")
		return ok && len(c.Faulty) > 0
	})
	var listed []faultyJSON
	if code := o.get(t, "/api/clusters/default/faulty", &listed); code != http.StatusOK || len(listed) != 1 || listed[0].Member != 3 || listed[0].Evidence == nil {
		t.Fatalf("GET faulty = %d %+v, want member 3 with its evidence", code, listed)
	}
	e := *listed[0].Evidence
	if err := certify.VerifyEvidence(b.keys.Members(), e); err != nil {
		t.Errorf("the evidence served does not hold: %v", err)
	}
	if k := e.First.Statement.Kind; k != certify.KindRelay {
		t.Errorf("the evidence is of %ss; want relays", k)
	}
	// Each member passes the evidence on as it gets it: the observer may
	// have recorded it from one before another had its copy.
	for _, id := range []uint64{1, 2, 4} {
		o.waitFor(t, fmt.Sprintf("member %d holding the evidence", id), func() bool {
			return services[id].Stats().Evidence >= 1
		})
		if s := services[id].Stats(); s.Evidence != 1 {
			t.Errorf("member %d: Stats.Evidence = %d; want 1", id, s.Evidence)
		}
	}

	resp, err := http.Get("http://" + o.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`data-member="3"`, "relayed two values of order 1 of term 7", "relay by member 3 of order 1 of term 7 along [4 3]"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
