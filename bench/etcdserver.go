package bench

import (
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdServer is an etcd server embedded in the harness's process: one
// member, on loopback ports, with its data in a temporary directory. It runs
// with etcd's defaults (100 ms heartbeat, 1 s election timeout, a WAL fsync
// per commit), as a single-member cluster would in production.
type etcdServer struct {
	e         *embed.Etcd
	dir       string
	clientURL string
}

func startEtcd() (*etcdServer, error) {
	dir, err := os.MkdirTemp("", "simbabench-etcd-")
	if err != nil {
		return nil, err
	}
	client, err := freeAddr()
	if err != nil {
		return nil, err
	}
	peer, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop()) // its shutdown logs errors of its own listeners
	cu := url.URL{Scheme: "http", Host: client}
	pu := url.URL{Scheme: "http", Host: peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the embedded etcd: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the embedded etcd was not ready within 30s")
	}
	return &etcdServer{e: e, dir: dir, clientURL: cu.String()}, nil
}

func (s *etcdServer) stop() {
	s.e.Close()
	os.RemoveAll(s.dir)
}
