package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/nodetest"
	"github.com/baton-election/baton/pkg/protocol"
)

// Three nodes of a Paxos cluster; the application beside node 3 works only
// while node 3 leads. The nodes run on an in-memory network here; a real
// application passes its *nats.Conn to node.New instead.
func ExampleNode_Lead() {
	network := nodetest.NewNetwork()
	members := []uint64{1, 2, 3}
	ctx, stopNodes := context.WithCancel(context.Background())
	var nodes []*node.Node
	done := make(chan error, len(members))
	for _, id := range members {
		dir, err := os.MkdirTemp("", "example-node-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		n, err := node.NewWithTransport(network.Connect(protocol.ConnectionName("jobs", id)), node.Config{
			Cluster:   "jobs",
			Algorithm: protocol.Paxos,
			Election:  election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members))},
			DataDir:   dir,
			Logger:    slog.New(slog.DiscardHandler),
		})
		if err != nil {
			panic(err)
		}
		nodes = append(nodes, n)
		go func() { done <- n.Run(ctx) }()
	}

	worked := make(chan struct{})
	var announced sync.Once
	leadCtx, stopLead := context.WithCancel(context.Background())
	err := nodes[2].Lead(leadCtx, node.Callbacks{
		OnStartedLeading: func(work context.Context) {
			fmt.Println("node 3 leads: working")
			close(worked)
			<-work.Done() // a real application works until this
		},
		OnStoppedLeading: func() { fmt.Println("node 3 no longer leads") },
		OnNewLeader: func(leader, term uint64) {
			if leader == 3 {
				announced.Do(func() {
					fmt.Println("leader: node", leader)
					go func() { <-worked; stopLead() }()
				})
			}
		},
	})
	fmt.Println("Lead returned:", err)
	stopNodes()
	for range members {
		<-done
	}
	// Output:
	// leader: node 3
	// node 3 leads: working
	// node 3 no longer leads
	// Lead returned: <nil>
}
