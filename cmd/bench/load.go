package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
)

// The loads of the steady state (-load): each loads the host the way real
// hosts are loaded, beside the clusters, from separate processes.
const (
	loadCPU      = "cpu"      // twice as many busy processes as cores
	loadFsync    = "fsync"    // writers that fsync files beside the nodes' data
	loadMemory   = "memory"   // a process that holds and re-touches a share of RAM
	loadProcs    = "procs"    // a process that fork/execs a short command at a high rate
	loadCgroup   = "cgroup"   // the nodes under a CPU-throttled cgroup
	loadTogether = "together" // all of the above at once
	loadAll      = "all"      // every load on its own, then together
)

// loadKinds is every scenario, in the order "all" runs them.
var loadKinds = []string{loadCPU, loadFsync, loadMemory, loadProcs, loadCgroup, loadTogether}

// parseLoads reads -load: a comma-separated list of scenarios; "all" adds
// every one not named yet, in loadKinds' order.
func parseLoads(s string) ([]string, error) {
	var out []string
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "" && strings.TrimSpace(s) == "":
			return nil, nil
		case k == loadAll:
			for _, l := range loadKinds {
				if !slices.Contains(out, l) {
					out = append(out, l)
				}
			}
		case !slices.Contains(loadKinds, k):
			return nil, fmt.Errorf("-load: %q is not one of %s or %s", k, strings.Join(loadKinds, ", "), loadAll)
		case slices.Contains(out, k):
			return nil, fmt.Errorf("-load: %s twice", k)
		default:
			out = append(out, k)
		}
	}
	return out, nil
}

// The loaders' bounds.
const (
	fsyncWriters   = 2
	fsyncFileSize  = 16 << 20  // each writer rewrites one file of this size
	fsyncChunk     = 256 << 10 // written, then fsynced
	maxMemoryLoad  = 2 << 30   // the memory loader's cap
	procsInterval  = 2 * time.Millisecond
	loaderGrace    = 5 * time.Second // a loader outlives its end by at most this
	pageSize       = 4096
	cgroupPeriodUs = 100000 // the throttled cgroup's period
	cgroupQuotaUs  = 20000  // and each node's CPU time per period: 20% of a core
)

// Environment of a loader process: loaderEnv names its kind (the
// benchmark's binary then runs the loader instead of the benchmark).
const (
	loaderEnv      = "BATON_BENCH_LOADER"
	loaderUntilEnv = "BATON_BENCH_LOADER_UNTIL" // Unix nanoseconds: the loader exits by then
	loaderDirEnv   = "BATON_BENCH_LOADER_DIR"   // the fsync loader's directory
	loaderSizeEnv  = "BATON_BENCH_LOADER_BYTES" // the memory loader's size
)

// loadSpec is one scenario's loaders.
type loadSpec struct {
	kind  string    // one of loadKinds
	dir   string    // fsync: a directory to create, beside the nodes' data, removed at the end
	until time.Time // every loader exits by then even if nobody stops it
	pids  []int     // cgroup: the processes to throttle
}

// load is a scenario's running loaders. stop ends them and removes what
// they left.
type load struct {
	cmds    []*exec.Cmd
	waited  sync.WaitGroup
	exited  chan struct{} // closed when any loader exits
	once    sync.Once
	dirs    []string
	undo    []func() error
	notes   []string // what could not be loaded, and why
	stopped bool
}

// startLoad starts spec's loaders from this binary. A load the machine
// does not allow (a cgroup without a writable cgroup file system) is
// skipped with a note, not an error.
func startLoad(ctx context.Context, spec loadSpec) (*load, error) {
	ld := &load{exited: make(chan struct{})}
	kinds := []string{spec.kind}
	if spec.kind == loadTogether {
		kinds = loadKinds[:len(loadKinds)-1]
	}
	for _, k := range kinds {
		if err := ld.start(ctx, k, spec); err != nil {
			ld.stop()
			return nil, fmt.Errorf("load %s: %w", k, err)
		}
	}
	return ld, nil
}

func (ld *load) start(ctx context.Context, kind string, spec loadSpec) error {
	switch kind {
	case loadCPU:
		for range 2 * runtime.NumCPU() {
			if err := ld.spawn(ctx, loadCPU, spec.until); err != nil {
				return err
			}
		}
	case loadFsync:
		if spec.dir == "" {
			return errors.New("no directory")
		}
		if err := os.MkdirAll(spec.dir, 0o755); err != nil {
			return err
		}
		ld.dirs = append(ld.dirs, spec.dir)
		for range fsyncWriters {
			if err := ld.spawn(ctx, loadFsync, spec.until, loaderDirEnv+"="+spec.dir); err != nil {
				return err
			}
		}
	case loadMemory:
		size := memoryShare(memAvailable())
		if size == 0 {
			ld.notes = append(ld.notes, "memory: MemAvailable unknown, skipped")
			return nil
		}
		return ld.spawn(ctx, loadMemory, spec.until, loaderSizeEnv+"="+strconv.FormatInt(size, 10))
	case loadProcs:
		return ld.spawn(ctx, loadProcs, spec.until)
	case loadCgroup:
		undo, err := throttle(spec.pids)
		if err != nil {
			ld.notes = append(ld.notes, "cgroup: skipped: "+err.Error())
			return nil
		}
		ld.undo = append(ld.undo, undo)
	default:
		return fmt.Errorf("unknown load %q", kind)
	}
	return nil
}

