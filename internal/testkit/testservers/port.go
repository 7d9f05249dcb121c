package testservers

import (
	"net"
	"sync"
	"testing"
)

// handedOut holds every port FreePort has returned in this process. The
// kernel may give a port it has just freed to the next listener, so two
// calls in a row could otherwise return the same port to two servers.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback port that nothing listens on now and that no
// earlier call in this process returned.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testservers: finding a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
	t.Fatal("testservers: no loopback port that was not handed out already, in 100 tries")
	return 0
}
