package simbapg

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/logtext"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// counter counts calls of a watch.
type counter struct{ n atomic.Int64 }

func (c *counter) fn() { c.n.Add(1) }

func (c *counter) wait(t *testing.T, what string, want int64) {
	t.Helper()
	waitFor(t, 5*time.Second, what, func() bool { return c.n.Load() >= want })
}

// cycle makes s acquire and release name.
func cycle(t *testing.T, s backends.Session, name string) {
	t.Helper()
	ctx := testCtx(t)
	g, err := s.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, name, g.Token); err != nil {
		t.Fatal(err)
	}
}

// waitListening waits until b's LISTEN connection is confirmed.
func waitListening(t testing.TB, b *Backend) {
	t.Helper()
	waitFor(t, 10*time.Second, "the LISTEN connection", func() bool { return b.listenerPID.Load() != 0 })
}

// A1: releases, closes and reaped expiries notify the other sessions'
// watches of the name, across backends (nodes) of the schema, but not the
// releasing session's own watches, nor watches of other names; after the
// LISTEN connection is terminated, it reconnects and wakes every watch, and
// notifications resume.
func TestNotifications(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	b1 := newBackend(t, newPool(t, dsn, nil), admin)
	b2 := sameSchema(t, b1, newPool(t, dsn, nil))
	ctx := testCtx(t)
	a := mustOpen(t, b1, time.Minute)
	other := mustOpen(t, b2, time.Minute)
	third := mustOpen(t, b2, time.Minute)
	var byA, byOther, unrelated counter
	t.Cleanup(a.(backends.Notifier).Watch("x", byA.fn))
	t.Cleanup(other.(backends.Notifier).Watch("x", byOther.fn))
	t.Cleanup(other.(backends.Notifier).Watch("y", unrelated.fn))
	waitListening(t, b1)
	waitListening(t, b2)

	cycle(t, a, "x")
	byOther.wait(t, "other's watch after a's release", 1)
	cycle(t, third, "x")
	byA.wait(t, "a's watch after the third session's release", 1)
	byOther.wait(t, "other's watch after the third session's release", 2)
	if n := byA.n.Load(); n != 1 {
		t.Errorf("a's watch called %d times for a's own release and another's; want 1, for the other's", n)
	}

	// A crashed holder: its session expires, and a keep-alive of another
	// session reaps it, which notifies.
	crashed := mustOpen(t, b2, time.Minute)
	if _, err := crashed.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	expireSession(t, admin, b1.Schema(), crashed.ID())
	before := byOther.n.Load()
	if _, err := third.KeepAlive(ctx); err != nil {
		t.Fatal(err)
	}
	byOther.wait(t, "other's watch after a reaped expiry", before+1)
	if n := unrelated.n.Load(); n != 0 {
		t.Errorf("the watch of an untouched name was called %d times; want 0", n)
	}

	// The LISTEN connection is terminated: the feed reconnects, wakes every
	// watch (notifications sent meanwhile are lost), and delivers again.
	old := b2.listenerPID.Load()
	before, beforeY := byOther.n.Load(), unrelated.n.Load()
	var ok bool
	if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(old)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", old, ok, err)
	}
	waitFor(t, 10*time.Second, "a new LISTEN connection", func() bool { p := b2.listenerPID.Load(); return p != 0 && p != old })
	byOther.wait(t, "other's watch after the reconnection", before+1)
	waitFor(t, 5*time.Second, "the unrelated watch after the reconnection", func() bool { return unrelated.n.Load() > beforeY })
	before = byOther.n.Load()
	cycle(t, a, "x")
	byOther.wait(t, "other's watch after a release on the new connection", before+1)
}

// The feed's pings keep an idle LISTEN connection honest, and Backend.Close
// ends it: the server no longer lists it.
func TestListenerClosedWithBackend(t *testing.T) {
	b, admin := sharedBackend(t)
	s := mustOpen(t, b, time.Minute)
	stop := s.(backends.Notifier).Watch("x", func() {})
	defer stop()
	waitListening(t, b)
	pid := b.listenerPID.Load()
	var appName string
	ctx := testCtx(t)
	if err := admin.QueryRow(ctx, "SELECT application_name FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&appName); err != nil {
		t.Fatal(err)
	}
	if appName != "simbapg listener" {
		t.Errorf("the LISTEN connection's application_name = %q; want %q", appName, "simbapg listener")
	}
	b.Close()
	waitFor(t, 5*time.Second, "the LISTEN connection gone", func() bool {
		var n int
		err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&n)
		return err == nil && n == 0
	})
}

