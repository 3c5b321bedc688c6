package transport_test

import (
	"testing"

	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/node/transport/transporttest"
)

type memoryNetwork struct{ net *transport.Network }

func (n memoryNetwork) Join(_ *testing.T, id uint64) transport.Transport { return n.net.Join(id) }

// The in-memory network keeps the transports' contract.
func TestMemoryTransportContract(t *testing.T) {
	transporttest.Run(t, func(*testing.T) transporttest.Network { return memoryNetwork{transport.NewNetwork()} })
}
