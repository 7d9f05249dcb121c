package simbazk

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
)

// inspectParallel bounds the reads Inspect has in flight at once.
const inspectParallel = 64

// Inspect lists the root's live sessions, the leases they hold and the
// groups with members ([backends.Inspector]), with plain reads on the
// backend's own connection (at most 64 in flight): the session nodes and
// their children, the lease and value nodes of the leases held, the group
// nodes and their children. It changes nothing but the clock node (for
// StoreTime), and under [WithReadOnly] nothing at all: it then reports no
// store time, and a root that does not exist lists as empty. The lists are
// read close together, not as one snapshot. Remaining is 0: ZooKeeper does
// not tell a session's time left.
func (b *Backend) Inspect(ctx context.Context) (backends.Inventory, error) {
	const op = "inspect"
	var inv backends.Inventory
	if !b.readOnly {
		t, err := b.StoreTime(ctx)
		if err != nil {
			return inv, err
		}
		inv.StoreTime = t
	}
	var gen generation
	err := b.adminDo(ctx, op, func(c *zk.Conn) error {
		data, st, err := c.Get(b.root)
		if err != nil {
			return err
		}
		gen, err = b.parseGeneration(data, st)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return inv, nil // no root: nothing is held (read-only; otherwise StoreTime created it)
	}
	if err != nil {
		return inv, b.adminErr(ctx, op, err)
	}
	// The amnesia guard of a root created anew: measured on the store's
	// clock where it was read, else on this host's (a read-only Inspect
	// does not write the clock node it reads the store's clock from).
	now := inv.StoreTime
	if now.IsZero() {
		now = time.Now()
	}
	if now.Before(gen.guardEnd) {
		inv.Recovering = &backends.RecoveringError{Remaining: gen.guardEnd.Sub(now), Until: gen.guardEnd.UTC(),
			MaxLease: gen.guardEnd.Sub(time.UnixMilli(gen.ctime)),
			Why:      b.whyRecovering()}
	}
	var sids, groups []string
	err = b.adminDo(ctx, op, func(c *zk.Conn) error {
		return parallel(
			func() error { var err error; sids, _, err = c.Children(b.paths.sessions()); return absent(err) },
			func() error { var err error; groups, _, err = c.Children(b.paths.groups()); return absent(err) })
	})
	if err != nil {
		return inv, b.adminErr(ctx, op, err)
	}
	slices.Sort(sids)
	slices.Sort(groups)

	// Each session's identity and children.
	type sessionRead struct {
		identity []byte
		children []string
		ok       bool
	}
	reads := make([]sessionRead, len(sids))
	err = b.adminDo(ctx, op, func(c *zk.Conn) error {
		return bounded(len(sids), func(i int) error {
			r := &reads[i]
			err := parallel(
				func() error { var err error; r.identity, _, err = c.Get(b.paths.session(sids[i])); return err },
				func() error { var err error; r.children, _, err = c.Children(b.paths.session(sids[i])); return err })
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			r.ok = err == nil && slices.Contains(r.children, markerName)
			return err
		})
	})
	if err != nil {
		return inv, b.adminErr(ctx, op, err)
	}
	type leaseRead struct {
		name, sid, identity string
		data, value         []byte
		st                  *zk.Stat
		hasValue            bool
	}
	var leases []leaseRead
	for i, sid := range sids {
		if !reads[i].ok {
			continue
		}
		inv.Sessions = append(inv.Sessions, backends.SessionInfo{ID: backends.SessionID(sid), Identity: string(reads[i].identity)})
		for _, name := range reads[i].children {
			if name != markerName {
				leases = append(leases, leaseRead{name: name, sid: sid, identity: string(reads[i].identity)})
			}
		}
	}
	err = b.adminDo(ctx, op, func(c *zk.Conn) error {
		return bounded(len(leases), func(i int) error {
			l := &leases[i]
			return parallel(
				func() error {
					var err error
					l.data, l.st, err = c.Get(b.paths.lease(l.name))
					if errors.Is(err, zk.ErrNoNode) {
						return nil
					}
					return err
				},
				func() error {
					var err error
					l.value, _, err = c.Get(b.paths.value(l.name))
					l.hasValue = err == nil
					if errors.Is(err, zk.ErrNoNode) {
						return nil
					}
					return err
				})
		})
	})
	if err != nil {
		return inv, b.adminErr(ctx, op, err)
	}
	counts := make(map[string]int)
	for _, l := range leases {
		if sid, _ := parseLeaseData(l.data); l.st == nil || sid != l.sid {
			continue
		}
		li := backends.LeaseInfo{Name: l.name, Session: backends.SessionID(l.sid), Identity: l.identity,
			Token: backends.Token(gen.base + l.st.Czxid)}
		if l.hasValue {
			li.Value = append([]byte{}, l.value...)
		}
		inv.Leases = append(inv.Leases, li)
		counts[l.sid]++
	}
	queued, err := b.inspectQueues(ctx, gen, inv.Sessions)
	if err != nil {
		return inv, err
	}
	for _, li := range queued {
		inv.Leases = append(inv.Leases, li)
		counts[string(li.Session)]++
	}
	for i := range inv.Sessions {
		inv.Sessions[i].Leases = counts[string(inv.Sessions[i].ID)]
	}
	slices.SortFunc(inv.Leases, func(a, b backends.LeaseInfo) int { return cmp.Compare(a.Name, b.Name) })

	type groupRead struct {
		data     []byte
		children []string
	}
	greads := make([]groupRead, len(groups))
	err = b.adminDo(ctx, op, func(c *zk.Conn) error {
		return bounded(len(groups), func(i int) error {
			g := &greads[i]
			err := parallel(
				func() error { var err error; g.data, _, err = c.Get(b.paths.group(groups[i])); return err },
				func() error { var err error; g.children, _, err = c.Children(b.paths.group(groups[i])); return err })
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return err
		})
	})
	if err != nil {
		return inv, b.adminErr(ctx, op, err)
	}
	for i, name := range groups {
		members, _ := groupChildren(greads[i].children)
		n, _ := strconv.Atoi(string(greads[i].data))
		if len(members) == 0 || n == 0 {
			continue
		}
		slices.Sort(members)
		gi := backends.GroupInfo{Name: name, Partitions: n}
		for _, m := range members {
			gi.Members = append(gi.Members, backends.SessionID(m))
		}
		inv.Groups = append(inv.Groups, gi)
	}
	return inv, nil
}

// inspectQueues lists the leases held through reservations (queue.go):
// for each queue node with children and no lease node, the first
// reservation, if its session is one of sessions. Other reservations are
// no leases, and not listed.
func (b *Backend) inspectQueues(ctx context.Context, gen generation, sessions []backends.SessionInfo) ([]backends.LeaseInfo, error) {
	const op = "inspect"
	var names []string
	err := b.adminDo(ctx, op, func(c *zk.Conn) error {
		var err error
		names, _, err = c.Children(b.paths.queues())
		return absent(err)
	})
	if err != nil || len(names) == 0 {
		return nil, b.adminErr(ctx, op, err)
	}
	type queueRead struct {
		lease          bool
		first          string
		data, value    []byte
		st             *zk.Stat
		hasValue, read bool
	}
	reads := make([]queueRead, len(names))
	err = b.adminDo(ctx, op, func(c *zk.Conn) error {
		return bounded(len(names), func(i int) error {
			q := &reads[i]
			var children []string
			err := parallel(
				func() error { var err error; q.lease, _, err = c.Exists(b.paths.lease(names[i])); return err },
				func() error {
					var err error
					children, _, err = c.Children(b.paths.queue(names[i]))
					return absent(err)
				})
			if err != nil || q.lease {
				return err
			}
			if q.first = firstReservation(children); q.first == "" {
				return nil
			}
			return parallel(
				func() error {
					var err error
					q.data, q.st, err = c.Get(b.paths.queue(names[i]) + "/" + q.first)
					q.read = err == nil
					return absent(err)
				},
				func() error {
					var err error
					q.value, _, err = c.Get(b.paths.value(names[i]))
					q.hasValue = err == nil
					return absent(err)
				})
		})
	})
	if err != nil {
		return nil, b.adminErr(ctx, op, err)
	}
	var out []backends.LeaseInfo
	for i, q := range reads {
		if !q.read {
			continue
		}
		sid, identity := parseLeaseData(q.data)
		if !slices.ContainsFunc(sessions, func(si backends.SessionInfo) bool { return string(si.ID) == sid }) {
			continue
		}
		li := backends.LeaseInfo{Name: names[i], Session: backends.SessionID(sid), Identity: identity,
			Token: backends.Token(gen.base + q.st.Czxid)}
		if q.hasValue {
			li.Value = append([]byte{}, q.value...)
		}
		out = append(out, li)
	}
	return out, nil
}

// bounded calls fn(i) for i in [0, n), at most inspectParallel at once,
// and returns the first error.
func bounded(n int, fn func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, inspectParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// absent turns ZooKeeper's "no node" into no error: a node that is not
// there holds nothing.
func absent(err error) error {
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}
