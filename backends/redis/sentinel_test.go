package simbaredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testkit/testservers"
)

// §15 on Redis Sentinel: the primary crashes (SIGKILL) and Sentinel promotes
// its replica. The promoted replica is another process, with another run id
// than the namespace's meta hash records (replicated from the old primary),
// and its script cache is empty: the backend's next calls arm it, its guard
// check starts the amnesia guard, and every session from before ends. So
// the leader's term ends, and no node is granted the lease until MaxLease
// after the crash at the earliest; tokens stay above those issued before.
func TestSentinelFailover(t *testing.T) {
	sen := testservers.StartSentinel(t)
	newFailoverClient := func(t *testing.T) *redis.Client {
		c := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            sen.Master,
			SentinelAddrs:         []string{sen.Sentinel},
			ContextTimeoutEnabled: true,
			MaxRetries:            1,
			DialerRetries:         1,
			DialTimeout:           500 * time.Millisecond,
		})
		t.Cleanup(func() { c.Close() })
		return c
	}
	admin := redis.NewClient(&redis.Options{Addr: sen.Primary})
	t.Cleanup(func() { admin.Close() })
	// A guard longer than Sentinel takes to promote (about 2–3 s here), so
	// that without it a node would be elected right after the promotion:
	// the leader's session, replicated, has run out by then.
	b := newBackend(t, newFailoverClient(t), admin, WithMaxLease(5*time.Second))
	cl := newCluster(t)
	a := cl.Start("a", b, "lease")
	ta := a.WaitElected(5 * time.Second)
	c := cl.Start("c", sameNamespace(t, b, newFailoverClient(t)), "lease")
	c.NotElected(testConfig.RenewInterval)
	// What the primary has, the replica has: the crash loses nothing that
	// would explain a takeover by itself.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.Do(ctx, "WAIT", 1, 1000).Err(); err != nil {
		t.Fatalf("WAIT for the replica: %v", err)
	}

	killAt := time.Now()
	sen.Kill(sen.Primary)
	for {
		addr, err := sen.MasterAddr(ctx)
		if err == nil && addr == sen.Replica {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Sentinel did not promote the replica: %v, %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("Sentinel promoted the replica %v after the crash", time.Since(killAt))

	var next *termRecord
	select {
	case next = <-c.Elected():
	case next = <-a.Elected():
	case <-ctx.Done():
		t.Fatal("no node was elected after the fail-over")
	}
	ta.WaitEnded(t, time.Second)
	t.Logf("elected %v after the crash; the old term ended %v after it (%v)",
		next.ElectedAt.Sub(killAt), ta.EndedAt.Sub(killAt), ta.Reason)
	if !ta.EndedAt.Before(next.ElectedAt) {
		t.Errorf("the old term ended at %v, after the next was elected at %v: two valid terms", ta.EndedAt, next.ElectedAt)
	}
	if since := next.ElectedAt.Sub(killAt); since < b.MaxLease() {
		t.Errorf("a node was elected %v after the crash; want no grant before MaxLease %v (the amnesia guard, §15)", since, b.MaxLease())
	}
	if next.Term.Token() <= ta.Term.Token() {
		t.Errorf("token after the fail-over %d; want > %d from before it (F5)", next.Term.Token(), ta.Term.Token())
	}
}
