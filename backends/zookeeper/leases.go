package simbazk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
)

// storeNow estimates the store's clock now from the last renewal, or
// returns false.
func (s *session) storeNow() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.storeTime.IsZero() {
		return time.Time{}, false
	}
	return s.storeTime.Add(time.Since(s.storeAt)), true
}

// whyRecovering is what the amnesia guard of the root says it guards
// against.
func (b *Backend) whyRecovering() string {
	return "the root " + b.root + " is new or was created again, and may replace one ZooKeeper lost"
}

// recovering is the refusal of an acquisition of name within the amnesia
// guard, wait before its end; it logs the guard once per guard period.
func (s *session) recovering(name string, wait time.Duration) error {
	e := &backends.RecoveringError{
		Remaining: wait,
		Until:     s.gen.guardEnd.UTC(),
		MaxLease:  s.gen.guardEnd.Sub(time.UnixMilli(s.gen.ctime)),
		Why:       s.b.whyRecovering(),
	}
	s.b.guardLog.Refused(s.b.logger, "simbazk", e, slog.String("root", s.b.root))
	return fmt.Errorf("%s: %w", opName("acquire", name), e)
}

// Acquire creates the lease node (ephemeral), the session's child for it
// and, for a partition of a group with members, the group's holder marker,
// and writes the session node, in one multi whose reply gives the token
// (the transaction's zxid, which is the lease node's czxid) and the digest;
// then it reads the value node. Two round trips (B6). A lease held by
// another session is read to name its holder.
func (s *session) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	g, err := s.acquire(ctx, name)
	var he *backends.HeldError
	if errors.As(err, &he) && he.Holder.Session != backends.SessionID(s.id) {
		s.refused(name) // a Watch that follows reserves it (queue.go)
	} else {
		s.called(name)
	}
	return g, err
}

// queueOps is the number of operations before the lease node's creation
// in Acquire's multi: the queue node created and deleted, so that the
// multi fails while a queue exists (queue.go).
const queueOps = 2

