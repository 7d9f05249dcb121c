package simbaetcd

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/sessionid"
)

// session is one Simba session: one etcd lease, the session key and the
// release counter on it.
type session struct {
	b        *Backend
	id       backends.SessionID
	lease    clientv3.LeaseID
	identity string
	ttl      int64 // seconds: the most a renewal reports (what was asked, clamped)
	gen      generation
	sessRev  int64 // the session key's CreateRevision: the session is alive while it exists

	mu      sync.Mutex
	dead    error            // why the session ended, or nil
	groups  map[string]int   // joined, with their partition counts
	refused map[string]int64 // lease name → revision at which Acquire was refused (for Watch)
	known   known            // the latest digest read, and the revision it was read at

	watchCtx  context.Context // cancelled when the session ends
	watchStop context.CancelFunc
	watchers  sync.WaitGroup
}

// known is a digest as of a store revision.
type known struct {
	rev    int64
	digest backends.Digest
}

var _ backends.Notifier = (*session)(nil)

// OpenSession grants an etcd lease of opts.TTL clamped to MaxLease, in
// whole seconds rounded down (at least one: a TTL below a second is
// refused), and puts the session key and the release counter on it in one
// transaction that also checks the prefix's meta key. The renewal reports
// what was granted, never more than asked: a server that raised the TTL to
// its minimum (about 1.5 × its election timeout) keeps the session longer
// than reported, which only delays a crashed holder's fail-over (logged
// once).
func (b *Backend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if b.closed.Load() {
		return nil, backends.Renewal{}, b.closedErr("open session", "")
	}
	if err := args.Session(opts, time.Second); err != nil {
		return nil, backends.Renewal{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, backends.Renewal{}, unavailable(ctx, "open session", "", err)
	}
	ttl := int64(min(opts.TTL, b.maxLease) / time.Second)
	for attempt := 0; ; attempt++ {
		s, r, err := b.openSession(ctx, opts.Identity, ttl, attempt > 0)
		if errors.Is(err, errGeneration) && attempt < 2 {
			continue
		}
		return s, r, err
	}
}

// errGeneration reports that the prefix's meta key changed under a session
// being opened.
var errGeneration = errors.New("the prefix was created again while the session opened")

func (b *Backend) openSession(ctx context.Context, identity string, ttl int64, fresh bool) (*session, backends.Renewal, error) {
	const op = "open session"
	g, err := b.generation(ctx, op, fresh)
	if err != nil {
		return nil, backends.Renewal{}, err
	}
	gr, err := b.cli.Grant(ctx, ttl)
	if err != nil {
		return nil, backends.Renewal{}, unavailable(ctx, op, "", err)
	}
	s := &session{b: b, id: sessionid.New(), lease: gr.ID, identity: identity, ttl: ttl, gen: g,
		groups: make(map[string]int), refused: make(map[string]int64)}
	sid := string(s.id)
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.keys.meta()), "=", g.rev0),
			clientv3.Compare(clientv3.Value(b.keys.meta()), "=", metaData(g.base))).
		Then(clientv3.OpPut(b.keys.session(sid), identity, clientv3.WithLease(gr.ID)),
			clientv3.OpPut(b.keys.released(sid), "", clientv3.WithLease(gr.ID))).
		Commit()
	if err == nil && !resp.Succeeded {
		b.forget(g)
		err = errGeneration
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		b.cli.Revoke(rctx, gr.ID)
		cancel()
		if errors.Is(err, errGeneration) {
			return nil, backends.Renewal{}, fmt.Errorf("%s: %w", opName(op, ""), err)
		}
		return nil, backends.Renewal{}, unavailable(ctx, op, "", err)
	}
	s.sessRev = resp.Header.Revision
	s.known = known{rev: resp.Header.Revision}
	s.watchCtx, s.watchStop = context.WithCancel(context.Background())
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		s.end(ctx, true)
		return nil, backends.Renewal{}, b.closedErr(op, "")
	}
	b.sessions[s] = struct{}{}
	b.mu.Unlock()
	return s, backends.Renewal{Remaining: s.remaining(gr.TTL), StoreTime: b.storeTime()}, nil
}

