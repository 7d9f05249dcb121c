package simbaetcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backends"
)

// errRetry reports a transaction whose comparisons failed although what it
// read shows no reason (the store changed between two of them); the
// operation is tried again.
var errRetry = errors.New("the store changed under the transaction")

// Acquire is one transaction: if the session key is the session's, the
// lease key does not exist and the amnesia guard has passed, it creates the
// lease key on the session's etcd lease and puts the session key (whose
// version counts acquisitions); either way it reads the value and the
// digest. The token is the lease key's CreateRevision above the prefix's
// base: cluster-wide and strictly increasing (F5).
func (s *session) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	const op = "acquire"
	if err := args.Name(op, name); err != nil {
		return backends.Grant{}, err
	}
	if err := s.check(op, name); err != nil {
		return backends.Grant{}, err
	}
	if refused, err := s.stillHeld(ctx, name); refused || err != nil {
		return backends.Grant{}, err
	}
	for range 3 {
		g, err := s.acquire(ctx, name)
		if !errors.Is(err, errRetry) {
			return g, err
		}
	}
	return backends.Grant{}, unavailable(ctx, op, name, errRetry)
}

// stillHeld spares etcd's log the retries of a candidate: etcd runs every
// transaction that may write through raft, whether or not its comparisons
// hold, so an Acquire refused is a log entry (and a disk sync) like any
// write. While the session was refused name and has seen no deletion of it
// since (its watch clears the refusal), it first reads the lease key, the
// guard and its own session key without raft (a serializable read of the
// member it reaches), and returns the refusal that read shows, if any. A
// member that lags can only refuse wrongly, never grant: grants are decided
// by the transaction alone, and a release the read missed comes after the
// revision it recorded, so the watch of the name reports it (A1).
func (s *session) stillHeld(ctx context.Context, name string) (bool, error) {
	const op = "acquire"
	s.mu.Lock()
	_, refused := s.refused[name]
	s.mu.Unlock()
	if !refused {
		return false, nil
	}
	k := s.b.keys
	resp, err := s.b.cli.Txn(ctx).Then(
		clientv3.OpGet(k.lease(name), clientv3.WithSerializable()),
		clientv3.OpGet(k.guard(), clientv3.WithSerializable()),
		clientv3.OpGet(k.session(string(s.id)), clientv3.WithSerializable()),
	).Commit()
	if err != nil {
		return true, s.fail(ctx, op, name, err)
	}
	if !s.isAlive(resp.Responses[2].GetResponseRange().Kvs) {
		return false, nil // let the transaction say what became of the session
	}
	return s.refusedBy(ctx, op, name, resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs,
		resp.Responses[1].GetResponseRange().Kvs)
}

// refusedBy returns the refusal of Acquire by a lease key held by another
// session or by the amnesia guard, read at rev, and records it for Watch;
// false if neither refuses.
func (s *session) refusedBy(ctx context.Context, op, name string, rev int64, lease, guard []*mvccpb.KeyValue) (bool, error) {
	if len(lease) == 1 && clientv3.LeaseID(lease[0].Lease) != s.lease {
		s.refusal(name, rev)
		holder, identity := parseLeaseRecord(lease[0].Value)
		t := s.gen.token(lease[0].CreateRevision)
		s.b.noteToken(t)
		return true, fmt.Errorf("%s: %w", opName(op, name), &backends.HeldError{Name: name, Holder: backends.Holder{
			Session: backends.SessionID(holder), Identity: identity, Token: t}})
	}
	if len(lease) == 0 && len(guard) == 1 {
		s.refusal(name, rev)
		return true, fmt.Errorf("%s: %w", opName(op, name), s.b.recovering(ctx, guard[0]))
	}
	return false, nil
}

