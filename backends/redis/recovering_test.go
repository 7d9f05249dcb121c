package simbaredis

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

// §15: a grant refused by the amnesia guard says why, until when (on
// Redis's clock) and how to shorten the wait, and the backend logs it once
// per guard period, not once per refusal.
func TestRecoveringVisible(t *testing.T) {
	addr, admin := sharedRedis(t)
	var logs logRecords
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
		re := checkRecovering(t, err, 3*time.Second)
		st, serr := b.StoreTime(ctx)
		if serr != nil {
			t.Fatal(serr)
		}
		if d := re.Until.Sub(st.Add(re.Remaining)); d < -time.Second || d > time.Second {
			t.Errorf("RecoveringError Until %v, Remaining %v at store time %v; want Until = store time + Remaining", re.Until, re.Remaining, st)
		}
	}
	warned := logs.lines("level=WARN")
	if len(warned) != 1 || !strings.Contains(warned[0], "simba_max_lease") || !strings.Contains(warned[0], "until=") ||
		!strings.Contains(warned[0], "prefix="+b.Prefix()) {
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
