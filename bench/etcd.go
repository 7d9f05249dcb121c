package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// The etcd rows: etcd's own recipes (client/v3/concurrency) on the embedded
// server. Each node is a clientv3.Client and one concurrency.Session with
// TTL 2 (seconds, the lease), whose lease all of the node's mutexes or
// elections share: the client keeps it alive on one stream, sending a
// keep-alive a third of the TTL after the last reply, on a loop that looks
// every 500 ms (so about every second with a 2 s TTL; the harness counts the
// keep-alives it sends to get the period). A Mutex's Lock is a transaction,
// then, if another key is older, a watch until it is deleted; an Election's
// Campaign is the same on its prefix. Everything else is etcd's default.
type etcdTarget struct {
	url      string
	prefix   string
	election bool
	cli      *clientv3.Client // for the raw pair and the cleanup
}

func etcdRow(election bool) func(ctx context.Context, env *Env) (Target, error) {
	return func(ctx context.Context, env *Env) (Target, error) {
		url, err := env.Etcd()
		if err != nil {
			return nil, err
		}
		cli, err := etcdClient(url, nil)
		if err != nil {
			return nil, err
		}
		kind := "etcdmutex"
		if election {
			kind = "etcdelection"
		}
		return &etcdTarget{url: url, prefix: "/" + unique(kind), election: election, cli: cli}, nil
	}
}

// etcdClient returns a client of url, with its connections through net and
// its requests counted there (and keep-alives in ka), when net is not nil.
func etcdClient(url string, net *NodeNet, ka ...*etcdCounts) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{url}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if net != nil {
		c := ka[0]
		cfg.DialOptions = []grpc.DialOption{
			grpc.WithContextDialer(net.GRPCDial),
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
				cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				net.Add(1)
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
				method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				s, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil {
					return nil, err
				}
				return &countedStream{ClientStream: s, net: net, c: c,
					keepAlive: method == "/etcdserverpb.Lease/LeaseKeepAlive"}, nil
			}),
		}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// etcdCounts are a node's keep-alives: how many were sent, and when the last
// reply came.
type etcdCounts struct {
	sent    atomic.Int64
	renewed atomic.Int64 // Unix ns
}

// countedStream counts every message a stream sends as a request (a
// keep-alive, a watch request), and notes keep-alive replies.
type countedStream struct {
	grpc.ClientStream
	net       *NodeNet
	c         *etcdCounts
	keepAlive bool
}

func (s *countedStream) SendMsg(m any) error {
	s.net.Add(1)
	if s.keepAlive {
		s.c.sent.Add(1)
	}
	return s.ClientStream.SendMsg(m)
}

func (s *countedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil && s.keepAlive {
		s.c.renewed.Store(time.Now().UnixNano())
	}
	return err
}

func (t *etcdTarget) Framing() Framing { return FramingNone }

// Raw is two Puts of one key: the write a Lock's transaction makes and the
// delete an Unlock makes are each one such raft commit.
func (t *etcdTarget) Raw(context.Context) (func(ctx context.Context) error, func(), error) {
	key := t.prefix + "/raw"
	return func(ctx context.Context) error {
		for range 2 {
			if _, err := t.cli.Put(ctx, key, "x"); err != nil {
				return err
			}
		}
		return nil
	}, func() {}, nil
}

func (t *etcdTarget) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), callWithin)
	defer cancel()
	_, err := t.cli.Delete(ctx, t.prefix, clientv3.WithPrefix())
	t.cli.Close()
	return err
}

func (t *etcdTarget) NewNode(ctx context.Context, net *NodeNet) (Node, error) {
	n := &etcdNode{election: t.election, prefix: t.prefix}
	cli, err := etcdClient(t.url, net, &n.counts)
	if err != nil {
		return nil, err
	}
	// The session lives until Close: its context is not ctx, which may be
	// a step's.
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(Lease/time.Second)), concurrency.WithContext(context.Background()))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	n.cli, n.s = cli, s
	n.counts.renewed.Store(time.Now().UnixNano()) // the lease was granted now
	return n, nil
}

// etcdNode is one clientv3.Client and its session.
type etcdNode struct {
	cli      *clientv3.Client
	s        *concurrency.Session
	election bool
	prefix   string
	counts   etcdCounts
}

func (n *etcdNode) Acquire(ctx context.Context, name string) (Held, error) {
	key := n.prefix + "/" + name
	if n.election {
		e := concurrency.NewElection(n.s, key)
		if err := e.Campaign(ctx, "node"); err != nil {
			return nil, err
		}
		return etcdLeader{e}, nil
	}
	m := concurrency.NewMutex(n.s, key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return etcdLock{m}, nil
}

func (n *etcdNode) LastRenewal() time.Time {
	return time.Unix(0, n.counts.renewed.Load())
}

// RenewalPeriod is 0: the client picks it (see Renewals).
func (n *etcdNode) RenewalPeriod() time.Duration { return 0 }

// Renewals counts the keep-alives the client sent.
func (n *etcdNode) Renewals() int64 { return n.counts.sent.Load() }

// Close revokes the session's lease (everything the node holds goes with
// it) and closes the client.
func (n *etcdNode) Close(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- n.s.Close() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	n.cli.Close()
	return err
}

type etcdLock struct{ m *concurrency.Mutex }

func (l etcdLock) Release(ctx context.Context) error { return l.m.Unlock(ctx) }

type etcdLeader struct{ e *concurrency.Election }

func (l etcdLeader) Release(ctx context.Context) error { return l.e.Resign(ctx) }