func (s *session) acquire(ctx context.Context, name string) (backends.Grant, error) {
	const op = "acquire"
	if err := args.Name(op, name); err != nil {
		return backends.Grant{}, err
	}
	if now, ok := s.storeNow(); ok && now.Before(s.gen.guardEnd) {
		if s.b.closed.Load() {
			return backends.Grant{}, s.b.closedErr(op, name)
		}
		return backends.Grant{}, s.recovering(name, s.gen.guardEnd.Sub(now))
	}
	s.mu.Lock()
	h, mine := s.held[name]
	s.mu.Unlock()
	if mine {
		g, ok, err := s.reacquire(ctx, name, h)
		if err != nil || ok {
			return g, err
		}
	}
	withHolder := true
	// Another session's lease node may vanish between the multi that found
	// it and the read of its holder: then try again, a few times.
	for range 16 {
		if r := s.reservationOf(ctx, name); r != nil {
			g, done, err := s.takeTurn(ctx, name, r)
			if done {
				return g, err
			}
		}
		holder := ""
		if group, i, ok := backends.SplitPartition(name); ok && withHolder {
			s.mu.Lock()
			n, joined := s.joined[group]
			s.mu.Unlock()
			if !joined || i < n {
				holder = s.paths.holder(group, i, s.id)
			}
		}
		// On a root of the first layout (no queues, no reservations) the
		// multi does not touch the queue node: q is where the lease
		// node's creation falls in it.
		var ops []any
		q := 0
		if s.gen.queues {
			ops = append(ops,
				&zk.CreateRequest{Path: s.paths.queue(name), Acl: s.b.acl, Flags: zk.FlagPersistent},
				&zk.DeleteRequest{Path: s.paths.queue(name), Version: -1})
			q = queueOps
		}
		ops = append(ops,
			&zk.CreateRequest{Path: s.paths.lease(name), Data: leaseData(s.id, string(s.identity)), Acl: s.b.acl, Flags: zk.FlagEphemeral},
			&zk.CreateRequest{Path: s.paths.owned(s.id, name), Acl: s.b.acl, Flags: zk.FlagEphemeral})
		if holder != "" {
			ops = append(ops, &zk.CreateRequest{Path: holder, Acl: s.b.acl, Flags: zk.FlagEphemeral})
		}
		ops = append(ops, &zk.SetDataRequest{Path: s.paths.session(s.id), Data: s.identity, Version: -1})
		var (
			st       *zk.Stat
			failed   int
			value    []byte
			valueErr error
			valueOK  bool
		)
		err := s.do(ctx, op, name, func(c *zk.Conn) error {
			// B6: the value node is read in a request pipelined right
			// behind the multi, sent once the multi has been written:
			// ZooKeeper answers a session's requests in order, so the read
			// sees the state after the multi, values its previous holders
			// stored included.
			sent := s.w.awaitWrite(s.paths.lease(name))
			defer s.w.stopAwait(sent)
			type multiResult struct {
				res []zk.MultiResponse
				err error
			}
			mres := make(chan multiResult, 1)
			go func() { res, err := c.Multi(ops...); mres <- multiResult{res, err} }()
			var r multiResult
			read := false
			select {
			case <-sent.sent:
				read = true
			case r = <-mres:
			}
			var vdone chan struct{}
			if read {
				vdone = make(chan struct{})
				go func() {
					defer close(vdone)
					value, _, valueErr = c.Get(s.paths.value(name))
				}()
				r = <-mres
			}
			failed, r.err = multiErr(r.res, r.err)
			if r.err == nil {
				st = r.res[len(r.res)-1].Stat
			}
			if vdone != nil {
				<-vdone
				valueOK = true
			}
			return r.err
		})
		switch {
		case err == nil:
			tok := backends.Token(s.gen.base + st.Mzxid)
			if time.UnixMilli(st.Mtime).Before(s.gen.guardEnd) {
				// Granted within the guard: undo it (best effort).
				s.undo(ctx, name, holder)
				return backends.Grant{}, s.recovering(name, s.gen.guardEnd.Sub(time.UnixMilli(st.Mtime)))
			}
			s.b.noteToken(int64(tok))
			groupsRev := int64(0)
			s.mu.Lock()
			s.held[name] = heldLease{token: tok, holder: holder}
			if holder != "" {
				group, _, _ := backends.SplitPartition(name)
				if _, ok := s.joined[group]; ok {
					groupsRev = st.Mzxid
				}
			}
			s.storeAt, s.storeTime = time.Now(), time.UnixMilli(st.Mtime)
			s.mu.Unlock()
			switch {
			case !valueOK:
				value, valueErr = s.value(ctx, name)
				if valueErr != nil {
					return backends.Grant{}, valueErr
				}
			case errors.Is(valueErr, zk.ErrNoNode):
				value = nil
			case valueErr != nil:
				return backends.Grant{}, s.fail(ctx, op, name, valueErr)
			case value == nil:
				value = []byte{}
			}
			return backends.Grant{Token: tok, Value: value, Digest: s.digest(st, s.knownGroups(groupsRev))}, nil
		case errors.Is(err, zk.ErrNodeExists) && q > 0 && failed == 0:
			// A queue of reservations exists (queue.go).
			g, retry, err := s.queued(ctx, name)
			if !retry {
				return g, err
			}
		case errors.Is(err, zk.ErrNodeExists) && failed == q:
			g, retry, err := s.taken(ctx, name)
			if !retry {
				return g, err
			}
		case errors.Is(err, zk.ErrNodeExists) && failed == q+1:
			// A child of ours left from a term whose lease node someone
			// deleted: remove it and try again.
			if err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(s.paths.owned(s.id, name), -1) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return backends.Grant{}, s.fail(ctx, op, name, err)
			}
		case errors.Is(err, zk.ErrNodeExists) && holder != "" && failed == q+2:
			if err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(holder, -1) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return backends.Grant{}, s.fail(ctx, op, name, err)
			}
		case errors.Is(err, zk.ErrNoNode) && holder != "" && failed == q+2:
			withHolder = false // the group has no node: no members to show it to
		case errors.Is(err, zk.ErrNoNode) && (failed == 0 || failed == q):
			if err := s.do(ctx, op, name, func(c *zk.Conn) error { return s.b.ensureLayout(c) }); err != nil {
				return backends.Grant{}, s.fail(ctx, op, name, err)
			}
		case errors.Is(err, zk.ErrNoNode):
			return backends.Grant{}, s.lost(op, name)
		default:
			return backends.Grant{}, s.fail(ctx, op, name, err)
		}
	}
	return backends.Grant{}, s.b.unavailable(ctx, op, name, errors.New("the lease node kept changing; try again"))
}

