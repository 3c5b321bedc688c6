package natsnode_test

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
)

// One process of a fleet takes part in an election per shard over one
// connection, and works on the shards it leads (about a third of them,
// ranked by rendezvous hashing); a shard is added while it runs, and
// another left.
func ExampleGroup() {
	const id = 2
	nc, err := nats.Connect(nats.DefaultURL, nats.Name(protocol.ConnectionName("shard-0", id)), nats.NoEcho())
	if err != nil {
		log.Fatal(err)
	}
	// One beat per process every 100 ms (DefaultTiming's heartbeat
	// interval) stands for all its elections: a process that hangs is
	// found silent after 500 ms, in every shard at once.
	group, err := natsnode.NewGroup(nc, natsnode.GroupConfig{Node: node.GroupConfig{ID: id, Beat: 100 * time.Millisecond},
		Conn: "shard-0", BeatTimeout: 500 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	shard := func(name string) natsnode.Config {
		return natsnode.Config{Node: node.Config{
			Cluster:   name,
			Algorithm: protocol.Paxos,
			// Spread: each shard ranks the members by a hash of its name,
			// so that leaders spread over the processes.
			Election: election.Config{ID: id, Members: []uint64{1, 2, 3}, Timing: election.DefaultTiming(3), Rank: election.Spread(name)},
			DataDir:  filepath.Join("data", name),
			Callbacks: node.Callbacks{OnStartedLeading: func(ctx context.Context) {
				fmt.Println("working on", name)
				<-ctx.Done() // until this process no longer leads the shard
			}},
		}}
	}
	for i := range 16 {
		if _, err := group.Add(shard(fmt.Sprintf("shard-%d", i))); err != nil {
			log.Fatal(err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		// Later, while the group runs:
		group.Add(shard("shard-16"))
		group.Remove("shard-3") // hands shard-3 over if it led it
	}()
	if err := group.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
