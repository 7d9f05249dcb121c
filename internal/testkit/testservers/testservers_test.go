package testservers

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// fakeTB records Fatalf and Skipf and, like testing.T, stops the calling
// goroutine there. Any other method panics (the embedded TB is nil), so a
// helper that calls something unexpected shows up at once.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// call runs fn with a fakeTB on its own goroutine, as testing runs a test,
// and returns what it recorded.
func call(fn func(testing.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// listeningAddr returns a loopback address that accepts connections until the
// test ends (the kernel completes the handshake; nobody needs to Accept).
func listeningAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// clearRequire unsets the variables that make missing servers fatal, which
// `make test` and CI set for the whole run.
func clearRequire(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv(requireEnv, "")
}

func TestUnreachableSkipsOrFails(t *testing.T) {
	helpers := []struct {
		name, env string
		value     func(addr string) string
		call      func(testing.TB)
	}{
		{"Redis", redisEnv, func(a string) string { return a }, func(tb testing.TB) { Redis(tb) }},
		{"Postgres", postgresEnv, func(a string) string { return "postgres://postgres@" + a + "/simba?sslmode=disable" }, func(tb testing.TB) { Postgres(tb) }},
		{"ZooKeeper", zookeeperEnv, func(a string) string { return a }, func(tb testing.TB) { ZooKeeper(tb) }},
	}
	modes := []struct {
		name      string
		ci, req   string
		wantFatal bool
	}{
		{"bare machine", "", "", false},
		{"CI=false", "false", "", false},
		{"SIMBA_REQUIRE_SERVICES=0", "", "0", false},
		{"CI=true", "true", "", true},
		{"SIMBA_REQUIRE_SERVICES=1", "", "1", true},
		{"SIMBA_REQUIRE_SERVICES=yes (not a bool: strict)", "", "yes", true},
	}
	for _, h := range helpers {
		for _, m := range modes {
			t.Run(h.name+"/"+m.name, func(t *testing.T) {
				addr := unusedAddr(t)
				t.Setenv(h.env, h.value(addr))
				t.Setenv("CI", m.ci)
				t.Setenv(requireEnv, m.req)

				f := call(h.call)

				msg := f.skip
				if m.wantFatal {
					msg = f.fatal
					if f.fatal == "" || f.skip != "" {
						t.Fatalf("want Fatal, got fatal=%q skip=%q", f.fatal, f.skip)
					}
				} else if f.skip == "" || f.fatal != "" {
					t.Fatalf("want Skip, got fatal=%q skip=%q", f.fatal, f.skip)
				}
				for _, want := range []string{addr, "make services", "scripts/services.sh", "from " + h.env} {
					if !strings.Contains(msg, want) {
						t.Errorf("message lacks %q:\n%s", want, msg)
					}
				}
			})
		}
	}
}

func TestReachableReturnsSetting(t *testing.T) {
	clearRequire(t)
	addr := listeningAddr(t)

	t.Setenv(redisEnv, addr)
	if got := Redis(t); got != addr {
		t.Errorf("Redis = %q, want %q", got, addr)
	}

	dsn := "postgres://postgres@" + addr + "/simba?sslmode=disable"
	t.Setenv(postgresEnv, dsn)
	if got := Postgres(t); got != dsn {
		t.Errorf("Postgres = %q, want %q", got, dsn)
	}

	// One server of the list answering is enough; the driver fails over.
	down := unusedAddr(t)
	t.Setenv(zookeeperEnv, down+", "+addr+",")
	if got, want := ZooKeeper(t), []string{down, addr}; !slices.Equal(got, want) {
		t.Errorf("ZooKeeper = %q, want %q", got, want)
	}
}

func TestDefaults(t *testing.T) {
	for _, env := range []string{redisEnv, postgresEnv, zookeeperEnv} {
		t.Setenv(env, "  ") // blank counts as unset
	}
	if got := setting(redisEnv, redisDefault); got != "127.0.0.1:6379" {
		t.Errorf("Redis default = %q", got)
	}
	if got := setting(postgresEnv, postgresDefault); got != "postgres://postgres@127.0.0.1:5432/simba?sslmode=disable" {
		t.Errorf("Postgres default = %q", got)
	}
	if got := setting(zookeeperEnv, zookeeperDefault); got != "127.0.0.1:2181" {
		t.Errorf("ZooKeeper default = %q", got)
	}
}

func TestBadSettingAlwaysFails(t *testing.T) {
	clearRequire(t) // even where a missing server would only skip
	cases := []struct {
		name, env, value string
		call             func(testing.TB)
		want             string
	}{
		{"redis without port", redisEnv, "localhost", func(tb testing.TB) { Redis(tb) }, "want host:port"},
		{"zookeeper without port", zookeeperEnv, "127.0.0.1:2181,zk2", func(tb testing.TB) { ZooKeeper(tb) }, "want host:port"},
		{"zookeeper empty list", zookeeperEnv, ",,", func(tb testing.TB) { ZooKeeper(tb) }, "names no server"},
		{"postgres bad URL", postgresEnv, "postgres://u:secret@h%zz/db", func(tb testing.TB) { Postgres(tb) }, "not a valid URL"},
		{"postgres bad port", postgresEnv, "host=h port=0", func(tb testing.TB) { Postgres(tb) }, `port "0"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			f := call(c.call)
			if f.fatal == "" || f.skip != "" {
				t.Fatalf("want Fatal, got fatal=%q skip=%q", f.fatal, f.skip)
			}
			if !strings.Contains(f.fatal, c.want) {
				t.Errorf("message lacks %q: %s", c.want, f.fatal)
			}
			if strings.Contains(f.fatal, "secret") {
				t.Errorf("message shows the password: %s", f.fatal)
			}
		})
	}
}

func TestPostgresEndpoints(t *testing.T) {
	cases := []struct {
		dsn  string
		want []string
	}{
		{"postgres://postgres@127.0.0.1:5432/simba?sslmode=disable", []string{"127.0.0.1:5432"}},
		{"postgresql://u:p@db.example/x", []string{"db.example:5432"}},
		{"postgres://u:p@h1:5433,h2:5434/x", []string{"h1:5433", "h2:5434"}},
		{"postgres://[::1]:6000/x", []string{"[::1]:6000"}},
		{"postgres:///x", []string{"localhost:5432"}},
		{"postgres:///x?host=/var/run/postgresql&port=5433", []string{"unix:/var/run/postgresql/.s.PGSQL.5433"}},
		{"host=127.0.0.1 port=5439 dbname=simba", []string{"127.0.0.1:5439"}},
		{`host=a,b port=1,2 password='it\'s x'`, []string{"a:1", "b:2"}},
		{"host=a,b port=7", []string{"a:7", "b:7"}},
		{"dbname=simba", []string{"localhost:5432"}},
		{"host='/tmp/pg dir' user=x", []string{"unix:/tmp/pg dir/.s.PGSQL.5432"}},
	}
	for _, c := range cases {
		eps, err := postgresEndpoints(c.dsn)
		if err != nil {
			t.Errorf("%q: %v", c.dsn, err)
			continue
		}
		var got []string
		for _, ep := range eps {
			got = append(got, ep.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.dsn, got, c.want)
		}
	}
	for _, bad := range []string{"host=a,b,c port=1,2", "justtext", "host='unterminated", "port=x"} {
		if _, err := postgresEndpoints(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// TestHelperProcess is the child of TestRealTestingT; on its own it skips.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("TESTSERVERS_CHILD") != "1" {
		t.Skip("helper process of TestRealTestingT")
	}
	Redis(t)
	t.Log("helper returned: test went on")
}

// TestRealTestingT checks skip and fail with the real testing package, in a
// child process of this test binary.
func TestRealTestingT(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	addr := unusedAddr(t)
	cases := []struct {
		name     string
		env      []string
		wantFail bool
		want     string
	}{
		{"bare machine skips", []string{"CI=", requireEnv + "="}, false, "--- SKIP: TestHelperProcess"},
		{"CI=true fails", []string{"CI=true", requireEnv + "="}, true, "--- FAIL: TestHelperProcess"},
		{"SIMBA_REQUIRE_SERVICES=1 fails", []string{"CI=", requireEnv + "=1"}, true, "--- FAIL: TestHelperProcess"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v", "-test.count=1")
			// Later entries win, so these override the inherited ones.
			cmd.Env = append(os.Environ(), "TESTSERVERS_CHILD=1", redisEnv+"="+addr,
				"GORACE=atexit_sleep_ms=0") // a -race binary otherwise sleeps 1 s at exit
			cmd.Env = append(cmd.Env, c.env...)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != c.wantFail {
				t.Fatalf("child failed = %v (%v), want %v; output:\n%s", failed, err, c.wantFail, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, out)
			}
			if strings.Contains(string(out), "test went on") {
				t.Errorf("the test went on after the helper stopped it:\n%s", out)
			}
		})
	}
}

// TestServers checks the servers this run is configured for: it skips on a
// bare machine and fails under `make test` when one is missing.
func TestServers(t *testing.T) {
	t.Run("Redis", func(t *testing.T) { t.Log(Redis(t)) })
	t.Run("Postgres", func(t *testing.T) { t.Log(Postgres(t)) })
	t.Run("ZooKeeper", func(t *testing.T) { t.Log(ZooKeeper(t)) })
}
