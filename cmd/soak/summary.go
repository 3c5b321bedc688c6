package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
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
	before := make([]cpuTime, len(targets)+1)
	errs := make([]error, len(targets)+1)
	pids := make([]int, len(targets)+1)
	for i, t := range targets {
		pids[i] = t.p.pid()
	}
	pids[len(targets)] = os.Getpid()
	for i, pid := range pids {
		before[i], errs[i] = readCPU(pid)
	}
	s.sleep(ctx, measureWindow)
	for i, pid := range pids {
		name, started := self.name, self.started
		if i < len(targets) {
			name, started = targets[i].name, targets[i].p.started
		}
		u := usage{name: name, pid: pid, err: errs[i]}
		after, err := readCPU(pid)
		if u.err == nil {
			u.err = err
		}
		if u.err == nil {
			u.recent = after.share(before[i])
			if wall := after.at.Sub(started).Seconds(); wall > 0 {
				u.average = 100 * float64(after.ticks) / userHZ / wall
			}
			u.rss, u.err = readRSS(pid)
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

// The reading of /proc below is cmd/bench's (proc.go), which is in
// another command.

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on
// Linux whatever the kernel's own tick.
const userHZ = 100

// cpuTime is a process's CPU time so far, and when it was read.
type cpuTime struct {
	ticks int64 // user + system, in 1/userHZ s
	at    time.Time
}

// share is the CPU used since before, in percent of one core.
func (c cpuTime) share(before cpuTime) float64 {
	wall := c.at.Sub(before.at).Seconds()
	if wall <= 0 {
		return 0
	}
	return 100 * float64(c.ticks-before.ticks) / userHZ / wall
}

// readCPU reads the CPU time of process pid from /proc.
func readCPU(pid int) (cpuTime, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTime{}, err
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return cpuTime{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is the state (field 3); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return cpuTime{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return cpuTime{}, fmt.Errorf("/proc/%d/stat: bad CPU times %q %q", pid, fields[11], fields[12])
	}
	return cpuTime{ticks: utime + stime, at: time.Now()}, nil
}

// readRSS reads the resident memory of process pid, in bytes.
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmRSS %q", pid, rest)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}
