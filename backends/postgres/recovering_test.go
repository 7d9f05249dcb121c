package simbapg

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

// §15: a grant refused by the amnesia guard of a new schema says why, how
// long it waits and how to shorten the wait, and the backend logs it once
// per guard period, not once per refusal.
func TestRecoveringVisible(t *testing.T) {
	pool := newPool(t, sharedDSN(t), nil)
	var logs logtext.Buffer
	b := guardedBackend(t, pool, pool, WithMaxLease(5*time.Second), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for range 3 {
		_, err := s.Acquire(ctx, "lease")
		if re := backendtest.CheckRecovering(t, "Acquire", err, 5*time.Second); !strings.Contains(re.Why, b.Schema()) {
			t.Errorf("RecoveringError.Why %q does not name the schema %s", re.Why, b.Schema())
		}
	}
	warned := logs.Lines("level=WARN")
	if len(warned) != 1 || !strings.Contains(warned[0], "simba_max_lease") || !strings.Contains(warned[0], "remaining=") ||
		!strings.Contains(warned[0], "schema="+b.Schema()) {
		t.Errorf("warnings logged for three refusals of one guard:\n%s\nwant one, saying how long and how to shorten it", strings.Join(warned, ""))
	}
}
