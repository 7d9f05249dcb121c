package simbamysql

import (
	"context"
	"database/sql"
	"slices"

	"github.com/simba-go/simba/backends"
)

func (s *session) Join(ctx context.Context, group string, partitions int) error {
	const what = "join"
	if err := args.Group(what, group, partitions); err != nil {
		return err
	}
	var (
		status string
		parts  sql.NullInt64
	)
	err := s.b.call(ctx, what, group, func() error {
		return s.b.queryRow(ctx, s.b.sql.join, []any{&status, &parts}, s.id, group, int64(partitions))
	})
	if err != nil {
		return err
	}
	switch status {
	case "OK":
		return nil
	case "MISMATCH":
		return s.b.errorf(what, group, "%d partitions, its members have %d: %w", partitions, parts.Int64, backends.ErrGroupMismatch)
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
	err := s.b.call(ctx, what, group, func() error {
		return s.b.queryRow(ctx, s.b.sql.leave, []any{&status}, s.id, group)
	})
	if err != nil {
		return err
	}
	switch status {
	case "OK":
		return nil
	case "EXPIRED":
		return s.expired(what, group)
	}
	return s.b.unexpected(what, status)
}

func (s *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	const what = "members"
	if err := args.Name(what, group); err != nil {
		return backends.GroupView{}, err
	}
	type holding struct {
		part int
		id   string
	}
	var (
		live     bool
		parts    int
		members  []backends.SessionID
		holdings []holding
	)
	err := s.b.call(ctx, what, group, func() error {
		live, parts, members, holdings = false, 0, members[:0], holdings[:0]
		return s.b.queryRows(ctx, s.b.sql.members, func(rows *sql.Rows) error {
			var (
				kind string
				id   sql.NullString
				n    int64
			)
			if err := rows.Scan(&kind, &id, &n); err != nil {
				return err
			}
			switch kind {
			case "G":
				live, parts = true, int(n)
			case "M":
				members = append(members, backends.SessionID(id.String))
			case "H":
				holdings = append(holdings, holding{int(n), id.String})
			}
			return nil
		}, s.id, group)
	})
	if err != nil {
		return backends.GroupView{}, err
	}
	if !live {
		return backends.GroupView{}, s.expired(what, group)
	}
	var v backends.GroupView
	if parts == 0 || len(members) == 0 {
		return v, nil
	}
	v.Partitions = parts
	v.Members = members
	slices.Sort(v.Members)
	v.Holders = make([]backends.SessionID, parts)
	for _, h := range holdings {
		if 0 <= h.part && h.part < parts {
			v.Holders[h.part] = backends.SessionID(h.id)
		}
	}
	return v, nil
}
