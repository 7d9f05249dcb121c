package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"github.com/simba-go/simba/backends"
)

// MaxPermits is the largest size of a [Semaphore]: each permit is a lease
// the client may wait for, so a semaphore's waiters cost a lease per permit.
const MaxPermits = 1024

// Semaphore lets at most n holders across the cluster work at once (§13).
// Each of its n permits is a lease of its own, named after the semaphore
// ("jobs" has the permits "jobs.permit-0" … "jobs.permit-2" when n is 3), so
// that a permit is a [Term] like any lock's: a fencing token that rises with
// every grant of that permit, a deadline, [Term.Done] and
// [Term.EnsureValid], the same hand-off and the same failure modes. Since no
// lease has two valid terms at once (D3), no more than n permits are valid at
// once.
//
// Every process must use the same n for a name: processes that disagree are
// bounded by the largest n among them. A fenced resource checks a permit's
// token against the permit's own name ([Term.Name]), as it would a lock's.
//
// Create one with [Client.Semaphore]; it is safe for concurrent use.
type Semaphore struct {
	c       *Client
	name    string
	permits []string
}

// Semaphore returns the semaphore name of n permits on this client. It makes
// no call: permits are acquired by [Semaphore.Acquire] and
// [Semaphore.TryAcquire]. name must be a valid lease name once the permits'
// suffix is added (at most 128 characters in all, T1), and n between 1 and
// [MaxPermits].
func (c *Client) Semaphore(name string, n int) (*Semaphore, error) {
	if n < 1 || n > MaxPermits {
		return nil, fmt.Errorf("simba: semaphore %q: %d permits; want 1 to %d", name, n, MaxPermits)
	}
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: semaphore: %w", err)
	}
	s := &Semaphore{c: c, name: name, permits: make([]string, n)}
	for i := range s.permits {
		s.permits[i] = PermitName(name, i)
	}
	if err := backends.ValidateName(s.permits[n-1]); err != nil {
		return nil, fmt.Errorf("simba: semaphore %q of %d permits: its last permit's name: %w", name, n, err)
	}
	return s, nil
}

// PermitName returns the lease name of permit i of the semaphore name, the
// name its terms carry.
func PermitName(name string, i int) string { return name + ".permit-" + strconv.Itoa(i) }

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Size returns how many permits the semaphore has.
func (s *Semaphore) Size() int { return len(s.permits) }

// TryAcquire makes one attempt at each permit, starting at a random one,
// and returns the first it gets; or an error matching [ErrLeaseHeld] if
// every permit is held (by other nodes, or by this client's own Acquires).
func (s *Semaphore) TryAcquire(ctx context.Context) (*Term, error) {
	if ctx == nil {
		return nil, fmt.Errorf("simba: semaphore %q: TryAcquire: nil context: %w", s.name, ErrNilArgument)
	}
	first := rand.IntN(len(s.permits))
	for i := range s.permits {
		name := s.permits[(first+i)%len(s.permits)]
		t, err := s.c.TryLock(ctx, name)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, ErrLeaseHeld) {
			return nil, fmt.Errorf("simba: semaphore %q: %w", s.name, err)
		}
	}
	return nil, fmt.Errorf("simba: semaphore %q: all %d permits are held: %w", s.name, len(s.permits), ErrLeaseHeld)
}

// Acquire returns a permit, waiting until one is free or ctx ends. It first
// tries every permit once, as [Semaphore.TryAcquire] does; if all are held
// it waits for all of them at once, as [Client.Lock] waits for one, and
// keeps the first it wins: a release of any permit wakes it. A permit won
// by the same wait after the first is released at once.
//
// A waiting Acquire costs what a waiting Lock costs, once per permit.
func (s *Semaphore) Acquire(ctx context.Context) (*Term, error) {
	t, err := s.TryAcquire(ctx)
	if err == nil || !errors.Is(err, ErrLeaseHeld) {
		return t, err
	}
	wait, cancel := context.WithCancel(ctx)
	defer cancel()
	type won struct {
		t   *Term
		err error
	}
	results := make(chan won, len(s.permits))
	var wg sync.WaitGroup
	for _, name := range s.permits {
		wg.Go(func() {
			t, err := s.c.Lock(wait, name)
			results <- won{t, err}
		})
	}
	var (
		kept     *Term
		firstErr error
	)
	for range s.permits {
		r := <-results
		switch {
		case r.err != nil:
			if firstErr == nil && wait.Err() == nil {
				firstErr = r.err // a failure of its own, not our cancellation
				cancel()
			}
		case kept == nil && firstErr == nil:
			kept = r.t
			cancel() // the other waits end
		default:
			// Won after the first (or after a failure): give it back at once,
			// on the caller's context so that it is not cut short.
			if err := s.c.Unlock(context.WithoutCancel(ctx), r.t); err != nil {
				s.c.d.logger.Debug("simba: semaphore: releasing a second permit", "semaphore", s.name, "term", r.t.String(), "err", err)
			}
		}
	}
	wg.Wait()
	switch {
	case kept != nil:
		return kept, nil
	case firstErr != nil:
		return nil, fmt.Errorf("simba: semaphore %q: %w", s.name, firstErr)
	default:
		return nil, fmt.Errorf("simba: semaphore %q: waiting for one of %d permits: %w", s.name, len(s.permits), ctx.Err())
	}
}

// Release gives back the permit held with term t, as [Client.Unlock] does:
// the term is revoked, then its lease is released with its token (T5).
// Releasing a permit that already ended returns nil.
func (s *Semaphore) Release(ctx context.Context, t *Term) error {
	if t == nil {
		return fmt.Errorf("simba: semaphore %q: Release: nil term: %w", s.name, ErrNilArgument)
	}
	if !slices.Contains(s.permits, t.Name()) {
		return fmt.Errorf("simba: semaphore %q: Release of %v, which is not one of its permits", s.name, t)
	}
	if err := s.c.Unlock(ctx, t); err != nil {
		return fmt.Errorf("simba: semaphore %q: %w", s.name, err)
	}
	return nil
}
