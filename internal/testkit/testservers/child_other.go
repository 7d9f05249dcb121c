//go:build !linux

package testservers

import "os/exec"

// dieWithTest does nothing here: only Linux can tie a child's life to its
// parent's; a test killed abruptly leaves its servers running.
func dieWithTest(*exec.Cmd) {}
