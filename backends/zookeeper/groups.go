package simbazk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
)

// joinedGroups returns the groups the session joined, sorted.
func (s *session) joinedGroups() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	gs := make([]string, 0, len(s.joined))
	for g := range s.joined {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	return gs
}

// groupReads returns reads of each group node's pzxid into pz: the zxid of
// its last child change (a member joining, leaving or ending, a partition
// changing holder).
func (s *session) groupReads(c *zk.Conn, groups []string, pz []int64) []func() error {
	fns := make([]func() error, len(groups))
	for i, g := range groups {
		fns[i] = func() error {
			ok, st, err := c.Exists(s.paths.group(g))
			if err == nil && ok {
				pz[i] = st.Pzxid
			}
			return err
		}
	}
	return fns
}

// groupsDigest is Digest.Groups: the largest of the joined groups' pzxids
// and of the zxid of the session's last leave (B3). Called with s.mu held.
func (s *session) groupsDigest(pz []int64) int64 {
	g := s.leaveRev
	for _, z := range pz {
		g = max(g, z)
	}
	s.groupsRev = g
	return g
}

// knownGroups is Digest.Groups as last read, for the replies of Acquire and
// Release, raised to rev if the call changed a joined group.
func (s *session) knownGroups(rev int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groupsRev = max(s.groupsRev, rev)
	return s.groupsRev
}

// Join adds the session's member node to the group node, with a
// compare-and-swap on the group node's data version (which holds the
// partition count): the count is recorded by a join while the group has no
// members, and a join with another count while it has some is refused.
// Two round trips: the group node and its children, read together, then
// the multi.
func (s *session) Join(ctx context.Context, group string, partitions int) error {
	const op = "join"
	if err := args.Group(op, group, partitions); err != nil {
		return err
	}
	for range 8 {
		n, members, st, err := s.readGroup(ctx, op, group)
		if errors.Is(err, zk.ErrNoNode) {
			err = s.do(ctx, op, group, func(c *zk.Conn) error {
				return s.b.ensureNode(c, func() error {
					_, err := c.Create(s.paths.group(group), nil, zk.FlagPersistent, s.b.acl)
					return err
				})
			})
			if err != nil {
				return s.fail(ctx, op, group, err)
			}
			continue
		}
		if err != nil {
			return err
		}
		if len(members) > 0 && n != partitions {
			return fmt.Errorf("%s with %d partitions, its members have %d: %w", opName(op, group), partitions, n, backends.ErrGroupMismatch)
		}
		if slices.Contains(members, s.id) {
			s.mu.Lock()
			s.joined[group] = partitions
			s.mu.Unlock()
			return nil
		}
		ops := []any{&zk.CheckVersionRequest{Path: s.paths.group(group), Version: st.Version}}
		if len(members) == 0 && n != partitions {
			ops = []any{&zk.SetDataRequest{Path: s.paths.group(group), Data: []byte(strconv.Itoa(partitions)), Version: st.Version}}
		}
		ops = append(ops, &zk.CreateRequest{Path: s.paths.member(group, s.id), Acl: s.b.acl, Flags: zk.FlagEphemeral})
		// Partitions of the group this session already holds get their
		// holder markers now.
		s.mu.Lock()
		var marked []string
		for name, h := range s.held {
			if g, i, ok := backends.SplitPartition(name); ok && g == group && i < partitions && h.holder == "" {
				ops = append(ops, &zk.CreateRequest{Path: s.paths.holder(group, i, s.id), Acl: s.b.acl, Flags: zk.FlagEphemeral})
				marked = append(marked, name)
			}
		}
		s.mu.Unlock()
		var failed int
		err = s.do(ctx, op, group, func(c *zk.Conn) error {
			res, err := c.Multi(ops...)
			failed, err = multiErr(res, err)
			return err
		})
		switch {
		case err == nil:
			s.mu.Lock()
			s.joined[group] = partitions
			for _, name := range marked {
				h := s.held[name]
				_, i, _ := backends.SplitPartition(name)
				h.holder = s.paths.holder(group, i, s.id)
				s.held[name] = h
			}
			s.mu.Unlock()
			return nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode) && failed == 0:
			continue // the count changed, or the node went: read again
		case errors.Is(err, zk.ErrNodeExists) && failed == 1:
			continue // joined meanwhile (an earlier join whose reply was lost)
		default:
			return s.fail(ctx, op, group, err)
		}
	}
	return s.b.unavailable(ctx, op, group, errors.New("the group node kept changing; try again"))
}

