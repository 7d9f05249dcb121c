package simbazk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
)

// A reservation's turn (queue.go says what reservations are): what a
// waiting session watches — its predecessor, the lease node, the value
// node, the queue — and, when the node it watches goes, how its turn is
// taken: granted by the event alone when the deletion makes it the holder
// (firstAfter), from the reads sent on the event (prefetch), or by reading
// again; and how a lease held through a reservation is read and released.

// valueCache is the value node of a reserved name as of the latest event
// the session received, kept by a watch on the node (watchValue), so that
// a turn granted by an event (firstAfter) needs no read at all: ZooKeeper
// delivers a connection's events in the order of the changes, so a change
// of the value made before the release has told its event (and made the
// cache not ok) before the release's event arrives. Any event of the
// connection's state (a disconnection, a reconnection, whose replayed
// events need not come in order) makes it not ok.
type valueCache struct {
	ok   bool   // data is the node's data as of the latest event
	data []byte // nil: no value node
	seq  int    // events of the value node (and of the connection's state) so far
}

// watchTarget is the node a watch of name is set on: the predecessor of
// the session's reservation, if it has one and is not first; else the
// lease node (prefix + name). alone says the session has no reservation
// of name: its watch also follows the queue (watchQueue), where the
// lease passes from reservation to reservation without touching the
// lease node. head says the session's reservation is first in the queue:
// with no lease node, it holds the lease (headFound).
func (s *session) watchTarget(c *zk.Conn, prefix, name string) (path string, lease, alone, head bool, err error) {
	s.mu.Lock()
	r := s.resv[name]
	mine := ""
	if r != nil && !r.dropped {
		mine = r.path
	}
	s.mu.Unlock()
	if mine == "" {
		return prefix + name, true, r == nil || r.dropped, false, nil
	}
	children, _, err := c.Children(s.paths.queue(name))
	if errors.Is(err, zk.ErrNoNode) {
		return prefix + name, true, false, false, nil
	}
	if err != nil {
		return "", false, false, false, err
	}
	own := mine[strings.LastIndexByte(mine, '/')+1:]
	_, seq, _ := reservationSeq(own)
	pred, predSeq := "", int64(-1)
	for _, child := range children {
		if _, n, ok := reservationSeq(child); ok && n < seq && n > predSeq {
			pred, predSeq = child, n
		}
	}
	if !slices.Contains(children, own) {
		return prefix + name, true, false, false, nil
	}
	if pred == "" {
		s.setFirstAfter(r, prefix+name)
		return prefix + name, true, false, true, nil
	}
	path = s.paths.queue(name) + "/" + pred
	s.mu.Lock()
	noLease := r.noLease
	s.mu.Unlock()
	if !noLease {
		exists, _, err := c.Exists(s.paths.lease(name))
		if err != nil {
			return "", false, false, false, err
		}
		if !exists {
			s.mu.Lock()
			r.noLease = true // none can be created while r exists
			s.mu.Unlock()
		}
		noLease = !exists
	}
	if noLease && pred == firstReservation(children) {
		s.setFirstAfter(r, path)
	} else {
		s.setFirstAfter(r, "")
	}
	return path, false, false, false, nil
}

// headFound reports whether the session's reservation of name, found
// first in the queue with no lease node while its watch was set, was not
// yet told so: its owner holds the lease, and no event will say it (the
// deletion that put it first came before any watch of it, or it was
// created first). It is told once: a turn that then fails is the
// engine's to try again on its own schedule.
func (s *session) headFound(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resv[name]
	if r == nil || r.dropped || r.path == "" || r.headTold {
		return false
	}
	r.headTold = true
	return true
}

// setFirstAfter records, before its watch is set, the node whose deletion
// makes r the holder ("": none known).
func (s *session) setFirstAfter(r *reservation, path string) {
	s.mu.Lock()
	r.firstAfter = path
	s.mu.Unlock()
}

// watchValue sets a watch on the value node of name and reads it into the
// cache of the session's reservation of name, unless the cache is ok.
func (s *session) watchValue(c *zk.Conn, name string) error {
	s.mu.Lock()
	r := s.resv[name]
	if r == nil || r.dropped || r.path == "" || r.val.ok {
		s.mu.Unlock()
		return nil
	}
	seq := r.val.seq
	s.mu.Unlock()
	for range 4 {
		data, _, _, err := c.GetW(s.paths.value(name))
		exists := err == nil
		if errors.Is(err, zk.ErrNoNode) {
			// No node: watch its creation; created meanwhile: read it.
			if exists, _, _, err = c.ExistsW(s.paths.value(name)); err == nil && exists {
				continue
			}
		}
		if err != nil {
			return err
		}
		switch {
		case !exists:
			data = nil
		case data == nil:
			data = []byte{}
		}
		s.mu.Lock()
		if r.val.seq == seq {
			r.val = valueCache{ok: true, data: data, seq: seq}
		}
		s.mu.Unlock()
		return nil
	}
	return nil // it kept changing: the turn reads it
}

