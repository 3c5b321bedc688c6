package atomicfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncFS syncs the whole file system of dir (syncfs(2)), once per file
// system: synced holds the devices already synced. It reports whether it
// did (or had).
func syncFS(dir string, synced map[uint64]bool) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return false, fmt.Errorf("atomicfile: %w", err)
	}
	if synced[st.Dev] {
		return true, nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("atomicfile: %w", err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return false, fmt.Errorf("atomicfile: syncfs %s: %w", dir, err)
	}
	synced[st.Dev] = true
	return true, nil
}
