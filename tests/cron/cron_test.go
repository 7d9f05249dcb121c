package cron

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/simba-go/simba/backends"
	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
	"github.com/simba-go/simba/tests/internal/serial"
)

// The environment of a node process.
const (
	nodeEnv   = "SIMBA_CRON_NODE" // the node's number; set, the binary runs a node
	addrEnv   = "SIMBA_CRON_REDIS"
	prefixEnv = "SIMBA_CRON_PREFIX"
	skewEnv   = "SIMBA_CRON_SKEW" // a time.Duration
)

func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) != "" {
		os.Exit(nodeMain())
	}
	unlock := serial.Lock()
	code := m.Run()
	unlock()
	os.Exit(code)
}

// skewed is a node's view of a store whose clock it reads off by off.
type skewed struct {
	backends.Backend
	off time.Duration
}

func (s *skewed) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	sess, r, err := s.Backend.OpenSession(ctx, opts)
	if err != nil {
		return nil, r, err
	}
	r.StoreTime = r.StoreTime.Add(s.off)
	return &skewedSession{Session: sess, off: s.off}, r, nil
}

func (s *skewed) StoreTime(ctx context.Context) (time.Time, error) {
	at, err := s.Backend.(backends.StoreClock).StoreTime(ctx)
	return at.Add(s.off), err
}

type skewedSession struct {
	backends.Session
	off time.Duration
}

func (s *skewedSession) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	r, err := s.Session.KeepAlive(ctx)
	r.StoreTime = r.StoreTime.Add(s.off)
	return r, err
}

// nodeMain runs one node: a cron schedule every second whose runs count
// themselves in Redis, by slot, until SIGTERM.
func nodeMain() int {
	node := os.Getenv(nodeEnv)
	skew, err := time.ParseDuration(os.Getenv(skewEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	prefix := os.Getenv(prefixEnv)
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv(addrEnv), ContextTimeoutEnabled: true})
	defer rc.Close()
	b, err := simbaredis.New(rc, simbaredis.WithPrefix(prefix))
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	c, err := runtime.NewClient(&skewed{Backend: b, off: skew}, runtime.ConfigFor(2*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	_, err = c.StartSchedule("cron", runtime.Schedule{Cron: "* * * * * *", CatchUp: 2 * time.Second},
		func(ctx context.Context, t *runtime.Term) error {
			slot, _ := runtime.ScheduledSlot(ctx)
			key := strconv.FormatInt(slot.UnixMilli(), 10)
			// A fresh context: the count must land even if the term ends now.
			wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := rc.HIncrBy(wctx, prefix+":runs", key, 1).Err(); err != nil {
				return err
			}
			return rc.HSet(wctx, prefix+":by", key, node).Err()
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	<-stop
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "node: close:", err)
		return 1
	}
	return 0
}

// R2: four node processes whose views of the store's clock are up to 4.7 s
// apart run a cron schedule every second while the test kills the leader
// (and starts it again) and pauses it for longer than the lease; Redis
// counts every run by slot, and no slot counts twice.
func TestSkewedProcessesRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes, real time")
	}
	addr := testservers.Redis(t)
	prefix := fmt.Sprintf("simba-crontest-%d", time.Now().UnixNano())
	testservers.ClearRedis(t, addr, 0, prefix+"*")
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()

	skews := []time.Duration{-2500 * time.Millisecond, -700 * time.Millisecond, 900 * time.Millisecond, 2200 * time.Millisecond}
	procs := make([]*exec.Cmd, len(skews))
	start := func(i int) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), nodeEnv+"="+strconv.Itoa(i), addrEnv+"="+addr, prefixEnv+"="+prefix, skewEnv+"="+skews[i].String())
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
	}
	for i := range skews {
		start(i)
	}
	defer func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGCONT)
			p.Process.Kill()
			p.Wait()
		}
	}()
	ctx := context.Background()
	// leader is the node that ran the latest slot.
	leader := func() int {
		by, err := rc.HGetAll(ctx, prefix+":by").Result()
		if err != nil {
			t.Fatal(err)
		}
		var latest int64 = -1
		node := -1
		for slot, n := range by {
			if s, _ := strconv.ParseInt(slot, 10, 64); s > latest {
				latest = s
				node, _ = strconv.Atoi(n)
			}
		}
		return node
	}
	for round := range 6 {
		time.Sleep(2500 * time.Millisecond)
		n := leader()
		if n < 0 {
			continue
		}
		if round%2 == 0 {
			procs[n].Process.Kill() // a crash; the node comes back at once
			procs[n].Wait()
			start(n)
		} else {
			procs[n].Process.Signal(syscall.SIGSTOP) // a pause longer than the lease
			time.Sleep(3 * time.Second)
			procs[n].Process.Signal(syscall.SIGCONT)
		}
	}
	time.Sleep(2 * time.Second)
	for _, p := range procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		if err := p.Wait(); err != nil {
			t.Errorf("node exit: %v", err)
		}
	}
	procs = nil

	runs, err := rc.HGetAll(ctx, prefix+":runs").Result()
	if err != nil {
		t.Fatal(err)
	}
	by, err := rc.HGetAll(ctx, prefix+":by").Result()
	if err != nil {
		t.Fatal(err)
	}
	var slots []int64
	for slot, n := range runs {
		if n != "1" {
			t.Errorf("slot %s ran %s times", slot, n)
		}
		s, _ := strconv.ParseInt(slot, 10, 64)
		slots = append(slots, s)
	}
	slices.Sort(slots)
	changes := 0 // hand-overs between nodes, in slot order
	for i := 1; i < len(slots); i++ {
		if by[strconv.FormatInt(slots[i], 10)] != by[strconv.FormatInt(slots[i-1], 10)] {
			changes++
		}
	}
	t.Logf("%d slots ran, with %d hand-overs between nodes", len(slots), changes)
	if len(slots) < 10 || changes < 2 {
		t.Errorf("%d slots ran, with %d hand-overs: the test exercised too little", len(slots), changes)
	}
}