// valueEvent records an event of the value node of name, or, with name
// "", of the connection's state: the cache is not ok any more. It reports
// whether the reservation of name wants its watch set again.
func (s *session) valueEvent(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		for _, r := range s.resv {
			r.val.ok = false
			r.val.seq++
		}
		return false
	}
	r := s.resv[name]
	if r == nil {
		return false
	}
	r.val.ok = false
	r.val.seq++
	return !r.dropped
}

// watchQueue sets a watch on the queue of name for a session that has no
// reservation of it (a follower of the holder, a candidate whose
// reservation could not be made): on its children, so that the lease
// passing from one reservation to the next calls the watch functions, or,
// while there is no queue, on its creation. It reports whether it set one:
// not on a root of the first layout, nor for a partition, which have no
// queues.
func (s *session) watchQueue(c *zk.Conn, name string) (bool, error) {
	if !s.gen.queues || !reservable(name) {
		return false, nil
	}
	_, _, _, err := c.ChildrenW(s.paths.queue(name))
	if errors.Is(err, zk.ErrNoNode) {
		_, _, _, err = c.ExistsW(s.paths.queue(name))
	}
	return err == nil, err
}

// turnRead is what a reservation's turn reads: the queue's children, the
// lease node (until a read found none) and the value node.
type turnRead struct {
	done                            chan struct{}
	children                        []string
	leaseData, value                []byte
	lease                           *zk.Stat
	childrenErr, leaseErr, valueErr error
	err                             error
	won                             bool // the event granted r (firstAfter): only the value is read
}

// read sends the turn's reads of name on c: the queue's children, then,
// pipelined behind them, the value node and, if readLease, the lease
// node (B6: the value read sees what the previous holders stored).
func (t *turnRead) read(s *session, c *zk.Conn, name string, readLease bool) error {
	sent := s.w.awaitWrite(s.paths.queue(name))
	defer s.w.stopAwait(sent)
	first := make(chan struct{})
	go func() {
		defer close(first)
		t.children, _, t.childrenErr = c.Children(s.paths.queue(name))
	}()
	select {
	case <-sent.sent:
	case <-first:
	}
	err := parallel(
		func() error {
			if !readLease {
				return nil
			}
			t.leaseData, t.lease, t.leaseErr = c.Get(s.paths.lease(name))
			if t.leaseErr != nil {
				t.lease = nil // go-zookeeper returns an empty Stat with ErrNoNode
			}
			return nil
		},
		func() error { t.value, _, t.valueErr = c.Get(s.paths.value(name)); return nil })
	<-first
	for _, e := range []error{t.childrenErr, absent(t.leaseErr), absent(t.valueErr)} {
		if e != nil && !errors.Is(e, zk.ErrNoNode) {
			return e
		}
	}
	return err
}

// grants reports whether t found r first in the queue and no lease node.
func (t *turnRead) grants(r *reservation) bool {
	mine := r.path[strings.LastIndexByte(r.path, '/')+1:]
	return t.childrenErr == nil && t.lease == nil && firstReservation(t.children) == mine
}

