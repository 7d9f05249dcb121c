// Command etcdlocal runs a single etcd member on loopback, for trying the
// etcd backend and the demo without installing etcd: the server the
// backend's tests embed (go.etcd.io/etcd/server/v3), with its data in a
// temporary directory that it removes when it stops (Ctrl-C).
//
//	go run ./cmd/etcdlocal [--client 127.0.0.1:2379] [--peer 127.0.0.1:2380] [--data DIR]
//
// It serves loopback addresses only; for anything else, run a real etcd.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	client := flag.String("client", "127.0.0.1:2379", "the client address (loopback)")
	peer := flag.String("peer", "127.0.0.1:2380", "the peer address (loopback)")
	data := flag.String("data", "", "the data directory (default: a temporary one, removed at exit)")
	flag.Parse()
	for _, a := range []string{*client, *peer} {
		host, _, err := net.SplitHostPort(a)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			log.Fatalf("etcdlocal: %q: want a loopback host:port such as 127.0.0.1:2379", a)
		}
	}
	dir := *data
	if dir == "" {
		d, err := os.MkdirTemp("", "etcdlocal-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, pu := url.URL{Scheme: "http", Host: *client}, url.URL{Scheme: "http", Host: *peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcdlocal: %v", err)
	}
	defer e.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Printf("etcd serving on %s (data in %s); Ctrl-C stops it\n", cu.String(), dir)
	case err := <-e.Err():
		log.Fatalf("etcdlocal: %v", err)
	case <-stop:
		return
	}
	select {
	case err := <-e.Err():
		log.Printf("etcdlocal: %v", err)
	case <-stop:
	}
}
