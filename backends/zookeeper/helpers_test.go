package simbazk

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The conformance cases spend most of their time waiting (for a new
	// root's amnesia guard, for expiries), not computing: run more of them
	// at once than the default of one per CPU, unless -parallel says.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", "8")
	}
	goleak.VerifyTestMain(m)
}

// testTick is the tickTime of the shared server and of the private ones.
const testTick = 500 * time.Millisecond

// uniqueRoot returns a root path no other test uses.
func uniqueRoot() string {
	var b [6]byte
	rand.Read(b[:])
	return "/simbatest-" + hex.EncodeToString(b[:])
}

// newBackend returns a backend on servers with a fresh root, ready to grant
// leases (it waits for the amnesia guard of the new root, MaxLease). When
// the test ends it is closed and its root is deleted.
func newBackend(t testing.TB, servers []string, opts ...Option) *Backend {
	t.Helper()
	root := uniqueRoot()
	b, err := New(servers, append([]Option{WithRoot(root), WithMaxLease(2 * time.Second), WithTickTime(testTick)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		b.Close()
		deleteTree(t, servers, root, b.digest)
	})
	waitGuard(t, b)
	return b
}

// sameRoot returns another backend on b's root: another node of the same
// cluster.
func sameRoot(t testing.TB, b *Backend, servers []string, opts ...Option) *Backend {
	t.Helper()
	nb, err := New(servers, append([]Option{WithRoot(b.Root()), WithMaxLease(b.MaxLease()), WithTickTime(testTick)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { nb.Close() })
	return nb
}

// waitGuard waits until b grants leases.
func waitGuard(t testing.TB, b *Backend) {
	t.Helper()
	backendtest.WaitGranting(t, b, b.MaxLease()+20*time.Second, 10*time.Second)
}

// directConn connects to servers with go-zookeeper directly, for checks and
// clean-ups behind the backend's back; closed when the test ends.
func directConn(t testing.TB, servers []string, opts ...func(*zk.Conn)) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// deleteTree deletes path and everything below it, ignoring nodes that
// vanish meanwhile.
func deleteTree(t testing.TB, servers []string, path, digest string) {
	t.Helper()
	c, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Logf("deleting %s: %v", path, err)
		return
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		if digest != "" {
			if err := c.AddAuth("digest", []byte(digest)); err != nil {
				done <- err
				return
			}
		}
		done <- deleteRecursive(c, path)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("deleting %s: %v", path, err)
		}
	case <-time.After(10 * time.Second):
		t.Logf("deleting %s: timed out", path)
	}
}

func deleteRecursive(c *zk.Conn, path string) error {
	children, _, err := c.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := deleteRecursive(c, path+"/"+ch); err != nil {
			return err
		}
	}
	if err := c.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// zkSession returns the ZooKeeper session of a session of b.
func zkSession(t testing.TB, s backends.Session) *session {
	t.Helper()
	zs, ok := s.(*session)
	if !ok {
		t.Fatalf("session is %T, want *simbazk.session", s)
	}
	return zs
}

// expireSession ends the ZooKeeper session of id behind its client's back,
// the way a second client with the session's id and password can: it
// attaches to the session on a connection of its own (ZooKeeper moves the
// session there) and closes it. It returns once ZooKeeper has answered the
// close, that is, once the session's ephemeral nodes are gone.
func expireSession(t testing.TB, b *Backend, id backends.SessionID) {
	t.Helper()
	b.mu.Lock()
	var target *session
	for s := range b.sessions {
		if s.id == string(id) {
			target = s
		}
	}
	b.mu.Unlock()
	if target == nil {
		t.Fatalf("expireSession: backend has no open session %s", id)
	}
	target.w.mu.Lock()
	sid, passwd := target.w.sid, append([]byte(nil), target.w.passwd...)
	server := target.w.cur.RemoteAddr().String()
	target.w.mu.Unlock()
	// The session's own client reconnects at once when ZooKeeper moves the
	// session to the new connection, and may take it back before the close
	// request is handled: send the close with the connect request, and
	// again until the session's ephemeral nodes are gone.
	c := directConn(t, b.servers)
	marker := b.paths.marker(string(id))
	for end := time.Now().Add(10 * time.Second); ; {
		if err := closeSessionAs(server, sid, passwd); err != nil {
			t.Logf("expireSession %s: %v", id, err)
		}
		for wait := time.Now().Add(300 * time.Millisecond); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
			if ok, _, err := c.Exists(marker); err == nil && !ok {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("expireSession %s: its node %s still exists", id, marker)
		}
	}
}

// closeSessionAs speaks ZooKeeper's protocol on a connection of its own:
// a connect request for session sid with passwd, then a close request.
func closeSessionAs(server string, sid int64, passwd []byte) error {
	c, err := net.DialTimeout("tcp", server, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// connect request: protocol 0, last zxid 0, timeout, session id, password
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 10000)
	req = binary.BigEndian.AppendUint64(req, uint64(sid))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	// The close request (xid 1, opcode -11) goes with it, so that
	// ZooKeeper handles it right after moving the session here.
	closeReq := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), uint32(0xfffffff5))
	packet := append(binary.BigEndian.AppendUint32(nil, uint32(len(req))), req...)
	packet = append(packet, binary.BigEndian.AppendUint32(nil, uint32(len(closeReq)))...)
	if _, err := c.Write(append(packet, closeReq...)); err != nil {
		return err
	}
	reply, err := readPacket(c)
	if err != nil {
		return fmt.Errorf("reading the connect reply: %w", err)
	}
	if len(reply) < 16 || int64(binary.BigEndian.Uint64(reply[8:16])) != sid {
		return fmt.Errorf("ZooKeeper did not attach session %x (reply % x)", sid, reply)
	}
	for {
		reply, err := readPacket(c)
		if errors.Is(err, io.EOF) {
			return nil // closed: the caller waits for the nodes to go
		}
		if err != nil {
			return fmt.Errorf("reading the close reply: %w", err)
		}
		if len(reply) >= 4 && binary.BigEndian.Uint32(reply[:4]) == 1 {
			return nil
		}
	}
}

func readPacket(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 1<<20 {
		return nil, fmt.Errorf("packet of %d bytes", size)
	}
	p := make([]byte, size)
	_, err := io.ReadFull(r, p)
	return p, err
}

// sharedZK returns the servers of the shared ZooKeeper.
func sharedZK(t testing.TB) []string {
	t.Helper()
	return testservers.ZooKeeper(t)
}

// nodeExists reports whether path exists, read behind the backend's back.
func nodeExists(t testing.TB, c *zk.Conn, path string) bool {
	t.Helper()
	ok, _, err := c.Exists(path)
	if err != nil {
		t.Fatalf("Exists(%s): %v", path, err)
	}
	return ok
}
