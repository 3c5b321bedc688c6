package leader_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// exampleCluster is an embedded NATS server with a stand-in for the
// cluster's leading node, which answers queries and announces leaders as
// a real node does. It keeps the examples short and their output fixed.
type exampleCluster struct {
	srv  *server.Server
	node *nats.Conn
	sub  *nats.Subscription
}

func startExampleCluster() *exampleCluster {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		panic("nats server not ready")
	}
	node, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	return &exampleCluster{srv: srv, node: node}
}

// lead makes the stand-in announce leader with term and answer queries
// with it.
func (c *exampleCluster) lead(leader, term uint64) {
	a := protocol.Announcement{Cluster: "default", Leader: leader, Term: term, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: time.Now()}}
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		panic(err)
	}
	if c.sub != nil {
		c.sub.Unsubscribe()
	}
	if c.sub, err = c.node.Subscribe(protocol.QuerySubject("default"), func(m *nats.Msg) { m.Respond(data) }); err != nil {
		panic(err)
	}
	if err := c.node.Publish(protocol.LeaderSubject("default"), data); err != nil {
		panic(err)
	}
	if err := c.node.Flush(); err != nil {
		panic(err)
	}
}

func (c *exampleCluster) stop() {
	c.node.Close()
	c.srv.Shutdown()
	c.srv.WaitForShutdown()
}

func ExampleCurrent() {
	cluster := startExampleCluster()
	defer cluster.stop()
	cluster.lead(5, 9)

	nc, err := nats.Connect(cluster.srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// The leading node answers at once; with no leader, Current fails
	// at once with ErrNoLeader (or falls back to the stream, if any).
	a, err := leader.Current(ctx, nc, "default", leader.WithoutStream())
	fmt.Println(a.Leader, a.Term, err)
	// Output: 5 9 <nil>
}

func ExampleWatch() {
	cluster := startExampleCluster()
	defer cluster.stop()
	cluster.lead(5, 9)

	nc, err := nats.Connect(cluster.srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Watch yields the current leader first, then every newer one.
	seen := 0
	for a, err := range leader.Watch(ctx, nc, "default", leader.WithoutStream()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("leader", a.Leader, "term", a.Term)
		if seen++; seen == 1 {
			cluster.lead(4, 13) // the leader failed; node 4 took over
		} else {
			break
		}
	}
	// Output:
	// leader 5 term 9
	// leader 4 term 13
}

func ExampleFence() {
	// A resource written by whoever leads admits each write's term only if
	// it is at least the newest seen: a deposed leader's late writes are
	// refused once its successor has written.
	var fence leader.Fence
	fmt.Println(fence.Admit(9))  // leader 5, term 9
	fmt.Println(fence.Admit(13)) // leader 4, term 13
	fmt.Println(fence.Admit(9))  // leader 5 again, unaware it was replaced
	// Output:
	// <nil>
	// <nil>
	// leader: stale term: 9 is older than 13
}

// A byzantine cluster's resource admits a write only from the certified
// leader: the writer, member 4, proves each write with its seed; the
// resource checks the certificate, then member 4's signature of the
// write, with the cluster's members file.
func ExampleFence_AdmitCertified() {
	signers := map[uint64]*signing.Signer{}
	public := map[uint64]string{}
	for id := uint64(1); id <= 4; id++ {
		kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{byte(id)}, 32))
		if err != nil {
			panic(err)
		}
		if signers[id], err = signing.NewSigner(id, kp); err != nil {
			panic(err)
		}
		public[id] = signers[id].PublicKey()
	}
	keys, err := signing.NewMemberKeys(public) // the resource's members file
	if err != nil {
		panic(err)
	}
	// Members 1, 2 and 3 voted for member 4 in term 7: its announcement
	// carries their certificate.
	var votes []certify.SignedStatement
	for _, id := range []uint64{1, 2, 3} {
		v, err := certify.Sign(signers[id].Certify(), certify.Vote("byzantine", id, 7, 4))
		if err != nil {
			panic(err)
		}
		votes = append(votes, v)
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		panic(err)
	}
	a := protocol.Announcement{Cluster: "byzantine", Leader: 4, Term: 7, Algorithm: protocol.Byzantine, Certificate: &cert}

	// The writer's side: the leader signs the write it sends.
	body := []byte(`{"key":"k","value":"v"}`)
	proof, err := leader.ProveWrite(signers[4], a, body)
	if err != nil {
		panic(err)
	}

	// The resource's side.
	fence := leader.NewCertifiedFence("byzantine", keys)
	fmt.Println(fence.AdmitCertified(proof, body))
	// Member 3 holds the same (public) certificate, but signs with its
	// own key: refused.
	sig, err := certify.SignWrite(signers[3].Certify(), certify.WriteOf("byzantine", 7, 3, body))
	if err != nil {
		panic(err)
	}
	fmt.Println(fence.AdmitCertified(leader.WriteProof{Certificate: &cert, Signature: sig}, body) != nil)
	// The leader's proof does not admit another write.
	fmt.Println(fence.AdmitCertified(proof, []byte(`{"key":"k","value":"w"}`)) != nil)
	// Output:
	// <nil>
	// true
	// true
}
