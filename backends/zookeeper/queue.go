package simbazk

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
)

// Reservations: a session refused a lease that it goes on waiting for (the
// engine watches the name right after the refusal) queues a sequential
// ephemeral node, its reservation, under the name's queue node r/q/<name>,
// and watches its predecessor. The holder of a name is its lease node
// while that exists, else the lowest reservation: a release then hands the
// lease over without a write, and the next holder's Acquire is one round
// trip of reads. Three rules keep one holder at a time and tokens in grant
// order:
//
//   - a lease node is created only in a multi that also creates and
//     deletes the queue node, so only while no queue exists (ZooKeeper
//     refuses to delete a queue node with children, and a reservation is
//     created only under an existing queue node);
//   - so every reservation was created after the lease node of its time,
//     and reservations are granted in the order of their sequence numbers,
//     which is the order of their czxids: the token of a lease held
//     through a reservation, the root's base plus its czxid, is above
//     every earlier holder's;
//   - a reservation at the front stays the holder until it is deleted: a
//     read that finds it there may be stale, but never wrong.
//
// The engine's Watch that follows a refusal creates the reservation (the
// watch goroutine does, so Watch does not wait): a Watch of a name reserves
// it only if the session's last call about that name was an Acquire that
// another session's lease refused (the engine watches right after such a
// refusal, before it calls anything else about the name; a follower of the
// holder, the runtime's WatchHolder, reads the holder before it watches). Its
// stop deletes the reservation at once unless it became the lease, so a
// session that stops contending — an election stopped, a Lock whose context
// ended, a TryLock's refusal — keeps no one waiting. Partitions (names with
// a ".<i>" suffix) never reserve: group members watch partitions they may
// not want. Nor does a root of the first layout (simbazk 1), whose clients
// do not see queues.

// reserveBound bounds each call the watch goroutine makes for reservations.
const reserveBound = 10 * time.Second

// reservation is one of this session's reservations.
type reservation struct {
	path    string         // the node, once created; "" before, or if it failed
	token   backends.Token // base + its czxid
	ready   chan struct{}  // closed once the creation is over, made or not
	dropped bool           // nobody here waits for it any more: delete it (guarded by s.mu)
	noLease bool           // a read after its creation found no lease node (guarded by s.mu)
	pre     *turnRead      // the turn's reads, sent on the event that called for it (guarded by s.mu)

	// firstAfter is the node whose deletion makes r the holder (guarded by
	// s.mu): the lease node, watched while r was first in the queue, or the
	// reservation just before r, watched while it was first and no lease
	// node existed. No reservation can be queued before r, nor a lease node
	// created, while r exists, so the deletion's event is the grant.
	firstAfter string
	val        valueCache // the value node, as the events received tell it (guarded by s.mu)
	headTold   bool       // a watch call told that it was found the holder (headFound; guarded by s.mu)
}

// reservable reports whether name may be reserved: not a partition.
func reservable(name string) bool {
	_, _, ok := backends.SplitPartition(name)
	return !ok
}

// refused notes that the store refused the session name: a Watch of it
// that follows, before any other call about name, reserves it.
func (s *session) refused(name string) {
	if !reservable(name) || !s.gen.queues {
		return
	}
	s.mu.Lock()
	if s.resv[name] == nil {
		s.refusedLast[name] = true
	}
	s.mu.Unlock()
}

// called notes a call about name other than a refused Acquire: a Watch that
// follows it does not follow a refusal.
func (s *session) called(name string) {
	s.mu.Lock()
	delete(s.refusedLast, name)
	s.mu.Unlock()
}

// reserve asks the watch goroutine to create a reservation of name, if the
// session's last call about name was a refused Acquire and the session has
// no reservation of it.
func (s *session) reserve(name string) {
	s.mu.Lock()
	ok := s.refusedLast[name]
	delete(s.refusedLast, name)
	if !ok || s.resv[name] != nil {
		s.mu.Unlock()
		return
	}
	if _, held := s.held[name]; held {
		s.mu.Unlock()
		return
	}
	r := &reservation{ready: make(chan struct{})}
	s.resv[name] = r
	s.mu.Unlock()
	s.watches.toReserve(name, r)
}

// unreserve deletes the session's reservation of name, unless it became
// the lease: nobody here waits for it any more.
func (s *session) unreserve(name string) {
	s.mu.Lock()
	delete(s.refusedLast, name)
	r := s.resv[name]
	if r == nil {
		s.mu.Unlock()
		return
	}
	delete(s.resv, name)
	r.dropped = true
	path := r.path
	s.mu.Unlock()
	if path != "" {
		s.watches.toRemove(path)
	}
}

