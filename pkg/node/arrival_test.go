package node

import (
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
)

// arrivals is a machine that records the arrival tick of every message
// it is handed.
type arrivals struct {
	election.Machine
	now     int
	arrived []int
}

func (a *arrivals) Start() {}

func (a *arrivals) Tick() { a.now++ }

func (a *arrivals) StepAt(_ protocol.Message, arrived int) { a.arrived = append(a.arrived, arrived) }

func (a *arrivals) Step(m protocol.Message) { a.StepAt(m, a.now) }

func (a *arrivals) Ready() election.Ready { return election.Ready{} }

// TestMessagesCarryTheirArrival: the node hands a machine that measures
// from arrivals (election.ArrivalStepper) each message with the tick in
// which the transport received it, also when, as settle does, it hands
// the message over before ticks that fell due before it arrived: a Paxos
// grant is then counted from the arrival, not from the earlier tick.
func TestMessagesCarryTheirArrival(t *testing.T) {
	n, err := newTestNode(endpoint(1), endpoint(1), Config{
		Cluster:   "arrival",
		Algorithm: protocol.Paxos,
		Election:  electionConfig(1, []uint64{1, 2, 3}),
		DataDir:   t.TempDir(),
		Logger:    testLogger(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m := &arrivals{}
	drv, err := driver.New(m, driver.Config{Tick: 10 * time.Millisecond, Incarnation: 1})
	if err != nil {
		t.Fatalf("driver.New: %v", err)
	}
	n.drv = drv
	drv.Start(time.Now().Add(-time.Second))
	// As settle does: the ticks before the deadline's (tick 40), then what
	// a flush brought, which arrived in ticks 41 and 47.
	drv.Advance(drv.At(39))
	for _, at := range []int{41, 47} {
		n.handle(transport.Inbound{Kind: transport.Message, Msg: protocol.Message{Type: protocol.TypePropose, From: 2, Term: 2, Seq: 1}, At: drv.At(at).Add(time.Millisecond)})
	}
	if m.now != 39 || len(m.arrived) != 2 || m.arrived[0] != 41 || m.arrived[1] != 47 {
		t.Fatalf("machine at tick %d got arrivals %v, want tick 39 with arrivals [41 47]", m.now, m.arrived)
	}
}
