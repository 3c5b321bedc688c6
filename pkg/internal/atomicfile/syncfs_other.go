//go:build !linux

package atomicfile

// syncFS is not available: the caller fsyncs each file.
func syncFS(string, map[uint64]bool) (bool, error) { return false, nil }
