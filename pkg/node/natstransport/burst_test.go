package natstransport_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
)

// In an unsigned cluster anybody can forge a member's messages. A burst
// of six forgeries in the leader's name, numbered far ahead of its own
// messages, mutes it only for a while: once the forgeries are older than
// the maximum message age, the others hear the real member again, and the
// cluster settles on one leader, the highest ID.
func TestForgedBurstMutesNobodyForGood(t *testing.T) {
	url := batontest.StartNATS(t)
	// A message age well above the leader time-out, so that the cluster
	// surely elects without the muted leader before it is heard again.
	c := cluster{url: url, name: "burst", algorithm: protocol.Bully, members: five, maxAge: 3 * time.Second}
	eve := startCapture(t, url, c.name)
	nodes := c.startAll(t)
	before := awaitAgreement(t, nodes, 5)

	// A heartbeat of 5's, as anybody on the subject sees it.
	var beat protocol.Message
	var subject string
	batontest.CheckFor(t, 5*time.Second, func() error {
		for _, m := range eve.taken(t)[protocol.TypeHeartbeat] {
			if msg, _ := protocol.Decode(m.Data); msg.From == 5 {
				beat, subject = msg, m.Subject
				return nil
			}
		}
		return errors.New("captured no heartbeat of node 5")
	})
	attacker := connect(t, url)
	for i := range uint64(6) {
		forged := beat
		forged.N, forged.TS = 1<<62+i, time.Now().UnixMilli()
		data, err := protocol.Encode(forged)
		if err != nil {
			t.Fatal(err)
		}
		if err := attacker.PublishMsg(&nats.Msg{Subject: subject, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}

	// The others no longer hear 5 and elect 4, while 5 goes on leading.
	batontest.CheckFor(t, 10*time.Second, func() error {
		if st := nodes[4].Status(); st.State != "leader" {
			return fmt.Errorf("node 4: state %s, want leader once 5 is muted", st.State)
		}
		return nil
	})
	// Once the forgeries are out of date, 5 is heard again and takes
	// over: one leader, in a newer term.
	after := awaitAgreement(t, nodes, 5)
	if after <= before {
		t.Errorf("term after the burst: got %d, want above %d", after, before)
	}
}