// prefetch sends, as soon as the event that calls for a reservation's
// turn arrives (the deletion of the node it watches), the reads the
// turn's Acquire needs, so that the engine's Acquire, a few goroutine hops
// later, finds them answered or on their way (takeTurn).
func (s *session) prefetch(name, path string) {
	s.mu.Lock()
	r := s.resv[name]
	if r == nil || r.path == "" || r.dropped {
		s.mu.Unlock()
		return
	}
	t := &turnRead{done: make(chan struct{}), won: r.firstAfter != "" && r.firstAfter == path}
	r.pre = t
	readLease := !r.noLease
	if t.won && r.val.ok {
		// Granted by the event, with the value as of it: nothing to read.
		if r.val.data == nil {
			t.valueErr = zk.ErrNoNode
		} else {
			t.value = append([]byte{}, r.val.data...)
		}
		close(t.done)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	go func() {
		defer close(t.done)
		ctx, cancel := context.WithTimeout(context.Background(), reserveBound)
		defer cancel()
		t.err = s.do(ctx, "acquire", name, func(c *zk.Conn) error {
			if t.won {
				t.value, _, t.valueErr = c.Get(s.paths.value(name))
				return absent(t.valueErr)
			}
			return t.read(s, c, name, readLease)
		})
	}()
}

// takeTurn answers an Acquire of name by a session with the reservation r:
// one round trip of reads (turnRead), sent by the event that called for
// the turn (prefetch), else now. If r
// is first and no lease node exists, the session holds name with r's
// token; the digest is the session node's latest (lastDigest), which
// taking the lease did not change. done is false if r is gone: the caller
// acquires as if it had none.
//
// A prefetched answer may be older than the Acquire, so it is used only if
// it grants, which does not go stale: no lease node can be created, nor a
// reservation queued before r, while r exists, and only the holder, r's
// session from then on, writes the value node. Any other answer is read
// again (the watch may have been used up since, so no event would have
// told of a change).
func (s *session) takeTurn(ctx context.Context, name string, r *reservation) (g backends.Grant, done bool, err error) {
	const op = "acquire"
	granted := false
	defer func() {
		if !granted {
			s.watches.rearm(name) // the watch that called for this turn is used up
		}
	}()
	// No lease node can be created while r exists: once a read after its
	// creation found none, there is none to read.
	s.mu.Lock()
	readLease := !r.noLease
	t := r.pre
	r.pre = nil
	s.mu.Unlock()
	if t != nil {
		select {
		case <-t.done:
		case <-ctx.Done():
			return backends.Grant{}, true, s.fail(ctx, op, name, ctx.Err())
		}
		if t.err != nil || !t.won && !t.grants(r) {
			t = nil // read again, within ctx: only a grant does not go stale
		}
	} else {
		t = nil
	}
	if t != nil && t.won {
		// Granted by the event, perhaps without a call: the session must
		// still be alive (s.do checks that otherwise).
		if err := s.alive(ctx, op, name); err != nil {
			return backends.Grant{}, true, err
		}
	}
	if t == nil {
		t = &turnRead{}
		err = s.do(ctx, op, name, func(c *zk.Conn) error { return t.read(s, c, name, readLease) })
		if err != nil {
			return backends.Grant{}, true, s.fail(ctx, op, name, err)
		}
	}
	children, leaseData, lease, value, valueErr, childrenErr := t.children, t.leaseData, t.lease, t.value, t.valueErr, t.childrenErr
	if !t.won { // else the event granted r (firstAfter)
		mine := r.path[strings.LastIndexByte(r.path, '/')+1:]
		if errors.Is(childrenErr, zk.ErrNoNode) || !slices.Contains(children, mine) {
			// Gone behind the session's back.
			s.mu.Lock()
			if s.resv[name] == r {
				delete(s.resv, name)
			}
			s.mu.Unlock()
			return backends.Grant{}, false, nil
		}
		if lease == nil {
			s.mu.Lock()
			r.noLease = true
			s.mu.Unlock()
		} else {
			sid, identity := parseLeaseData(leaseData)
			if sid == s.id {
				return backends.Grant{}, false, nil // a lease node of its own: adopted by the multi's path
			}
			return backends.Grant{}, true, s.heldBy(name, sid, identity, lease.Czxid)
		}
		if first := firstReservation(children); first != mine {
			if sid, _, _ := reservationSeq(first); sid == s.id {
				// A reservation of its own it did not know of (a creation
				// whose reply was lost): delete it, and look again.
				path := s.paths.queue(name) + "/" + first
				err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(path, -1) })
				if err != nil && !errors.Is(err, zk.ErrNoNode) {
					return backends.Grant{}, true, s.fail(ctx, op, name, err)
				}
				return backends.Grant{}, false, nil
			}
			h, err := s.queueHolder(ctx, op, name, first)
			if err != nil {
				return backends.Grant{}, true, err
			}
			if h.Session == "" {
				return backends.Grant{}, false, nil // it went meanwhile: try again
			}
			return backends.Grant{}, true, fmt.Errorf("%s: %w", opName(op, name), &backends.HeldError{Name: name, Holder: h})
		}
	}
	if now, ok := s.storeNow(); ok && now.Before(s.gen.guardEnd) {
		return backends.Grant{}, true, s.recovering(name, s.gen.guardEnd.Sub(now))
	}
	s.b.noteToken(int64(r.token))
	s.mu.Lock()
	if s.resv[name] != r || r.dropped {
		s.mu.Unlock()
		return backends.Grant{}, false, nil // stopped meanwhile: unreserve deletes it
	}
	delete(s.resv, name)
	s.held[name] = heldLease{token: r.token, queue: r.path}
	s.qLeases++
	s.qVersion++
	s.mu.Unlock()
	granted = true
	switch {
	case errors.Is(valueErr, zk.ErrNoNode):
		value = nil
	case value == nil:
		value = []byte{}
	}
	return backends.Grant{Token: r.token, Value: value, Digest: s.lastDigest(s.knownGroups(0))}, true, nil
}

