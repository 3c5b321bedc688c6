// Command observer records every leadership of every election cluster on a
// NATS server and serves the history: a JSON API under /api/, a live page
// at /, /healthz and /metrics. See package
// github.com/baton-election/baton/services/observer/internal/observer and
// the README for configuration and guarantees.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/baton-election/baton/services/observer/internal/observer"
)

func main() {
	cfg, err := observer.ParseConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("service", "observer")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := observer.New(cfg, log).Run(ctx); err != nil {
		log.Error("observer failed", "err", err)
		os.Exit(1)
	}
}
