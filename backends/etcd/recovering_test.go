package simbaetcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backends"
)

// §15: an acquire refused by the amnesia guard of a new prefix is a
// *backends.RecoveringError saying how long the guard has left, and
// Inspect reports the guard, so that clients and simba status say when
// grants resume.
func TestRecoveringSaysHowLong(t *testing.T) {
	cli := newClient(t, nil, shared.get(t))
	b, err := New(cli, WithPrefix("/"+unique("simbaguard")+"/"), WithMaxLease(testMaxLease), WithLocalClock())
	if err != nil {
		t.Fatal(err)
	}
	prefix := b.Prefix()
	t.Cleanup(func() {
		b.Close()
		cli.Delete(context.Background(), prefix, clientv3.WithPrefix())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	_, err = s.Acquire(ctx, "lease")
	var re *backends.RecoveringError
	if !errors.As(err, &re) || !errors.Is(err, backends.ErrRecovering) || re.Remaining <= 0 || re.Remaining > testMaxLease+time.Second ||
		re.MaxLease != b.MaxLease() || re.Why == "" {
		t.Fatalf("Acquire on a new prefix = %v (%+v); want a *RecoveringError with at most %v left", err, re, testMaxLease)
	}
	inv, err := b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := inv.Recovering; r == nil || r.Remaining <= 0 || r.Remaining > testMaxLease+time.Second {
		t.Errorf("Inspect on a new prefix: Recovering = %+v; want the guard", r)
	}
}
