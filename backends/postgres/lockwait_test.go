package simbapg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backends"
)

// S3, D1 (the second trap of the package documentation): a call that reaches
// PostgreSQL before its session expires but has to wait for a lock on the
// session's row until after the expiry must find the session expired. The
// lock here is an admin's FOR SHARE that changes nothing: PostgreSQL
// re-checks an UPDATE's WHERE clause after a lock wait only for rows that
// changed, so an "UPDATE … SET expires_at = now() + ttl WHERE expires_at >
// now()" (now() is when the statement began) would renew the expired session
// here, and an acquire or release that judged the expiry before the lock
// would grant or release for a dead session. The backend reads
// clock_timestamp() after locking the row, and refuses. The calls are those
// that lock the session's row first: a keep-alive, an acquire of a free
// lease (its fast path locks the row with the UPDATE that counts the lease)
// and a release (likewise).
func TestCallAfterLockWait(t *testing.T) {
	for _, c := range []struct {
		fn   string // the function the call runs
		call func(ctx context.Context, s backends.Session, held backends.Grant) error
	}{
		{"keep_alive", func(ctx context.Context, s backends.Session, _ backends.Grant) error {
			_, err := s.KeepAlive(ctx)
			return err
		}},
		{"acquire", func(ctx context.Context, s backends.Session, _ backends.Grant) error {
			_, err := s.Acquire(ctx, "free")
			return err
		}},
		{"release", func(ctx context.Context, s backends.Session, held backends.Grant) error {
			_, err := s.Release(ctx, "lease", held.Token)
			return err
		}},
	} {
		t.Run(c.fn, func(t *testing.T) {
			t.Parallel() // each waits for an expiry of its own
			dsn := sharedDSN(t)
			admin := newPool(t, dsn, nil)
			b := newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(time.Minute))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			testCallAfterLockWait(t, ctx, b, admin, c.fn, c.call)
		})
	}
}

