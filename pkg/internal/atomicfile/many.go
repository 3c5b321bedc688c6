package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File is one file of WriteMany: its path and new content.
type File struct {
	Path string
	Data []byte
}

// WriteMany replaces each file's content as Write does, atomically and
// durably, sharing the waits for stable storage among them: it writes
// every temporary file, syncs their file systems once (syncFS), renames
// each over its target, and syncs the file systems once more for the
// renames. A crash leaves each file with its old or its new content, and
// temporary files that Clean removes. On an error no file is known to
// have its new content.
func WriteMany(files []File, perm os.FileMode) (err error) {
	temps := make([]string, 0, len(files))
	defer func() {
		if err != nil {
			for _, t := range temps {
				os.Remove(t)
			}
		}
	}()
	dirs := make(map[string]bool)
	for _, file := range files {
		dir, name := filepath.Split(file.Path)
		if dir == "" {
			dir = "."
		}
		dirs[dir] = true
		f, err := os.CreateTemp(dir, name+tempInfix+"*")
		if err != nil {
			return fmt.Errorf("atomicfile: %w", err)
		}
		temps = append(temps, f.Name())
		_, errW := f.Write(file.Data)
		errM := f.Chmod(perm)
		if err := errors.Join(errW, errM, f.Close()); err != nil {
			return fmt.Errorf("atomicfile: write %s: %w", f.Name(), err)
		}
	}
	if err := syncDirs(dirs); err != nil {
		return err
	}
	for i, file := range files {
		if err := os.Rename(temps[i], file.Path); err != nil {
			return fmt.Errorf("atomicfile: %w", err)
		}
	}
	temps = nil // renamed: nothing to remove
	return syncDirs(dirs)
}

// syncDirs puts what was written under each of dirs on stable storage:
// once per file system where syncFS can, else each directory's files
// (fsyncDirTree).
func syncDirs(dirs map[string]bool) error {
	synced := make(map[uint64]bool)
	for dir := range dirs {
		done, err := syncFS(dir, synced)
		if err != nil {
			return err
		}
		if !done {
			if err := fsyncDir(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// fsyncDir fsyncs every regular file of dir and dir itself.
func fsyncDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("atomicfile: %w", err)
		}
		errS := f.Sync()
		f.Close()
		if errS != nil {
			return fmt.Errorf("atomicfile: fsync %s: %w", f.Name(), errS)
		}
	}
	return SyncDir(dir)
}
