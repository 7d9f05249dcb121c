package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd's process when the harness dies,
// so that an interrupted run leaves no private server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
