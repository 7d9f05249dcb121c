package bench

import (
	"context"

	"github.com/simba-go/simba/backends"
	simbaredis "github.com/simba-go/simba/backends/redis"
)

// simbaOnRedis opens a simba row on the Redis backend: every node a go-redis
// client of its own (ContextTimeoutEnabled, as the backend requires; one
// retry) and a backend on it, all in one fresh namespace, with MaxLease the
// lease (the longest session granted, and the amnesia guard's wait on a
// Redis that just started).
func simbaOnRedis(election bool) func(ctx context.Context, env *Env) (Target, error) {
	return func(ctx context.Context, env *Env) (Target, error) {
		addr, _, err := env.Redis()
		if err != nil {
			return nil, err
		}
		prefix := unique("simba")
		s := simbaStore{
			framing: FramingRESP,
			addr:    addr,
			newBackend: func(ctx context.Context, net *NodeNet) (backends.Backend, func(), error) {
				c := redisClient(addr, net.Dial)
				b, err := simbaredis.New(c, simbaredis.WithPrefix(prefix), simbaredis.WithMaxLease(Lease))
				if err != nil {
					c.Close()
					return nil, nil, err
				}
				return b, func() { b.Close(); c.Close() }, nil
			},
			raw: func(context.Context) (func(ctx context.Context) error, func(), error) {
				return redisRaw(addr, prefix+"-raw")
			},
			cleanup: func() error {
				ctx, cancel := context.WithTimeout(context.Background(), callWithin)
				defer cancel()
				return deleteRedisKeys(ctx, addr, "{"+prefix+"}*")
			},
		}
		return newSimbaTarget(s, election), nil
	}
}
