package memory_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
)

// Two nodes contend for one lease in a private store; the second takes it
// over, with a greater token, once the first closes its session.
func Example() {
	ctx := context.Background()
	store := memory.New(memory.WithMaxLease(30 * time.Second))

	node1, granted, _ := store.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	node2, _, _ := store.OpenSession(ctx, backends.SessionOptions{TTL: 10 * time.Second})
	fmt.Println("granted:", granted.Remaining) // clamped to MaxLease

	g1, _ := node1.Acquire(ctx, "report")
	_ = node1.PutValue(ctx, "report", g1.Token, []byte("slot 41 done"))
	if _, err := node2.Acquire(ctx, "report"); errors.Is(err, backends.ErrLeaseHeld) {
		fmt.Println("node2: held by node1")
	}

	_ = node1.Close(ctx) // releases everything (S4)
	g2, _ := node2.Acquire(ctx, "report")
	fmt.Println("node2 took over:", g2.Token > g1.Token, string(g2.Value))
	// Output:
	// granted: 30s
	// node2: held by node1
	// node2 took over: true slot 41 done
}

// The fault surface makes the store misbehave for tests: here a session is
// expired behind its client's back.
func ExampleFaults_ExpireSession() {
	ctx := context.Background()
	store := memory.New()
	sess, _, _ := store.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})

	store.Faults().ExpireSession(sess.ID())
	_, err := sess.KeepAlive(ctx)
	fmt.Println(errors.Is(err, backends.ErrSessionExpired))
	// Output: true
}
