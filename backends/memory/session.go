package memory

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/sessionid"
)

// OpenSession opens a session that expires opts.TTL after its last renewal,
// as measured by the store clock, with opts.Identity recorded. A TTL longer
// than the store's MaxLease is clamped to it; the reply says what was
// granted. A TTL ≤ 0 or an invalid identity is an error. Sessions may be
// opened while the store is within its restart guard; only acquisitions
// wait.
func (s *Store) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if err := args.Session(opts, 0); err != nil {
		return nil, backends.Renewal{}, err
	}
	ttl := min(opts.TTL, s.maxLease)
	var (
		sess *session
		r    backends.Renewal
	)
	err := s.call(ctx, mOpenSession, func(now int64) error {
		rec := &sessionRec{
			id:       sessionid.New(),
			identity: opts.Identity,
			ttl:      ttl,
			expiry:   now + int64(ttl),
			owned:    make(map[string]backends.Token),
		}
		s.sessions[rec.id] = rec
		heap.Push(&s.expiries, rec)
		sess = &session{s: s, id: rec.id}
		r = s.renewal(rec, now)
		return nil
	})
	if err != nil {
		return nil, backends.Renewal{}, err
	}
	return sess, r, nil
}

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

// Close ends the session, releasing its leases and memberships (S4).
func (c *session) Close(ctx context.Context) error {
	return c.s.call(ctx, mClose, func(now int64) error {
		if rec := c.s.sessions[c.id]; rec != nil {
			c.s.endSession(rec)
		}
		return nil
	})
}

func (s *Store) renewal(rec *sessionRec, now int64) backends.Renewal {
	return backends.Renewal{
		Remaining: time.Duration(rec.expiry - now),
		StoreTime: storeTime(now),
		Digest:    s.digest(rec),
	}
}

// digest costs O(groups joined), never O(leases). Group epochs and the
// session's own membership revision are store-wide revisions, so their
// maximum grows whenever any of them changes.
func (s *Store) digest(rec *sessionRec) backends.Digest {
	g := rec.memberRev
	for _, gr := range rec.groups {
		g = max(g, gr.epoch)
	}
	return backends.Digest{Leases: len(rec.owned), Version: rec.version, Groups: g}
}

// endSession ends a session that expired, was closed or was expired by a
// fault: its leases are released, its memberships ended, watchers woken.
// Called with mu held.
func (s *Store) endSession(rec *sessionRec) {
	for name := range rec.owned {
		s.dropLease(rec.id, name)
	}
	rec.owned = nil
	for name, gr := range rec.groups {
		s.leaveGroup(rec, name, gr)
	}
	delete(s.sessions, rec.id)
	heap.Remove(&s.expiries, rec.index)
}

// sessionRec is the store's record of a session.
type sessionRec struct {
	id        backends.SessionID
	identity  string
	ttl       time.Duration
	expiry    int64 // store nanoseconds
	index     int   // in Store.expiries
	owned     map[string]backends.Token
	version   uint64 // Digest.Version
	memberRev uint64 // revision of the session's last leave
	groups    map[string]*groupRec
}

// expiryHeap is a min-heap of sessions by expiry, so that reaping costs
// O(log n) per expired session and O(1) when none expired.
type expiryHeap []*sessionRec

func (h expiryHeap) Len() int { return len(h) }

func (h expiryHeap) Less(i, j int) bool { return h[i].expiry < h[j].expiry }

func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *expiryHeap) Push(x any) {
	rec := x.(*sessionRec)
	rec.index = len(*h)
	*h = append(*h, rec)
}

func (h *expiryHeap) Pop() any {
	old := *h
	n := len(old)
	rec := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	rec.index = -1
	return rec
}