// WithNotifications(false): no LISTEN connection and no NOTIFY; watches never
// fire.
func TestWithoutNotifications(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	quiet := newBackend(t, newPool(t, dsn, nil), admin, WithNotifications(false))
	loud := sameSchema(t, quiet, newPool(t, dsn, nil), WithNotifications(true))
	var byQuiet, byLoud counter
	qs, ls := mustOpen(t, quiet, time.Minute), mustOpen(t, loud, time.Minute)
	defer qs.(backends.Notifier).Watch("x", byQuiet.fn)()
	defer ls.(backends.Notifier).Watch("x", byLoud.fn)()
	waitListening(t, loud)
	cycle(t, qs, "x")                             // no NOTIFY
	cycle(t, mustOpen(t, loud, time.Minute), "x") // NOTIFY: wakes loud's watch; quiet does not listen
	byLoud.wait(t, "the listening backend's watch", 1)
	time.Sleep(100 * time.Millisecond)
	if n := byLoud.n.Load(); n != 1 {
		t.Errorf("the listening backend's watch was called %d times; want 1 (the quiet backend does not notify)", n)
	}
	if n := byQuiet.n.Load(); n != 0 || quiet.listenerPID.Load() != 0 {
		t.Errorf("the quiet backend's watch was called %d times, listener pid %d; want none", n, quiet.listenerPID.Load())
	}
}