// remaining is what a renewal reports for the TTL etcd granted: at most
// what was asked (see OpenSession).
func (s *session) remaining(granted int64) time.Duration {
	if granted > s.ttl {
		s.b.raised.Do(func() {
			s.b.logger.Warn("simbaetcd: etcd raised the session's time to live to its minimum; renewals report the time asked, and a crashed holder's leases are freed after the longer one",
				slog.Duration("asked", time.Duration(s.ttl)*time.Second), slog.Duration("granted", time.Duration(granted)*time.Second))
		})
		granted = s.ttl
	}
	return time.Duration(granted) * time.Second
}

// storeTime is the Renewal's StoreTime: this process's clock with
// WithLocalClock, else none.
func (b *Backend) storeTime() time.Time {
	if b.clock {
		return time.Now()
	}
	return time.Time{}
}

func (s *session) ID() backends.SessionID { return s.id }

// check returns the error of a call on an ended session or a closed
// backend, or nil.
func (s *session) check(op, name string) error {
	if s.b.closed.Load() {
		return s.b.closedErr(op, name)
	}
	s.mu.Lock()
	dead := s.dead
	s.mu.Unlock()
	if dead != nil {
		return fmt.Errorf("%s: %w", opName(op, name), dead)
	}
	return nil
}

// expired marks the session ended (the store no longer has it) and returns
// the error of op.
func (s *session) expired(op, name string) error {
	s.mu.Lock()
	if s.dead == nil {
		s.dead = backends.ErrSessionExpired
	}
	s.mu.Unlock()
	s.stopWatches()
	return fmt.Errorf("%s: %w", opName(op, name), backends.ErrSessionExpired)
}

// fail maps an error of the client: a lease etcd no longer has means the
// session expired; anything else, unavailable.
func (s *session) fail(ctx context.Context, op, name string, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return s.expired(op, name)
	}
	if s.b.closed.Load() {
		return s.b.closedErr(op, name)
	}
	return unavailable(ctx, op, name, err)
}

// alive is the comparison every transaction of the session makes: the
// session key is the one it created. It is gone once etcd revoked the
// lease (an expiry, a Close) or lost its data.
func (s *session) alive() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(s.b.keys.session(string(s.id))), "=", s.sessRev)
}

// isAlive reads the session key of a transaction's reply.
func (s *session) isAlive(kvs []*mvccpb.KeyValue) bool {
	return len(kvs) == 1 && kvs[0].CreateRevision == s.sessRev && clientv3.LeaseID(kvs[0].Lease) == s.lease
}

