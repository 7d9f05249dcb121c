package simbapg

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backends"
)

func (s *session) Join(ctx context.Context, group string, partitions int) error {
	const what = "join"
	if err := args.Group(what, group, partitions); err != nil {
		return err
	}
	// A renewal must not leave the group again once this join started.
	s.groupMu.Lock()
	defer s.groupMu.Unlock()
	delete(s.unconfirmed, group)
	var (
		status string
		parts  *int32
	)
	err := s.b.call(ctx, what, group, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.join, s.id, group, int32(partitions), s.b.notify).Scan(&status, &parts)
	})
	if err != nil {
		return err
	}
	switch status {
	case "OK":
		return nil
	case "MISMATCH":
		return s.b.errorf(what, group, "%d partitions, its members have %d: %w", partitions, deref(parts), backends.ErrGroupMismatch)
	case "EXPIRED":
		return s.expired(what, group)
	}
	return s.b.unexpected(what, status)
}

func (s *session) Leave(ctx context.Context, group string) error {
	const what = "leave"
	if err := args.Name(what, group); err != nil {
		return err
	}
	var status string
	err := s.b.call(ctx, what, group, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.leave, s.id, group).Scan(&status)
	})
	if err != nil {
		return err
	}
	switch status {
	case "OK":
		s.groupMu.Lock()
		if s.unconfirmed == nil {
			s.unconfirmed = make(map[string]bool)
		}
		s.unconfirmed[group] = true
		s.groupMu.Unlock()
		return nil
	case "EXPIRED":
		return s.expired(what, group)
	}
	return s.b.unexpected(what, status)
}

// confirmLeaves leaves again, durably, the groups the session left since
// its last renewal, unless it joined them again: a leave commits without
// waiting for its flush (leave_group in schema.sql), and one lost in a
// crash would list the session as a member that runs nothing. Where the
// first leave stuck, the second changes nothing. A group whose second
// leave fails is tried again at the next renewal, as are all of them when a
// join is in progress (the renewal never waits for one). Called after a
// renewal succeeded; it costs one call per group left, once.
func (s *session) confirmLeaves(ctx context.Context) {
	if !s.groupMu.TryLock() {
		return // a join is in progress: the renewal does not wait for it; the next one confirms
	}
	defer s.groupMu.Unlock()
	for g := range s.unconfirmed {
		var status string
		err := s.b.call(ctx, "leave", g, func(querier) error {
			return pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
				if err := tx.QueryRow(ctx, s.b.sql.leave, s.id, g).Scan(&status); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "SET LOCAL synchronous_commit TO DEFAULT") // the leave's commit waits for its flush
				return err
			})
		})
		if err != nil {
			return
		}
		delete(s.unconfirmed, g)
	}
}

func (s *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	const what = "members"
	if err := args.Name(what, group); err != nil {
		return backends.GroupView{}, err
	}
	var (
		status    string
		parts     *int32
		members   []string
		indexes   []int32
		holderIDs []string
	)
	err := s.b.call(ctx, what, group, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.members, s.id, group).Scan(&status, &parts, &members, &indexes, &holderIDs)
	})
	if err != nil {
		return backends.GroupView{}, err
	}
	switch status {
	case "OK":
	case "EXPIRED":
		return backends.GroupView{}, s.expired(what, group)
	default:
		return backends.GroupView{}, s.b.unexpected(what, status)
	}
	var v backends.GroupView
	if parts == nil || *parts == 0 || len(members) == 0 {
		return v, nil
	}
	v.Partitions = int(*parts)
	v.Members = make([]backends.SessionID, len(members))
	for i, m := range members {
		v.Members[i] = backends.SessionID(m)
	}
	slices.Sort(v.Members)
	v.Holders = make([]backends.SessionID, v.Partitions)
	for i, idx := range indexes {
		if 0 <= idx && int(idx) < v.Partitions && i < len(holderIDs) {
			v.Holders[idx] = backends.SessionID(holderIDs[i])
		}
	}
	return v, nil
}