// undo deletes what an acquisition within the amnesia guard created.
func (s *session) undo(ctx context.Context, name, holder string) {
	ops := []any{
		&zk.DeleteRequest{Path: s.paths.owned(s.id, name), Version: -1},
		&zk.DeleteRequest{Path: s.paths.lease(name), Version: -1},
	}
	if holder != "" {
		ops = append(ops, &zk.DeleteRequest{Path: holder, Version: -1})
	}
	_ = s.do(ctx, "acquire", name, func(c *zk.Conn) error { _, err := c.Multi(ops...); return err })
}

// reacquire answers an Acquire of a lease the session holds: the same
// token, with the value and the digest. ok is false if the lease turns out
// not to be the session's any more.
func (s *session) reacquire(ctx context.Context, name string, h heldLease) (backends.Grant, bool, error) {
	const op = "acquire"
	var (
		lease, own *zk.Stat
		data       []byte
		value      []byte
		hasValue   bool
	)
	err := s.do(ctx, op, name, func(c *zk.Conn) error {
		return parallel(
			func() error {
				var err error
				path := s.paths.lease(name)
				if h.queue != "" {
					path = h.queue // held through a reservation (queue.go)
				}
				data, lease, err = c.Get(path)
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return err
			},
			func() error {
				var err error
				value, _, err = c.Get(s.paths.value(name))
				hasValue = err == nil
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return err
			},
			func() error {
				var err error
				_, own, err = c.Exists(s.paths.session(s.id))
				return err
			})
	})
	if err != nil {
		return backends.Grant{}, false, s.fail(ctx, op, name, err)
	}
	if own == nil || own.Czxid == 0 {
		return backends.Grant{}, false, s.lost(op, name)
	}
	if sid, _ := parseLeaseData(data); lease == nil || sid != s.id || backends.Token(s.gen.base+lease.Czxid) != h.token {
		s.forget(name)
		return backends.Grant{}, false, nil
	}
	if !hasValue {
		value = nil
	} else if value == nil {
		value = []byte{}
	}
	return backends.Grant{Token: h.token, Value: value, Digest: s.digest(own, s.knownGroups(0))}, true, nil
}

