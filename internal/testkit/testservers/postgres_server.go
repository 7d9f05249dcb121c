package testservers

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PostgresServer is a PostgreSQL server that a test started for itself on a
// spare loopback port, with a data directory of its own, so that it can
// restart it, stop it, or wipe its data; the shared server is never touched.
// It runs as the user postgres when the test runs as root (PostgreSQL refuses
// to run as root), with trust authentication for the user postgres, and
// fsync off (a crash of the machine would lose its data; a restart does not).
//
// Its methods fail the test when a step fails; they are safe for concurrent
// use.
type PostgresServer struct {
	t    testing.TB
	bin  string // the directory of initdb, pg_ctl and postgres
	dir  string // the server's directory: data/ and the Unix socket
	port int
	as   []string // the command prefix that runs a program as postgres
	opts []string // postgres -c options

	mu sync.Mutex
}

// pgBinEnv names the directory of the PostgreSQL programs, if they are not
// in /usr/lib/postgresql/*/bin or on $PATH.
const pgBinEnv = "SIMBA_TEST_PG_BIN"

// StartPostgres initialises a new cluster (initdb) in a directory of its own,
// starts it on a free loopback port, waits until it answers, and stops it and
// removes its directory when the test ends. opts are extra server settings
// ("shared_preload_libraries=pg_stat_statements"). The server has the
// databases of a new cluster: postgres, template0 and template1.
//
// Without the PostgreSQL programs (initdb, pg_ctl), the test is skipped, or
// fails under CI=true or SIMBA_REQUIRE_SERVICES=1 (see the package
// documentation); SIMBA_TEST_PG_BIN names their directory if they are not in
// /usr/lib/postgresql/*/bin or on $PATH.
func StartPostgres(t testing.TB, opts ...string) *PostgresServer {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		missing(t, fmt.Sprintf("the PostgreSQL server programs are not installed (%v)", err),
			"install PostgreSQL (`make services` does), or set "+pgBinEnv)
		return nil
	}
	s := &PostgresServer{t: t, bin: bin, opts: opts}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			missing(t, fmt.Sprintf("running as root, and there is no user postgres to run PostgreSQL as (%v)", err),
				"install PostgreSQL from the distribution's packages, which create the user")
			return nil
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.as = []string{"runuser", "-u", "postgres", "--"}
		dir, err := os.MkdirTemp("", "simba-pg-")
		if err != nil {
			t.Fatalf("testservers: %v", err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			t.Fatalf("testservers: %v", err)
		}
		s.dir = dir
	} else {
		dir, err := os.MkdirTemp("", "simba-pg-")
		if err != nil {
			t.Fatalf("testservers: %v", err)
		}
		s.dir = dir
	}
	t.Cleanup(func() {
		s.stop("immediate", false)
		os.RemoveAll(s.dir)
	})
	s.port = FreePort(t)
	s.initdb()
	s.start()
	return s
}

// missing skips t, or fails it where services are required.
func missing(t testing.TB, what, fix string) {
	t.Helper()
	if must, why := required(); must {
		t.Fatalf("testservers: %s; %s requires it: %s", what, why, fix)
	}
	t.Skipf("testservers: %s: %s", what, fix)
}

// postgresBin finds the directory of initdb and pg_ctl.
func postgresBin() (string, error) {
	if dir := os.Getenv(pgBinEnv); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err != nil {
			return "", fmt.Errorf("%s=%s: %w", pgBinEnv, dir, err)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) }) // newest first
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	p, err := exec.LookPath("pg_ctl")
	if err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

// version is the major version in a path like /usr/lib/postgresql/15/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// DSN returns the URL of the server's database postgres, for the user
// postgres.
func (s *PostgresServer) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Port returns the server's port on 127.0.0.1.
func (s *PostgresServer) Port() int { return s.port }

func (s *PostgresServer) data() string { return filepath.Join(s.dir, "data") }

// run runs a PostgreSQL program as postgres and fails the test if it fails.
func (s *PostgresServer) run(prog string, args ...string) {
	s.t.Helper()
	if out, err := s.runErr(prog, args...); err != nil {
		s.t.Fatalf("testservers: %s %s: %v\n%s%s", prog, strings.Join(args, " "), err, out, s.log())
	}
}

