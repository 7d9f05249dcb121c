package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a private redis-server: same binary and version as the
// shared one, no persistence, loopback only.
type redisServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	out  bytes.Buffer
}

func startRedis() (*redisServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "simbabench-redis-")
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	s := &redisServer{addr: addr, dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port, "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no")
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	dieWithParent(s.cmd)
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server on %s exited: %s", addr, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s not answering: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *redisServer) stop() {
	s.cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}

// redisStats is what a Redis server reports about its own work: CPU seconds
// (user + system, all threads) and, per command, calls and µs from INFO
// commandstats. Commands a script runs are counted under their own names as
// well as in the script's time.
type redisStats struct {
	cpu      time.Duration
	commands map[string]commandStat
}

type commandStat struct {
	calls int64
	usec  int64
}

// readRedisStats reads INFO cpu and INFO commandstats, in one call.
func readRedisStats(ctx context.Context, c *redis.Client) (redisStats, error) {
	info, err := c.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return redisStats{}, fmt.Errorf("INFO cpu commandstats: %w", err)
	}
	st := redisStats{commands: map[string]commandStat{}}
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			st.cpu += time.Duration(f * 1e9)
			continue
		}
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		var cs commandStat
		for kv := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				cs.calls = n
			case "usec":
				cs.usec = n
			}
		}
		st.commands[name] = cs
	}
	return st, nil
}

// sub returns what happened between o and s, leaving out the INFO calls that
// read them.
func (s redisStats) sub(o redisStats) redisStats {
	d := redisStats{cpu: s.cpu - o.cpu, commands: map[string]commandStat{}}
	for name, cs := range s.commands {
		if name == "info" {
			continue
		}
		p := o.commands[name]
		if cs.calls != p.calls {
			d.commands[name] = commandStat{cs.calls - p.calls, cs.usec - p.usec}
		}
	}
	return d
}

// redisClient returns a go-redis client of addr for one node or baseline:
// deadlines from contexts (the Redis backend requires it), few retries, and
// dial through dial when it is not nil.
func redisClient(addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		Dialer:                dial,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		DialerRetries:         1,
		DialTimeout:           time.Second,
	})
}

// redisRaw is the Redis baseline: SET NX PX and DEL of one key, two bare
// commands on one connection of their own.
func redisRaw(addr, key string) (func(ctx context.Context) error, func(), error) {
	c := redisClient(addr, nil)
	raw := func(ctx context.Context) error {
		ok, err := c.SetNX(ctx, key, "x", Lease).Result()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("SET NX %s: not set", key)
		}
		return c.Del(ctx, key).Err()
	}
	return raw, func() { c.Close() }, nil
}

// deleteRedisKeys deletes the keys that match pattern.
func deleteRedisKeys(ctx context.Context, addr, pattern string) error {
	c := redisClient(addr, nil)
	defer c.Close()
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}