func (s *session) acquire(ctx context.Context, name string) (backends.Grant, error) {
	const op = "acquire"
	k := s.b.keys
	sid := string(s.id)
	lk := k.lease(name)
	digest, groups := s.digestOps()
	then := []clientv3.Op{
		clientv3.OpPut(lk, leaseRecord(sid, s.identity), clientv3.WithLease(s.lease)),
		clientv3.OpPut(k.session(sid), s.identity, clientv3.WithLease(s.lease)),
		clientv3.OpGet(k.value(name)),
	}
	then = append(then, s.epochOps(name)...)
	at := len(then)
	then = append(then, digest...)
	els := append([]clientv3.Op{clientv3.OpGet(lk), clientv3.OpGet(k.guard()), clientv3.OpGet(k.value(name))}, digest...)
	resp, err := s.b.cli.Txn(ctx).
		If(s.alive(),
			clientv3.Compare(clientv3.CreateRevision(lk), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(k.guard()), "=", 0)).
		Then(then...).Else(els...).Commit()
	if err != nil {
		return backends.Grant{}, s.fail(ctx, op, name, err)
	}
	rs := resp.Responses
	if resp.Succeeded {
		d, ok := s.digestOf(rs[at:], groups)
		if !ok { // cannot be: the comparison held
			return backends.Grant{}, s.expired(op, name)
		}
		s.note(resp.Header.Revision, d)
		t := s.gen.token(resp.Header.Revision)
		s.b.noteToken(t)
		s.forgetRefusal(name)
		return backends.Grant{Token: t, Value: valueOf(rs[2]), Digest: d}, nil
	}
	d, ok := s.digestOf(rs[3:], groups)
	if !ok {
		return backends.Grant{}, s.expired(op, name)
	}
	s.note(resp.Header.Revision, d)
	lease := rs[0].GetResponseRange().Kvs
	if len(lease) == 1 && clientv3.LeaseID(lease[0].Lease) == s.lease {
		t := s.gen.token(lease[0].CreateRevision)
		s.forgetRefusal(name)
		return backends.Grant{Token: t, Value: valueOf(rs[2]), Digest: d}, nil
	}
	if refused, err := s.refusedBy(ctx, op, name, resp.Header.Revision, lease, rs[1].GetResponseRange().Kvs); refused {
		return backends.Grant{}, err
	}
	return backends.Grant{}, errRetry
}

// epochOps puts the epoch of name's group, if name is a partition of a
// group that exists, so that the members see the change of holder (B3).
// A session that joined the group knows its count and leaves names beyond
// it alone; another puts the epoch of any group.i, a spurious change at
// worst.
func (s *session) epochOps(name string) []clientv3.Op {
	group, i, ok := backends.SplitPartition(name)
	if !ok {
		return nil
	}
	s.mu.Lock()
	n, joined := s.groups[group]
	s.mu.Unlock()
	if joined && i >= n {
		return nil
	}
	k := s.b.keys
	return []clientv3.Op{clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.count(group)), ">", 0)},
		[]clientv3.Op{clientv3.OpPut(k.epoch(group), "")}, nil)}
}

// valueOf reads a value key from a reply: nil if it does not exist.
func valueOf(r *etcdserverpb.ResponseOp) []byte {
	kvs := r.GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil
	}
	if kvs[0].Value == nil {
		return []byte{}
	}
	return kvs[0].Value
}

// refusal records the revision at which the session was refused name, so
// that a watch of name starts right after it (A1).
func (s *session) refusal(name string, rev int64) {
	s.mu.Lock()
	if len(s.refused) < 1<<16 {
		s.refused[name] = rev
	}
	s.mu.Unlock()
}

func (s *session) forgetRefusal(name string) {
	s.mu.Lock()
	delete(s.refused, name)
	s.mu.Unlock()
}