func testCallAfterLockWait(t *testing.T, ctx context.Context, b *Backend, admin interface {
	Begin(context.Context) (pgx.Tx, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}, fn string, call func(ctx context.Context, s backends.Session, held backends.Grant) error) {
	const ttl = 3 * time.Second
	a := mustOpen(t, b, ttl)
	held, err := a.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	sentAt := time.Now()
	r, err := a.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expiry := sentAt.Add(r.Remaining)

	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{b.Schema()}.Sanitize()+".sessions WHERE id = $1 FOR SHARE", string(a.ID())); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- call(ctx, a, held) }()
	// The call waits for the lock, well before the expiry.
	waitFor(t, time.Until(expiry)-100*time.Millisecond, "the "+fn+" waiting for the row lock", func() bool {
		var waiting bool
		err := admin.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '".' || $2 || '(%'`, b.Schema(), fn).Scan(&waiting)
		return err == nil && waiting
	})
	if time.Now().After(expiry.Add(-50 * time.Millisecond)) {
		t.Skipf("the %s reached its lock wait too late (%v before the expiry) to test anything", fn, time.Until(expiry))
	}
	// Hold the lock until the session expired, then let go without a change.
	time.Sleep(time.Until(expiry) + 100*time.Millisecond)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, backends.ErrSessionExpired) {
		t.Fatalf("the %s call that waited for its row's lock past the expiry = %v; want ErrSessionExpired (S3)", fn, err)
	}
	other := mustOpen(t, b, ttl)
	for _, name := range []string{"lease", "free"} {
		if _, err := other.Acquire(ctx, name); err != nil {
			t.Errorf("Acquire of %q after the session expired: %v", name, err)
		}
	}
}

// S1, T4: an acquire that finds the lease free, counts it in its session's
// digest and locks its session's row (its fast path), then loses the lease to
// another session before it could lock the lease's record, undoes the count:
// it is refused, naming the winner, and its digest is as before. The other
// session's acquire runs in an admin's transaction that holds the lease's
// record (an existing one, locked; or a new one, inserted and not yet
// committed) while the first waits for it.
func TestAcquireLosesRace(t *testing.T) {
	for _, existing := range []bool{true, false} {
		name := map[bool]string{true: "existing record", false: "new record"}[existing]
		t.Run(name, func(t *testing.T) {
			dsn := sharedDSN(t)
			admin := newPool(t, dsn, nil)
			b := newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(time.Minute))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			a := mustOpen(t, b, time.Minute)
			winner := mustOpen(t, b, time.Minute)
			if existing {
				g, err := winner.Acquire(ctx, "lease")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := winner.Release(ctx, "lease", g.Token); err != nil {
					t.Fatal(err)
				}
			}
			before, err := a.KeepAlive(ctx)
			if err != nil {
				t.Fatal(err)
			}

			tx, err := admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			schema := pgx.Identifier{b.Schema()}.Sanitize()
			if existing {
				if _, err := tx.Exec(ctx, "SELECT 1 FROM "+schema+".leases WHERE name = 'lease' FOR UPDATE"); err != nil {
					t.Fatal(err)
				}
			} else if _, err := tx.Exec(ctx, "SELECT * FROM "+schema+".acquire($1, 'lease', NULL, NULL, '1 minute', false)", string(winner.ID())); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := a.Acquire(ctx, "lease")
				done <- err
			}()
			waitFor(t, 10*time.Second, "the acquire waiting for the lease's record", func() bool {
				var waiting bool
				err := admin.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '".acquire(%'`, b.Schema()).Scan(&waiting)
				return err == nil && waiting
			})
			if existing {
				var status string
				if err := tx.QueryRow(ctx, "SELECT status FROM "+schema+".acquire($1, 'lease', NULL, NULL, '1 minute', false)", string(winner.ID())).Scan(&status); err != nil || status != "OK" {
					t.Fatalf("the winner's acquire in the admin's transaction: %q, %v", status, err)
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			err = <-done
			var held *backends.HeldError
			if !errors.As(err, &held) || held.Holder.Session != winner.ID() {
				t.Fatalf("Acquire that lost the race = %v; want a HeldError naming %s", err, winner.ID())
			}
			after, err := a.KeepAlive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.Digest != before.Digest {
				t.Errorf("digest after the lost race %+v; want %+v unchanged (T4)", after.Digest, before.Digest)
			}
			if owned, d, err := a.Owned(ctx); err != nil || len(owned) != 0 || d != before.Digest {
				t.Errorf("Owned after the lost race = %v, %+v, %v; want nothing and the digest %+v", owned, d, err, before.Digest)
			}
		})
	}
}

// A release that frees a lease commits without waiting for the WAL flush
// (synchronous_commit off for its transaction: losing it in a crash only
// keeps the lease taken longer), and nothing else does: an acquire, a
// keep-alive, and a release that frees nothing (a wrong token) leave the
// setting on, since a renewal lost in a crash could let the database
// expire a session sooner than its client was told. Each function runs
// here inside a transaction of the test's, which then reads the setting
// the function left for it.
func TestOnlyReleasesCommitWithoutFlush(t *testing.T) {
	t.Parallel()
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	b := newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := mustOpen(t, b, time.Minute)
	held, err := s.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	schema := pgx.Identifier{b.Schema()}.Sanitize()
	id := string(s.ID())
	for _, c := range []struct {
		what, sql string
		args      []any
		want      string
	}{
		{"acquire", "SELECT status FROM " + schema + ".acquire($1, 'free', NULL, NULL, '1 minute', true)", []any{id}, "on"},
		{"keep-alive", "SELECT status FROM " + schema + ".keep_alive($1, true)", []any{id}, "on"},
		{"release of another token", "SELECT status FROM " + schema + ".release($1, 'held', $2, true)", []any{id, int64(held.Token) + 1}, "on"},
		{"release", "SELECT status FROM " + schema + ".release($1, 'held', $2, true)", []any{id, int64(held.Token)}, "off"},
	} {
		tx, err := admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var status, setting string
		if err := tx.QueryRow(ctx, c.sql, c.args...).Scan(&status); err != nil || status != "OK" {
			t.Fatalf("%s: status %q, %v; want OK", c.what, status, err)
		}
		if err := tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if setting != c.want {
			t.Errorf("%s: synchronous_commit %s for its transaction; want %s", c.what, setting, c.want)
		}
	}
}
