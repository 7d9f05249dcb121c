package simbaetcd_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	simbaetcd "github.com/simba-go/simba/backends/etcd"
	"github.com/simba-go/simba/runtime"
)

// A backend on a client the program already has: the backend never closes
// it. (It needs an etcd, so it is compiled, not run.)
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{simbaetcd.ReconnectParams()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	b, err := simbaetcd.New(cli, simbaetcd.WithPrefix("/billing/simba/"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := runtime.NewClient(b.Backend(), runtime.ConfigFor(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	t, err := c.Lock(context.Background(), "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token", t.Token())
	c.Unlock(context.Background(), t)
}

// A backend from a URL, on a client of its own, with the local clock that
// schedules need on etcd. (It needs an etcd, so it is compiled, not run.)
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := simbaetcd.Open(ctx, "etcd://127.0.0.1:2379/billing?simba_clock=local&simba_max_lease=30s")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Println(b.Prefix(), b.MaxLease())
}
