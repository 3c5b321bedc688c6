// Package procstat reads what Linux's /proc tells of a process: its CPU
// time and its resident memory. The benchmark and the soak measure their
// node processes with it.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// UserHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on
// Linux whatever the kernel's own tick.
const UserHZ = 100

// CPUTime is a process's CPU time so far, and when it was read.
type CPUTime struct {
	Ticks int64 // user + system, in 1/UserHZ s
	At    time.Time
}

// Share is the CPU used since before, in percent of one core.
func (c CPUTime) Share(before CPUTime) float64 {
	wall := c.At.Sub(before.At).Seconds()
	if wall <= 0 {
		return 0
	}
	return 100 * float64(c.Ticks-before.Ticks) / UserHZ / wall
}

// ReadCPU reads the CPU time of process pid from /proc.
func ReadCPU(pid int) (CPUTime, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPUTime{}, err
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return CPUTime{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is the state (field 3); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return CPUTime{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return CPUTime{}, fmt.Errorf("/proc/%d/stat: bad CPU times %q %q", pid, fields[11], fields[12])
	}
	return CPUTime{Ticks: utime + stime, At: time.Now()}, nil
}

// ReadRSS reads the resident memory of process pid, in bytes.
func ReadRSS(pid int) (int64, error) {
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
