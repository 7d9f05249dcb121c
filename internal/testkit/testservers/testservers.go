// Package testservers tells tests where the real servers are: Redis,
// PostgreSQL and ZooKeeper, as started by `make services`
// (scripts/services.sh).
//
// Each helper reads an environment variable, falls back to the loopback
// default, and checks that the server accepts a TCP connection (the test then
// connects with its own driver):
//
//	helper      variable               default
//	Redis       SIMBA_TEST_REDIS       127.0.0.1:6379
//	Postgres    SIMBA_TEST_POSTGRES    postgres://postgres@127.0.0.1:5432/simba?sslmode=disable
//	ZooKeeper   SIMBA_TEST_ZOOKEEPER   127.0.0.1:2181 (a comma-separated server list)
//
// When the server does not answer, the test is skipped with a reason that says
// how to start it, so that `go test ./...` passes on a bare machine. Under
// CI=true or SIMBA_REQUIRE_SERVICES=1 (which `make test` and .ci/run set) the
// test fails instead: there a missing server is a broken set-up, not a reason
// to pass. A value that cannot be parsed always fails the test.
package testservers

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The environment variables and their defaults.
const (
	redisEnv     = "SIMBA_TEST_REDIS"
	postgresEnv  = "SIMBA_TEST_POSTGRES"
	zookeeperEnv = "SIMBA_TEST_ZOOKEEPER"
	requireEnv   = "SIMBA_REQUIRE_SERVICES"

	redisDefault     = "127.0.0.1:6379"
	postgresDefault  = "postgres://postgres@127.0.0.1:5432/simba?sslmode=disable"
	zookeeperDefault = "127.0.0.1:2181"
)

// dialTimeout bounds each reachability check. Servers are expected on a fast
// network (usually loopback), where a refused connection answers at once.
const dialTimeout = time.Second

// Redis returns the address (host:port) of the Redis server tests use, from
// SIMBA_TEST_REDIS or 127.0.0.1:6379. If the server does not accept
// connections, it skips the test, or fails it when services are required.
func Redis(t testing.TB) string {
	t.Helper()
	addr := setting(redisEnv, redisDefault)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf("testservers: %s=%q: want host:port: %v", redisEnv, addr, err)
		return ""
	}
	if !reachable(t, "Redis", redisEnv, []endpoint{{"tcp", addr}}) {
		return ""
	}
	return addr
}

// Postgres returns the connection string (URL or keyword/value form, as pgx
// takes it) of the PostgreSQL database tests use, from SIMBA_TEST_POSTGRES or
// postgres://postgres@127.0.0.1:5432/simba?sslmode=disable. If no host it
// names accepts connections, it skips the test, or fails it when services
// are required.
func Postgres(t testing.TB) string {
	t.Helper()
	dsn := setting(postgresEnv, postgresDefault)
	eps, err := postgresEndpoints(dsn)
	if err != nil {
		t.Fatalf("testservers: %s: %v", postgresEnv, err)
		return ""
	}
	if !reachable(t, "PostgreSQL", postgresEnv, eps) {
		return ""
	}
	return dsn
}

// ZooKeeper returns the ZooKeeper servers (host:port each) tests use, from
// the comma-separated list in SIMBA_TEST_ZOOKEEPER or 127.0.0.1:2181. If none
// of them accepts connections, it skips the test, or fails it when services
// are required.
func ZooKeeper(t testing.TB) []string {
	t.Helper()
	list := setting(zookeeperEnv, zookeeperDefault)
	var servers []string
	var eps []endpoint
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			t.Fatalf("testservers: %s=%q: want host:port[,host:port...]: %v", zookeeperEnv, list, err)
			return nil
		}
		servers = append(servers, s)
		eps = append(eps, endpoint{"tcp", s})
	}
	if len(servers) == 0 {
		t.Fatalf("testservers: %s=%q names no server", zookeeperEnv, list)
		return nil
	}
	if !reachable(t, "ZooKeeper", zookeeperEnv, eps) {
		return nil
	}
	return servers
}

// setting returns the environment variable env, or def if it is unset or
// blank.
func setting(env, def string) string {
	if v := strings.TrimSpace(os.Getenv(env)); v != "" {
		return v
	}
	return def
}

// required reports whether a missing server fails the test rather than
// skipping it, and which variable says so. Any value other than a false one
// ("", "0", "false", …) counts as true, so that a typo errs on the strict side.
func required() (bool, string) {
	for _, env := range []string{requireEnv, "CI"} {
		v := strings.TrimSpace(os.Getenv(env))
		if v == "" {
			continue
		}
		if b, err := strconv.ParseBool(v); err == nil && !b {
			continue
		}
		return true, env + "=" + v
	}
	return false, ""
}

