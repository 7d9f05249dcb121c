package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/internal/redact"
)

// The schemes this package opens through package backendurl, once a program
// imports it (or backends/all).
func init() {
	backendurl.Register("mysql", openURL)
	backendurl.Register("mariadb", openURL)
}

// openURL is the backendurl.Opener of mysql:// and mariadb:// URLs: [Open],
// with the caller's logger; read-only (OpenInspector: simba status and
// watch) it is [WithReadOnly], which writes nothing to the database, and
// tables that do not exist yet list as empty.
func openURL(ctx context.Context, rawURL string, o backendurl.Options) (backends.Backend, io.Closer, error) {
	opts := []Option{WithLogger(o.Logger)}
	if o.ReadOnly {
		opts = append(opts, WithReadOnly())
	}
	b, err := Open(ctx, rawURL, opts...)
	if err != nil {
		return nil, nil, err // Open redacts the URL itself
	}
	return b, b, nil
}

// URL query parameters of [Open] that configure the backend rather than the
// connection. Open removes them before the driver sees the rest.
const (
	ParamPrefix       = "simba_prefix"        // WithPrefix
	ParamMaxLease     = "simba_max_lease"     // WithMaxLease: a Go duration, such as 15s
	ParamMigrate      = "simba_migrate"       // false: WithoutMigration
	ParamPollInterval = "simba_poll_interval" // WithPollInterval: a Go duration; 0 turns the poll off
	ParamBells        = "simba_bells"         // WithBells: names waited on with a bell at once; 0 turns them off
)

// lockWaitParam is the session variable that bounds InnoDB's lock waits, in
// whole seconds; Open sets it to 1 unless the URL sets it.
const lockWaitParam = "innodb_lock_wait_timeout"

// Defaults of the pool [Open] makes; a URL's own parameters (timeout, …)
// take precedence.
const (
	openDialTimeout  = 5 * time.Second
	openWriteTimeout = 5 * time.Second
	openMaxIdle      = 16
	openMaxLifetime  = 5 * time.Minute
)

// Open connects to the MySQL or MariaDB database of a URL and returns a
// backend that owns its pool: Close closes it. It takes
//
//	mysql://[user[:password]@]host[:port]/database[?param=value&…]
//
// (mariadb:// alike; the port defaults to 3306), or a go-sql-driver/mysql
// DSN (user:password@tcp(host:3306)/database?param=value). The parameters
// are go-sql-driver's (tls, timeout, readTimeout, charset, …), except these,
// which configure the backend and which Open removes first:
//
//	simba_prefix=NAME             the tables' and procedures' prefix (WithPrefix; default simba)
//	simba_max_lease=DURATION      the longest lease, and the amnesia guard (WithMaxLease; default 60s)
//	simba_migrate=false           do not create the tables (WithoutMigration)
//	simba_poll_interval=DURATION  the release poll (WithPollInterval; default 50ms; 0 turns it off)
//	simba_bells=N                 names waited on with a bell at once (WithBells; default 4, on a pool of their own; 0 turns them off)
//
// Open's pools dial within 5 s and write within 5 s (timeout=5s,
// writeTimeout=5s) unless the URL says otherwise: a write that a silent
// link never takes would otherwise wait forever, and Close with it.
//
// Options given to Open take precedence over the URL's. Open checks every
// part of the URL before it dials, checks that the database answers and
// migrates the tables (or checks them, under WithoutMigration or
// WithReadOnly), so that a wrong URL or a missing privilege fails here.
// Credentials never appear in an error or a log line, in either form: the
// userinfo is taken to end at the URL's last "@", so a password needs no
// escaping of "/", "#", "?" or "@" (escapes such as %40 are decoded).
func Open(ctx context.Context, rawURL string, opts ...Option) (*Backend, error) {
	shown := Redact(rawURL)
	cfg, o, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("simbamysql: open %s: %w", shown, err)
	}
	for _, opt := range opts {
		opt(&o)
	}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = driverLogger{logger}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("simbamysql: open %s: %w", shown, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(openMaxIdle)
	db.SetConnMaxLifetime(openMaxLifetime)
	// The bells' own pool, so that they never take the calls' connections;
	// it dials nothing until a bell is needed.
	o.bellDB = sql.OpenDB(conn)
	b, err := build(db, o)
	if err != nil {
		o.bellDB.Close()
		db.Close()
		return nil, err
	}
	b.ownsDB = true
	if err := b.ensureSchema(ctx); err != nil && !(b.readOnly && errors.Is(err, ErrNoSchema)) {
		b.Close()
		return nil, fmt.Errorf("simbamysql: open %s: %w", shown, unprefixed{err})
	}
	return b, nil
}

