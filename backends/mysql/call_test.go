package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// A link that goes silent after a CALL's row arrived and before its closing
// OK packet did: the call ends when its context does, as every call of the
// backend must (D2), and does not wait for the link to heal.
// (*sql.DB).QueryRowContext read that packet in Rows.Close, after
// go-sql-driver stopped watching the context: a keep-alive blackholed there
// held its session past its deadline (TestBlackholedConnection, 2 runs in
// 18).
func TestSilentLinkBetweenRowAndOK(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	proc := fmt.Sprintf("simbatest_%x_row_then_wait", rand.Uint64())
	ctx := context.Background()
	// The row is sent (and flushed) at once; the OK packet that ends the
	// CALL only after the SLEEP.
	if _, err := admin.ExecContext(ctx, "CREATE PROCEDURE "+proc+"() BEGIN SELECT 1; DO SLEEP(0.6); END"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP PROCEDURE IF EXISTS "+proc) })

	link := faultnet.New()
	db := newDB(t, url, link)
	var warm int
	if err := scanRow(ctx, db, "SELECT 1", &warm); err != nil { // a pooled connection, dialled before the blackhole
		t.Fatal(err)
	}
	b := newBackend(t, db, admin)
	for _, c := range []struct {
		name string
		scan func(ctx context.Context, dest *int) error
	}{
		{"scanRow", func(ctx context.Context, dest *int) error { return scanRow(ctx, db, "CALL "+proc+"()", dest) }},
		{"queryRows", func(ctx context.Context, dest *int) error {
			return b.queryRows(ctx, "CALL "+proc+"(", func(rows *sql.Rows) error { return rows.Scan(dest) })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			defer cancel()
			blackholed := time.AfterFunc(150*time.Millisecond, link.Blackhole)
			defer blackholed.Stop()
			defer link.Heal()
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				var v int
				done <- c.scan(ctx, &v)
			}()
			select {
			case err := <-done:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("the call on a link silent before its OK packet = %v after %v; want context.DeadlineExceeded", err, time.Since(start))
				}
			case <-time.After(3 * time.Second):
				link.Heal()
				err := <-done
				t.Errorf("the call on a link silent before its OK packet returned only when the link healed, after %v (%v); want it ended with its context, at 400ms", time.Since(start), err)
			}
		})
	}
}
