package simbaredis_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/runtime"
)

// A backend on a go-redis client the application already has: the client
// stays the application's, and must honour context deadlines.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true,
	})
	defer client.Close()

	b, err := simbaredis.New(client, simbaredis.WithPrefix("billing"), simbaredis.WithMaxLease(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	c, err := runtime.NewClient(b, runtime.ConfigFor(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	// c.StartElection, c.RunWhileLeader, c.Lock ...
}

// A backend from a URL: it owns its client and closes it.
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := simbaredis.Open(ctx, "redis://127.0.0.1:6379/0")
	if err != nil {
		log.Fatal(err) // the error never shows the URL's password
	}
	defer b.Close()
}
