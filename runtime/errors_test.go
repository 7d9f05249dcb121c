package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// EnsureValid's error says what happened: a valid term "ends too soon for
// the step", with the time left and the time asked; an ended one "ended",
// with the reason.
func TestTermExpiredErrorWords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		term, err := c.Lock(context.Background(), "report")
		if err != nil {
			t.Fatal(err)
		}
		err = term.EnsureValid(time.Hour)
		if err == nil || strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "ends too soon") ||
			!strings.Contains(err.Error(), "need more than 1h0m0s") {
			t.Errorf("EnsureValid(1h) on a valid term = %v; want it to say the term ends too soon, not that it expired", err)
		}
		if !errors.Is(err, runtime.ErrTermExpired) {
			t.Errorf("EnsureValid(1h) = %v; want it to match ErrTermExpired", err)
		}
		if err := c.Unlock(context.Background(), term); err != nil {
			t.Fatal(err)
		}
		if err := term.EnsureValid(0); err == nil || !strings.HasSuffix(err.Error(), "ended: stopped") {
			t.Errorf("EnsureValid on an ended term = %v; want it to say it ended, and why", err)
		}
	})
}

// RunWhileLeader returns an error matching ErrClosed when its client is
// closed under it, not nil as if its context had ended.
func TestRunWhileLeaderClientClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		done := make(chan error, 1)
		go func() {
			done <- c.RunWhileLeader(context.Background(), "report", func(ctx context.Context, _ *runtime.Term) error {
				<-ctx.Done()
				return nil
			})
		}()
		synctest.Wait()
		closeClient(t, c)
		if err := <-done; !errors.Is(err, runtime.ErrClosed) || !strings.Contains(err.Error(), `"report"`) {
			t.Errorf("RunWhileLeader when its client closed = %v; want an error naming the lease and matching ErrClosed", err)
		}
	})
}

// A nil Option, like a nil ElectionOption, is no option: no panic.
func TestNilOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New(), nil, runtime.WithIdentity("x"), nil)
		defer closeClient(t, c)
		e, err := c.StartElection("report", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Every error of the API says which call on which name, with one prefix,
// and wraps the sentinel a caller tests for.
func TestErrorsHaveOnePrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		ctx := context.Background()
		if _, err := c.StartElection("report", nil); err != nil {
			t.Fatal(err)
		}
		_, errInUse := c.StartElection("report", nil)
		_, errLockInUse := c.Lock(ctx, "report")
		_, errName := c.Lock(ctx, "bad name")
		_, errGroup := c.StartGroup("g", 0, runtime.Schedule{}, func(context.Context, *runtime.Term, int) error { return nil })
		closeClient(t, c)
		_, errClosed := c.StartElection("other", nil)
		errReady := c.Ready(ctx)
		for _, tc := range []struct {
			err    error
			want   string
			target error
		}{
			{errInUse, `simba: start election "report": name already in use on this client`, runtime.ErrNameInUse},
			{errLockInUse, `simba: lock "report": name already in use on this client`, runtime.ErrNameInUse},
			{errName, `simba: lock: invalid name "bad name": character ' ' at byte 3; want only [A-Za-z0-9._:-]`, runtime.ErrInvalidName},
			{errGroup, `simba: start group: invalid group "g": 0 partitions; want 1 to 65536`, nil},
			{errClosed, `simba: start election "other": client closed`, runtime.ErrClosed},
			{errReady, `simba: ready: client closed`, runtime.ErrClosed},
		} {
			if tc.err == nil || tc.err.Error() != tc.want {
				t.Errorf("error %v; want %q", tc.err, tc.want)
				continue
			}
			if n := strings.Count(tc.err.Error(), "simba:"); n != 1 {
				t.Errorf("error %q has %d prefixes; want 1", tc.err, n)
			}
			if tc.target != nil && !errors.Is(tc.err, tc.target) {
				t.Errorf("error %q does not match %v", tc.err, tc.target)
			}
		}
	})
}
