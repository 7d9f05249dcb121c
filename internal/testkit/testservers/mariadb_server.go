package testservers

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDBServer is a MariaDB server that a test started for itself on a free
// loopback port, with a data directory of its own, so that it can restart
// it, kill it, put back an older copy of its data, or wipe it; the shared
// server is never touched. It runs as the user mysql when the test runs as
// root, with root allowed in without a password over TCP, a database test,
// no binary log, and InnoDB writing its log at every commit
// (innodb_flush_log_at_trx_commit=1, the default): a kill loses no committed
// transaction.
//
// Its methods fail the test when a step fails; they are safe for concurrent
// use. The server dies with the test binary, and is killed when the test
// ends.
type MariaDBServer struct {
	t    testing.TB
	dir  string // data/, the socket, the log, the pid file, copies of data/
	port int
	uid  int // of the user mysql when running as root; -1 otherwise
	gid  int

	mu   sync.Mutex
	proc child
}

// The MariaDB programs, from the distribution's mariadb-server package.
const (
	mariadbInstall = "mariadb-install-db"
	mariadbServer  = "/usr/sbin/mariadbd"
)

// StartMariaDB initialises a new data directory (mariadb-install-db), starts
// mariadbd on a free loopback port, waits until it answers, and creates the
// database test. Without the MariaDB server programs the test is skipped, or
// fails under CI=true or SIMBA_REQUIRE_SERVICES=1.
func StartMariaDB(t testing.TB) *MariaDBServer {
	t.Helper()
	if _, err := exec.LookPath(mariadbInstall); err != nil {
		missing(t, fmt.Sprintf("the MariaDB server programs are not installed (%v)", err), "install mariadb-server (`make services` does)")
		return nil
	}
	if _, err := os.Stat(mariadbServer); err != nil {
		missing(t, fmt.Sprintf("the MariaDB server is not installed (%v)", err), "install mariadb-server (`make services` does)")
		return nil
	}
	dir, err := os.MkdirTemp("", "simba-mariadb-")
	if err != nil {
		t.Fatalf("testservers: %v", err)
	}
	s := &MariaDBServer{t: t, dir: dir, uid: -1, gid: -1}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			os.RemoveAll(dir)
			missing(t, fmt.Sprintf("running as root, and there is no user mysql to run MariaDB as (%v)", err),
				"install mariadb-server from the distribution's packages, which create the user")
			return nil
		}
		s.uid, _ = strconv.Atoi(u.Uid)
		s.gid, _ = strconv.Atoi(u.Gid)
		if err := os.Chown(dir, s.uid, s.gid); err != nil {
			os.RemoveAll(dir)
			t.Fatalf("testservers: %v", err)
		}
	}
	t.Cleanup(func() {
		s.proc.signal(syscall.SIGKILL)
		os.RemoveAll(s.dir)
	})
	s.port = FreePort(t)
	s.install()
	s.start()
	s.exec("CREATE DATABASE IF NOT EXISTS test")
	return s
}

// URL returns the URL of the server's database test, for root.
func (s *MariaDBServer) URL() string {
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/test", s.port)
}

// Port returns the server's port on 127.0.0.1.
func (s *MariaDBServer) Port() int { return s.port }

func (s *MariaDBServer) data() string { return filepath.Join(s.dir, "data") }

