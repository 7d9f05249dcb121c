package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// terse is a backend whose refused joins say nothing but the sentinel, to
// check what the engine itself adds to the error.
type terse struct{ backends.Backend }

func (b terse) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return openWrapped(ctx, b.Backend, opts, func(s backends.Session) backends.Session { return terseSession{s} })
}

type terseSession struct{ backends.Session }

func (s terseSession) Join(ctx context.Context, group string, n int) error {
	err := s.Session.Join(ctx, group, n)
	if errors.Is(err, backends.ErrGroupMismatch) {
		return backends.ErrGroupMismatch
	}
	return err
}

// §13: a member that joins with another partition count than the group's
// is not refused by StartGroup, which does not wait for the join; the
// refusal shows in the group's LastError and in an EventBackendError logged
// as a warning, each wrapping backends.ErrGroupMismatch and naming the
// group and both counts: the engine names the group and this member's
// count, the backend's error the group's. The join is retried, and succeeds
// once the members with the other count have left.
func TestGroupPartitionCountMismatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend func(*memory.Store) backends.Backend
		want    []string // in the errors
	}{
		{"memory", func(s *memory.Store) backends.Backend { return s }, []string{`"billing"`, "8 partitions", "have 4"}},
		{"terse backend", func(s *memory.Store) backends.Backend { return terse{s} }, []string{`"billing"`, "8 partitions"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testGroupPartitionCountMismatch(t, tc.backend, tc.want) })
	}
}

func testGroupPartitionCountMismatch(t *testing.T, backend func(*memory.Store) backends.Backend, want []string) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		idle := func(ctx context.Context, _ *runtime.Term, _ int) error { <-ctx.Done(); return nil }
		a := newClient(t, store)
		ga, err := a.StartGroup("billing", 4, runtime.Schedule{}, idle)
		if err != nil {
			t.Fatal(err)
		}
		heldAll(t, a, 4)

		evs, logs := &events{}, &logRecords{}
		b := newClient(t, backend(store), runtime.WithObserver(evs), runtime.WithLogger(slog.New(logs)))
		if _, err := b.StartGroup("billing", 8, runtime.Schedule{}, idle); err != nil {
			t.Fatalf("StartGroup with another count = %v, want nil: it does not wait for the join", err)
		}
		time.Sleep(cfg.RenewInterval)
		synctest.Wait()

		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, backends.ErrGroupMismatch) {
				t.Errorf("%s = %v, want an error wrapping backends.ErrGroupMismatch", what, err)
				return
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s = %q, want it to name the group and the counts (missing %q)", what, err, w)
				}
			}
		}
		gs := b.Snapshot().Groups[0]
		check("GroupStatus.LastError", gs.LastError)
		if gs.Joined || len(gs.Held) != 0 {
			t.Errorf("the refused member: joined %v, holds %v; want neither", gs.Joined, gs.Held)
		}
		bad := evs.of(runtime.EventBackendError)
		if len(bad) == 0 {
			t.Fatal("no EventBackendError for the refused join")
		}
		for _, ev := range bad {
			if ev.Name != "billing" || ev.Group != "billing" {
				t.Errorf("event for %q, group %q; want the group's name in both", ev.Name, ev.Group)
			}
			check("Event.Err", ev.Err)
		}
		if n := logs.count(slog.LevelWarn, "backend error"); n == 0 {
			t.Error("the refused join was not logged as a warning")
		}

		// The member with the recorded count leaves; the group empties, and
		// the retried join records 8.
		if err := ga.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		gs = heldAll(t, b, 8)
		if gs.LastError != nil || gs.Partitions != 8 {
			t.Errorf("after the other member left: %+v; want the group joined with 8 partitions", gs)
		}
		closeClient(t, a)
		closeClient(t, b)
	})
}
