package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

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
