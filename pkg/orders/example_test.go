package orders_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/orders"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Four members of a byzantine cluster run a Service each beside their
// node; member 4 leads term 7 with the votes of 1, 2 and 3. The
// application on member 4 issues an order with its announcement; an
// application anywhere reads the decided orders with leader.Orders,
// which yields an order once f+1 = 2 members signed the same decision.
func Example() {
	srv, err := natsconf.Start(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	defer natsconf.Stop(srv)

	// The members' keys: each node's ELECTION_KEY_FILE, and the
	// cluster's ELECTION_KEYS_FILE (signing.ReadMemberKeysFile).
	signers := map[uint64]*signing.Signer{}
	public := map[uint64]string{}
	for id := uint64(1); id <= 4; id++ {
		kp, err := nkeys.CreateUser()
		if err != nil {
			panic(err)
		}
		if signers[id], err = signing.NewSigner(id, kp); err != nil {
			panic(err)
		}
		public[id] = signers[id].PublicKey()
	}
	keys, err := signing.NewMemberKeys(public)
	if err != nil {
		panic(err)
	}

	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { // before the connections close
		cancel()
		wg.Wait()
	}()
	// Each member keeps its part in the orders beside its node's data
	// (ELECTION_DATA), so that a restart cannot make it relay twice.
	data, err := os.MkdirTemp("", "orders")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(data)
	services := map[uint64]*orders.Service{}
	for id := uint64(1); id <= 4; id++ {
		nc, err := nats.Connect(srv.ClientURL()) // or the node's connection
		if err != nil {
			panic(err)
		}
		conns = append(conns, nc)
		s, err := orders.New(nc, orders.Config{Cluster: "default", Signer: signers[id], Keys: keys,
			StateFile: filepath.Join(data, fmt.Sprintf("orders-%d.json", id))})
		if err != nil {
			panic(err)
		}
		services[id] = s
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				fmt.Println("run:", err)
			}
		})
		<-s.Ready()
	}

	// A reader of the decided orders.
	reader, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	conns = append(conns, reader)
	decided := make(chan leader.DecidedOrder, 1)
	wg.Go(func() {
		for o, err := range leader.Orders(ctx, reader, "default", leader.WithKeys(keys)) {
			if err != nil {
				fmt.Println("orders:", err)
				return
			}
			decided <- o
		}
	})
	waitSubscribed(reader)

	// Member 4's announcement, as its node publishes it: the votes of a
	// quorum for it in term 7. An application on a node gets it from
	// leader.Watch or leader.Current with leader.WithKeys(keys).
	var votes []certify.SignedStatement
	for _, id := range []uint64{1, 2, 3} {
		v, err := certify.Sign(signers[id].Certify(), certify.Vote("default", id, 7, 4))
		if err != nil {
			panic(err)
		}
		votes = append(votes, v)
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		panic(err)
	}
	a := protocol.Announcement{Cluster: "default", Leader: 4, Term: 7, Algorithm: protocol.Byzantine,
		At: protocol.Timestamp{Time: time.Now()}, Certificate: &cert}

	if _, err := services[1].IssueAs(ctx, a, "scale to 5"); err != nil {
		fmt.Println("member 1:", err)
	}
	o, err := services[4].IssueAs(ctx, a, "scale to 5")
	if err != nil {
		panic(err)
	}
	fmt.Printf("issued order %d of term %d: %s\n", o.Seq, o.Term, o.Value)
	d := <-decided
	fmt.Printf("decided order %d of term %d: %s, by %d members\n", d.Seq, d.Term, d.Value, len(d.Members))
	// Output:
	// member 1: orders: this member is not the certified leader: the announcement names 4 in term 7
	// issued order 1 of term 7: scale to 5
	// decided order 1 of term 7: scale to 5, by 2 members
}

// waitSubscribed returns once nc's subscription has reached the server.
func waitSubscribed(nc *nats.Conn) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for nc.NumSubscriptions() == 0 {
		<-tick.C
	}
	if err := nc.Flush(); err != nil {
		panic(err)
	}
}