// digestOps reads the digest: the session key, whose version counts the
// leases acquired (plus one), the release counter, whose version counts
// those released (plus one), and for each joined group its epoch (put at
// every join, leave and change of a partition's holder) and the number of
// its members (which falls when a member's session ends). The first op is
// the session key. They cost the same however many leases the session
// holds.
func (s *session) digestOps() ([]clientv3.Op, []string) {
	sid := string(s.id)
	ops := []clientv3.Op{clientv3.OpGet(s.b.keys.session(sid)), clientv3.OpGet(s.b.keys.released(sid))}
	s.mu.Lock()
	groups := make([]string, 0, len(s.groups))
	for g := range s.groups {
		groups = append(groups, g)
	}
	s.mu.Unlock()
	slices.Sort(groups)
	for _, g := range groups {
		ops = append(ops,
			clientv3.OpGet(s.b.keys.epoch(g)),
			clientv3.OpGet(s.b.keys.members(g), clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	return ops, groups
}

// digestOf reads the replies of digestOps (resps starts at their first);
// ok is false if the session key is gone.
func (s *session) digestOf(resps []*etcdserverpb.ResponseOp, groups []string) (backends.Digest, bool) {
	sk := resps[0].GetResponseRange().Kvs
	if !s.isAlive(sk) {
		return backends.Digest{}, false
	}
	var rv int64 = 1
	if kvs := resps[1].GetResponseRange().Kvs; len(kvs) == 1 {
		rv = kvs[0].Version
	}
	acquired, released := sk[0].Version-1, rv-1
	d := backends.Digest{Leases: int(acquired - released), Version: uint64(acquired + released)}
	if len(groups) > 0 {
		h := fnv.New64a()
		for i, g := range groups {
			r := resps[2+2*i : 4+2*i]
			var epoch int64
			if kvs := r[0].GetResponseRange().Kvs; len(kvs) == 1 {
				epoch = kvs[0].ModRevision
			}
			fmt.Fprintf(h, "%s\x00%d\x00%d\x00", g, epoch, r[1].GetResponseRange().Count)
		}
		d.Groups = h.Sum64() | 1 // never 0, the digest of no group
	}
	return d, true
}

// note records a digest read at rev, if it is the latest.
func (s *session) note(rev int64, d backends.Digest) {
	s.mu.Lock()
	if rev >= s.known.rev {
		s.known = known{rev: rev, digest: d}
	}
	s.mu.Unlock()
}

// KeepAlive renews the lease with one KeepAliveOnce (one request; never
// the client's background keep-alive stream). Its reply's TTL is counted by
// the server from when it handled the request (B1). The digest comes from
// the latest the session read if the reply's revision shows that nothing
// was written to etcd since; otherwise from one read transaction after the
// renewal (see the package documentation).
func (s *session) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	const op = "keep-alive"
	if err := s.check(op, ""); err != nil {
		return backends.Renewal{}, err
	}
	resp, err := s.b.cli.KeepAliveOnce(ctx, s.lease)
	if err != nil {
		return backends.Renewal{}, s.fail(ctx, op, "", err)
	}
	r := backends.Renewal{Remaining: s.remaining(resp.TTL), StoreTime: s.b.storeTime()}
	s.mu.Lock()
	k := s.known
	s.mu.Unlock()
	if resp.ResponseHeader != nil && resp.Revision <= k.rev {
		r.Digest = k.digest
		return r, nil
	}
	d, err := s.readDigest(ctx, op)
	if err != nil {
		return backends.Renewal{}, err
	}
	r.Digest = d
	return r, nil
}

// readDigest reads the digest in one transaction.
func (s *session) readDigest(ctx context.Context, op string) (backends.Digest, error) {
	ops, groups := s.digestOps()
	resp, err := s.b.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return backends.Digest{}, s.fail(ctx, op, "", err)
	}
	d, ok := s.digestOf(resp.Responses, groups)
	if !ok {
		return backends.Digest{}, s.expired(op, "")
	}
	s.note(resp.Header.Revision, d)
	return d, nil
}

// Owned lists the session's leases: the lease keys on its etcd lease, read
// in the same transaction as the digest.
func (s *session) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	const op = "owned"
	if err := s.check(op, ""); err != nil {
		return nil, backends.Digest{}, err
	}
	ops, groups := s.digestOps()
	ops = append(ops, clientv3.OpGet(s.b.keys.leases(), clientv3.WithPrefix()))
	resp, err := s.b.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, backends.Digest{}, s.fail(ctx, op, "", err)
	}
	d, ok := s.digestOf(resp.Responses, groups)
	if !ok {
		return nil, backends.Digest{}, s.expired(op, "")
	}
	s.note(resp.Header.Revision, d)
	var held []backends.Held
	for _, kv := range resp.Responses[len(ops)-1].GetResponseRange().Kvs {
		if sid, _ := parseLeaseRecord(kv.Value); sid != string(s.id) || clientv3.LeaseID(kv.Lease) != s.lease {
			continue
		}
		held = append(held, backends.Held{
			Name:  strings.TrimPrefix(string(kv.Key), s.b.keys.leases()),
			Token: s.gen.token(kv.CreateRevision),
		})
	}
	return held, d, nil
}

// Close revokes the session's lease: etcd deletes every key on it — its
// leases, memberships, session key — in one step, waking watchers (S4).
func (s *session) Close(ctx context.Context) error {
	if s.b.closed.Load() {
		return nil
	}
	return s.end(ctx, false)
}

// end revokes the lease and stops the watches; byBackend marks the session
// closed with the backend.
func (s *session) end(ctx context.Context, byBackend bool) error {
	s.mu.Lock()
	already := s.dead != nil
	if !already {
		s.dead = backends.ErrSessionExpired
		if byBackend {
			s.dead = fmt.Errorf("%w (%w)", backends.ErrClosed, backends.ErrSessionExpired)
		}
	}
	s.mu.Unlock()
	s.stopWatches()
	s.b.mu.Lock()
	delete(s.b.sessions, s)
	s.b.mu.Unlock()
	if already {
		return nil
	}
	if _, err := s.b.cli.Revoke(ctx, s.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return unavailable(ctx, "close session", "", err)
	}
	return nil
}

// stopWatches ends the session's watches and waits for their goroutines.
func (s *session) stopWatches() {
	if s.watchStop != nil {
		s.watchStop()
	}
	s.watchers.Wait()
}
