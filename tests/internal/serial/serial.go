// Package serial makes the test packages of the tests module that load the
// machine, or time it, run one at a time: `go test ./...` runs packages in
// parallel, and on a small machine (2 cores, -race) the fault schedules'
// dozens of node processes slow the ZooKeeper ensemble's elections past
// what tests/zookeeper allows.
package serial

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Lock waits until no other package holding the lock runs, then holds it
// until the returned function is called (or the process exits). The lock is
// a flock(2) on a file in the temporary directory, so it is released when
// the process dies, however it dies.
func Lock() (unlock func()) {
	path := filepath.Join(os.TempDir(), "simba-tests-serial.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		fmt.Fprintf(os.Stderr, "serial: %v; running without the lock\n", err)
		return func() {}
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "serial: flock %s: %v; running without the lock\n", path, err)
	}
	return func() { f.Close() }
}
