// Command leaderonly is an example application that does work only while
// the election node it runs beside leads its cluster, and stops the moment
// that node loses the lead.
//
// It follows the leader with leader.Watch, so it learns the current leader
// at start, even long after the election. The work carries the leader's
// term as a fencing token: whatever it writes to is expected to refuse a
// term lower than one it has seen (see leader.Fence), which covers the
// moment between a takeover and this program hearing of it.
//
//	NATS_URL=nats://127.0.0.1:4222 ELECTION_CLUSTER=default NODE_ID=3 go run ./cmd/leaderonly
//
// Set ELECTION_KEYS_FILE to the nodes' member keys file, if they have
// keys, so that only announcements signed by the leader they name count.
// The application needs public keys only, never a seed.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// config is read from the environment.
type config struct {
	// NATSURL is the NATS server URL.
	NATSURL string `env:"NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	// Cluster is the election cluster to follow.
	Cluster string `env:"ELECTION_CLUSTER" envDefault:"default"`
	// NodeID is the node this program runs beside: it works while that
	// node leads.
	NodeID uint64 `env:"NODE_ID,required"`
	// KeysFile is the nodes' ELECTION_KEYS_FILE, if they have member
	// keys: only announcements signed by the leader they name are
	// believed.
	KeysFile string `env:"ELECTION_KEYS_FILE"`
}

func main() {
	cfg, err := env.ParseAs[config]()
	if err == nil {
		err = protocol.ValidateCluster(cfg.Cluster)
	}
	var keys *signing.MemberKeys
	if err == nil && cfg.KeysFile != "" {
		if keys, err = signing.ReadMemberKeysFile(cfg.KeysFile); err != nil {
			err = fmt.Errorf("ELECTION_KEYS_FILE: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "leaderonly:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", cfg.NodeID, "cluster", cfg.Cluster)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	nc, err := nats.Connect(cfg.NATSURL, nats.Name("leaderonly"))
	if err != nil {
		log.Error("connect", "err", err)
		os.Exit(1)
	}
	defer nc.Drain()
	var opts []leader.Option
	if keys != nil {
		opts = append(opts, leader.WithKeys(keys))
	}
	if err := run(ctx, nc, cfg.Cluster, cfg.NodeID, tick(log), opts...); err != nil {
		log.Error("watch", "err", err)
		os.Exit(1)
	}
}

// tick is the leader-only work of this example: it logs once a second,
// with its fencing term, until ctx ends.
func tick(log *slog.Logger) func(ctx context.Context, term uint64) {
	return func(ctx context.Context, term uint64) {
		log.Info("leading: work starts", "term", term)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				log.Info("lost the lead: work stops", "term", term)
				return
			case <-t.C:
				log.Info("leader-only work", "term", term)
			}
		}
	}
}

// run runs work while node id leads (leader.RunWhileLeader).
func run(ctx context.Context, nc *nats.Conn, cluster string, id uint64, work func(ctx context.Context, term uint64), opts ...leader.Option) error {
	return leader.RunWhileLeader(ctx, nc, cluster, id, work, opts...)
}
