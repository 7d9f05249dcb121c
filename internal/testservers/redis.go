package testservers

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClearRedis deletes the keys matching pattern in database db of the Redis
// at addr, before the test and again when it ends. Use it for keys a test
// cannot give a name of its own, such as a backend's default namespace on a
// server that other checkouts of this module share.
func ClearRedis(t testing.TB, addr string, db int, pattern string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	clear := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var keys []string
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("testservers: scanning Redis db %d for %q: %v", db, pattern, err)
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Fatalf("testservers: deleting %d keys %q from Redis db %d: %v", len(keys), pattern, db, err)
			}
		}
	}
	clear()
	t.Cleanup(func() { clear(); c.Close() })
}
