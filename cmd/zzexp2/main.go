package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/deploy/natsconf"
	"github.com/baton-election/baton/pkg/leader"
)

func main() {
	dir, _ := os.MkdirTemp("", "zz2")
	ns, err := localcluster.StartAccountsNATS(dir, "127.0.0.1", -1, dir)
	if err != nil {
		panic(err)
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(natsconf.NodeUser, natsconf.LocalPasswords.Node))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		t := time.Now()
		a, err := leader.LastAnnounced(ctx, nc, "exp")
		fmt.Println("stream", time.Since(t), a.Term, err)
		t = time.Now()
		a, err = leader.Current(ctx, nc, "exp", leader.WithoutStream())
		fmt.Println("query", time.Since(t), a.Term, err)
		cancel()
	}
}
