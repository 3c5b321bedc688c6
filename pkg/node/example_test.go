package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
)

// Three nodes of a Paxos cluster; the application beside node 3 works only
// while node 3 leads: its callbacks are in node 3's Config, and Run calls
// them. The nodes run on an in-memory network here; a real application
// passes its *nats.Conn to node.New instead.
func ExampleNode_Run() {
	network := transport.NewNetwork()
	members := []uint64{1, 2, 3}
	ctx, stopNodes := context.WithCancel(context.Background())
	worked := make(chan struct{})
	var announced sync.Once
	callbacks := node.Callbacks{
		OnStartedLeading: func(work context.Context) {
			fmt.Println("node 3 leads: working")
			close(worked)
			<-work.Done() // a real application works until this
		},
		OnStoppedLeading: func() { fmt.Println("node 3 no longer leads") },
		OnNewLeader: func(leader, term uint64) {
			if leader == 3 {
				announced.Do(func() { fmt.Println("leader: node", leader) })
			}
		},
	}
	done := make(map[uint64]chan error)
	for _, id := range members {
		dir, err := os.MkdirTemp("", "example-node-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		cfg := node.Config{
			Cluster:   "jobs",
			Algorithm: protocol.Paxos,
			Election:  election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members))},
			DataDir:   dir,
			Logger:    slog.New(slog.DiscardHandler),
		}
		if id == 3 {
			cfg.Callbacks = callbacks
		}
		conn := network.Join(id)
		n, err := node.New(cfg, node.Deps{Transport: conn, Cluster: conn, Machines: machines.Factory{Algorithm: cfg.Algorithm}.New})
		if err != nil {
			panic(err)
		}
		ran := make(chan error, 1)
		done[id] = ran
		go func() { ran <- n.Run(ctx) }()
	}

	<-worked
	stopNodes()
	fmt.Println("node 3's Run returned:", <-done[3])
	<-done[1]
	<-done[2]
	// Output:
	// leader: node 3
	// node 3 leads: working
	// node 3 no longer leads
	// node 3's Run returned: <nil>
}