// A pooler in transaction mode (PgBouncer's pool_mode = transaction) lets
// LISTEN run but never delivers notifications: here a dialer that drops
// every NotificationResponse plays it. The backend detects it with its
// probe, logs it once, and stops trying; its sessions work on.
func TestNotificationsUnsupported(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	var dials atomic.Int64
	cfg := poolConfig(t, dsn, nil)
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &dropNotifications{Conn: c}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	logs := &logtext.Buffer{}
	b := newBackend(t, pool, admin, WithMaxLease(time.Minute), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	unsupportedFeed(t, b, logs, &dials)
}

// The same behind a real PgBouncer in transaction mode, if one is
// installed (it is not among the servers `make services` starts).
func TestNotificationsBehindPgBouncer(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	bouncer := startPgBouncer(t, dsn)
	var dials atomic.Int64
	cfg := poolConfig(t, bouncer, nil)
	// PgBouncer 1.18 keeps no prepared statements in transaction mode.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	logs := &logtext.Buffer{}
	b := newBackend(t, pool, admin, WithMaxLease(time.Minute), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	unsupportedFeed(t, b, logs, &dials)
}

func unsupportedFeed(t *testing.T, b *Backend, logs *logtext.Buffer, dials *atomic.Int64) {
	t.Helper()
	s := mustOpen(t, b, time.Minute)
	var c counter
	defer s.(backends.Notifier).Watch("x", c.fn)()
	waitFor(t, probeWithin+10*time.Second, "the log of unsupported notifications", func() bool {
		return strings.Contains(logs.String(), "not supported")
	})
	t.Logf("log: %s", logs.String())
	if !strings.Contains(logs.String(), "transaction mode") {
		t.Errorf("the log does not suggest a pooler in transaction mode: %s", logs.String())
	}
	n := dials.Load()
	time.Sleep(time.Second) // longer than the feed's back-off
	if d := dials.Load() - n; d != 0 {
		t.Errorf("%d dials after notifications were found unsupported; want none (the feed stops)", d)
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 {
		t.Errorf("logged %d times; want once", got)
	}
	cycle(t, mustOpen(t, b, time.Minute), "x")
	if _, err := s.KeepAlive(testCtx(t)); err != nil {
		t.Errorf("KeepAlive: %v", err)
	}
}

// dropNotifications is a connection that drops every NotificationResponse
// the server sends, as a pooler in transaction mode does to a client that
// LISTENed.
type dropNotifications struct {
	net.Conn
	in, out []byte
}

func (c *dropNotifications) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		buf := make([]byte, 8192)
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		for len(c.in) >= 5 {
			size := 1 + int(binary.BigEndian.Uint32(c.in[1:5]))
			if len(c.in) < size {
				break
			}
			if c.in[0] != 'A' {
				c.out = append(c.out, c.in[:size]...)
			}
			c.in = c.in[size:]
		}
		if err != nil && len(c.out) == 0 {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// startPgBouncer starts a PgBouncer in transaction mode in front of dsn's
// server and returns the URL of dsn's database through it. Without
// PgBouncer the test is skipped, or fails where services are required.
func startPgBouncer(t *testing.T, dsn string) string {
	t.Helper()
	bin := testservers.Binary(t, "pgbouncer", "notifications behind a pooler in transaction mode (TestNotificationsUnsupported covers the same without one)")
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "simba-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port := freeLoopbackPort(t)
	ini := "[databases]\n" +
		cfg.Database + " = host=" + cfg.Host + " port=" + strconv.Itoa(int(cfg.Port)) + " dbname=" + cfg.Database + " user=" + cfg.User + "\n" +
		"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " + strconv.Itoa(port) + "\n" +
		"auth_type = trust\nauth_file = " + filepath.Join(dir, "users.txt") + "\n" +
		"pool_mode = transaction\ndefault_pool_size = 4\nmax_client_conn = 100\nunix_socket_dir =\n" +
		"logfile = " + filepath.Join(dir, "log") + "\npidfile = " + filepath.Join(dir, "pid") + "\n"
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": `"` + cfg.User + `" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	argv := []string{bin, filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 { // PgBouncer refuses to run as root
		os.Chmod(dir, 0o777)
		argv = append([]string{"runuser", "-u", "postgres", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// A process group of its own, killed whole: runuser's child outlives a
	// kill of runuser alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting PgBouncer: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	waitFor(t, 10*time.Second, "PgBouncer listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "postgres://" + cfg.User + "@" + addr + "/" + cfg.Database + "?sslmode=disable"
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// backends.HolderNotifier across a cut: while the watching backend's
// connections are cut (its LISTEN connection and its follower's locks are
// gone), the lease changes hands twice; once the link heals, the watch is
// told the current holder (read again after the resubscription), and
// every change it was told is newer than the one before.
func TestWatchHolderAcrossCut(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	link := faultnet.New()
	bl := newBackend(t, newPool(t, dsn, nil), admin)
	bw := sameSchema(t, bl, newPool(t, dsn, link))
	ctx := testCtx(t)
	w := mustOpen(t, bw, 20*time.Second)
	l := mustOpen(t, bl, 20*time.Second)
	var (
		mu   sync.Mutex
		told []backends.Holder
	)
	stop := w.(backends.HolderNotifier).WatchHolder("x", func(h backends.Holder) {
		mu.Lock()
		told = append(told, h)
		mu.Unlock()
	})
	defer stop()
	last := func() backends.Holder {
		mu.Lock()
		defer mu.Unlock()
		if len(told) == 0 {
			return backends.Holder{}
		}
		return told[len(told)-1]
	}
	g, err := l.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the first grant told", func() bool { return last().Token == g.Token && last().Session == l.ID() })

	link.Cut()
	for range 2 {
		if _, err := l.Release(ctx, "x", g.Token); err != nil {
			t.Fatal(err)
		}
		if g, err = l.Acquire(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if h := last(); h.Token == g.Token {
		t.Fatalf("the watch was told token %d while its connections were cut; the test cuts nothing", h.Token)
	}
	link.Heal()
	waitFor(t, 15*time.Second, "the current holder told after the heal", func() bool { return last().Token == g.Token && last().Session == l.ID() })
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(told); i++ {
		prev, cur := told[i-1], told[i]
		if cur.Session != "" && cur.Token <= prev.Token || cur.Session == "" && (prev.Session == "" || cur.Token < prev.Token) {
			t.Errorf("told %+v after %+v: out of order", cur, prev)
		}
	}
}