// Release is one transaction: if the session key is the session's and the
// lease key was created at the token's revision on the session's lease, it
// deletes the lease key and puts the release counter; either way it reads
// the digest. Anything else changes nothing (T5).
func (s *session) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	const op = "release"
	if err := args.Name(op, name); err != nil {
		return backends.Digest{}, err
	}
	if err := s.check(op, name); err != nil {
		return backends.Digest{}, err
	}
	k := s.b.keys
	sid := string(s.id)
	lk := k.lease(name)
	digest, groups := s.digestOps()
	then := append([]clientv3.Op{
		clientv3.OpDelete(lk),
		clientv3.OpPut(k.released(sid), "", clientv3.WithLease(s.lease)),
	}, s.epochOps(name)...)
	at := len(then)
	then = append(then, digest...)
	resp, err := s.b.cli.Txn(ctx).
		If(s.alive(),
			clientv3.Compare(clientv3.CreateRevision(lk), "=", s.gen.revision(token)),
			clientv3.Compare(clientv3.LeaseValue(lk), "=", s.lease)).
		Then(then...).Else(digest...).Commit()
	if err != nil {
		return backends.Digest{}, s.fail(ctx, op, name, err)
	}
	rs := resp.Responses
	if resp.Succeeded {
		rs = rs[at:]
	}
	d, ok := s.digestOf(rs, groups)
	if !ok {
		return backends.Digest{}, s.expired(op, name)
	}
	s.note(resp.Header.Revision, d)
	return d, nil
}

// Holder reads the lease key: its value names the holder, its
// CreateRevision makes the token. etcd deletes the key when it revokes the
// holder's lease, so a lease whose holder expired reads as free once etcd
// has revoked it (its leader checks every half second). Remaining is 0:
// etcd would need a request per holder to tell it.
func (s *session) Holder(ctx context.Context, name string) (backends.Holder, error) {
	const op = "holder"
	if err := args.Name(op, name); err != nil {
		return backends.Holder{}, err
	}
	if err := s.check(op, name); err != nil {
		return backends.Holder{}, err
	}
	resp, err := s.b.cli.Get(ctx, s.b.keys.lease(name))
	if err != nil {
		return backends.Holder{}, s.fail(ctx, op, name, err)
	}
	if len(resp.Kvs) == 0 {
		return backends.Holder{}, nil
	}
	kv := resp.Kvs[0]
	sid, identity := parseLeaseRecord(kv.Value)
	t := s.gen.token(kv.CreateRevision)
	s.b.noteToken(t)
	return backends.Holder{Session: backends.SessionID(sid), Identity: identity, Token: t}, nil
}

// PutValue is one transaction: if the session holds name with token (the
// comparisons of Release), it puts the value key.
func (s *session) PutValue(ctx context.Context, name string, token backends.Token, value []byte) error {
	const op = "put value"
	if err := args.Value(op, name, value); err != nil {
		return err
	}
	if err := s.check(op, name); err != nil {
		return err
	}
	k := s.b.keys
	lk := k.lease(name)
	resp, err := s.b.cli.Txn(ctx).
		If(s.alive(),
			clientv3.Compare(clientv3.CreateRevision(lk), "=", s.gen.revision(token)),
			clientv3.Compare(clientv3.LeaseValue(lk), "=", s.lease)).
		Then(clientv3.OpPut(k.value(name), string(value))).
		Else(clientv3.OpGet(k.session(string(s.id)))).Commit()
	if err != nil {
		return s.fail(ctx, op, name, err)
	}
	if resp.Succeeded {
		return nil
	}
	if !s.isAlive(resp.Responses[0].GetResponseRange().Kvs) {
		return s.expired(op, name)
	}
	return fmt.Errorf("%s: token %d: %w", opName(op, name), token, backends.ErrNotHolder)
}

// recovering is the refusal of the amnesia guard whose key is guard: a
// *backends.RecoveringError, with the time its etcd lease has left (one
// more read, made only while the guard stands), or MaxLease if etcd does
// not say.
func (b *Backend) recovering(ctx context.Context, guard *mvccpb.KeyValue) *backends.RecoveringError {
	e := &backends.RecoveringError{Remaining: b.maxLease, MaxLease: b.maxLease,
		Why: "the prefix " + b.keys.p + " is new and may replace one etcd lost"}
	if r, err := b.cli.TimeToLive(ctx, clientv3.LeaseID(guard.Lease)); err == nil && r.TTL > 0 {
		e.Remaining = time.Duration(r.TTL) * time.Second
	}
	return e
}
