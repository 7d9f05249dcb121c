package testservers

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
)

// The MySQL or MariaDB database tests use, as `make services` starts it.
const (
	mysqlEnv     = "SIMBA_TEST_MYSQL"
	mysqlDefault = "mysql://root@127.0.0.1:3306/test"
)

// MySQL returns the URL (mysql://user[:password]@host[:port]/database, or
// mariadb://) of the MySQL or MariaDB database tests use, from
// SIMBA_TEST_MYSQL or mysql://root@127.0.0.1:3306/test. If the server does
// not accept connections, it skips the test, or fails it when services are
// required. Tests isolate themselves in it with table prefixes of their own.
func MySQL(t testing.TB) string {
	t.Helper()
	u := setting(mysqlEnv, mysqlDefault)
	addr, err := mysqlAddr(u)
	if err != nil {
		t.Fatalf("testservers: %s: %v", mysqlEnv, err)
		return ""
	}
	if !reachable(t, "MySQL", mysqlEnv, []endpoint{{"tcp", addr}}) {
		return ""
	}
	return u
}

// mysqlAddr returns the host:port of a mysql:// or mariadb:// URL (port
// 3306 if it names none).
func mysqlAddr(raw string) (string, error) {
	if !strings.HasPrefix(raw, "mysql://") && !strings.HasPrefix(raw, "mariadb://") {
		return "", errors.New("want a mysql:// or mariadb:// URL")
	}
	_, rest, _ := strings.Cut(raw, "://")
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:] // the userinfo ends at the last "@" and is never quoted
	}
	u, err := url.Parse("mysql://" + rest)
	if err != nil || u.Hostname() == "" {
		return "", errors.New("the URL names no host; want mysql://user@host:3306/database")
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
