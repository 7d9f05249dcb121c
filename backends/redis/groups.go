package simbaredis

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/simba-go/simba/backends"
)

func (s *session) Join(ctx context.Context, group string, partitions int) error {
	if err := args.Group("join", group, partitions); err != nil {
		return err
	}
	r, err := s.b.run(ctx, scriptJoin, "join", s.idArg, group, partitions, s.b.node)
	if err != nil {
		return err
	}
	switch r.status() {
	case "OK":
		return nil
	case "MISMATCH":
		return fmt.Errorf("simbaredis: join %q with %d partitions, its members have %d: %w",
			group, partitions, r.int(1), backends.ErrGroupMismatch)
	}
	return s.b.unexpected("join", r)
}

func (s *session) Leave(ctx context.Context, group string) error {
	if err := args.Name("leave", group); err != nil {
		return err
	}
	r, err := s.b.run(ctx, scriptLeave, "leave", s.idArg, group)
	if err != nil {
		return err
	}
	if r.status() != "OK" {
		return s.b.unexpected("leave", r)
	}
	return nil
}

func (s *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	if err := args.Name("members", group); err != nil {
		return backends.GroupView{}, err
	}
	r, err := s.b.run(ctx, scriptMembers, "members", s.idArg, group)
	if err != nil {
		return backends.GroupView{}, err
	}
	if r.status() != "OK" {
		return backends.GroupView{}, s.b.unexpected("members", r)
	}
	var v backends.GroupView
	v.Partitions = int(r.int(1))
	if v.Partitions == 0 {
		return v, nil
	}
	members := r.list(2)
	v.Members = make([]backends.SessionID, 0, len(members))
	for _, m := range members {
		id, _ := m.(string)
		v.Members = append(v.Members, backends.SessionID(id))
	}
	slices.Sort(v.Members)
	v.Holders = make([]backends.SessionID, v.Partitions)
	flat := r.list(3)
	for i := 0; i+1 < len(flat); i += 2 {
		idx, _ := flat[i].(string)
		id, _ := flat[i+1].(string)
		if n, err := strconv.Atoi(idx); err == nil && 0 <= n && n < v.Partitions {
			v.Holders[n] = backends.SessionID(id)
		}
	}
	return v, nil
}
