package simbaredis

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
)

// heldBy returns the names, among names, whose lease records name session
// id as their holder.
func heldBy(t *testing.T, c *redis.Client, l layout, id string, names []string) []string {
	t.Helper()
	ctx := context.Background()
	cmds := make([]*redis.StringCmd, len(names))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range names {
			cmds[i] = p.HGet(ctx, l.meta(), field(fieldHolder, name))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("reading lease records: %v", err)
	}
	var held []string
	for i, cmd := range cmds {
		if cmd.Val() == id {
			held = append(held, names[i])
		}
	}
	return held
}

// sessionRecords returns what is left of session id in Redis: its keys
// (owned, joined) and its fields of the meta hash.
func sessionRecords(t *testing.T, c *redis.Client, l layout, id string) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	for _, k := range []string{l.owned(id), l.joined(id)} {
		if n, err := c.Exists(ctx, k).Result(); err != nil {
			t.Fatalf("EXISTS %s: %v", k, err)
		} else if n > 0 {
			left = append(left, k)
		}
	}
	tags := []string{fieldExpiry, fieldTTL, fieldLeases, fieldVersion, fieldLeave, fieldIdentity}
	fields := make([]string, len(tags))
	for i, tag := range tags {
		fields[i] = field(tag, id)
	}
	vals, err := c.HMGet(ctx, l.meta(), fields...).Result()
	if err != nil {
		t.Fatalf("HMGET %s: %v", l.meta(), err)
	}
	for i, v := range vals {
		if v != nil {
			left = append(left, l.meta()+" "+fields[i])
		}
	}
	return left
}

// S1: a keep-alive ends crashed sessions on the way, but releases at most
// reapBudget of their leases per call, so that a node's renewal never pays
// for a crashed node with many leases in one go (it would block Redis for
// a few µs a lease). Meanwhile the crashed session stays dead and its leases not
// yet released are free to others, since their holder expired; later calls
// go on until the session is gone.
func TestReapIsBounded(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	crashed, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := crashed.Join(ctx, "group", 2); err != nil {
		t.Fatal(err)
	}
	names := []string{backends.PartitionName("group", 0)}
	for i := range 2*reapBudget + 10 {
		names = append(names, "lease-"+strconv.Itoa(i))
	}
	tokens := make(map[string]backends.Token)
	for i, name := range names {
		g, err := crashed.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = g.Token
		if i%500 == 499 {
			if _, err := crashed.KeepAlive(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	live, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close(ctx)
	mine, err := live.Acquire(ctx, "mine")
	if err != nil {
		t.Fatal(err)
	}
	id := string(crashed.ID())
	expireSession(t, admin, b.keys, id)

	if _, err := live.KeepAlive(ctx); err != nil {
		t.Fatal(err)
	}
	left := heldBy(t, admin, b.keys, id, names)
	released := len(names) - len(left)
	if released > reapBudget {
		t.Errorf("one keep-alive released %d leases of a crashed session; want at most %d", released, reapBudget)
	}
	if released == 0 {
		t.Errorf("a keep-alive released none of a crashed session's %d leases; want progress", len(names))
	}

	// Part-way: the session stays dead, its members gone, and what it still
	// holds on record is free to others.
	if _, err := crashed.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive of the crashed session part-way through its reaping = %v; want ErrSessionExpired (S3)", err)
	}
	if _, err := crashed.Acquire(ctx, "new"); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("Acquire by the crashed session part-way through its reaping = %v; want ErrSessionExpired (S3)", err)
	}
	if len(left) > 0 {
		name := left[len(left)-1]
		g, err := live.Acquire(ctx, name)
		if err != nil {
			t.Errorf("Acquire(%q), not yet released by the crashed session: %v; want it free (its holder expired)", name, err)
		} else if g.Token <= tokens[name] {
			t.Errorf("Acquire(%q): token %d; want > %d, the crashed session's", name, g.Token, tokens[name])
		}
	}
	if v, err := live.Members(ctx, "group"); err != nil || len(v.Members) != 0 || slices.ContainsFunc(v.Holders, func(h backends.SessionID) bool { return h != "" }) {
		t.Errorf("Members part-way = %+v, %v; want no members and no holders", v, err)
	}

	for i := 0; i < 10 && len(heldBy(t, admin, b.keys, id, names)) > 0; i++ {
		if _, err := live.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if left := heldBy(t, admin, b.keys, id, names); len(left) > 0 {
		t.Errorf("%d leases still held by the crashed session after 10 more keep-alives", len(left))
	}
	if _, err := live.KeepAlive(ctx); err != nil { // ends the session, if only its records are left
		t.Fatal(err)
	}
	if left := sessionRecords(t, admin, b.keys, id); len(left) > 0 {
		t.Errorf("the crashed session's records %v are left; want none once it is reaped", left)
	}
	if err := admin.ZScore(ctx, b.keys.sessions(), id).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("the crashed session in the sessions set: %v; want it gone", err)
	}
	if g, err := live.Acquire(ctx, "mine"); err != nil || g.Token != mine.Token {
		t.Errorf("the live session's lease after the reaping: %v, %v; want it still held with token %d", g, err, mine.Token)
	}
}

// S4: Close releases every lease, however many, and wakes watchers; more
// than reapBudget take more than one call, but the first call ends the
// session, so that what it holds is free to others at once, and Close
// returns: the backend sweeps the rest of the session's records after it.
func TestCloseManyLeases(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range reapBudget + 10 {
		name := "lease-" + strconv.Itoa(i)
		if _, err := s.Acquire(ctx, name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	other, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	woken := make(chan struct{}, 1)
	stop := other.(backends.Notifier).Watch(names[len(names)-1], func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	defer stop()
	time.Sleep(100 * time.Millisecond) // the subscription starts
	// A candidate tries before it waits; a release wakes those refused.
	if _, err := other.Acquire(ctx, names[len(names)-1]); !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("Acquire of a held lease = %v; want ErrLeaseHeld", err)
	}

	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close with %d leases: %v", len(names), err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := heldBy(t, admin, b.keys, string(s.ID()), names)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d leases still on record as held 5s after Close; want the sweep to release them (S4)", len(left))
			break
		}
	}
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Errorf("the watcher of %s not woken within 5s of Close", names[len(names)-1])
	}
	if _, err := s.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive after Close = %v; want ErrSessionExpired", err)
	}
	if left := sessionRecords(t, admin, b.keys, string(s.ID())); len(left) > 0 {
		t.Errorf("the closed session's records %v are left; want none", left)
	}
}