func (s *PostgresServer) runErr(prog string, args ...string) ([]byte, error) {
	argv := append(slices.Clone(s.as), append([]string{filepath.Join(s.bin, prog)}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A process group of its own: a test killed by a signal (^C) does not
	// signal the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Run()
	return out.Bytes(), err
}

func (s *PostgresServer) initdb() {
	s.t.Helper()
	s.run("initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C")
}

// log returns the end of the server's log, for failure messages.
func (s *PostgresServer) log() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "log"))
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "server log:\n" + string(b)
}

func (s *PostgresServer) serverOptions() string {
	o := []string{"-p", strconv.Itoa(s.port), "-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"}
	for _, opt := range s.opts {
		o = append(o, "-c", opt)
	}
	return strings.Join(o, " ")
}

func (s *PostgresServer) start() {
	s.t.Helper()
	var err error
	for range 3 {
		var out []byte
		out, err = s.runErr("pg_ctl", "-D", s.data(), "-o", s.serverOptions(), "-l", filepath.Join(s.dir, "log"), "-w", "-t", "30", "start")
		if err == nil {
			return
		}
		// Another process may have taken the port since freePort: try another.
		if !strings.Contains(s.log(), "could not bind") && !strings.Contains(s.log(), "already in use") {
			s.t.Fatalf("testservers: pg_ctl start: %v\n%s%s", err, out, s.log())
		}
		s.port = FreePort(s.t)
	}
	s.t.Fatalf("testservers: pg_ctl start: %v\n%s", err, s.log())
}

// stop stops the server with pg_ctl's mode (fast, immediate); it fails the
// test on an error unless quiet.
func (s *PostgresServer) stop(mode string, strict bool) {
	s.t.Helper()
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err != nil {
		return // not running
	}
	if out, err := s.runErr("pg_ctl", "-D", s.data(), "-m", mode, "-w", "-t", "30", "stop"); err != nil && strict {
		s.t.Fatalf("testservers: pg_ctl stop: %v\n%s%s", err, out, s.log())
	}
}

// Restart restarts the server with pg_ctl restart -m fast (open
// connections are closed; the data stays) and returns once it answers again.
func (s *PostgresServer) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run("pg_ctl", "-D", s.data(), "-o", s.serverOptions(), "-l", filepath.Join(s.dir, "log"), "-m", "fast", "-w", "-t", "30", "restart")
}

// Wipe stops the server at once (pg_ctl stop -m immediate, as a crash),
// deletes its data directory, initialises a new cluster there (initdb) and
// starts it on the same port: every database, role and row is lost, as when
// a server comes back from an empty backup or as a new cluster.
func (s *PostgresServer) Wipe() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop("immediate", true)
	if out, err := exec.Command("rm", "-rf", s.data()).CombinedOutput(); err != nil {
		s.t.Fatalf("testservers: removing %s: %v\n%s", s.data(), err, out)
	}
	s.initdb()
	s.start()
}

// Stop stops the server (pg_ctl stop -m fast) until [PostgresServer.Start].
func (s *PostgresServer) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop("fast", true)
}

// Start starts a stopped server again, with its data.
func (s *PostgresServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
}

// WaitReady waits until the server accepts TCP connections, for up to d.
func (s *PostgresServer) WaitReady(d time.Duration) {
	s.t.Helper()
	end := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(end) {
			s.t.Fatalf("testservers: PostgreSQL on port %d not accepting connections after %v: %v", s.port, d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PostgresProgram returns the path of one of PostgreSQL's programs (psql,
// pg_dump, …), from the directory StartPostgres uses. Without it, the test
// is skipped, or fails where services are required.
func PostgresProgram(t testing.TB, name string) string {
	t.Helper()
	bin, err := postgresBin()
	if err == nil {
		p := filepath.Join(bin, name)
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	if p, lerr := exec.LookPath(name); lerr == nil {
		return p
	}
	missing(t, fmt.Sprintf("the PostgreSQL program %s is not installed (%v)", name, err),
		"install PostgreSQL (`make services` does), or set "+pgBinEnv)
	return ""
}
