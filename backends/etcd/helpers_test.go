package simbaetcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The conformance cases spend most of their time waiting (for a new
	// prefix's amnesia guard, for expiries), not computing: run more of
	// them at once than the default of one per CPU, unless -parallel says.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", "8")
	}
	code := m.Run()
	shared.stop()
	if code == 0 {
		if err := goleak.Find(leakOptions...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakOptions ignore the embedded members' peer connections (net/http:
// rafthttp and lease forwarding), which a member killed with HardStop
// leaves to their idle timeouts. Neither the backend nor the etcd client
// uses net/http (gRPC has its own HTTP/2), so no leak of ours hides here.
var leakOptions = []goleak.Option{
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
	goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
}

// The tests' timing: etcd's minimum lease is about 1.5 × the election
// timeout, in whole seconds, so a 500 ms election timeout allows the 1 s
// leases of the conformance suite.
const (
	testTickMs     = 50
	testElectionMs = 500
	testMaxLease   = testTTL
)

// server is an etcd member embedded in the test process, on loopback ports
// of its own, with its data in a temporary directory.
type server struct {
	name, dir    string
	client, peer string // host:port
	cluster      string // initial-cluster
	token        string
	tick, elect  uint
	mu           sync.Mutex
	e            *embed.Etcd
}

// handedOut holds every address freeAddr has returned in this process.
// The kernel may give a port it just freed to the next listener, so two
// calls in a row could otherwise return the same address (a cluster's
// initial configuration then has a duplicate URL).
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// freeAddr returns a loopback address no one listens on and that no earlier
// call in this process returned.
func freeAddr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		addr := l.Addr().String()
		l.Close()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("no loopback port that was not handed out already, in 100 tries")
	return ""
}

func unique(kind string) string {
	var b [6]byte
	rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

// newServer returns an unstarted single member.
func newServer(t testing.TB, dir string) *server {
	s := &server{name: "m0", dir: dir, client: freeAddr(t), peer: freeAddr(t), token: unique("simbatest"),
		tick: testTickMs, elect: testElectionMs}
	s.cluster = s.name + "=http://" + s.peer
	return s
}

func (s *server) config() *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = s.name
	cfg.Dir = s.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs = s.tick, s.elect
	cfg.UnsafeNoFsync = true // tests on a shared machine; a restart of the process keeps the page cache
	cu := url.URL{Scheme: "http", Host: s.client}
	pu := url.URL{Scheme: "http", Host: s.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = s.cluster
	cfg.InitialClusterToken = s.token
	return cfg
}

// start starts the member and, if wait, waits until it serves.
func (s *server) start(wait bool) error {
	e, err := embed.StartEtcd(s.config())
	if err != nil {
		return fmt.Errorf("starting etcd member %s: %w", s.name, err)
	}
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
	if wait {
		return s.ready(60 * time.Second)
	}
	return nil
}

func (s *server) ready(within time.Duration) error {
	s.mu.Lock()
	e := s.e
	s.mu.Unlock()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd member %s: %w", s.name, err)
	case <-time.After(within):
		return fmt.Errorf("etcd member %s not ready within %v", s.name, within)
	}
}

// kill stops the member: its gRPC servers first (requests in flight are
// drained), then the member, which hands its leadership over if it leads a
// cluster. Stopping the member first (HardStop) while clients still send
// it requests can crash the test process: etcd 3.7.3's serializable reads
// then meet a closed database (a nil bbolt transaction). [server.hardKill]
// kills a leader that no client talks to.
func (s *server) kill() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// hardKill stops the member at once, without handing its leadership over.
// No client may be connected to it (see kill).
func (s *server) hardKill() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Server.HardStop()
		e.Close()
	}
}

// wipe kills the member, deletes its data and makes the next start a new
// cluster.
func (s *server) wipe() {
	s.kill()
	os.RemoveAll(s.dir)
	s.token = unique("simbatest")
}

func (s *server) isLeader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e != nil && s.e.Server.Leader() == s.e.Server.MemberID()
}

