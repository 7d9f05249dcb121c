package simbamysql

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// S3, many times over: the conformance case KeepAliveRacesTakeover, with
// sessions of a few tens of milliseconds so that hundreds of races run in
// seconds, many at once, while the other races' keep-alives reap (each
// keep-alive ends other expired sessions). In each race a holds a lease;
// its keep-alive is sent around its expiry, at a moment drawn at random,
// and b tries to take the lease every half millisecond meanwhile. Whichever
// the database handles first wins, never both: a renewal that succeeded is
// never followed by a takeover before its time to live has passed, no
// keep-alive sent after the takeover succeeds, and the old holder's next
// keep-alive says ErrSessionExpired.
func TestKeepAliveRacesTakeoverMany(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	db := newDB(t, url, nil)
	const pairs = 8
	db.SetMaxOpenConns(4 * pairs) // no call waits for a connection
	db.SetMaxIdleConns(4 * pairs)
	b := newBackend(t, db, admin)
	ctx := testCtx(t)
	rounds := 40
	if testing.Short() {
		rounds = 5
	}
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
	)
	concurrently(pairs, func(p int) {
		for r := range rounds {
			outcome, err := raceOnce(ctx, b, fmt.Sprintf("lease-%d-%d", p, r))
			if err != nil {
				t.Errorf("pair %d, race %d: %v", p, r, err)
				return
			}
			mu.Lock()
			outcomes[outcome]++
			mu.Unlock()
		}
	})
	t.Logf("%d races: %v", pairs*rounds, outcomes)
	if outcomes[raceRenewed]+outcomes[raceTaken] == 0 {
		t.Errorf("no race ran to its end (%v)", outcomes)
	}
}

// The outcomes of a race of TestKeepAliveRacesTakeoverMany.
const (
	raceRenewed = "the keep-alive won"
	raceTaken   = "the takeover won"
	raceNeither = "neither within the race"   // the keep-alive came too late, and the takeover later still
	raceSkipped = "a expired before the race" // on a loaded machine: a's set-up outlasted its time to live
)

// raceOnce runs one race of TestKeepAliveRacesTakeoverMany on lease name,
// and reports its outcome, or what broke S3.
func raceOnce(ctx context.Context, b *Backend, name string) (outcome string, err error) {
	const ttl = 100 * time.Millisecond
	open := func(ttl time.Duration) (backends.Session, error) {
		s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: ttl, Identity: name})
		return s, err
	}
	c, err := open(10 * time.Second) // outlives the race
	if err != nil {
		return "", err
	}
	defer c.Close(context.WithoutCancel(ctx))
	a, err := open(ttl)
	if err != nil {
		return "", err
	}
	defer a.Close(context.WithoutCancel(ctx))
	if _, err := a.Acquire(ctx, name); errors.Is(err, backends.ErrSessionExpired) {
		return raceSkipped, nil
	} else if err != nil {
		return "", fmt.Errorf("a's Acquire: %w", err)
	}
	sentAt := time.Now()
	r, err := a.KeepAlive(ctx)
	if errors.Is(err, backends.ErrSessionExpired) {
		return raceSkipped, nil
	} else if err != nil {
		return "", fmt.Errorf("a's KeepAlive: %w", err)
	}
	latency := time.Since(sentAt)
	// a expires Remaining after a moment between sentAt and
	// sentAt+latency: its keep-alive goes at a moment drawn from that span,
	// widened by 2 ms on either side; the takeover tries from 5 ms before.
	expiry := sentAt.Add(r.Remaining)
	at := expiry.Add(-2*time.Millisecond + rand.N(latency+4*time.Millisecond))
	from := expiry.Add(-5 * time.Millisecond)
	until := expiry.Add(latency + 30*time.Millisecond)
	time.Sleep(time.Until(from))

	type renewal struct{ sent time.Time }
	var (
		renewals []renewal
		taken    time.Time
		mu       sync.Mutex
		failed   error
	)
	concurrently(2, func(i int) {
		if i == 0 {
			time.Sleep(time.Until(at))
		}
		for time.Now().Before(until) {
			if i == 0 {
				sent := time.Now()
				_, err := a.KeepAlive(ctx)
				if errors.Is(err, backends.ErrSessionExpired) {
					return
				}
				if err == nil {
					mu.Lock()
					renewals = append(renewals, renewal{sent})
					mu.Unlock()
					return // a stops renewing: it expires
				}
				mu.Lock()
				failed = fmt.Errorf("a's KeepAlive: %w", err)
				mu.Unlock()
				return
			}
			_, err := c.Acquire(ctx, name)
			if err == nil {
				mu.Lock()
				taken = time.Now()
				mu.Unlock()
				return
			}
			if !errors.Is(err, backends.ErrLeaseHeld) {
				mu.Lock()
				failed = fmt.Errorf("b's Acquire: %w", err)
				mu.Unlock()
				return
			}
			time.Sleep(500 * time.Microsecond)
		}
	})
	if failed != nil {
		return "", failed
	}
	for _, rn := range renewals {
		if !taken.IsZero() && rn.sent.After(taken) {
			return "", fmt.Errorf("a keep-alive sent %v after another session took the lease succeeded (S3)", rn.sent.Sub(taken))
		}
		// The renewal was handled after it was sent: the session lived
		// at least ttl after that. The clocks are the same host's.
		if !taken.IsZero() && taken.Before(rn.sent.Add(ttl-time.Millisecond)) {
			return "", fmt.Errorf("the lease was taken %v after a renewal was sent, before the renewal's %v had passed (S3)",
				taken.Sub(rn.sent), ttl)
		}
	}
	switch {
	case taken.IsZero() && len(renewals) > 0:
		return raceRenewed, nil
	case taken.IsZero():
		return raceNeither, nil
	}
	if _, err := a.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		return "", fmt.Errorf("a's KeepAlive after b took its lease = %v; want ErrSessionExpired (S3)", err)
	}
	return raceTaken, nil
}

// concurrently runs fn(0) … fn(n-1) at once and waits for them.
func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}
