package testservers

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// child is the process of a server a test started: started again at will,
// signalled, and waited for. Safe for concurrent use.
type child struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// start starts cmd, its output appended to logPath, unless the process is
// already running: then it reports false and does nothing. The process dies
// with the test binary (dieWithTest).
func (c *child) start(cmd *exec.Cmd, logPath string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runningLocked() {
		return false, nil
	}
	dieWithTest(cmd)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return false, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	c.cmd, c.done = cmd, done
	return true, nil
}

// running reports whether the process was started and has not exited.
func (c *child) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runningLocked()
}

func (c *child) runningLocked() bool {
	if c.cmd == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// exited returns a channel closed when the current process exits (nil if
// none was started).
func (c *child) exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// signal sends sig to the process and, unless it is SIGSTOP or SIGCONT,
// waits for it to exit (a frozen process is resumed so that it can; one
// that ignores sig for 10 s is killed). It does nothing if the process is
// not running.
func (c *child) signal(sig syscall.Signal) {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Signal(sig)
	if sig == syscall.SIGSTOP || sig == syscall.SIGCONT {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT) // a frozen process must run to exit
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}