// startServer starts a private single member, stopped when the test ends.
func startServer(t testing.TB) *server {
	t.Helper()
	s := newServer(t, t.TempDir())
	if err := s.start(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

// startCluster starts three members on loopback, stopped when the test
// ends. Their election timeout is etcd's default (1 s), so that a loaded
// machine does not make them elect needlessly.
func startCluster(t testing.TB) []*server {
	t.Helper()
	token := unique("simbatest")
	ms := make([]*server, 3)
	cluster := ""
	for i := range ms {
		ms[i] = &server{name: fmt.Sprintf("m%d", i), dir: t.TempDir(), client: freeAddr(t), peer: freeAddr(t),
			token: token, tick: 100, elect: 1000}
		if i > 0 {
			cluster += ","
		}
		cluster += ms[i].name + "=http://" + ms[i].peer
	}
	for _, m := range ms {
		m.cluster = cluster
		if err := m.start(false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.kill)
	}
	for _, m := range ms {
		if err := m.ready(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// sharedServer is the member the tests share (isolated by prefixes),
// started on first use and stopped by TestMain.
type sharedServer struct {
	once sync.Once
	s    *server
	dir  string
	err  error
}

var shared sharedServer

func (sh *sharedServer) get(t testing.TB) *server {
	t.Helper()
	sh.once.Do(func() {
		sh.dir, sh.err = os.MkdirTemp("", "simbaetcd-test-")
		if sh.err != nil {
			return
		}
		sh.s = newServer(t, sh.dir)
		sh.err = sh.s.start(true)
	})
	if sh.err != nil {
		t.Fatal(sh.err)
	}
	return sh.s
}

func (sh *sharedServer) stop() {
	if sh.s != nil {
		sh.s.kill()
	}
	if sh.dir != "" {
		os.RemoveAll(sh.dir)
	}
}

// newClient returns a client of the servers, closed when the test ends;
// with a link, its connections go through it.
func newClient(t testing.TB, link *faultnet.Link, servers ...*server) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, s := range servers {
		eps = append(eps, "http://"+s.client)
	}
	dial := []grpc.DialOption{ReconnectParams()}
	if link != nil {
		dial = append(dial, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return link.Dial(ctx, "tcp", addr)
		}))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: dial})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newBackend returns a backend on cli under a prefix of its own, with
// MaxLease testMaxLease and the local clock. The prefix is laid out as an
// earlier backend would have left it, without the amnesia guard of a new
// one, which would cost every case MaxLease: TestConformance's AmnesiaGuard
// case and the faults lane of tests/faults check the guard.
func newBackend(t testing.TB, cli *clientv3.Client, opts ...Option) *Backend {
	t.Helper()
	b, err := New(cli, append([]Option{WithPrefix("/" + unique("simbatest") + "/"), WithMaxLease(testMaxLease), WithLocalClock()}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	prefix := b.Prefix()
	t.Cleanup(func() {
		b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cli.Delete(ctx, prefix, clientv3.WithPrefix())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(b.keys.meta()), "=", 0)).
		Then(clientv3.OpPut(b.keys.meta(), metaData(time.Now().UnixMicro()))).Commit(); err != nil {
		t.Fatalf("laying out %s: %v", prefix, err)
	}
	backendtest.WaitGranting(t, b.Backend(), testMaxLease+20*time.Second, testTTL)
	return b
}

// etcdSession returns the backend's session behind s.
func etcdSession(t testing.TB, s backends.Session) *session {
	t.Helper()
	es, ok := s.(*session)
	if !ok {
		t.Fatalf("session is %T, want *simbaetcd.session", s)
	}
	return es
}

// revokeBehindBack revokes the etcd lease of the session id of b from
// another client, as an expiry would end it.
func revokeBehindBack(t testing.TB, b *Backend, id backends.SessionID) {
	t.Helper()
	b.mu.Lock()
	var target *session
	for s := range b.sessions {
		if s.id == id {
			target = s
		}
	}
	b.mu.Unlock()
	if target == nil {
		t.Fatalf("revokeBehindBack: backend has no open session %s", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.cli.Revoke(ctx, target.lease); err != nil {
		t.Fatalf("revoking the lease of session %s: %v", id, err)
	}
}