// heldBy is the refusal of name held by session sid.
func (s *session) heldBy(name, sid, identity string, czxid int64) error {
	return fmt.Errorf("%s: %w", opName("acquire", name), &backends.HeldError{
		Name: name, Holder: backends.Holder{Session: backends.SessionID(sid), Identity: identity, Token: backends.Token(s.gen.base + czxid)}})
}

// queueHolder reads the reservation child of name's queue: the holder it
// names, or a zero Holder if it is gone.
func (s *session) queueHolder(ctx context.Context, op, name, child string) (backends.Holder, error) {
	var (
		data []byte
		st   *zk.Stat
	)
	err := s.do(ctx, op, name, func(c *zk.Conn) error {
		var err error
		data, st, err = c.Get(s.paths.queue(name) + "/" + child)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Holder{}, nil
	}
	if err != nil {
		return backends.Holder{}, s.fail(ctx, op, name, err)
	}
	sid, identity := parseLeaseData(data)
	return backends.Holder{Session: backends.SessionID(sid), Identity: identity, Token: backends.Token(s.gen.base + st.Czxid)}, nil
}

// queued answers an Acquire whose multi found name's queue node: the
// lease node's holder, else the first reservation's, is refused (or, if it
// is this session, a reservation of its own it did not know of, deleted so
// that the lease passes on); an empty queue node is deleted so that the
// lease node can be created. retry says to try the multi again.
func (s *session) queued(ctx context.Context, name string) (g backends.Grant, retry bool, err error) {
	const op = "acquire"
	var (
		children []string
		lease    bool
	)
	err = s.do(ctx, op, name, func(c *zk.Conn) error {
		return parallel(
			func() error {
				var err error
				children, _, err = c.Children(s.paths.queue(name))
				return absent(err)
			},
			func() error {
				var err error
				lease, _, err = c.Exists(s.paths.lease(name))
				return err
			})
	})
	if err != nil {
		return backends.Grant{}, false, s.fail(ctx, op, name, err)
	}
	if lease {
		return s.taken(ctx, name)
	}
	first := firstReservation(children)
	if first == "" {
		err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(s.paths.queue(name), -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNotEmpty) {
			return backends.Grant{}, false, s.fail(ctx, op, name, err)
		}
		return backends.Grant{}, true, nil
	}
	if sid, _, _ := reservationSeq(first); sid == s.id {
		path := s.paths.queue(name) + "/" + first
		if !s.knowsReservation(name, path) {
			err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(path, -1) })
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return backends.Grant{}, false, s.fail(ctx, op, name, err)
			}
		}
		return backends.Grant{}, true, nil
	}
	h, err := s.queueHolder(ctx, op, name, first)
	if err != nil || h.Session == "" {
		return backends.Grant{}, err == nil, err
	}
	return backends.Grant{}, false, fmt.Errorf("%s: %w", opName(op, name), &backends.HeldError{Name: name, Holder: h})
}

// forget drops the session's record of name, which it no longer holds.
func (s *session) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(name)
}

// forgetLocked is forget with s.mu held.
func (s *session) forgetLocked(name string) {
	if h, ok := s.held[name]; ok && h.queue != "" {
		s.qLeases--
		s.qVersion++
	}
	delete(s.held, name)
}

// releaseQueued releases a lease held through the reservation h.queue: one
// delete, which does not change the session node, so the digest is its
// latest Stat's (lastDigest). The next reservation, if any, holds the
// lease from then on.
func (s *session) releaseQueued(ctx context.Context, name string, h heldLease) (backends.Digest, error) {
	const op = "release"
	err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(h.queue, -1) })
	// The turn that granted the lease used up the session's watch of name
	// and did not set it again (takeTurn): a holder waits for no release,
	// and the engine stops its watch when it adopts the lease. A grant the
	// engine did not adopt (a hand-over's give-back, a late reply) leaves
	// the watch on: set it again, or the session would not hear of the
	// name's next release.
	defer s.watches.rearm(name)
	switch {
	case err == nil:
		s.forget(name)
		return s.lastDigest(s.knownGroups(0)), nil
	case errors.Is(err, zk.ErrNoNode):
		s.forget(name) // gone behind the session's back
		return s.readDigest(ctx, op, name)
	}
	return backends.Digest{}, s.fail(ctx, op, name, err)
}
