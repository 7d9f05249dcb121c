package simbaredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// commandCalls returns the calls of every command from INFO commandstats,
// by lower-case name.
func commandCalls(tb testing.TB, c *redis.Client) map[string]int64 {
	tb.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, stats, _ := strings.Cut(rest, ":")
		for kv := range strings.SplitSeq(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				out[name], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return out
}

// S1, A1 on Redis: a node that holds leases and waits for none sends
// exactly one request per renewal period, its keep-alive, however it churns
// locks meanwhile (each Lock+Unlock is one EVALSHA each, nothing more): no
// release subscription is opened, so nothing pings it. A private
// redis-server, whose command statistics count only this node. The node
// runs for longer than the release feed's ping interval (5 s), so that a
// watch kept alive by a holder would show as PINGs.
func TestHolderRequestsPerRenewal(t *testing.T) {
	srv := startRedis(t)
	admin := newClient(t, srv.Addr)
	b := newBackend(t, newClient(t, srv.Addr), admin)
	cfg := runtime.ConfigFor(600 * time.Millisecond) // renewals every 200 ms
	c, renewals := enginetest.StartHolder(t, b, cfg, 3)
	ctx := context.Background()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	r0 := renewals.Load()
	tick := time.NewTicker(cfg.RenewInterval / 3)
	defer tick.Stop()
	pairs := int64(0)
	for start := time.Now(); time.Since(start) < 6*time.Second; <-tick.C {
		term, err := c.Lock(ctx, fmt.Sprintf("job-%d", pairs%5))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Unlock(ctx, term); err != nil {
			t.Fatal(err)
		}
		pairs++
	}
	calls := commandCalls(t, admin)
	ren := renewals.Load() - r0
	evalsha := calls["evalsha"]
	keepAlives := evalsha - 2*pairs
	// The window may cut a keep-alive in flight: its EVALSHA counted, its
	// renewal not yet.
	if keepAlives < ren || keepAlives > ren+1 {
		t.Errorf("%d EVALSHA for %d Lock+Unlock pairs and %d renewals: %d beyond the pairs; want one per renewal", evalsha, pairs, ren, keepAlives)
	}
	// Besides the scripts (whose own commands INFO counts apart), the
	// client sent nothing: no subscription, no ping, no arming.
	for _, name := range []string{"ping", "subscribe", "eval", "script|load", "multi", "exec"} {
		if n := calls[name]; n > 0 {
			t.Errorf("%d %s calls; want none: a holder sends its keep-alive and nothing else", n, strings.ToUpper(name))
		}
	}
	requests := keepAlives + calls["ping"] + calls["subscribe"]
	t.Logf("%d renewals, %d Lock+Unlock pairs: %.2f requests per renewal beyond the pairs", ren, pairs, float64(requests)/float64(ren))
}
