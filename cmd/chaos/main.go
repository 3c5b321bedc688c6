// Command chaos disturbs the current leader of each cluster of the Compose
// deployment so that a person can watch failover on the observer's page:
// it kills the leader, starts it again, pauses the new leader, and
// unpauses it, waiting after each step until the observer has recorded
// the outcome and printing how long that took.
//
//	go tool task chaos            # runs: bin/chaos -compose "docker compose"
//	chaos -observer http://127.0.0.1:8080 -clusters bully,ring,paxos,byzantine -step 3s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // -h asked for the usage, which was printed
		}
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

type options struct {
	observer string
	compose  []string
	clusters []string
	step     time.Duration
	timeout  time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	observer := fs.String("observer", "http://127.0.0.1:8080", "base URL of the observer")
	compose := fs.String("compose", "", `compose command, e.g. "docker compose" or "docker-compose" (default: whichever works)`)
	clusters := fs.String("clusters", "bully,ring,paxos,byzantine", "comma-separated clusters; each node's Compose service is <cluster>-<id>")
	step := fs.Duration("step", 3*time.Second, "pause between steps, to watch the page")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the observer to record each outcome")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{observer: strings.TrimRight(*observer, "/"), step: *step, timeout: *timeout}
	for _, c := range strings.Split(*clusters, ",") {
		if c = strings.TrimSpace(c); c != "" {
			o.clusters = append(o.clusters, c)
		}
	}
	if len(o.clusters) == 0 {
		return o, errors.New("-clusters: no cluster named")
	}
	if *compose != "" {
		o.compose = strings.Fields(*compose)
	} else if exec.Command("docker", "compose", "version").Run() == nil {
		o.compose = []string{"docker", "compose"}
	} else {
		o.compose = []string{"docker-compose"}
	}
	return o, nil
}

// leadership is the observer's record of the current leadership.
type leadership struct {
	Leader uint64 `json:"leader"`
	Term   uint64 `json:"term"`
	// GapBefore is how long the cluster had no leader before this
	// leadership, as far as the observer can tell; nil when unknown.
	GapBefore *float64 `json:"gap_before_seconds"`
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "watch it on %s/\n", o.observer)
	for _, cluster := range o.clusters {
		steps := []struct {
			verb, undo string
		}{
			{"kill", "start"},
			{"pause", "unpause"},
		}
		for _, s := range steps {
			cur, err := o.current(ctx, cluster)
			if err != nil {
				return err
			}
			service := fmt.Sprintf("%s-%d", cluster, cur.Leader)
			if err := o.disturb(ctx, out, cluster, cur, s.verb, service); err != nil {
				return err
			}
			if err := o.wait(ctx, o.step); err != nil {
				return err
			}
			next, err := o.current(ctx, cluster)
			if err != nil {
				return err
			}
			if err := o.disturb(ctx, out, cluster, next, s.undo, service); err != nil {
				return err
			}
			if err := o.wait(ctx, o.step); err != nil {
				return err
			}
		}
	}
	return nil
}

// disturb runs one compose verb on a service and waits until the observer
// records a leadership with a term above cur's.
func (o options) disturb(ctx context.Context, out io.Writer, cluster string, cur leadership, verb, service string) error {
	fmt.Fprintf(out, "%s: leader %d (term %d): %s %s\n", cluster, cur.Leader, cur.Term, verb, service)
	start := time.Now()
	cmd := exec.CommandContext(ctx, o.compose[0], append(o.compose[1:], verb, service)...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s %s: %w\n%s", strings.Join(o.compose, " "), verb, service, err, output)
	}
	deadline := time.Now().Add(o.timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		now, err := o.current(ctx, cluster)
		if err == nil && now.Term > cur.Term {
			gap := "unknown"
			if now.GapBefore != nil {
				gap = time.Duration(*now.GapBefore * float64(time.Second)).Round(time.Millisecond).String()
			}
			fmt.Fprintf(out, "%s:   leader %d (term %d) recorded %v after the %s command started; leaderless for %s\n",
				cluster, now.Leader, now.Term, time.Since(start).Round(time.Millisecond), verb, gap)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no new leader recorded within %v of %s %s (last: %+v, %v)", cluster, o.timeout, verb, service, now, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (o options) current(ctx context.Context, cluster string) (leadership, error) {
	var l leadership
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.observer+"/api/clusters/"+cluster+"/leader", nil)
	if err != nil {
		return l, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return l, fmt.Errorf("observer: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return l, fmt.Errorf("observer: %s has no leader: %s %s", cluster, resp.Status, strings.TrimSpace(string(body)))
	}
	return l, json.Unmarshal(body, &l)
}

func (o options) wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
