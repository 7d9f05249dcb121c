package testservers

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd's process when the test binary
// exits, however it exits: a test killed by its -timeout panic, by ^C or by
// SIGKILL would otherwise leave its servers running, holding their ports and
// (if frozen by SIGSTOP) their sessions, for the next run to trip over.
//
// The signal is tied to the thread that starts the process; Go ends a thread
// only when a goroutine locked to it exits, which the callers never do.
func dieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