// closeHold is a go-redis hook that holds up the close scripts of one
// session after the first that succeeded, until their context ends, as a
// Redis too busy to answer in time would.
type closeHold struct {
	target atomic.Value // the session id whose closes it holds up
	closed atomic.Int64 // close scripts of it that succeeded
	held   atomic.Int64 // close scripts of it held up
}

func (*closeHold) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*closeHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *closeHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || (args[1] != scriptClose.sha && args[1] != scriptClose.src) || !slices.Contains(args, any(h.target.Load())) {
			return next(ctx, cmd)
		}
		if h.closed.Load() > 0 {
			h.held.Add(1)
			<-ctx.Done()
			return ctx.Err()
		}
		err := next(ctx, cmd)
		if err == nil {
			h.closed.Add(1)
		}
		return err
	}
}

// S4: Close returns after its one call, which ended the session, whatever
// the sweep of the session's other records that follows it (here held up:
// Redis does not answer it); what the session held is free to others at
// once, and the backend's Close stops the sweep.
func TestCloseReturnsAfterItsFirstCall(t *testing.T) {
	addr, admin := sharedRedis(t)
	client := newClient(t, addr)
	hold := new(closeHold)
	client.AddHook(hold)
	b := newBackend(t, client, admin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	hold.target.Store(string(s.ID()))
	last := "lease-" + strconv.Itoa(reapBudget+9)
	for i := range reapBudget + 10 {
		if _, err := s.Acquire(ctx, "lease-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close = %v; want nil", err)
	}
	if c := hold.closed.Load(); c != 1 {
		t.Fatalf("%d close calls answered; want the first", c)
	}
	other, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Acquire(ctx, last); err != nil {
		t.Errorf("Acquire of a lease the closed session still had on record: %v; want it free", err)
	}
	for hold.held.Load() == 0 {
		time.Sleep(time.Millisecond) // the sweep's call, held up
	}
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend's Close did not stop the sweep within 5s")
	}
}
