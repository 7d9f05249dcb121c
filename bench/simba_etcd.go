package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backends"
	simbaetcd "github.com/simba-go/simba/backends/etcd"
)

// simbaOnEtcd opens a simba row on the etcd backend, on the embedded server
// the etcd rows use: every node a clientv3.Client of its own (its requests
// counted as the etcd rows count theirs) and a backend on it, all under one
// fresh prefix, with MaxLease the lease. The prefix is created, and its
// amnesia guard waited out, before the row starts.
func simbaOnEtcd(election bool) func(ctx context.Context, env *Env) (Target, error) {
	return func(ctx context.Context, env *Env) (Target, error) {
		url, err := env.Etcd()
		if err != nil {
			return nil, err
		}
		admin, err := etcdClient(url, nil)
		if err != nil {
			return nil, err
		}
		prefix := "/" + unique("simbaetcd") + "/"
		if err := etcdGuardPassed(ctx, admin, prefix); err != nil {
			admin.Close()
			return nil, err
		}
		s := simbaStore{
			framing: FramingNone,
			newBackend: func(ctx context.Context, net *NodeNet) (backends.Backend, func(), error) {
				cli, err := etcdClient(url, net, &etcdCounts{})
				if err != nil {
					return nil, nil, err
				}
				b, err := simbaetcd.New(cli, simbaetcd.WithPrefix(prefix), simbaetcd.WithMaxLease(Lease))
				if err != nil {
					cli.Close()
					return nil, nil, err
				}
				return b.Backend(), func() { b.Close(); cli.Close() }, nil
			},
			raw: func(context.Context) (func(ctx context.Context) error, func(), error) {
				key := prefix + "raw"
				return func(ctx context.Context) error {
					for range 2 {
						if _, err := admin.Put(ctx, key, "x"); err != nil {
							return err
						}
					}
					return nil
				}, func() {}, nil
			},
			cleanup: func() error {
				defer admin.Close()
				ctx, cancel := context.WithTimeout(context.Background(), callWithin)
				defer cancel()
				_, err := admin.Delete(ctx, prefix, clientv3.WithPrefix())
				return err
			},
		}
		return newSimbaTarget(s, election), nil
	}
}

// etcdGuardPassed creates prefix's layout (a session of its own) and waits
// until the new prefix's amnesia guard lets a lease be acquired.
func etcdGuardPassed(ctx context.Context, cli *clientv3.Client, prefix string) error {
	b, err := simbaetcd.New(cli, simbaetcd.WithPrefix(prefix), simbaetcd.WithMaxLease(Lease))
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(ctx, Lease+10*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: Lease})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	for {
		g, err := s.Acquire(ctx, "probe")
		if err == nil {
			_, err = s.Release(ctx, "probe", g.Token)
			return err
		}
		if !errors.Is(err, backends.ErrRecovering) {
			return err
		}
		if _, err := s.KeepAlive(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the prefix's amnesia guard: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
