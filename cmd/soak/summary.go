package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/baton-election/baton/cmd/internal/procstat"
)

// usage is what one process used, measured at the end.
type usage struct {
	name    string
	pid     int
	rss     int64   // resident memory, bytes
	recent  float64 // CPU over the last measureWindow, % of one core
	average float64 // CPU since the process started, % of one core
	err     error
}

// measureWindow is how long the CPU is measured at the end, with no
// fault.
const measureWindow = 5 * time.Second

// measureEnd reads the resident memory and CPU of every node, NATS
// server and the soak itself, once the faults are over.
func (s *soak) measureEnd(ctx context.Context) {
	type target struct {
		name string
		p    *proc
	}
	var targets []target
	for _, m := range s.present() {
		if p, _ := m.current(); p != nil && !p.exited() {
			targets = append(targets, target{fmt.Sprintf("node %d", m.id), p})
		}
	}
	for _, n := range s.nats {
		if n.proc != nil && !n.proc.exited() {
			targets = append(targets, target{fmt.Sprintf("nats %d", n.index), n.proc})
		}
	}
	self := &proc{name: "soak", started: s.begin}
	before := make([]procstat.CPUTime, len(targets)+1)
	errs := make([]error, len(targets)+1)
	pids := make([]int, len(targets)+1)
	for i, t := range targets {
		pids[i] = t.p.pid()
	}
	pids[len(targets)] = os.Getpid()
	for i, pid := range pids {
		before[i], errs[i] = procstat.ReadCPU(pid)
	}
	s.sleep(ctx, measureWindow)
	for i, pid := range pids {
		name, started := self.name, self.started
		if i < len(targets) {
			name, started = targets[i].name, targets[i].p.started
		}
		u := usage{name: name, pid: pid, err: errs[i]}
		after, err := procstat.ReadCPU(pid)
		if u.err == nil {
			u.err = err
		}
		if u.err == nil {
			u.recent = after.Share(before[i])
			if wall := after.At.Sub(started).Seconds(); wall > 0 {
				u.average = 100 * float64(after.Ticks) / procstat.UserHZ / wall
			}
			u.rss, u.err = procstat.ReadRSS(pid)
		}
		s.usage = append(s.usage, u)
	}
}

// summary prints the summary and returns the exit status.
func (s *soak) summary() int {
	heard, bad := 0, 0
	if s.sub != nil {
		heard, bad = s.sub.counts() // before s.mu: the subscriber takes s.mu under its own lock
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.out
	fmt.Fprintf(w, "\n=== soak summary\n")
	fmt.Fprintf(w, "seed %d; %s; %d elections (%s); %d processes at the start, %d members at the end (IDs up to %d)\n",
		s.o.seed, time.Since(s.begin).Round(time.Second), s.o.elections, s.o.algorithm, s.o.processes, len(s.presentLocked()), s.nextID)
	var faults []string
	total := 0
	for _, k := range faultKinds {
		if c := s.faults[k]; c > 0 {
			faults = append(faults, fmt.Sprintf("%s %d", k, c))
			total += c
		}
	}
	fmt.Fprintf(w, "faults: %d (%s)\n", total, strings.Join(faults, ", "))
	distinct, repeats := s.check.Announcements()
	fmt.Fprintf(w, "announcements: %d distinct (%d messages over 3 connections, %d repeats of a leader's term, %d unreadable); polls of /elections: %d (%d failed, of paused or stopping processes mostly)\n",
		distinct, heard, repeats, bad, s.polls, s.failed)
	fmt.Fprintf(w, "\ntime until every election was led again, per step (polls every %v: add up to one poll):\n", s.o.poll)
	fmt.Fprintf(w, "  %-14s %5s %9s %9s %9s\n", "step", "count", "p50", "p90", "max")
	for _, step := range s.stepSeq {
		times := slices.Clone(s.heals[step])
		slices.Sort(times)
		fmt.Fprintf(w, "  %-14s %5d %9v %9v %9v\n", step, len(times),
			percentile(times, 50).Round(time.Millisecond), percentile(times, 90).Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	}
	if len(s.usage) > 0 {
		fmt.Fprintf(w, "\nprocesses at the end (CPU in %% of one core; this machine has %d):\n", numCPU())
		fmt.Fprintf(w, "  %-8s %8s %10s %14s %16s\n", "process", "pid", "RSS", "CPU last 5 s", "CPU since start")
		for _, u := range s.usage {
			if u.err != nil {
				fmt.Fprintf(w, "  %-8s %8d %v\n", u.name, u.pid, u.err)
				continue
			}
			fmt.Fprintf(w, "  %-8s %8d %7.1f MiB %13.1f%% %15.1f%%\n", u.name, u.pid, float64(u.rss)/(1<<20), u.recent, u.average)
		}
	}
	vs := s.check.Violations()
	if len(vs) == 0 {
		fmt.Fprintf(w, "\nviolations: none\nlogs, data and announcements: %s\n", s.o.out)
		return exitOK
	}
	fmt.Fprintf(w, "\nviolations: %d\n", len(vs))
	for i, v := range vs {
		if i == 20 {
			fmt.Fprintf(w, "  ... and %d more\n", len(vs)-20)
			break
		}
		fmt.Fprintf(w, "  %s %s\n", v.At.UTC().Format(timeOfDay), v)
	}
	fmt.Fprintf(w, "logs, data and announcements: %s (seed %d)\n", s.o.out, s.o.seed)
	return exitViolation
}

// presentLocked is present with s.mu held.
func (s *soak) presentLocked() []*member {
	var out []*member
	for _, m := range s.members {
		m.mu.Lock()
		if !m.gone {
			out = append(out, m)
		}
		m.mu.Unlock()
	}
	return out
}

// numCPU is the number of CPUs this process may use.
func numCPU() int { return runtime.NumCPU() }
