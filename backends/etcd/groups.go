package simbaetcd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backends"
)

// Join is one transaction with nested ones: if the session is alive, and
// the group's count is partitions, put the member key (on the session's
// lease) and the epoch unless the session is a member already; else, if
// the group has no members, record the count too; else read the count for
// the mismatch error.
func (s *session) Join(ctx context.Context, group string, partitions int) error {
	const op = "join"
	if err := args.Group(op, group, partitions); err != nil {
		return err
	}
	if err := s.check(op, group); err != nil {
		return err
	}
	k := s.b.keys
	sid := string(s.id)
	n := strconv.Itoa(partitions)
	join := []clientv3.Op{
		clientv3.OpPut(k.member(group, sid), "", clientv3.WithLease(s.lease)),
		clientv3.OpPut(k.epoch(group), ""),
	}
	first := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.members(group)), "=", 0).WithPrefix()},
		append([]clientv3.Op{clientv3.OpPut(k.count(group), n)}, join...),
		[]clientv3.Op{clientv3.OpGet(k.count(group))})
	same := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.Value(k.count(group)), "=", n)},
		[]clientv3.Op{clientv3.OpTxn( // a member already: nothing changes
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.member(group, sid)), "=", 0)}, join, nil)},
		[]clientv3.Op{first})
	resp, err := s.b.cli.Txn(ctx).If(s.alive()).Then(same).Else(clientv3.OpGet(k.session(sid))).Commit()
	if err != nil {
		return s.fail(ctx, op, group, err)
	}
	if !resp.Succeeded {
		return s.expired(op, group)
	}
	inner := resp.Responses[0].GetResponseTxn()
	if !inner.Succeeded {
		firstResp := inner.Responses[0].GetResponseTxn()
		if !firstResp.Succeeded {
			has := "none"
			if kvs := firstResp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
				has = string(kvs[0].Value)
			}
			return fmt.Errorf("%s: the members have %s partitions; joined with %d: %w", opName(op, group), has, partitions, backends.ErrGroupMismatch)
		}
	}
	s.mu.Lock()
	s.groups[group] = partitions
	s.known = known{} // the digest now covers the group: read it
	s.mu.Unlock()
	return nil
}

// Leave deletes the member key and puts the epoch, if the session is a
// member; it releases no lease.
func (s *session) Leave(ctx context.Context, group string) error {
	const op = "leave"
	if err := args.Name(op, group); err != nil {
		return err
	}
	if err := s.check(op, group); err != nil {
		return err
	}
	k := s.b.keys
	sid := string(s.id)
	resp, err := s.b.cli.Txn(ctx).
		If(s.alive(), clientv3.Compare(clientv3.CreateRevision(k.member(group, sid)), ">", 0)).
		Then(clientv3.OpDelete(k.member(group, sid)), clientv3.OpPut(k.epoch(group), "")).
		Else(clientv3.OpGet(k.session(sid))).Commit()
	if err != nil {
		return s.fail(ctx, op, group, err)
	}
	if !resp.Succeeded && !s.isAlive(resp.Responses[0].GetResponseRange().Kvs) {
		return s.expired(op, group)
	}
	s.mu.Lock()
	delete(s.groups, group)
	s.known = known{}
	s.mu.Unlock()
	return nil
}

// Members reads the group's count, members and partitions' lease keys in
// one transaction.
func (s *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	const op = "members"
	if err := args.Name(op, group); err != nil {
		return backends.GroupView{}, err
	}
	if err := s.check(op, group); err != nil {
		return backends.GroupView{}, err
	}
	k := s.b.keys
	resp, err := s.b.cli.Txn(ctx).If(s.alive()).
		Then(clientv3.OpGet(k.count(group)),
			clientv3.OpGet(k.members(group), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			clientv3.OpGet(k.partitions(group), clientv3.WithPrefix())).
		Else(clientv3.OpGet(k.session(string(s.id)))).Commit()
	if err != nil {
		return backends.GroupView{}, s.fail(ctx, op, group, err)
	}
	if !resp.Succeeded {
		return backends.GroupView{}, s.expired(op, group)
	}
	return s.b.groupView(group, resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs,
		resp.Responses[2].GetResponseRange().Kvs), nil
}

// groupView builds a view from the count, member and partition keys.
func (b *Backend) groupView(group string, count, members, partitions []*mvccpb.KeyValue) backends.GroupView {
	if len(members) == 0 || len(count) == 0 {
		return backends.GroupView{}
	}
	n, err := strconv.Atoi(string(count[0].Value))
	if err != nil || n <= 0 {
		return backends.GroupView{}
	}
	v := backends.GroupView{Partitions: n, Holders: make([]backends.SessionID, n)}
	for _, kv := range members {
		v.Members = append(v.Members, backends.SessionID(strings.TrimPrefix(string(kv.Key), b.keys.members(group))))
	}
	for _, kv := range partitions {
		g, i, ok := backends.SplitPartition(strings.TrimPrefix(string(kv.Key), b.keys.leases()))
		if !ok || g != group || i >= n {
			continue
		}
		sid, _ := parseLeaseRecord(kv.Value)
		v.Holders[i] = backends.SessionID(sid)
	}
	return v
}