// Redact returns a mysql:// or mariadb:// URL, or a go-sql-driver DSN, with
// its credentials hidden, for logs and errors: the whole userinfo's
// password (or all of it, in a DSN) and the query, which may carry secrets.
func Redact(raw string) string {
	if strings.Contains(raw, "://") {
		return redact.URL(raw)
	}
	at := dsnUserEnd(raw)
	out := raw
	if at >= 0 {
		out = redact.Mask + raw[at:]
	}
	if q := strings.IndexByte(out, '?'); q >= 0 {
		out = out[:q] + "?…"
	}
	return out
}

// dsnUserEnd returns the index of the "@" that ends a DSN's user and
// password: the last one before its network part ("@tcp(", "@unix(", "@/"),
// or the last one at all; -1 if there is none.
func dsnUserEnd(dsn string) int {
	end := -1
	for _, marker := range []string{"@tcp(", "@tcp4(", "@tcp6(", "@unix(", "@/"} {
		if i := strings.LastIndex(dsn, marker); i > end {
			end = i
		}
	}
	if end < 0 {
		end = strings.LastIndexByte(dsn, '@')
	}
	return end
}

// unprefixed is an error of this package shown without its "simbamysql: "
// prefix, inside another of its errors that has one.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), "simbamysql: ") }
func (u unprefixed) Unwrap() error { return u.err }

// driverLogger passes go-sql-driver's logs (a connection found broken, …)
// to the backend's logger, at debug level, instead of the driver's default
// of the standard error.
type driverLogger struct{ l *slog.Logger }

func (d driverLogger) Print(v ...any) { d.l.Debug("simbamysql: driver: " + fmt.Sprint(v...)) }

// parseURL checks a URL or DSN, takes the backend's parameters out of its
// query and returns the driver's configuration for the rest. No error it
// returns quotes the input: only names of its parts.
func parseURL(raw string) (*mysql.Config, options, error) {
	var o options
	scheme, rest, isURL := strings.Cut(raw, "://")
	var (
		user, pass, addr, db, query string
		err                         error
	)
	if isURL {
		if s := strings.ToLower(scheme); s != "mysql" && s != "mariadb" {
			return nil, o, errors.New("want a mysql:// or mariadb:// URL, or a go-sql-driver DSN")
		}
		user, pass, addr, db, query, err = splitURL(rest)
	} else {
		user, pass, addr, db, query, err = splitDSN(raw)
	}
	if err != nil {
		return nil, o, err
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return nil, o, errors.New("its query does not parse (escape special characters with %XX)")
	}
	if v, ok := take(values, ParamPrefix); ok {
		o.prefix = &v
	}
	for _, p := range []struct {
		name string
		to   **time.Duration
	}{{ParamMaxLease, &o.maxLease}, {ParamPollInterval, &o.poll}} {
		if v, ok := take(values, p.name); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, o, fmt.Errorf("%s: want a duration such as 60s", p.name)
			}
			*p.to = &d
		}
	}
	if v, ok := take(values, ParamBells); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, o, fmt.Errorf("%s: want a count, 0 or more", ParamBells)
		}
		o.bells = &n
	}
	if v, ok := take(values, ParamMigrate); ok {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return nil, o, fmt.Errorf("%s: want true or false", ParamMigrate)
		}
		o.migrate = &on
	}
	cfg, err := driverConfig(addr, db, values)
	if err != nil {
		return nil, o, err
	}
	cfg.User, cfg.Passwd = user, pass
	if cfg.Timeout == 0 {
		cfg.Timeout = openDialTimeout
	}
	if cfg.WriteTimeout == 0 {
		// go-sql-driver writes with no deadline otherwise, and its calls
		// end with their contexts by closing the connection — but closing
		// an idle one sends COM_QUIT, which would wait forever for a
		// silent link, and Close with it.
		cfg.WriteTimeout = openWriteTimeout
	}
	if _, ok := cfg.Params[lockWaitParam]; !ok {
		// The procedures bound their lock waits to a second; a connection
		// that does already spares them two SETs per call.
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[lockWaitParam] = "1"
	}
	return cfg, o, nil
}

