package simbaredis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
)

// infoCalls returns how many INFO commands the server ran, scripts' included.
func infoCalls(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	for _, line := range strings.Split(c.Info(context.Background(), "commandstats").Val(), "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_info:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// §15 without INFO: once a process is armed, acquisitions and renewals read
// no INFO, on a private Redis 7, whose command counts are ours alone.
func TestArmedScriptsSkipInfo(t *testing.T) {
	srv := startRedis(t)
	admin := newClient(t, srv.Addr)
	b := newBackend(t, newClient(t, srv.Addr), admin, WithMaxLease(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if b.armed.set.Load() == nil {
		t.Fatal("the backend is not armed after its first guarded call on Redis 7")
	}
	before := infoCalls(t, admin)
	for i := range 50 {
		g, err := s.Acquire(ctx, "x")
		if err != nil {
			t.Fatalf("Acquire #%d: %v", i, err)
		}
		if _, err := s.Release(ctx, "x", g.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := s.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// infoCalls' own INFO is counted once.
	if n := infoCalls(t, admin) - before; n != 1 {
		t.Errorf("%d INFO calls over 50 acquisitions, releases and renewals; want none", n-1)
	}
}

// §15: an armed process still notices what the guarded scripts notice in
// one process: here the namespace's meta hash records another run, as when
// an older snapshot is loaded without a restart. The armed script hands back,
// the backend arms again, the check starts the guard, and no lease is
// granted; sessions from before end.
func TestArmedNoticesAnotherRun(t *testing.T) {
	srv := startRedis(t)
	admin := newClient(t, srv.Addr)
	b := newBackend(t, newClient(t, srv.Addr), admin, WithMaxLease(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := admin.HSet(ctx, b.keys.meta(), "run", "0123456789abcdef").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive after the meta hash changed run = %v; want ErrSessionExpired (every session ends)", err)
	}
	s2, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Acquire(ctx, "y"); !errors.Is(err, backends.ErrRecovering) {
		t.Errorf("Acquire after the meta hash changed run = %v; want ErrRecovering (the guard)", err)
	}
}
