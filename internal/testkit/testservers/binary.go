package testservers

import (
	"os/exec"
	"testing"
)

// Binary returns the path of the program name, which a test runs itself
// (a private server, a pooler), looked up on PATH. If it is not installed,
// it skips the test, or fails it when services are required (CI, make
// test: scripts/services.sh installs it); why says what the test would
// have shown.
func Binary(t testing.TB, name, why string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if must, req := required(); must {
		t.Fatalf("testservers: %s is not installed; %s requires it (scripts/services.sh installs it): %s", name, req, why)
	} else {
		t.Skipf("testservers: %s is not installed (scripts/services.sh installs it): %s", name, why)
	}
	return ""
}
