package simbapg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backends"
)

// S3, D1 (the second trap of the package documentation): a keep-alive that
// reaches PostgreSQL before its session expires but has to wait for a lock on
// the session's row until after the expiry must not renew it. The lock here
// is an admin's FOR SHARE that changes nothing: PostgreSQL re-checks an
// UPDATE's WHERE clause after a lock wait only for rows that changed, so an
// "UPDATE … SET expires_at = now() + ttl WHERE expires_at > now()" (now() is
// when the statement began) would renew the expired session here. The
// backend reads clock_timestamp() after locking the row, and refuses.
func TestKeepAliveAfterLockWait(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	b := newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const ttl = 3 * time.Second
	a := mustOpen(t, b, ttl)
	if _, err := a.Acquire(ctx, "lease"); err != nil {
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
	type result struct {
		r   backends.Renewal
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.KeepAlive(ctx)
		done <- result{r, err}
	}()
	// The keep-alive waits for the lock, well before the expiry.
	waitFor(t, time.Until(expiry)-100*time.Millisecond, "the keep-alive waiting for the row lock", func() bool {
		var waiting bool
		err := admin.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '".keep_alive%'`, b.Schema()).Scan(&waiting)
		return err == nil && waiting
	})
	if time.Now().After(expiry.Add(-50 * time.Millisecond)) {
		t.Skipf("the keep-alive reached its lock wait too late (%v before the expiry) to test anything", time.Until(expiry))
	}
	// Hold the lock until the session expired, then let go without a change.
	time.Sleep(time.Until(expiry) + 100*time.Millisecond)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if !errors.Is(res.err, backends.ErrSessionExpired) {
		t.Fatalf("a keep-alive that waited for its row's lock past the expiry = %+v, %v; want ErrSessionExpired (S3)", res.r, res.err)
	}
	other := mustOpen(t, b, ttl)
	if _, err := other.Acquire(ctx, "lease"); err != nil {
		t.Errorf("Acquire of the expired session's lease: %v", err)
	}
}
