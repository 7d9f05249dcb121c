package simbapg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/internal/redact"
)

// The URL schemes this package registers with backendurl when it is
// imported: postgres:// and postgresql://.
func init() {
	backendurl.Register("postgres", openURL)
	backendurl.Register("postgresql", openURL)
}

// URL query parameters of [Open] that configure the backend rather than the
// connection. Open removes them before pgx sees the URL (pgx would send
// unknown parameters to the server as run-time settings).
const (
	ParamSchema        = "simba_schema"        // WithSchema
	ParamMaxLease      = "simba_max_lease"     // WithMaxLease: a Go duration, such as 15s
	ParamMigrate       = "simba_migrate"       // false: WithoutMigration
	ParamNotifications = "simba_notifications" // false: WithNotifications(false)
)

// Open connects to the PostgreSQL database of a URL
// (postgres://[user[:password]@]host[:port]/database[?param=value&…], or
// postgresql://) and returns a backend that owns its pool: Close closes it.
// pgx's pgxpool.ParseConfig reads the URL, with all of its parameters
// (sslmode, pool_max_conns, …), except these, which configure the backend and
// which Open removes first:
//
//	simba_schema=NAME         the schema (WithSchema; default simba)
//	simba_max_lease=DURATION  the longest lease, and the amnesia guard (WithMaxLease; default 60s)
//	simba_migrate=false       do not create the schema (WithoutMigration)
//	simba_notifications=false no LISTEN/NOTIFY (WithNotifications(false))
//
// Any other simba_ parameter is refused. Options given to Open take
// precedence over the URL's. Open checks every part of the URL before it
// dials — the scheme in any case, a host (in its authority, or as the host
// parameter), ports from 1 to 65535, the backend's parameters — and its
// errors name the part at fault and the form expected. It then checks that
// PostgreSQL answers and migrates the schema (or checks it, under
// WithoutMigration), so that a wrong URL or a missing privilege fails here.
// Credentials in the URL never appear in an error or a log line, whatever
// characters the password holds: the userinfo is taken to end at the URL's
// last "@", and a "/", "#", "?" or "@" in it needs no escaping.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Backend, error) {
	shown := redact.URL(rawURL)
	connURL, o, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("simbapg: open %s: %w", shown, err)
	}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(connURL)
	if err != nil {
		return nil, fmt.Errorf("simbapg: open %s: %w", shown, parseError(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("simbapg: open %s: %w", shown, parseError(err))
	}
	b, err := build(pool, o) // the pool has dialled nothing yet
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("simbapg: open %s: %w", shown, unprefixed{err})
	}
	b.ownsPool = true
	if err := b.ensureSchema(ctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("simbapg: open %s: %w", shown, unprefixed{err})
	}
	return b, nil
}

// unprefixed is an error of this package shown without its "simbapg: "
// prefix, inside another of its errors that has one.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), "simbapg: ") }
func (u unprefixed) Unwrap() error { return u.err }

// parseURL checks a postgres:// URL, takes the backend's parameters out of
// its query and returns the rest for pgx. It does not use url.Parse on the
// whole URL: a password may hold an unescaped "/", "#", "?" or "@" (as
// redact.URL assumes, the userinfo ends at the last "@").
func parseURL(raw string) (string, options, error) {
	var o options
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme) // pgx reads only the lower-case schemes
	if !ok || (scheme != "postgres" && scheme != "postgresql") {
		return "", o, errors.New("want a postgres:// or postgresql:// URL")
	}
	authStart := 0
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		authStart = at + 1
		// The userinfo ends at the last "@" (as redact.URL assumes): escape
		// what a URL parser would take for the end of it, so that a
		// password holding an unescaped "/", "#", "?" or "@" means itself.
		userinfo := escapeUserinfo(rest[:at])
		rest = userinfo + rest[at:]
		authStart = len(userinfo) + 1
	}
	base, query := rest, ""
	if q := strings.IndexByte(rest[authStart:], '?'); q >= 0 {
		base, query = rest[:authStart+q], rest[authStart+q+1:]
	}
	if strings.ContainsRune(query, '#') || strings.ContainsRune(base[authStart:], '#') {
		return "", o, errors.New("the URL has a fragment (#…); escape a # in the password as %23")
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", o, errors.New("its query does not parse (escape special characters with %XX)")
	}
	host := base[authStart:]
	if slash := strings.IndexByte(host, '/'); slash >= 0 {
		host = host[:slash]
	}
	if host == "" && values.Get("host") == "" {
		return "", o, errors.New("it names no host; want postgres://user@host:port/database (or a host= parameter)")
	}
	if err := checkHosts(host, values.Get("port")); err != nil {
		return "", o, err
	}
	if v, ok := take(values, ParamSchema); ok {
		o.schema = &v
	}
	if v, ok := take(values, ParamMaxLease); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond {
			return "", o, fmt.Errorf("%s=%q: want a duration of at least 1ms, such as 60s", ParamMaxLease, v)
		}
		o.maxLease = &d
	}
	for _, p := range []struct {
		name string
		to   **bool
	}{{ParamMigrate, &o.migrate}, {ParamNotifications, &o.notify}} {
		if v, ok := take(values, p.name); ok {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return "", o, fmt.Errorf("%s=%q: want true or false", p.name, v)
			}
			*p.to = &on
		}
	}
	for _, key := range slices.Sorted(maps.Keys(values)) {
		if strings.HasPrefix(key, "simba_") {
			return "", o, fmt.Errorf("unknown option %s; want %s, %s, %s or %s", key, ParamSchema, ParamMaxLease, ParamMigrate, ParamNotifications)
		}
	}
	out := scheme + "://" + base
	if len(values) > 0 {
		out += "?" + values.Encode()
	}
	return out, o, nil
}

