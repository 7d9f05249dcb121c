package faults

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	_ "github.com/simba-go/simba/backends/etcd" // etcd://, a module of its own
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// The etcd lane: each schedule's server is an etcd member embedded in the
// test process (go.etcd.io/etcd/server/v3), on loopback ports of its own,
// and the nodes reach it through their proxies as the other backends' do.
func init() { kinds = append(kinds, backendKind{"etcd", startEtcd}) }

// etcdServer is one embedded member. Its election timeout is 500 ms, so
// that etcd allows the nodes' leases: it raises a lease below about 1.5 ×
// the election timeout, in whole seconds, and the backend asks for the
// lease rounded down to whole seconds (1 s for the default 1.5 s).
type etcdServer struct {
	cfg   *embed.Config
	lease time.Duration
	mu    sync.Mutex
	e     *embed.Etcd
}

func startEtcd(t *testing.T, lease time.Duration) server {
	t.Helper()
	// testservers.FreePort never hands out one port twice in a process:
	// the lanes start their members in parallel, and the kernel may give a
	// port just freed to the next listener (CI: "address already in use").
	addr := func() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(testservers.FreePort(t))) }
	// A port found free may still be taken by another listener of the
	// process before etcd binds it (a proxy on port 0): then try others.
	for try := 1; ; try++ {
		cfg := embed.NewConfig()
		cfg.Dir = t.TempDir()
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.TickMs, cfg.ElectionMs = 50, 500
		cu, pu := url.URL{Scheme: "http", Host: addr()}, url.URL{Scheme: "http", Host: addr()}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		s := &etcdServer{cfg: cfg, lease: lease}
		err := s.start()
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		if try == 3 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
		t.Logf("%v; trying other ports", err)
	}
}

func (s *etcdServer) start() error {
	e, err := embed.StartEtcd(s.cfg)
	if err != nil {
		return fmt.Errorf("starting the embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("the embedded etcd: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return fmt.Errorf("the embedded etcd was not ready within 60s")
	}
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
	return nil
}

// stop stops the member: its gRPC servers first, draining the requests in
// flight, then the member. (The member stopped first, HardStop, while the
// nodes still send it requests, crashed this process: etcd 3.7.3's
// serializable reads then meet a closed database.) A single member has no
// leadership to hand over, so nothing else differs from a kill.
func (s *etcdServer) stop() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

func (s *etcdServer) Addr() string { return s.cfg.ListenClientUrls[0].Host }
func (s *etcdServer) URL(addr string) string {
	return fmt.Sprintf("etcd://%s/simba?simba_max_lease=%v", addr, s.lease)
}
func (s *etcdServer) Restart(t testing.TB) {
	s.stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}
