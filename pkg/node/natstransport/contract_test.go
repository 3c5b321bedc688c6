package natstransport_test

import (
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/node/natstransport"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/node/transport/transporttest"
	"github.com/baton-election/baton/pkg/protocol"
)

// natsNetwork makes the NATS adapters of one cluster on one server.
type natsNetwork struct{ url string }

type noMeter struct{}

func (noMeter) EventsDelivered()  {}
func (noMeter) PeerDisconnected() {}
func (noMeter) SignatureChecked() {}

func (n natsNetwork) Join(t *testing.T, id uint64) transport.Transport {
	t.Helper()
	a, err := natstransport.New(connect(t, n.url), natstransport.Config{
		Cluster: "contract", Algorithm: protocol.Bully, ID: id, Members: transporttest.Members,
		MaxMessageAge: natsnode.DefaultMaxMessageAge, Logger: testLogger(), Meter: noMeter{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The NATS adapter keeps the transports' contract.
func TestNATSTransportContract(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transporttest.Network { return natsNetwork{batontest.StartNATS(t)} })
}
