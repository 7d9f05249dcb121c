package simbazk_test

import (
	"context"
	"fmt"
	"log"
	"time"

	simbazk "github.com/simba-go/simba/backends/zookeeper"
	"github.com/simba-go/simba/runtime"
)

// A node that runs a report while it holds the lease "report", on a
// ZooKeeper ensemble. (Not run: it needs the servers.)
func Example() {
	b, err := simbazk.New([]string{"zk1:2181", "zk2:2181", "zk3:2181"},
		simbazk.WithRoot("/billing/simba"),
		simbazk.WithTickTime(2*time.Second), // the servers' tickTime (B1)
		simbazk.WithMaxLease(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close() // after the client: closes the ZooKeeper sessions

	cfg := runtime.ConfigFor(15 * time.Second)
	cfg.RenewInterval = cfg.LeaseDuration / 4 // see the package documentation
	client, err := runtime.NewClient(b, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client.RunWhileLeader(ctx, "report", func(ctx context.Context, t *runtime.Term) error {
		fmt.Println("leading with token", t.Token())
		<-ctx.Done()
		return nil
	})
}

// Open takes a zk:// URL; digest credentials go in the userinfo and never
// appear in an error. (Not run: it needs the servers.)
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := simbazk.Open(ctx, "zk://billing:secret@zk1:2181,zk2:2181/billing/simba?simba_tick_time=2s&simba_max_lease=30s")
	if err != nil {
		log.Fatal(err) // e.g. simbazk: open zk://billing:xxxxx@zk1:2181,zk2:2181/billing/simba?…: …
	}
	defer b.Close()
}
