package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
)

// Acquire takes name for the session; see [backends.Session.Acquire]. During
// the restart guard it fails with an error wrapping [backends.ErrLeaseHeld].
func (c *session) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	if err := args.Name("acquire", name); err != nil {
		return backends.Grant{}, err
	}
	var g backends.Grant
	err := c.s.call(ctx, mAcquire, func(now int64) error {
		s := c.s
		rec, err := c.live(mAcquire)
		if err != nil {
			return err
		}
		if l := s.leases[name]; l != nil {
			if l.holder != rec {
				return fmt.Errorf("memory: acquire %q: %w", name, &backends.HeldError{Name: name, Holder: l.describe(now)})
			}
			g = backends.Grant{Token: l.token, Value: clone(s.values[name]), Digest: s.digest(rec)}
			return nil
		}
		if e := s.recovering(now); e != nil {
			return fmt.Errorf("memory: acquire %q: %w", name, e)
		}
		tok := s.nextToken(now)
		l := &leaseRec{holder: rec, token: tok}
		s.leases[name] = l
		s.holderChanged(name, l.describe(now))
		rec.owned[name] = tok
		rec.version++
		s.touchPartition(name)
		g = backends.Grant{Token: tok, Value: clone(s.values[name]), Digest: s.digest(rec)}
		return nil
	})
	return g, err
}

// Release gives up name if the session holds it with token, waking the
// watchers of other sessions; otherwise it does nothing.
func (c *session) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	if err := args.Name("release", name); err != nil {
		return backends.Digest{}, err
	}
	var d backends.Digest
	err := c.s.call(ctx, mRelease, func(now int64) error {
		rec, err := c.live(mRelease)
		if err != nil {
			return err
		}
		if l := c.s.leases[name]; l != nil && l.holder == rec && l.token == token {
			delete(rec.owned, name)
			rec.version++
			c.s.dropLease(rec.id, name)
		}
		d = c.s.digest(rec)
		return nil
	})
	return d, err
}

// Holder returns the holder of name.
func (c *session) Holder(ctx context.Context, name string) (backends.Holder, error) {
	if err := args.Name("holder", name); err != nil {
		return backends.Holder{}, err
	}
	var h backends.Holder
	err := c.s.call(ctx, mHolder, func(now int64) error {
		if _, err := c.live(mHolder); err != nil {
			return err
		}
		if l := c.s.leases[name]; l != nil {
			h = l.describe(now)
		}
		return nil
	})
	return h, err
}

// PutValue stores a copy of value beside the lease name.
func (c *session) PutValue(ctx context.Context, name string, token backends.Token, value []byte) error {
	if err := args.Value("put value", name, value); err != nil {
		return err
	}
	return c.s.call(ctx, mPutValue, func(now int64) error {
		rec, err := c.live(mPutValue)
		if err != nil {
			return err
		}
		if l := c.s.leases[name]; l == nil || l.holder != rec || l.token != token {
			return fmt.Errorf("memory: put value %q with token %d: %w", name, token, backends.ErrNotHolder)
		}
		c.s.values[name] = append([]byte{}, value...)
		return nil
	})
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// dropLease deletes the lease record of name (keeping its value), bumps the
// epoch of a group it is a partition of, and wakes the watchers of sessions
// other than its holder, from. The caller updates the holder's owned set.
// Called with mu held.
func (s *Store) dropLease(from backends.SessionID, name string) {
	if l := s.leases[name]; l != nil {
		s.holderChanged(name, backends.Holder{Token: l.token})
	}
	delete(s.leases, name)
	s.touchPartition(name)
	s.pending = append(s.pending, release{from, name})
}

// leaseRec is the store's record of a held lease. Released leases have no
// record; their values live on in Store.values.
type leaseRec struct {
	holder *sessionRec
	token  backends.Token
}

// describe returns the lease's holder as of the store clock now. Called with
// mu held.
func (l *leaseRec) describe(now int64) backends.Holder {
	return backends.Holder{
		Session:   l.holder.id,
		Identity:  l.holder.identity,
		Token:     l.token,
		Remaining: time.Duration(l.holder.expiry - now),
	}
}
