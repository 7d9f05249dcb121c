package simbazk

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// §15: a grant refused by the amnesia guard of a new root says why, until
// when (on the store's clock) and how to shorten the wait, and the backend
// logs it once per guard period, not once per refusal.
func TestRecoveringVisible(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	var logs logRecords
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
		re := checkRecovering(t, err, 5*time.Second)
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
	warned := logs.lines("no lease is granted for now")
	if len(warned) != 1 || !strings.Contains(warned[0], "simba_max_lease") || !strings.Contains(warned[0], "until=") ||
		!strings.Contains(warned[0], "root="+root) {
		t.Errorf("warnings logged for three refusals of one guard:\n%s\nwant one, saying until when and how to shorten it", strings.Join(warned, ""))
	}
}

// logRecords is a log of text lines that tests read, safe for concurrent
// use.
type logRecords struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecords) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the lines logged that hold s.
func (l *logRecords) lines(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.buf.String()) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// checkRecovering checks that err is the amnesia guard's refusal, saying
// why, until when and how to shorten the wait, the guard maxLease long.
func checkRecovering(t *testing.T, err error, maxLease time.Duration) *backends.RecoveringError {
	t.Helper()
	var re *backends.RecoveringError
	if !errors.As(err, &re) || !errors.Is(err, backends.ErrRecovering) || !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("Acquire within the amnesia guard = %v; want a *backends.RecoveringError matching ErrRecovering and ErrLeaseHeld", err)
	}
	if re.Remaining <= 0 || re.Remaining > maxLease || re.MaxLease != maxLease || re.Why == "" {
		t.Errorf("RecoveringError %+v; want 0 < Remaining ≤ MaxLease = %v, and why", *re, maxLease)
	}
	for _, s := range []string{"grants resume in", "WithMaxLease", "simba_max_lease"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal %q does not say %q", err, s)
		}
	}
	return re
}
