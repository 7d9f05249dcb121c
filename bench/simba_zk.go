package bench

import (
	"context"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
	simbazk "github.com/simba-go/simba/backends/zookeeper"
)

// simbaOnZooKeeper opens a simba row on the ZooKeeper backend, on the shared
// server: every node a backend of its own (each session is a ZooKeeper
// session on a connection of its own, dialled through the node's path), all
// under one fresh root, with MaxLease the lease and the server's tickTime
// (500 ms; the backend's default assumes ZooKeeper's sample 2 s, which at a
// 2 s lease would leave it half the session).
func simbaOnZooKeeper(election bool) func(ctx context.Context, env *Env) (Target, error) {
	return func(ctx context.Context, env *Env) (Target, error) {
		if err := reachable("ZooKeeper", env.ZooKeeper[0]); err != nil {
			return nil, err
		}
		admin, err := zkConnect(env.ZooKeeper, nil)
		if err != nil {
			return nil, err
		}
		root := "/" + unique("simbazk")
		rawPath := root + "-raw"
		s := simbaStore{
			framing:            FramingZooKeeper,
			renewalFromTraffic: true,
			newBackend: func(ctx context.Context, net *NodeNet) (backends.Backend, func(), error) {
				b, err := simbazk.New(env.ZooKeeper, simbazk.WithRoot(root), simbazk.WithMaxLease(Lease),
					simbazk.WithTickTime(zkTickTime), simbazk.WithDialer(net.DialTimeout))
				if err != nil {
					return nil, nil, err
				}
				return b, func() { b.Close() }, nil
			},
			raw: func(context.Context) (func(ctx context.Context) error, func(), error) {
				acl := zk.WorldACL(zk.PermAll)
				return func(context.Context) error {
					if _, err := admin.Create(rawPath, nil, 0, acl); err != nil {
						return fmt.Errorf("create %s: %w", rawPath, err)
					}
					return admin.Delete(rawPath, -1)
				}, func() {}, nil
			},
			cleanup: func() error {
				defer admin.Close()
				return zkDeleteAll(admin, root)
			},
		}
		return newSimbaTarget(s, election), nil
	}
}