// install runs mariadb-install-db into data/.
func (s *MariaDBServer) install() {
	s.t.Helper()
	// A temporary directory of its own: two installs at once in /tmp name
	// their temporary tables alike and trip over each other.
	args := []string{"--no-defaults", "--datadir=" + s.data(), "--tmpdir=" + s.dir, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve"}
	if s.uid >= 0 {
		args = append(args, "--user=mysql")
	}
	cmd := exec.Command(mariadbInstall, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("testservers: %s: %v\n%s", mariadbInstall, err, out.Bytes())
	}
}

// start starts mariadbd on data/ and waits until it answers.
func (s *MariaDBServer) start() {
	s.t.Helper()
	args := []string{"--no-defaults", "--datadir=" + s.data(), "--port=" + strconv.Itoa(s.port),
		"--socket=" + filepath.Join(s.dir, "sock"), "--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(s.dir, "pid"),
		"--tmpdir=" + s.dir, "--skip-log-bin", "--innodb-buffer-pool-size=32M", "--max-connections=300", "--skip-name-resolve"}
	if s.uid >= 0 {
		args = append(args, "--user=mysql")
	}
	cmd := exec.Command(mariadbServer, args...)
	started, err := s.proc.start(cmd, filepath.Join(s.dir, "err.log"))
	if err != nil {
		s.t.Fatalf("testservers: starting mariadbd: %v", err)
	}
	if !started {
		return
	}
	done := s.proc.exited()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.ping()
		if err == nil {
			return
		}
		select {
		case <-done:
			s.t.Fatalf("testservers: mariadbd on port %d exited: %s", s.port, s.log())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("testservers: mariadbd on port %d not answering: %v\n%s", s.port, err, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping connects as root without a database and pings.
func (s *MariaDBServer) ping() error {
	db, err := s.open("")
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func (s *MariaDBServer) open(database string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", s.port), database
	cfg.Timeout = time.Second
	cfg.Logger = mysql.Logger(nopLogger{})
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

type nopLogger struct{}

func (nopLogger) Print(...any) {}

// exec runs a statement as root and fails the test if it fails.
func (s *MariaDBServer) exec(stmt string) {
	s.t.Helper()
	db, err := s.open("")
	if err != nil {
		s.t.Fatalf("testservers: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		s.t.Fatalf("testservers: %s: %v", stmt, err)
	}
}

// log returns the end of the server's error log, for failure messages.
func (s *MariaDBServer) log() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "err.log"))
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Kill kills the server with SIGKILL, as a crash would, until
// [MariaDBServer.Start].
func (s *MariaDBServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.signal(syscall.SIGKILL)
}

// Stop shuts the server down cleanly (SIGTERM) until [MariaDBServer.Start].
func (s *MariaDBServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.signal(syscall.SIGTERM)
}

// Start starts a stopped server again, with its data.
func (s *MariaDBServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
}

// Restart kills the server (SIGKILL: InnoDB recovers every committed
// transaction from its log) and starts it again on the same port with its
// data, and returns once it answers.
func (s *MariaDBServer) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.signal(syscall.SIGKILL)
	s.start()
}

// Copy shuts the server down cleanly, copies its data directory, starts it
// again, and returns the copy's name for [MariaDBServer.RestoreCopy]: a
// backup of the data as it is now.
func (s *MariaDBServer) Copy() string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.signal(syscall.SIGTERM)
	name := fmt.Sprintf("copy-%d", time.Now().UnixNano())
	s.cp(s.data(), filepath.Join(s.dir, name))
	s.start()
	return name
}

// RestoreCopy kills the server, replaces its data directory by the copy
// [MariaDBServer.Copy] made, and starts it on the same port: every write
// since the copy is lost, as when a server comes back from an older backup.
func (s *MariaDBServer) RestoreCopy(name string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.signal(syscall.SIGKILL)
	s.rm(s.data())
	s.cp(filepath.Join(s.dir, name), s.data())
	s.start()
}

// Wipe kills the server, deletes its data directory, initialises a new one
// (mariadb-install-db) and starts it on the same port with a new, empty
// database test: every table and row is lost, as when a server comes back
// from an empty backup or as a new installation.
func (s *MariaDBServer) Wipe() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.signal(syscall.SIGKILL)
	s.rm(s.data())
	s.install()
	s.start()
	s.exec("CREATE DATABASE IF NOT EXISTS test")
}

func (s *MariaDBServer) cp(from, to string) {
	s.t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		s.t.Fatalf("testservers: copying %s: %v\n%s", from, err, out)
	}
}

func (s *MariaDBServer) rm(path string) {
	s.t.Helper()
	if !strings.HasPrefix(path, s.dir) {
		s.t.Fatalf("testservers: refusing to remove %s outside %s", path, s.dir)
	}
	if out, err := exec.Command("rm", "-rf", path).CombinedOutput(); err != nil {
		s.t.Fatalf("testservers: removing %s: %v\n%s", path, err, out)
	}
}