// splitURL splits what follows mysql:// into its parts; the userinfo ends at
// the last "@".
func splitURL(rest string) (user, pass, addr, db, query string, err error) {
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		var hasPass bool
		user, pass, hasPass = strings.Cut(rest[:at], ":")
		user, pass = unescape(user), unescape(pass)
		if hasPass && user == "" {
			return "", "", "", "", "", errors.New("its userinfo has a password but no user name; want mysql://user:password@host/database")
		}
		rest = rest[at+1:]
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest, query = rest[:q], rest[q+1:]
	}
	if strings.ContainsRune(rest, '#') || strings.ContainsRune(query, '#') {
		return "", "", "", "", "", errors.New("the URL has a fragment (#…); escape a # in the password as %23")
	}
	host, path, _ := strings.Cut(rest, "/")
	if host == "" {
		return "", "", "", "", "", errors.New("it names no host; want mysql://user@host:3306/database")
	}
	if addr, err = hostPort(host); err != nil {
		return "", "", "", "", "", err
	}
	if db, err = database(path); err != nil {
		return "", "", "", "", "", err
	}
	return user, pass, addr, db, query, nil
}

// splitDSN splits a go-sql-driver DSN, user:password@tcp(host:port)/database?params.
func splitDSN(dsn string) (user, pass, addr, db, query string, err error) {
	rest := dsn
	if at := dsnUserEnd(dsn); at >= 0 {
		user, pass, _ = strings.Cut(dsn[:at], ":")
		rest = dsn[at+1:]
	}
	if q := strings.LastIndexByte(rest, '?'); q >= 0 && q > strings.LastIndexByte(rest, ')') {
		rest, query = rest[:q], rest[q+1:]
	}
	slash := strings.LastIndexByte(rest, '/')
	if slash < 0 {
		return "", "", "", "", "", errors.New("want a mysql:// or mariadb:// URL, or a DSN user:password@tcp(host:3306)/database")
	}
	netAddr, path := rest[:slash], rest[slash+1:]
	switch {
	case netAddr == "":
		addr = "127.0.0.1:3306"
	case strings.HasPrefix(netAddr, "tcp(") && strings.HasSuffix(netAddr, ")"):
		if addr, err = hostPort(netAddr[len("tcp(") : len(netAddr)-1]); err != nil {
			return "", "", "", "", "", err
		}
	default:
		return "", "", "", "", "", errors.New("its network part is not tcp(host:port); the backend dials TCP")
	}
	if db, err = database(path); err != nil {
		return "", "", "", "", "", err
	}
	return user, pass, addr, db, query, nil
}

// hostPort checks host[:port] and adds the default port.
func hostPort(host string) (string, error) {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = strings.Trim(host, "[]"), "3306"
	}
	if h == "" {
		return "", errors.New("it names no host; want host or host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", errors.New("its port is not a number from 1 to 65535")
	}
	return net.JoinHostPort(h, port), nil
}

// database checks the database part of the path.
func database(path string) (string, error) {
	db, err := url.PathUnescape(path)
	if err != nil || db == "" || strings.ContainsAny(db, "/`") {
		return "", errors.New("it names no database (or one with / or `); want …/DATABASE: the backend's tables live in it")
	}
	return db, nil
}

// driverConfig parses the driver's parameters with go-sql-driver's own DSN
// parser, one at a time when they fail, so that an error names the parameter
// and never quotes its value.
func driverConfig(addr, db string, values url.Values) (*mysql.Config, error) {
	dsn := "tcp(" + addr + ")/" + url.PathEscape(db)
	if len(values) > 0 {
		dsn += "?" + values.Encode()
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err == nil {
		cfg.DBName = db
		return cfg, nil
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		one := url.Values{name: values[name]}
		if _, err := mysql.ParseDSN("tcp(" + addr + ")/x?" + one.Encode()); err != nil {
			return nil, fmt.Errorf("parameter %s: not a setting go-sql-driver/mysql accepts (see its documentation)", name)
		}
	}
	return nil, errors.New("the URL does not parse as go-sql-driver/mysql's DSN")
}

// unescape decodes %XX escapes, and leaves a string that has none, or a bad
// one, as it is (a password may hold a bare %).
func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// take removes parameter name from values and returns its value.
func take(values url.Values, name string) (string, bool) {
	v, ok := values[name]
	if !ok {
		return "", false
	}
	delete(values, name)
	if len(v) == 0 {
		return "", true
	}
	return v[len(v)-1], true
}
