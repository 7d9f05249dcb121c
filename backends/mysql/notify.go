package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/simba-go/simba/backends/internal/watch"
)

// pollWithin bounds one poll statement.
const pollWithin = 2 * time.Second

// pollPage is the most releases one poll returns (simba_poll's LIMIT); a
// full page is read again from its last release number, so that releases
// sharing a number (one session's end) are never split.
const pollPage = 2000

// pollReread is how far before the database clock of its last poll each
// poll reads again: a release is numbered with the clock when its
// transaction runs and may commit a moment later, after a poll that read
// past its number.
const pollReread = time.Second

// poller is the backend's release poll as a watch.Source: MySQL has no
// LISTEN/NOTIFY, so the releases that the procedures number (simba_seq row
// 2, recorded in each released lease's row) are read every poll interval
// while some watch waits. The backend's watch.Feed keeps it running.
type poller struct{ b *Backend }

// Subscribe reads the number of the last release: the poll reports those
// that follow.
func (p poller) Subscribe(ctx context.Context) (watch.Subscription, error) {
	s := &pollSubscription{b: p.b}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if _, err := s.poll(ctx, -1); err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// pollSubscription polls simba_poll from the last release number it saw.
type pollSubscription struct {
	b      *Backend
	ctx    context.Context // ended by Close, which ends a Receive in progress
	cancel context.CancelFunc

	mu      sync.Mutex // held while polling
	after   int64
	seen    map[string]int64 // name → number of a release passed on, numbered after after
	last    time.Time        // when the last poll was sent
	pending []watch.Release
}

// poll runs one simba_poll from after (-1: only the clock), queues the
// releases it returns that it has not passed on before, and moves after to
// a second before the database's clock (or, after a full page, to just
// before its last release). It reports how many it queued.
func (s *pollSubscription) poll(ctx context.Context, after int64) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, pollWithin)
	defer cancel()
	type release struct {
		watch.Release
		rel int64
	}
	var (
		now      int64
		releases []release
		lastRel  int64
	)
	s.last = time.Now()
	err := s.b.retry(ctx, "poll releases", "", func() error {
		releases = releases[:0]
		return s.b.queryRows(ctx, s.b.sql.poll, func(rows *sql.Rows) error {
			var (
				kind       string
				name, from sql.NullString
				rel        int64
			)
			if err := rows.Scan(&kind, &name, &from, &rel); err != nil {
				return err
			}
			if kind == "S" {
				now = rel
			} else {
				releases, lastRel = append(releases, release{watch.Release{Name: name.String, From: from.String}, rel}), rel
			}
			return nil
		}, after)
	})
	if err != nil {
		return 0, err
	}
	if s.seen == nil {
		s.seen = make(map[string]int64)
	}
	queued := 0
	for _, r := range releases {
		if s.seen[r.Name] == r.rel {
			continue // passed on by an earlier poll
		}
		s.seen[r.Name] = r.rel
		s.pending = append(s.pending, r.Release)
		queued++
	}
	if len(releases) >= pollPage {
		s.after = lastRel - 1 // the last number may go on in the next page
	} else {
		s.after = now - pollReread.Microseconds()
	}
	for name, rel := range s.seen {
		if rel <= s.after {
			delete(s.seen, name)
		}
	}
	return queued, nil
}

// Receive returns the next release: one queued, or one the polls find,
// polling every poll interval while some watch waits (and not at all while
// none does) until timeout.
func (s *pollSubscription) Receive(ctx context.Context, timeout time.Duration) (watch.Release, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := time.Now().Add(timeout)
	for {
		if len(s.pending) > 0 {
			r := s.pending[0]
			s.pending = s.pending[1:]
			return r, true, nil
		}
		if err := s.ctx.Err(); err != nil {
			return watch.Release{}, false, errors.New("simbamysql: poll releases: subscription closed")
		}
		next := s.last.Add(s.b.poll)
		if !next.Before(end) {
			next = end
		}
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return watch.Release{}, false, ctx.Err()
			case <-s.ctx.Done():
				t.Stop()
				return watch.Release{}, false, errors.New("simbamysql: poll releases: subscription closed")
			}
		}
		if !time.Now().Before(end) {
			return watch.Release{}, false, nil
		}
		if s.b.feed.Watching() == 0 {
			s.last = time.Now() // nobody waits: ask the database nothing
			continue
		}
		if _, err := s.poll(ctx, s.after); err != nil {
			return watch.Release{}, false, err
		}
	}
}

// Ping polls once: an answer means the poll works.
func (s *pollSubscription) Ping(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false, errors.New("simbamysql: poll releases: subscription closed")
	}
	_, err := s.poll(ctx, s.after)
	return err == nil, err
}

// Close ends a Receive in progress. It may be called more than once.
func (s *pollSubscription) Close() error {
	s.cancel()
	return nil
}