// readGroup reads a group node's partition count and its children, in one
// pipelined pair of reads that agree on the node's data version.
func (s *session) readGroup(ctx context.Context, op, group string) (n int, members []string, st *zk.Stat, err error) {
	var children []string
	var holders map[int]string
	for range 4 {
		var data []byte
		var dst *zk.Stat
		err = s.do(ctx, op, group, func(c *zk.Conn) error {
			return parallel(
				func() error { var err error; data, dst, err = c.Get(s.paths.group(group)); return err },
				func() error { var err error; children, st, err = c.Children(s.paths.group(group)); return err })
		})
		if errors.Is(err, zk.ErrNoNode) {
			return 0, nil, nil, err
		}
		if err != nil {
			return 0, nil, nil, s.fail(ctx, op, group, err)
		}
		if dst.Version != st.Version {
			continue // the count changed between the reads
		}
		n, _ = strconv.Atoi(string(data))
		members, holders = groupChildren(children)
		_ = holders
		slices.Sort(members)
		return n, members, st, nil
	}
	return 0, nil, nil, s.b.unavailable(ctx, op, group, errors.New("the group node kept changing; try again"))
}

// Leave deletes the session's member node, and writes the session node in
// the same multi: the write's zxid is the session's membership revision
// (Digest.Groups).
func (s *session) Leave(ctx context.Context, group string) error {
	const op = "leave"
	if err := args.Name(op, group); err != nil {
		return err
	}
	var (
		st     *zk.Stat
		failed int
	)
	err := s.do(ctx, op, group, func(c *zk.Conn) error {
		res, err := c.Multi(
			&zk.DeleteRequest{Path: s.paths.member(group, s.id), Version: -1},
			&zk.SetDataRequest{Path: s.paths.session(s.id), Data: s.identity, Version: -1})
		failed, err = multiErr(res, err)
		if err == nil {
			st = res[1].Stat
		}
		return err
	})
	switch {
	case err == nil:
		s.mu.Lock()
		delete(s.joined, group)
		s.leaveRev = max(s.leaveRev, st.Mzxid)
		s.mu.Unlock()
		return nil
	case errors.Is(err, zk.ErrNoNode) && failed == 0:
		s.mu.Lock()
		delete(s.joined, group) // not a member
		s.mu.Unlock()
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return s.lost(op, group)
	}
	return s.fail(ctx, op, group, err)
}

// Members reads the group node's children (members and partition
// holders) with its partition count, in one pipelined pair of reads.
func (s *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	const op = "members"
	if err := args.Name(op, group); err != nil {
		return backends.GroupView{}, err
	}
	var (
		data     []byte
		children []string
		dst, cst *zk.Stat
	)
	for range 4 {
		err := s.do(ctx, op, group, func(c *zk.Conn) error {
			return parallel(
				func() error { var err error; data, dst, err = c.Get(s.paths.group(group)); return err },
				func() error { var err error; children, cst, err = c.Children(s.paths.group(group)); return err })
		})
		if errors.Is(err, zk.ErrNoNode) {
			return backends.GroupView{}, nil
		}
		if err != nil {
			return backends.GroupView{}, s.fail(ctx, op, group, err)
		}
		if dst.Version == cst.Version {
			break
		}
	}
	members, holders := groupChildren(children)
	if len(members) == 0 {
		return backends.GroupView{}, nil
	}
	n, _ := strconv.Atoi(string(data))
	v := backends.GroupView{Partitions: n, Holders: make([]backends.SessionID, n)}
	for _, m := range members {
		v.Members = append(v.Members, backends.SessionID(m))
	}
	slices.Sort(v.Members)
	for i, sid := range holders {
		if i < n {
			v.Holders[i] = backends.SessionID(sid)
		}
	}
	return v, nil
}