// taken answers an Acquire whose lease node exists: the session's own
// (an earlier acquisition whose reply was lost: adopt it), another
// session's (a *HeldError), or gone by now (retry).
func (s *session) taken(ctx context.Context, name string) (g backends.Grant, retry bool, err error) {
	const op = "acquire"
	var (
		data []byte
		st   *zk.Stat
	)
	err = s.do(ctx, op, name, func(c *zk.Conn) error {
		var err error
		data, st, err = c.Get(s.paths.lease(name))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Grant{}, true, nil
	}
	if err != nil {
		return backends.Grant{}, false, s.fail(ctx, op, name, err)
	}
	sid, identity := parseLeaseData(data)
	tok := backends.Token(s.gen.base + st.Czxid)
	if sid != s.id {
		return backends.Grant{}, false, fmt.Errorf("%s: %w", opName(op, name), &backends.HeldError{
			Name: name, Holder: backends.Holder{Session: backends.SessionID(sid), Identity: identity, Token: tok}})
	}
	s.mu.Lock()
	s.held[name] = heldLease{token: tok}
	s.mu.Unlock()
	g, ok, err := s.reacquire(ctx, name, heldLease{token: tok})
	return g, !ok && err == nil, err
}

// value reads the value node of name: nil if none was ever stored.
func (s *session) value(ctx context.Context, name string) ([]byte, error) {
	var data []byte
	err := s.do(ctx, "acquire", name, func(c *zk.Conn) error {
		var err error
		data, _, err = c.Get(s.paths.value(name))
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil
	case err != nil:
		return nil, s.fail(ctx, "acquire", name, err)
	case data == nil:
		return []byte{}, nil
	}
	return data, nil
}

// Release deletes the lease node, the session's child for it and any
// holder marker in one multi, if the session's own record says it holds
// name with token (B4; ZooKeeper's check compares data versions, not
// czxids): the multi then fails unless the session's child exists, so a
// lease lost meanwhile is not touched. Otherwise it reads the digest.
func (s *session) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	const op = "release"
	if err := args.Name(op, name); err != nil {
		return backends.Digest{}, err
	}
	s.called(name) // (queue.go)
	s.mu.Lock()
	h, ok := s.held[name]
	s.mu.Unlock()
	if !ok || h.token != token {
		return s.readDigest(ctx, op, name)
	}
	if h.queue != "" {
		return s.releaseQueued(ctx, name, h)
	}
	ops := []any{
		&zk.DeleteRequest{Path: s.paths.owned(s.id, name), Version: -1},
		&zk.DeleteRequest{Path: s.paths.lease(name), Version: -1},
	}
	if h.holder != "" {
		ops = append(ops, &zk.DeleteRequest{Path: h.holder, Version: -1})
	}
	ops = append(ops, &zk.SetDataRequest{Path: s.paths.session(s.id), Data: s.identity, Version: -1})
	var (
		st     *zk.Stat
		failed int
	)
	counted := s.watches.releasing(name)
	err := s.do(ctx, op, name, func(c *zk.Conn) error {
		res, err := c.Multi(ops...)
		failed, err = multiErr(res, err)
		if err == nil {
			st = res[len(res)-1].Stat
		}
		return err
	})
	if err != nil && counted {
		s.watches.released(name)
	}
	switch {
	case err == nil:
		groupsRev := int64(0)
		s.mu.Lock()
		delete(s.held, name)
		if h.holder != "" {
			group, _, _ := backends.SplitPartition(name)
			if _, ok := s.joined[group]; ok {
				groupsRev = st.Mzxid
			}
		}
		s.mu.Unlock()
		return s.digest(st, s.knownGroups(groupsRev)), nil
	case errors.Is(err, zk.ErrNoNode) && failed == 0:
		// The session no longer holds it.
		s.mu.Lock()
		delete(s.held, name)
		s.mu.Unlock()
		return s.readDigest(ctx, op, name)
	case errors.Is(err, zk.ErrNoNode) && failed > 0 && failed < len(ops)-1:
		// Our child exists but the lease node (or marker) is gone: someone
		// deleted it; drop our child.
		s.mu.Lock()
		delete(s.held, name)
		s.mu.Unlock()
		err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(s.paths.owned(s.id, name), -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return backends.Digest{}, s.fail(ctx, op, name, err)
		}
		return s.readDigest(ctx, op, name)
	case errors.Is(err, zk.ErrNoNode):
		return backends.Digest{}, s.lost(op, name)
	}
	return backends.Digest{}, s.fail(ctx, op, name, err)
}

// readDigest reads the session node's Stat: the digest of a no-op.
func (s *session) readDigest(ctx context.Context, op, name string) (backends.Digest, error) {
	var st *zk.Stat
	err := s.do(ctx, op, name, func(c *zk.Conn) error {
		ok, stat, err := c.Exists(s.paths.session(s.id))
		if err == nil && !ok {
			return zk.ErrNoNode
		}
		st = stat
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Digest{}, s.lost(op, name)
	}
	if err != nil {
		return backends.Digest{}, s.fail(ctx, op, name, err)
	}
	return s.digest(st, s.knownGroups(0)), nil
}

// Holder reads the lease node: its data names the holder's session and
// identity, and its czxid gives the token; without one, the first
// reservation of the name's queue holds it (queue.go), read the same way. Remaining is 0: ZooKeeper does
// not tell how long another session has left.
func (s *session) Holder(ctx context.Context, name string) (backends.Holder, error) {
	const op = "holder"
	if err := args.Name(op, name); err != nil {
		return backends.Holder{}, err
	}
	s.called(name) // (queue.go)
	for range 16 {
		var (
			data     []byte
			st       *zk.Stat
			children []string
		)
		err := s.do(ctx, op, name, func(c *zk.Conn) error {
			return parallel(
				func() error {
					var err error
					data, st, err = c.Get(s.paths.lease(name))
					if err != nil {
						st = nil // go-zookeeper returns an empty Stat with ErrNoNode
					}
					return absent(err)
				},
				func() error {
					var err error
					children, _, err = c.Children(s.paths.queue(name))
					return absent(err)
				})
		})
		if err != nil {
			return backends.Holder{}, s.fail(ctx, op, name, err)
		}
		if st != nil {
			sid, identity := parseLeaseData(data)
			return backends.Holder{Session: backends.SessionID(sid), Identity: identity, Token: backends.Token(s.gen.base + st.Czxid)}, nil
		}
		// No lease node: the first reservation holds it (queue.go).
		first := firstReservation(children)
		if first == "" {
			return backends.Holder{}, nil
		}
		h, err := s.queueHolder(ctx, op, name, first)
		if err != nil || h.Session != "" {
			return h, err
		}
	}
	return backends.Holder{}, s.b.unavailable(ctx, op, name, errors.New("the holder kept changing; try again"))
}

// PutValue writes the value node in a multi that first checks that the
// session's child for the lease exists, after the session's own record
// said it holds name with token (B4).
func (s *session) PutValue(ctx context.Context, name string, token backends.Token, value []byte) error {
	const op = "put value"
	if err := args.Value(op, name, value); err != nil {
		return err
	}
	s.called(name) // (queue.go)
	s.mu.Lock()
	h, ok := s.held[name]
	s.mu.Unlock()
	if err := s.do(ctx, op, name, func(*zk.Conn) error { return nil }); err != nil {
		return err // expired, closed or an ended context come first
	}
	if !ok || h.token != token {
		return fmt.Errorf("%s with token %d: %w", opName(op, name), token, backends.ErrNotHolder)
	}
	data := append([]byte{}, value...)
	checked := s.paths.owned(s.id, name)
	if h.queue != "" {
		checked = h.queue // held through a reservation (queue.go)
	}
	check := &zk.CheckVersionRequest{Path: checked, Version: -1}
	for range 3 {
		var failed int
		err := s.do(ctx, op, name, func(c *zk.Conn) error {
			res, err := c.Multi(check, &zk.SetDataRequest{Path: s.paths.value(name), Data: data, Version: -1})
			failed, err = multiErr(res, err)
			if errors.Is(err, zk.ErrNoNode) && failed == 1 {
				res, err = c.Multi(check, &zk.CreateRequest{Path: s.paths.value(name), Data: data, Acl: s.b.acl, Flags: zk.FlagPersistent})
				failed, err = multiErr(res, err)
			}
			return err
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode) && failed == 0:
			s.forget(name)
			return fmt.Errorf("%s with token %d: the session no longer holds it: %w", opName(op, name), token, backends.ErrNotHolder)
		case errors.Is(err, zk.ErrNoNode) && failed == 1:
			if err := s.do(ctx, op, name, func(c *zk.Conn) error { return s.b.ensureLayout(c) }); err != nil {
				return s.fail(ctx, op, name, err)
			}
		case errors.Is(err, zk.ErrNodeExists):
			// created meanwhile: write it
		default:
			return s.fail(ctx, op, name, err)
		}
	}
	return s.b.unavailable(ctx, op, name, errors.New("the value node kept changing; try again"))
}
