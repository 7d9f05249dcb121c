package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/simba-go/simba/backends"
)

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

// touchPartition bumps the epoch of the group whose partition name is, if
// such a group has members. Called with mu held.
func (s *Store) touchPartition(name string) {
	g, i, ok := backends.SplitPartition(name)
	if !ok {
		return
	}
	if gr := s.groups[g]; gr != nil && i < gr.partitions {
		gr.epoch = s.nextRev()
	}
}

// leaveGroup ends rec's membership of group. Called with mu held.
func (s *Store) leaveGroup(rec *sessionRec, name string, gr *groupRec) {
	delete(gr.members, rec.id)
	delete(rec.groups, name)
	rec.memberRev = s.nextRev()
	gr.epoch = s.nextRev()
	if len(gr.members) == 0 {
		delete(s.groups, name)
	}
}

// groupRec is the store's record of a group with members.
type groupRec struct {
	partitions int
	epoch      uint64
	members    map[backends.SessionID]*sessionRec
}
