package simbapg

import (
	"context"
	"fmt"

	"github.com/simba-go/simba/backends"
)

// The batches (backends.BatchSession): one statement, in one transaction,
// for the lot — one round trip and one commit (one WAL flush) where single
// calls pay one each.
//
// Acquires call the acquire_batch function (schema.sql, functions revision
// 5 on), which grants the names that need nothing but a grant — free or
// new, no partition, not repeated — in a few statements for the whole
// batch, and calls the acquire function for each of the others, at its
// place in the order, so that each name's row is what its own call would
// have returned. On functions of an older revision (a role that may not
// replace them), acquires, like releases, call the single function once
// per lease, in order (a LATERAL join over the names, WITH ORDINALITY):
// each call sees what the calls before it in the statement did (a volatile
// function's statements take a snapshot each).
//
// The statement holds the session's row, and the rows of the leases it
// took, until it commits: the session's keep-alive waits for it (the
// runtime makes one batch at a time per session), and two sessions'
// batches that take the same names may deadlock — PostgreSQL then rolls one
// back, and it runs again (call, retryable), as a single call would.

var _ backends.BatchSession = (*session)(nil)

// AcquireBatch acquires each of names as Acquire does, in one statement.
func (s *session) AcquireBatch(ctx context.Context, names []string) ([]backends.AcquireResult, error) {
	out := make([]backends.AcquireResult, len(names))
	var (
		valid  []string
		groups []*string // NULL unless a partition name
		parts  []*int32
	)
	for i, name := range names {
		if err := args.Name("acquire", name); err != nil {
			out[i].Err = err
			continue
		}
		var g *string
		var p *int32
		if grp, i, ok := backends.SplitPartition(name); ok {
			pi := int32(i)
			g, p = &grp, &pi
		}
		valid, groups, parts = append(valid, name), append(groups, g), append(parts, p)
	}
	if len(valid) == 0 {
		return out, nil
	}
	rows := make([]acquireRow, 0, len(valid))
	err := s.b.call(ctx, "acquire", fmt.Sprintf("%s… (%d leases)", valid[0], len(valid)), func(q querier) error {
		rows = rows[:0]
		stmt := s.b.sql.acquireBatch
		if s.b.revision.Load() < batchRevision {
			stmt = s.b.sql.acquireEach
		}
		rs, err := q.Query(ctx, stmt, s.id, valid, groups, parts, s.b.maxLease, s.b.notify)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			rows = append(rows, acquireRow{})
			if err := rs.Scan(rows[len(rows)-1].dest()...); err != nil {
				return err
			}
		}
		return rs.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(rows) != len(valid) {
		return nil, s.b.errorf("acquire", valid[0], "%d rows for a batch of %d leases from schema %s", len(rows), len(valid), s.b.schema)
	}
	j := 0
	for i, name := range names {
		if out[i].Err == nil {
			out[i].Grant, out[i].Err = s.granted(name, &rows[j])
			j++
		}
	}
	return out, nil
}

// ReleaseBatch releases each of leases as Release does, in one statement.
func (s *session) ReleaseBatch(ctx context.Context, leases []backends.Held) ([]backends.ReleaseResult, error) {
	out := make([]backends.ReleaseResult, len(leases))
	var (
		names  []string
		tokens []int64
	)
	for i, l := range leases {
		if err := args.Name("release", l.Name); err != nil {
			out[i].Err = err
			continue
		}
		names, tokens = append(names, l.Name), append(tokens, int64(l.Token))
	}
	if len(names) == 0 {
		return out, nil
	}
	rows := make([]releaseRow, 0, len(names))
	err := s.b.call(ctx, "release", fmt.Sprintf("%s… (%d leases)", names[0], len(names)), func(q querier) error {
		rows = rows[:0]
		rs, err := q.Query(ctx, s.b.sql.releaseBatch, s.id, names, tokens, s.b.notify)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r releaseRow
			if err := rs.Scan(&r.status, &r.n, &r.v); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return rs.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(rows) != len(names) {
		return nil, s.b.errorf("release", names[0], "%d rows for a batch of %d leases from schema %s", len(rows), len(names), s.b.schema)
	}
	j := 0
	for i, l := range leases {
		if out[i].Err == nil {
			out[i].Digest, out[i].Err = s.released(l.Name, &rows[j])
			j++
		}
	}
	return out, nil
}
