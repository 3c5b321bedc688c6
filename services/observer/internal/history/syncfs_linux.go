package history

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// syncFS syncs the file system that holds f (syncfs(2)): every file
// written on it, and its directories. It reports false, and no error,
// where it cannot (f is not an *os.File, or the kernel lacks syncfs).
func syncFS(f appendFile) (bool, error) {
	osf, ok := f.(*os.File)
	if !ok {
		return false, nil
	}
	raw, err := osf.SyscallConn()
	if err != nil {
		return false, nil
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.Syncfs(int(fd)) }); err != nil {
		return false, nil
	}
	if errors.Is(serr, unix.ENOSYS) {
		return false, nil
	}
	return true, serr
}
