package simbaetcd

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backends"
)

// Inspect lists the prefix's sessions, leases and groups. It reads the
// session, lease, value and group keys in one read-only transaction (one
// snapshot), then asks etcd each session's time left (LeaseTimeToLive, up
// to 16 at a time): its cost grows with what the prefix holds. It writes
// nothing and opens no session. StoreTime is zero unless the backend has
// [WithLocalClock].
func (b *Backend) Inspect(ctx context.Context) (backends.Inventory, error) {
	const op = "inspect"
	if b.closed.Load() {
		return backends.Inventory{}, b.closedErr(op, "")
	}
	k := b.keys
	resp, err := b.cli.Txn(ctx).Then(
		clientv3.OpGet(k.meta()),
		clientv3.OpGet(k.sessions(), clientv3.WithPrefix()),
		clientv3.OpGet(k.leases(), clientv3.WithPrefix()),
		clientv3.OpGet(k.values(), clientv3.WithPrefix()),
		clientv3.OpGet(k.groups(), clientv3.WithPrefix()),
		clientv3.OpGet(k.guard()),
	).Commit()
	if err != nil {
		return backends.Inventory{}, unavailable(ctx, op, "", err)
	}
	inv := backends.Inventory{StoreTime: b.storeTime()}
	meta := resp.Responses[0].GetResponseRange().Kvs
	if len(meta) == 0 {
		return inv, nil // nothing was ever stored under the prefix
	}
	g, err := b.parseMeta(meta[0].Value, meta[0].CreateRevision)
	if err != nil {
		return backends.Inventory{}, err
	}
	rs := resp.Responses
	sessions := rs[1].GetResponseRange().Kvs
	leases := rs[2].GetResponseRange().Kvs
	values := make(map[string][]byte)
	for _, kv := range rs[3].GetResponseRange().Kvs {
		values[strings.TrimPrefix(string(kv.Key), k.values())] = kv.Value
	}
	held := make(map[string]int)
	for _, kv := range leases {
		sid, identity := parseLeaseRecord(kv.Value)
		name := strings.TrimPrefix(string(kv.Key), k.leases())
		held[sid]++
		inv.Leases = append(inv.Leases, backends.LeaseInfo{Name: name, Session: backends.SessionID(sid),
			Identity: identity, Token: g.token(kv.CreateRevision), Value: values[name]})
	}
	inv.Sessions = b.sessionInfos(ctx, sessions, held)
	inv.Groups = b.groupInfos(rs[4].GetResponseRange().Kvs)
	if guard := rs[5].GetResponseRange().Kvs; len(guard) == 1 {
		inv.Recovering = b.recovering(ctx, guard[0]) // the amnesia guard of a prefix created anew
	}
	return inv, nil
}

// sessionInfos lists the sessions with their time left, asked of etcd.
func (b *Backend) sessionInfos(ctx context.Context, kvs []*mvccpb.KeyValue, held map[string]int) []backends.SessionInfo {
	out := make([]backends.SessionInfo, len(kvs))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, kv := range kvs {
		sid := strings.TrimPrefix(string(kv.Key), b.keys.sessions())
		out[i] = backends.SessionInfo{ID: backends.SessionID(sid), Identity: string(kv.Value), Leases: held[sid]}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if r, err := b.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && r.TTL > 0 {
				out[i].Remaining = time.Duration(r.TTL) * time.Second
			}
		})
	}
	wg.Wait()
	return out
}

// groupInfos lists the groups with members from the keys under g/.
func (b *Backend) groupInfos(kvs []*mvccpb.KeyValue) []backends.GroupInfo {
	byName := make(map[string]*backends.GroupInfo)
	var names []string
	get := func(name string) *backends.GroupInfo {
		gi := byName[name]
		if gi == nil {
			gi = &backends.GroupInfo{Name: name}
			byName[name] = gi
			names = append(names, name)
		}
		return gi
	}
	counts := make(map[string][]*mvccpb.KeyValue)
	for _, kv := range kvs {
		rest := strings.TrimPrefix(string(kv.Key), b.keys.groups())
		group, tail, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		switch {
		case tail == "n":
			counts[group] = []*mvccpb.KeyValue{kv}
		case strings.HasPrefix(tail, "m/"):
			gi := get(group)
			gi.Members = append(gi.Members, backends.SessionID(strings.TrimPrefix(tail, "m/")))
		}
	}
	slices.Sort(names)
	out := make([]backends.GroupInfo, 0, len(names))
	for _, name := range names {
		gi := byName[name]
		if v := b.groupView(name, counts[name], []*mvccpb.KeyValue{{}}, nil); v.Partitions > 0 {
			gi.Partitions = v.Partitions
		}
		slices.Sort(gi.Members)
		out = append(out, *gi)
	}
	return out
}