// endpoint is one address a server may answer on.
type endpoint struct{ network, address string }

func (e endpoint) String() string {
	if e.network == "tcp" {
		return e.address
	}
	return e.network + ":" + e.address
}

// reachable dials each endpoint until one accepts a connection. If none does,
// it skips or fails t (see [required]) and returns false.
func reachable(t testing.TB, server, env string, eps []endpoint) bool {
	t.Helper()
	var errs []error
	for _, ep := range eps {
		c, err := net.DialTimeout(ep.network, ep.address, dialTimeout)
		if err == nil {
			c.Close()
			return true
		}
		errs = append(errs, err)
	}
	names := make([]string, len(eps))
	for i, ep := range eps {
		names[i] = ep.String()
	}
	from := "the default; " + env + " overrides it"
	if os.Getenv(env) != "" {
		from = "from " + env
	}
	what := fmt.Sprintf("%s is not reachable at %s (%s): %v",
		server, strings.Join(names, ", "), from, errors.Join(errs...))
	if must, why := required(); must {
		t.Fatalf("testservers: %s; %s requires it: start the servers with `make services` (or scripts/services.sh)", what, why)
	} else {
		t.Skipf("testservers: %s; start the servers with `make services` (or scripts/services.sh), or set %s", what, env)
	}
	return false
}

// postgresEndpoints returns the addresses a libpq-style connection string
// names: a postgres:// or postgresql:// URL (several comma-separated hosts
// allowed, host and port also as query parameters) or keyword/value pairs
// (host=… port=…). A host that starts with "/" is a Unix socket directory.
func postgresEndpoints(dsn string) ([]endpoint, error) {
	var hosts, ports string
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			// Report the cause without *url.Error's copy of the input,
			// which may hold a password.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("not a valid URL: %w", err)
		}
		var hs, ps []string
		for hp := range strings.SplitSeq(u.Host, ",") {
			h, p := hp, ""
			if i := strings.LastIndex(hp, ":"); i >= 0 && !strings.HasSuffix(hp, "]") {
				h, p = hp[:i], hp[i+1:]
			}
			hs = append(hs, strings.Trim(h, "[]"))
			ps = append(ps, p)
		}
		hosts, ports = strings.Join(hs, ","), strings.Join(ps, ",")
		q := u.Query()
		if q.Has("host") {
			hosts = q.Get("host")
		}
		if q.Has("port") {
			ports = q.Get("port")
		}
	} else {
		kv, err := keywordValues(dsn)
		if err != nil {
			return nil, err
		}
		hosts, ports = kv["host"], kv["port"]
	}
	return pgJoin(hosts, ports)
}

// pgJoin pairs comma-separated hosts with ports the way libpq does: one port
// for all hosts, or one port per host; an empty host is localhost and an
// empty port 5432.
func pgJoin(hosts, ports string) ([]endpoint, error) {
	hs := strings.Split(hosts, ",")
	ps := strings.Split(ports, ",")
	if len(ps) != 1 && len(ps) != len(hs) {
		return nil, fmt.Errorf("%d hosts but %d ports", len(hs), len(ps))
	}
	eps := make([]endpoint, len(hs))
	for i, h := range hs {
		p := ps[0]
		if len(ps) > 1 {
			p = ps[i]
		}
		if p == "" {
			p = "5432"
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q: want 1-65535", p)
		}
		switch {
		case strings.HasPrefix(h, "/"):
			eps[i] = endpoint{"unix", h + "/.s.PGSQL." + p}
		case h == "":
			eps[i] = endpoint{"tcp", net.JoinHostPort("localhost", p)}
		default:
			eps[i] = endpoint{"tcp", net.JoinHostPort(h, p)}
		}
	}
	return eps, nil
}

// keywordValues parses "key=value key='quoted value'" connection strings.
func keywordValues(s string) (map[string]string, error) {
	kv := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, errors.New("want a postgres:// URL or key=value pairs")
		}
		key := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			for {
				if s == "" {
					return nil, fmt.Errorf("unterminated quoted value of %s", key)
				}
				c := s[0]
				s = s[1:]
				if c == '\'' {
					break
				}
				if c == '\\' && s != "" {
					c, s = s[0], s[1:]
				}
				val.WriteByte(c)
			}
		} else {
			end := strings.IndexAny(s, " \t\n")
			if end < 0 {
				end = len(s)
			}
			val.WriteString(s[:end])
			s = s[end:]
		}
		kv[key] = val.String()
	}
	return kv, nil
}
