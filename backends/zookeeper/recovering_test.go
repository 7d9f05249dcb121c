package simbazk

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

// §15: a grant refused by the amnesia guard of a new root says why, until
// when (on the store's clock) and how to shorten the wait, and the backend
// logs it once per guard period, not once per refusal.
func TestRecoveringVisible(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	var logs logtext.Buffer
	root := uniqueRoot()
	b, err := New(servers, WithRoot(root), WithMaxLease(5*time.Second), WithTickTime(testTick),
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		deleteTree(t, servers, root, "")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for range 3 {
		_, err := s.Acquire(ctx, "lease")
		re := backendtest.CheckRecovering(t, "Acquire", err, 5*time.Second)
		if want := zkSession(t, s).gen.guardEnd; !re.Until.Equal(want) {
			t.Errorf("RecoveringError Until %v; want the guard's end %v", re.Until, want)
		}
	}
	inv, err := b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := inv.Recovering; r == nil || r.Remaining <= 0 || r.Remaining > 5*time.Second || r.MaxLease != 5*time.Second {
		t.Errorf("Inspect during the guard: Recovering = %+v; want the guard, at most 5s left", r)
	}
	warned := logs.Lines("no lease is granted for now")
	if len(warned) != 1 || !strings.Contains(warned[0], "simba_max_lease") || !strings.Contains(warned[0], "until=") ||
		!strings.Contains(warned[0], "root="+root) {
		t.Errorf("warnings logged for three refusals of one guard:\n%s\nwant one, saying until when and how to shorten it", strings.Join(warned, ""))
	}
}
