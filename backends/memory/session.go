package memory

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
)

// session is a client's handle on a session record of a Store. It holds only
// the id: every call looks the record up, so a session the store forgot
// (expired, closed, lost in a restart) stays dead (S3).
type session struct {
	s  *Store
	id backends.SessionID
}

var (
	_ backends.Backend    = (*Store)(nil)
	_ backends.StoreClock = (*Store)(nil)
	_ backends.Inspector  = (*Store)(nil)
	_ backends.Session    = (*session)(nil)
	_ backends.Notifier   = (*session)(nil)
)

// ID returns the session's id, 128 random bits in hex (S2).
func (c *session) ID() backends.SessionID { return c.id }

// live returns the session's record, or an error wrapping ErrSessionExpired.
// Called with mu held, after expired sessions were reaped.
func (c *session) live(m method) (*sessionRec, error) {
	rec := c.s.sessions[c.id]
	if rec == nil {
		return nil, fmt.Errorf("memory: %s: session %s: %w", m, c.id, backends.ErrSessionExpired)
	}
	return rec, nil
}

// KeepAlive extends the session's expiry to its granted TTL from now on the
// store clock. It costs O(groups joined).
func (c *session) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	var r backends.Renewal
	err := c.s.call(ctx, mKeepAlive, func(now int64) error {
		rec, err := c.live(mKeepAlive)
		if err != nil {
			return err
		}
		rec.expiry = now + int64(rec.ttl)
		heap.Fix(&c.s.expiries, rec.index)
		r = c.s.renewal(rec, now)
		return nil
	})
	return r, err
}

// Owned lists the leases the session holds, sorted by name, with the digest.
func (c *session) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	var (
		held []backends.Held
		d    backends.Digest
	)
	err := c.s.call(ctx, mOwned, func(now int64) error {
		rec, err := c.live(mOwned)
		if err != nil {
			return err
		}
		held = make([]backends.Held, 0, len(rec.owned))
		for name, tok := range rec.owned {
			held = append(held, backends.Held{Name: name, Token: tok})
		}
		slices.SortFunc(held, func(a, b backends.Held) int { return cmp.Compare(a.Name, b.Name) })
		d = c.s.digest(rec)
		return nil
	})
	if err != nil {
		return nil, backends.Digest{}, err
	}
	return held, d, nil
}

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
		if now < s.guardUntil {
			return fmt.Errorf("memory: acquire %q: %w after a restart that lost the state, no grants for %v: %w",
				name, backends.ErrRecovering, time.Duration(s.guardUntil-now), backends.ErrLeaseHeld)
		}
		tok := s.nextToken(now)
		s.leases[name] = &leaseRec{holder: rec, token: tok}
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

// Join makes the session a member of group.
func (c *session) Join(ctx context.Context, group string, partitions int) error {
	if err := args.Group("join", group, partitions); err != nil {
		return err
	}
	return c.s.call(ctx, mJoin, func(now int64) error {
		s := c.s
		rec, err := c.live(mJoin)
		if err != nil {
			return err
		}
		gr := s.groups[group]
		if gr == nil {
			gr = &groupRec{partitions: partitions, members: make(map[backends.SessionID]*sessionRec)}
			s.groups[group] = gr
		}
		if gr.partitions != partitions {
			return fmt.Errorf("memory: join %q with %d partitions, its members have %d: %w",
				group, partitions, gr.partitions, backends.ErrGroupMismatch)
		}
		if _, ok := gr.members[rec.id]; ok {
			return nil
		}
		gr.members[rec.id] = rec
		if rec.groups == nil {
			rec.groups = make(map[string]*groupRec)
		}
		rec.groups[group] = gr
		gr.epoch = s.nextRev()
		return nil
	})
}

// Leave ends the session's membership of group.
func (c *session) Leave(ctx context.Context, group string) error {
	if err := args.Name("leave", group); err != nil {
		return err
	}
	return c.s.call(ctx, mLeave, func(now int64) error {
		rec, err := c.live(mLeave)
		if err != nil {
			return err
		}
		if gr := rec.groups[group]; gr != nil {
			c.s.leaveGroup(rec, group, gr)
		}
		return nil
	})
}

// Members returns the group's live members and partition holders.
func (c *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	if err := args.Name("members", group); err != nil {
		return backends.GroupView{}, err
	}
	var v backends.GroupView
	err := c.s.call(ctx, mMembers, func(now int64) error {
		s := c.s
		if _, err := c.live(mMembers); err != nil {
			return err
		}
		gr := s.groups[group]
		if gr == nil {
			return nil
		}
		v.Partitions = gr.partitions
		v.Members = make([]backends.SessionID, 0, len(gr.members))
		for id := range gr.members {
			v.Members = append(v.Members, id)
		}
		slices.Sort(v.Members)
		v.Holders = make([]backends.SessionID, gr.partitions)
		for i := range v.Holders {
			if l := s.leases[backends.PartitionName(group, i)]; l != nil {
				v.Holders[i] = l.holder.id
			}
		}
		return nil
	})
	return v, err
}

// Close ends the session, releasing its leases and memberships (S4).
func (c *session) Close(ctx context.Context) error {
	return c.s.call(ctx, mClose, func(now int64) error {
		if rec := c.s.sessions[c.id]; rec != nil {
			c.s.endSession(rec)
		}
		return nil
	})
}

// Watch calls fn, on the goroutine of the store call that noticed it and
// after the store's mutex is released, each time name is released, its
// holder's session is closed or found expired (expiry is noticed lazily, by
// the next call to the store), or the store restarts; never for a release by
// this session itself, which tells it nothing new. fn must return quickly;
// calls of one watch never overlap. The returned stop waits for a call of fn in
// progress on another goroutine, so fn must not call its own stop.
func (c *session) Watch(name string, fn func()) (stop func()) {
	return c.s.watches.AddFor(string(c.id), name, fn)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