// reserved reports whether the session has a reservation of name.
func (s *session) reserved(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resv[name]
	return r != nil && r.path != "" && !r.dropped
}

// reservationOf returns the session's reservation of name, once its
// creation is over, or nil.
func (s *session) reservationOf(ctx context.Context, name string) *reservation {
	s.mu.Lock()
	r := s.resv[name]
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil
	case <-s.dead:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.path == "" || r.dropped || s.resv[name] != r {
		return nil
	}
	return r
}

// makeReservation creates r, a reservation of name (on the watch
// goroutine): a sequential ephemeral node under the queue node, created
// with the queue node if need be, in a multi that also writes the session
// node, whose Stat gives the transaction's zxid: the reservation's czxid.
// A creation whose outcome is unknown leaves name to sweep.
func (s *session) makeReservation(name string, r *reservation) {
	defer close(r.ready)
	ctx, cancel := context.WithTimeout(context.Background(), reserveBound)
	defer cancel()
	var (
		path  string
		czxid int64
		err   error
	)
	for range 4 {
		var failed int
		err = s.do(ctx, "reserve", name, func(c *zk.Conn) error {
			res, err := c.Multi(
				&zk.CreateRequest{Path: s.paths.reservationPrefix(name, s.id), Data: leaseData(s.id, string(s.identity)),
					Acl: s.b.acl, Flags: zk.FlagEphemeralSequential},
				&zk.SetDataRequest{Path: s.paths.session(s.id), Data: s.identity, Version: -1})
			failed, err = multiErr(res, err)
			if err == nil {
				path, czxid = res[0].String, res[1].Stat.Mzxid
				s.digest(res[1].Stat, 0) // notes the session node's Stat (lastDigest)
			}
			return err
		})
		if !errors.Is(err, zk.ErrNoNode) || failed != 0 {
			break
		}
		// No queue node: create it (a container, which ZooKeeper deletes
		// once it is empty again), and the layout if that is gone too.
		err = s.do(ctx, "reserve", name, func(c *zk.Conn) error {
			return s.b.ensureNode(c, func() error {
				_, err := c.CreateContainer(s.paths.queue(name), nil, zk.FlagContainer, s.b.acl)
				return err
			})
		})
		if err != nil {
			break
		}
	}
	s.mu.Lock()
	dropped := r.dropped
	if err == nil {
		r.path, r.token = path, backends.Token(s.gen.base+czxid)
	} else if !r.dropped && s.resv[name] == r {
		delete(s.resv, name)
	}
	s.mu.Unlock()
	switch {
	case err == nil && dropped:
		s.watches.toRemove(path)
	case err != nil && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrNoAuth):
		// It may have been made: find it by its name and delete it.
		s.watches.toSweep(name)
	}
}

// deleteReservation deletes a reservation node; it reports false if that
// must be tried again (the store could not be reached).
func (s *session) deleteReservation(path string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), reserveBound)
	defer cancel()
	err := s.do(ctx, "unreserve", "", func(c *zk.Conn) error { return c.Delete(path, -1) })
	return err == nil || errors.Is(err, zk.ErrNoNode) || s.isDead()
}

// sweep deletes the session's reservations of name that it does not know
// of (a creation whose reply was lost); it reports false if that must be
// tried again.
func (s *session) sweep(name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), reserveBound)
	defer cancel()
	var children []string
	err := s.do(ctx, "unreserve", name, func(c *zk.Conn) error {
		var err error
		children, _, err = c.Children(s.paths.queue(name))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return true
	}
	if err != nil {
		return s.isDead()
	}
	ok := true
	for _, child := range children {
		path := s.paths.queue(name) + "/" + child
		if sid, _, _ := reservationSeq(child); sid != s.id || s.knowsReservation(name, path) {
			continue
		}
		ok = s.deleteReservation(path) && ok
	}
	return ok
}

// knowsReservation reports whether path is the session's reservation of
// name, or the node a lease of it is held through.
func (s *session) knowsReservation(name, path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.resv[name]; r != nil && (r.path == path || r.path == "") {
		return true // "": a creation in flight
	}
	return s.held[name].queue == path
}

// queuedLease is a lease held through a reservation.
type queuedLease struct{ name, path string }

// queuedLeases lists the leases the session holds through reservations.
func (s *session) queuedLeases() []queuedLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	var q []queuedLease
	for name, h := range s.held {
		if h.queue != "" {
			q = append(q, queuedLease{name, h.queue})
		}
	}
	return q
}
