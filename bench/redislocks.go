package bench

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// The two Redis lock libraries have no sessions: each lock is a key with a
// TTL that its holder must refresh, and a waiter polls. Both rows are
// configured as their documentation shows:
//
//   - redislock: Obtain with RetryStrategy LinearBackoff(100 ms), the
//     backoff of its README (there bounded with LimitRetry; here the
//     caller's context bounds the wait, as Obtain allows), TTL 2 s, and a
//     Refresh(ttl 2 s) every 667 ms (a third of the TTL, as our runtime
//     and etcd's client renew).
//   - redsync: one pool (goredis v9), NewMutex with WithExpiry(2 s) and the
//     default retry delay (a random 50–250 ms between tries) and drift
//     factor; WithTries unbounded so that LockContext waits as long as its
//     context allows (the default 32 tries give up after 1.6–8 s); an
//     ExtendContext every 667 ms.
//
// The refresh loop is one goroutine per lock with a ticker, as a user of
// either library writes it: a lock's refresh is one request, so a node
// holding N locks sends N requests per period.
const lockRefresh = Lease / 3

// pollingTarget is a Redis lock library in a key prefix of its own.
type pollingTarget struct {
	addr    string
	prefix  string
	newNode func(c *redis.Client, prefix string) lockAPI
}

// lockAPI is what a polling row needs of its library on one node.
type lockAPI interface {
	// obtain waits until the node holds key, and returns a refresher and a
	// releaser for that lock.
	obtain(ctx context.Context, key string) (refresh, release func(ctx context.Context) error, err error)
}

func (t *pollingTarget) Framing() Framing  { return FramingRESP }
func (t *pollingTarget) redisAddr() string { return t.addr }

func (t *pollingTarget) Raw(context.Context) (func(ctx context.Context) error, func(), error) {
	return redisRaw(t.addr, t.prefix+":raw")
}

func (t *pollingTarget) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), callWithin)
	defer cancel()
	return deleteRedisKeys(ctx, t.addr, t.prefix+":*")
}

func (t *pollingTarget) NewNode(_ context.Context, net *NodeNet) (Node, error) {
	c := redisClient(t.addr, net.Dial)
	return &pollingNode{c: c, api: t.newNode(c, t.prefix), held: map[*pollingLock]struct{}{}}, nil
}

// pollingNode is one node of a polling row: a go-redis client of its own.
type pollingNode struct {
	c       *redis.Client
	api     lockAPI
	renewed atomic.Int64

	mu   sync.Mutex
	held map[*pollingLock]struct{}
}

func (n *pollingNode) Acquire(ctx context.Context, name string) (Held, error) {
	refresh, release, err := n.api.obtain(ctx, name)
	if err != nil {
		return nil, err
	}
	n.renewed.Store(time.Now().UnixNano()) // the lock's TTL starts now
	l := &pollingLock{n: n, release: release, stop: make(chan struct{}), done: make(chan struct{})}
	n.mu.Lock()
	n.held[l] = struct{}{}
	n.mu.Unlock()
	go l.refreshLoop(refresh)
	return l, nil
}

func (n *pollingNode) LastRenewal() time.Time {
	if ns := n.renewed.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func (n *pollingNode) RenewalPeriod() time.Duration { return lockRefresh }

func (n *pollingNode) Close(ctx context.Context) error {
	n.mu.Lock()
	held := make([]*pollingLock, 0, len(n.held))
	for l := range n.held {
		held = append(held, l)
	}
	n.mu.Unlock()
	for _, l := range held {
		l.Release(ctx)
	}
	return n.c.Close()
}

// pollingLock is a lock a pollingNode holds, refreshed until released.
type pollingLock struct {
	n       *pollingNode
	release func(ctx context.Context) error
	once    sync.Once
	stop    chan struct{}
	done    chan struct{}
}

func (l *pollingLock) refreshLoop(refresh func(ctx context.Context) error) {
	defer close(l.done)
	tick := time.NewTicker(lockRefresh)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), lockRefresh)
		err := refresh(ctx)
		cancel()
		if err == nil {
			l.n.renewed.Store(time.Now().UnixNano())
		}
	}
}

func (l *pollingLock) Release(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.n.mu.Lock()
		delete(l.n.held, l)
		l.n.mu.Unlock()
		err = l.release(ctx)
	})
	return err
}

// redislockRow opens the redislock row.
func redislockRow(ctx context.Context, env *Env) (Target, error) {
	addr, _, err := env.Redis()
	if err != nil {
		return nil, err
	}
	return &pollingTarget{addr: addr, prefix: unique("redislock"), newNode: func(c *redis.Client, prefix string) lockAPI {
		return redislockAPI{redislock.New(c), prefix}
	}}, nil
}

type redislockAPI struct {
	locker *redislock.Client
	prefix string
}

func (a redislockAPI) obtain(ctx context.Context, name string) (func(context.Context) error, func(context.Context) error, error) {
	l, err := a.locker.Obtain(ctx, a.prefix+":"+name, Lease, &redislock.Options{
		RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond),
	})
	if err != nil {
		return nil, nil, err
	}
	refresh := func(ctx context.Context) error { return l.Refresh(ctx, Lease, nil) }
	return refresh, l.Release, nil
}

// redsyncRow opens the redsync row.
func redsyncRow(ctx context.Context, env *Env) (Target, error) {
	addr, _, err := env.Redis()
	if err != nil {
		return nil, err
	}
	return &pollingTarget{addr: addr, prefix: unique("redsync"), newNode: func(c *redis.Client, prefix string) lockAPI {
		return redsyncAPI{redsync.New(redsyncgoredis.NewPool(c)), prefix}
	}}, nil
}

type redsyncAPI struct {
	rs     *redsync.Redsync
	prefix string
}

func (a redsyncAPI) obtain(ctx context.Context, name string) (func(context.Context) error, func(context.Context) error, error) {
	m := a.rs.NewMutex(a.prefix+":"+name, redsync.WithExpiry(Lease), redsync.WithTries(math.MaxInt32))
	if err := m.LockContext(ctx); err != nil {
		return nil, nil, err
	}
	refresh := func(ctx context.Context) error {
		ok, err := m.ExtendContext(ctx)
		if err == nil && !ok {
			return redsync.ErrExtendFailed
		}
		return err
	}
	release := func(ctx context.Context) error {
		_, err := m.UnlockContext(ctx)
		return err
	}
	return refresh, release, nil
}
