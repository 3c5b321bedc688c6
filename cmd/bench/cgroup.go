package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// throttle moves each process of pids into a cgroup of its own whose CPU
// time is capped at cgroupQuotaUs per cgroupPeriodUs, as a container with
// a CPU limit is: a burst longer than the quota waits for the next
// period. It uses cgroup v2 (cpu.max) or, where the cpu controller is
// mounted on its own, v1 (cpu.cfs_quota_us). undo moves the processes
// back and removes the cgroups. Where neither is writable it says why.
func throttle(pids []int) (undo func() error, err error) {
	if len(pids) == 0 {
		return nil, errors.New("no process to throttle")
	}
	var (
		base  string // the cpu hierarchy's root
		v2    bool
		write func(dir string) error
	)
	switch {
	case fileExists(filepath.Join(cgroupRoot, "cgroup.controllers")):
		base, v2 = cgroupRoot, true
		controllers, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
		if err != nil || !slices.Contains(strings.Fields(string(controllers)), "cpu") {
			return nil, errors.New("cgroup v2 without the cpu controller")
		}
		write = func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d %d", cgroupQuotaUs, cgroupPeriodUs), 0)
		}
	case fileExists(filepath.Join(cgroupRoot, "cpu", "cpu.cfs_quota_us")):
		base = filepath.Join(cgroupRoot, "cpu")
		write = func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), fmt.Appendf(nil, "%d", cgroupPeriodUs), 0); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), fmt.Appendf(nil, "%d", cgroupQuotaUs), 0)
		}
	default:
		return nil, errors.New("no cgroup cpu controller mounted at " + cgroupRoot)
	}
	parent := filepath.Join(base, fmt.Sprintf("baton-bench-%d", os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup not writable: %w", err)
	}
	type moved struct {
		pid  int
		from string // the process's cgroup before, as a directory
	}
	var done []moved
	undo = func() error {
		var errs []error
		for _, m := range done {
			// A process that exited meanwhile is not an error.
			if err := os.WriteFile(filepath.Join(m.from, "cgroup.procs"), []byte(strconv.Itoa(m.pid)), 0); err != nil && processExists(m.pid) {
				errs = append(errs, err)
			}
		}
		for _, m := range done {
			_ = os.Remove(filepath.Join(parent, strconv.Itoa(m.pid)))
		}
		if err := os.Remove(parent); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	if v2 {
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			_ = undo()
			return nil, fmt.Errorf("cgroup v2: cannot enable the cpu controller: %w", err)
		}
	}
	for _, pid := range pids {
		from, err := cgroupOf(pid, v2)
		if err != nil {
			_ = undo()
			return nil, err
		}
		dir := filepath.Join(parent, strconv.Itoa(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			_ = undo()
			return nil, err
		}
		if err := write(dir); err != nil {
			_ = undo()
			return nil, fmt.Errorf("cgroup quota: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			_ = undo()
			return nil, fmt.Errorf("cgroup: moving process %d: %w", pid, err)
		}
		done = append(done, moved{pid: pid, from: filepath.Join(base, from)})
	}
	return undo, nil
}

// cgroupOf is the cgroup of process pid in the cpu hierarchy (v1) or the
// unified one (v2), as a path below the hierarchy's root.
func cgroupOf(pid int, v2 bool) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if v2 && parts[0] == "0" && parts[1] == "" {
			return parts[2], nil
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if !v2 && c == "cpu" {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("process %d: no cpu cgroup in /proc/%d/cgroup", pid, pid)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func processExists(pid int) bool {
	return fileExists(fmt.Sprintf("/proc/%d", pid))
}
