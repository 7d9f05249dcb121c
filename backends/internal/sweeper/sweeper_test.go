package sweeper

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSweepRunsUntilNothingIsLeft(t *testing.T) {
	s := New()
	defer s.Close()
	var calls atomic.Int32
	done := make(chan struct{})
	s.Go(time.Second, func(ctx context.Context) (bool, error) {
		if calls.Add(1) == 3 {
			close(done)
			return false, nil
		}
		return true, nil
	}, nil)
	<-done
	s.Wait()
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls; want 3 (the sweep stops when the step reports nothing left)", n)
	}
}

func TestSweepStopsOnFailure(t *testing.T) {
	s := New()
	defer s.Close()
	boom := errors.New("boom")
	got := make(chan error, 1)
	var calls atomic.Int32
	s.Go(time.Second, func(ctx context.Context) (bool, error) {
		calls.Add(1)
		return true, boom
	}, func(err error) { got <- err })
	if err := <-got; !errors.Is(err, boom) {
		t.Errorf("failed got %v; want %v", err, boom)
	}
	s.Close()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls; want 1 (a failed step ends the sweep)", n)
	}
}

func TestCloseEndsASweepInFlight(t *testing.T) {
	s := New()
	started := make(chan struct{})
	var ended atomic.Bool
	s.Go(time.Hour, func(ctx context.Context) (bool, error) {
		close(started)
		<-ctx.Done()
		ended.Store(true)
		return true, ctx.Err()
	}, nil)
	<-started
	s.Close() // returns only once the step saw its context end
	if !ended.Load() {
		t.Error("Close returned before the sweep in flight ended")
	}
	ran := false
	s.Go(time.Second, func(context.Context) (bool, error) { ran = true; return false, nil }, nil)
	s.Close()
	if ran {
		t.Error("Go after Close started a sweep")
	}
}

func TestStepContextEndsAfterCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		defer s.Close()
		got := make(chan time.Duration, 1)
		start := time.Now()
		s.Go(time.Minute, func(ctx context.Context) (bool, error) {
			<-ctx.Done()
			got <- time.Since(start)
			return false, nil
		}, nil)
		if d := <-got; d != time.Minute {
			t.Errorf("step's context ended after %v; want the call timeout, 1m0s", d)
		}
	})
}
