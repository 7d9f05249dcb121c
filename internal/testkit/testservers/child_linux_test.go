package testservers

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHelperServerOwner is the child of TestServersDieWithTheTest: it starts
// a Redis server, prints its pid and waits to be killed; on its own it
// skips.
func TestHelperServerOwner(t *testing.T) {
	if os.Getenv("TESTSERVERS_CHILD") != "owner" {
		t.Skip("helper process of TestServersDieWithTheTest")
	}
	s := StartRedisServer(t)
	if s == nil {
		return
	}
	os.Stdout.WriteString("server-pid " + strconv.Itoa(s.proc.cmd.Process.Pid) + "\n")
	time.Sleep(time.Minute)
	t.Error("not killed within a minute")
}

// TestServersDieWithTheTest: a test binary killed outright (as by its
// -timeout panic or SIGKILL) runs no cleanup, and its servers must still not
// outlive it.
func TestServersDieWithTheTest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process and a Redis server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing(t, "redis-server is not installed", "install redis-server (`make services` does)")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServerOwner$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESTSERVERS_CHILD=owner", "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	pid, seen := 0, new(strings.Builder)
	lines := bufio.NewScanner(out)
	for pid == 0 && lines.Scan() {
		seen.WriteString(lines.Text() + "\n")
		if v, ok := strings.CutPrefix(lines.Text(), "server-pid "); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid == 0 {
		t.Fatalf("the helper printed no server pid:\n%s", seen)
	}
	// Alive: it exists and is not a zombie that nobody has reaped yet.
	alive := func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return !errors.Is(err, os.ErrNotExist)
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		return !strings.HasPrefix(rest, "Z")
	}
	if !alive() {
		t.Fatalf("server %d is not running before the helper is killed", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	for end := time.Now().Add(10 * time.Second); alive(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("server %d outlived its test binary by 10 s", pid)
		}
	}
}
