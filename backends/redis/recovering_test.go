package simbaredis

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/logtext"
)

// §15: a grant refused by the amnesia guard says why, until when (on
// Redis's clock) and how to shorten the wait, and the backend logs it once
// per guard period, not once per refusal.
func TestRecoveringVisible(t *testing.T) {
	addr, admin := sharedRedis(t)
	var logs logtext.Buffer
	b := newBackend(t, newClient(t, addr), admin, WithMaxLease(3*time.Second), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The meta hash records another process: Redis lost the namespace's
	// state, for all the backend can tell.
	if err := admin.HSet(ctx, b.keys.meta(), "run", "0000000000000000000000000000000000000000").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for range 3 {
		_, err := s.Acquire(ctx, "lease")
		re := backendtest.CheckRecovering(t, "Acquire", err, 3*time.Second)
		st, serr := b.StoreTime(ctx)
		if serr != nil {
			t.Fatal(serr)
		}
		if d := re.Until.Sub(st.Add(re.Remaining)); d < -time.Second || d > time.Second {
			t.Errorf("RecoveringError Until %v, Remaining %v at store time %v; want Until = store time + Remaining", re.Until, re.Remaining, st)
		}
	}
	warned := logs.Lines("level=WARN")
	if len(warned) != 1 || !strings.Contains(warned[0], "simba_max_lease") || !strings.Contains(warned[0], "until=") ||
		!strings.Contains(warned[0], "prefix="+b.Prefix()) {
		t.Errorf("warnings logged for three refusals of one guard:\n%s\nwant one, saying until when and how to shorten it", strings.Join(warned, ""))
	}
}