// spawn starts one loader process of kind.
func (ld *load) spawn(ctx context.Context, kind string, until time.Time, env ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), loaderEnv+"="+kind, loaderUntilEnv+"="+strconv.FormatInt(until.UnixNano(), 10))
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = localcluster.ChildProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	ld.cmds = append(ld.cmds, cmd)
	ld.waited.Add(1)
	go func() {
		defer ld.waited.Done()
		_ = cmd.Wait()
		ld.once.Do(func() { close(ld.exited) })
	}()
	return nil
}

// stop kills the loaders, waits for them, undoes the cgroup and removes
// the fsync files. It may be called more than once.
func (ld *load) stop() {
	if ld.stopped {
		return
	}
	ld.stopped = true
	for _, cmd := range ld.cmds {
		_ = cmd.Process.Kill()
	}
	ld.waited.Wait()
	for _, u := range ld.undo {
		if err := u(); err != nil {
			ld.notes = append(ld.notes, "cgroup: "+err.Error())
		}
	}
	for _, d := range ld.dirs {
		_ = os.RemoveAll(d)
	}
}

// memoryShare is what the memory loader holds: half of MemAvailable,
// capped at maxMemoryLoad.
func memoryShare(available int64) int64 {
	return min(available/2, maxMemoryLoad)
}

// memAvailable is /proc/meminfo's MemAvailable in bytes, 0 if unknown.
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb < 0 || kb > 1<<40 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// loaderMain runs the loader named by loaderEnv until its end
// (loaderUntilEnv) and returns the exit status.
func loaderMain() int {
	until, err := strconv.ParseInt(os.Getenv(loaderUntilEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loader: bad", loaderUntilEnv)
		return 2
	}
	end := time.Unix(0, until)
	if latest := time.Now().Add(time.Hour + loaderGrace); end.After(latest) {
		end = latest
	}
	switch kind := os.Getenv(loaderEnv); kind {
	case loadCPU:
		burn(end)
	case loadFsync:
		err = fsyncStorm(os.Getenv(loaderDirEnv), end)
	case loadMemory:
		var size int64
		size, err = strconv.ParseInt(os.Getenv(loaderSizeEnv), 10, 64)
		if err == nil && (size <= 0 || size > maxMemoryLoad) {
			err = fmt.Errorf("size %d out of (0, %d]", size, maxMemoryLoad)
		}
		if err == nil {
			touch(size, end)
		}
	case loadProcs:
		err = execStorm(end)
	default:
		err = fmt.Errorf("unknown loader %q", kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loader:", err)
		return 1
	}
	return 0
}

// burn keeps one core busy until end. It is the only busy loop of the
// project, and a deliberate one.
func burn(end time.Time) {
	runtime.GOMAXPROCS(1)
	var x uint64 = 1
	for time.Now().Before(end) {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if x == 0 {
			fmt.Fprintln(os.Stderr, x) // keeps the loop from being optimised away
		}
	}
}

// fsyncStorm writes chunks into one file of dir and fsyncs each, wrapping
// around at fsyncFileSize, until end.
func fsyncStorm(dir string, end time.Time) error {
	if dir == "" {
		return errors.New("no directory")
	}
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	chunk := make([]byte, fsyncChunk)
	var off int64
	for time.Now().Before(end) {
		chunk[0]++ // new contents each time
		if _, err := f.WriteAt(chunk, off); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		off = (off + fsyncChunk) % fsyncFileSize
	}
	return nil
}

// touch holds size bytes and writes to every page of them, again and
// again, until end.
func touch(size int64, end time.Time) {
	buf := make([]byte, size)
	for pass := byte(1); time.Now().Before(end); pass++ {
		for i := 0; i < len(buf); i += pageSize {
			buf[i] = pass
		}
	}
}

// execStorm runs a short command (true) every procsInterval, one at a
// time, until end: process operations at the rate of a storm of health
// checks.
func execStorm(end time.Time) error {
	path, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	tick := time.NewTicker(procsInterval)
	defer tick.Stop()
	stop := time.NewTimer(time.Until(end))
	defer stop.Stop()
	for {
		select {
		case <-stop.C:
			return nil
		case <-tick.C:
			if err := exec.Command(path).Run(); err != nil {
				return err
			}
		}
	}
}

// changeCounter counts the leaderships announced on a cluster's leader
// subject: every term above the highest seen so far is a new term, and a
// move if its leader is not the previous term's. The first announcement
// is the baseline; repeats and late, older terms change nothing.
type changeCounter struct {
	seen            bool
	term, leader    uint64
	newTerms, moves int
}

func (c *changeCounter) add(term, leader uint64) {
	if !c.seen {
		c.seen, c.term, c.leader = true, term, leader
		return
	}
	if term <= c.term {
		return
	}
	c.newTerms++
	if leader != c.leader {
		c.moves++
	}
	c.term, c.leader = term, leader
}

// loadResult is what one cluster showed under one load. With no member
// failed, every new term is a spurious leader change.
type loadResult struct {
	kind      string
	note      string // what the machine did not allow, if anything
	failed    bool   // a member exited meanwhile: the changes are not spurious
	newTerms  int    // new terms announced
	moves     int    // of them, with another leader than the term before
	elections int    // election_elections_started_total, summed over the nodes
	changes   int    // election_leader_changes_total, summed over the nodes
	announced int    // announcements on the leader subject
}

// calm tells whether the cluster stayed calm: no new term, no election
// started, no leader change seen by a node.
func (l loadResult) calm() bool {
	return l.newTerms == 0 && l.elections == 0 && l.changes == 0
}

func (l loadResult) String() string {
	s := fmt.Sprintf("%d spurious leader changes (new terms), %d to another leader; %d elections started, %d leader changes seen by the nodes, %d announcements",
		l.newTerms, l.moves, l.elections, l.changes, l.announced)
	if l.failed {
		s += ", but a member exited"
	}
	return s
}
