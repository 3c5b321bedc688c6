// Package atomicfile replaces a file's content so that a crash at any
// point leaves either the whole old content or the whole new one, and so
// that the new content is on stable storage when Write returns.
//
// Write puts the data in a temporary file beside the target (same
// directory, so the rename cannot cross file systems), fsyncs it, renames
// it over the target, and fsyncs the directory, so that the rename itself
// survives a power loss. A crash before the rename leaves the old file and
// a temporary one, which Clean removes; rename is atomic, so a crash during
// it leaves one or the other; a crash after it leaves the new file.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tempInfix marks the temporary files of Write: <name>.tmp-<random>.
const tempInfix = ".tmp-"

// Write replaces the file at path with data, atomically and durably.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, name+tempInfix+"*")
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("atomicfile: write %s: %w", tmp, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("atomicfile: fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("atomicfile: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, so that the creation, removal or renaming of
// its entries is on stable storage.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("atomicfile: fsync directory %s: %w", dir, err)
	}
	return nil
}

// Clean removes the temporary files that a Write to path interrupted by a
// crash left behind. It returns how many it removed.
func Clean(path string) (int, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("atomicfile: %w", err)
	}
	removed := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), name+tempInfix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("atomicfile: %w", err)
		}
		removed++
	}
	return removed, nil
}