// checkHosts checks the hosts of a URL's authority (host[:port], several
// joined by ",") and its port= parameter: every port a number from 1 to
// 65535. pgx would take a port out of range for a parse error that names
// no part.
func checkHosts(authority, portParam string) error {
	for h := range strings.SplitSeq(authority, ",") {
		if h == "" {
			continue
		}
		port, hasPort := "", false
		if strings.HasPrefix(h, "[") {
			if end := strings.IndexByte(h, ']'); end >= 0 && strings.HasPrefix(h[end+1:], ":") {
				port, hasPort = h[end+2:], true
			}
		} else if strings.Count(h, ":") == 1 {
			_, port, hasPort = strings.Cut(h, ":")
		}
		if hasPort && !validPort(port) {
			return fmt.Errorf("the URL does not parse: port %q of host %q; want a number from 1 to 65535", port, h)
		}
	}
	for p := range strings.SplitSeq(portParam, ",") {
		if portParam != "" && !validPort(p) {
			return fmt.Errorf("port=%q: want a number from 1 to 65535 (several joined by ,)", portParam)
		}
	}
	return nil
}

// validPort reports whether p is a port number, 1 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && 1 <= n && n <= 65535 && strings.TrimLeft(p, "0123456789") == ""
}

// escapeUserinfo percent-encodes the characters that end a URL's userinfo
// early or break its parsing; it leaves escapes already there ("%2F") alone.
func escapeUserinfo(s string) string {
	const special = "/?#@[] "
	if !strings.ContainsAny(s, special) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; strings.IndexByte(special, c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
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

// parseError returns the cause of a pgx parse or connect error without the
// connection string, which pgx's messages repeat: its redaction misses
// passwords with unescaped special characters, and so would net/url's
// messages, which quote the part of the URL they stumbled on.
func parseError(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return errors.New("the URL does not parse (percent-encode any /, #, ?, @ or % in the user name or password)")
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if inner := pe.Unwrap(); inner != nil {
			return fmt.Errorf("the URL does not parse: %w", inner)
		}
		return errors.New("the URL does not parse")
	}
	return err
}

// openURL is the backendurl.Opener of this package: it opens a postgres://
// or postgresql:// URL with [Open]:
// pgx reads the URL and its parameters, except the backend's own, which
// Open takes out first:
//
//	simba_schema=NAME          the schema (default simba)
//	simba_max_lease=DURATION   the longest lease, and the amnesia guard (default 60s)
//	simba_migrate=false        do not create the schema; only check it
//	simba_notifications=false  no LISTEN/NOTIFY: candidates take over at their next attempt
//
// The URL must name a host. Its password never appears in an error,
// whatever characters it holds (a "/", "#", "?" or "@" needs no escaping).
//
// Read-only (OpenInspector), it neither creates nor migrates the schema and
// does not LISTEN; a schema that does not exist yet lists as empty, and is
// opened once it does.
func openURL(ctx context.Context, rawURL string, o backendurl.Options) (backends.Backend, io.Closer, error) {
	if o.ReadOnly {
		in := &pgInspector{url: rawURL, logger: o.Logger}
		if err := in.open(ctx); err != nil && !errors.Is(err, ErrNoSchema) {
			return nil, nil, err
		}
		return in, in, nil
	}
	b, err := Open(ctx, rawURL, WithLogger(o.Logger))
	if err != nil {
		return nil, nil, err // Open redacts the URL itself
	}
	return b, b, nil
}
