package procstat

import (
	"os"
	"testing"
)

// This process's own figures read, and a process that does not exist
// is an error.
func TestReadOwnProcess(t *testing.T) {
	before, err := ReadCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1e6; i++ {
		_ = i * i
	}
	after, err := ReadCPU(os.Getpid())
	if err != nil || after.Ticks < before.Ticks || after.Share(before) < 0 {
		t.Fatalf("CPU %+v then %+v, %v", before, after, err)
	}
	if rss, err := ReadRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Fatalf("RSS %d, %v", rss, err)
	}
	if _, err := ReadCPU(1 << 30); err == nil {
		t.Error("ReadCPU of no process: no error")
	}
	if _, err := ReadRSS(1 << 30); err == nil {
		t.Error("ReadRSS of no process: no error")
	}
}
