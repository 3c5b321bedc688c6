//go:build !linux

package raftbench

import "syscall"

// sysProcAttr sets nothing off Linux: peers are stopped by MeasureCrash.
func sysProcAttr() *syscall.SysProcAttr { return nil }
