package simbaredis

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

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/internal/redact"
)

// The URL schemes this package registers with backendurl when it is
// imported: redis:// and rediss:// (TLS) for a server, unix:// for a socket.
func init() {
	for _, scheme := range []string{"redis", "rediss", "unix"} {
		backendurl.Register(scheme, openURL)
	}
}

// openURL is the backendurl.Opener of this package: [Open] with the
// caller's logger, read-only for listing ([WithReadOnly]).
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

// Open connects to the Redis server of a URL and returns a backend that owns
// the client: Close closes it. The URL's form:
//
//	redis://[[user]:password@]host[:port][/db][?option=value&…]
//	rediss://…                         the same, over TLS
//	unix://[[user]:password@]/path/to/redis.sock[?db=N&…]
//
// The scheme may be in any case. The port is 6379 unless given; the
// database (the path, or db= in the query) is a number from 0 up, 0 unless
// given. The query takes go-redis's options (those of redis.ParseURL:
// dial_timeout=, client_name=, …) and two of the backend's own; any other
// simba_ option is refused:
//
//	simba_prefix=billing    WithPrefix("billing")
//	simba_max_lease=30s     WithMaxLease(30 * time.Second)
//
// They come before opts, which may override them. Open checks every part of
// the URL before it dials, and its errors name the part at fault and the
// form expected. The userinfo ends at the URL's last "@", so a password may
// hold "/", "#", "?" or "@" unescaped (percent-escapes are decoded); no
// error or log line shows a byte of it.
//
// It then checks that Redis answers and that the namespace's layout fits
// ([Backend.Check]). For Redis Cluster or Sentinel, build the client and use
// [New].
//
// The client Open makes dials once per attempt (go-redis retries a failed dial
// five times by default), so that an unreachable server fails fast; its dial
// timeout is go-redis's (dial_timeout= in the query). go-redis logs some
// failures through a process-wide logger: see [SetDriverLogger].
func Open(ctx context.Context, rawURL string, opts ...Option) (*Backend, error) {
	shown := redact.URL(rawURL)
	o, own, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("simbaredis: open %s: %w", shown, err)
	}
	o.ContextTimeoutEnabled = true
	o.DialerRetries = 1
	client := redis.NewClient(o)
	b, err := New(client, append(own, opts...)...)
	if err != nil {
		client.Close()
		return nil, err
	}
	b.ownsClient = true
	if b.readOnly {
		err = client.Ping(ctx).Err()
		if err != nil {
			err = b.unavailable(ctx, "open "+shown, err)
		}
	} else {
		_, err = b.run(ctx, scriptCheck, "open "+shown, noSession)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// parseURL checks a Redis URL part by part, before anything dials, and
// returns go-redis's options for it and the backend's own. The credentials
// come out first — the userinfo ends at the URL's last "@", as redact.URL
// takes it — and go-redis parses the rest, so that no parser's error can
// quote a byte of them; every error names the part at fault and the form
// expected.
func parseURL(raw string) (*redis.Options, []Option, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "redis" && scheme != "rediss" && scheme != "unix") {
		return nil, nil, errors.New("want a redis://, rediss:// or unix:// URL")
	}
	var user, password string
	hasUser := false
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		var err error
		if user, password, err = userinfo(rest[:at]); err != nil {
			return nil, nil, err
		}
		hasUser = true
		rest = rest[at+1:]
	}
	base, query, _ := strings.Cut(rest, "?")
	if strings.ContainsRune(base, '#') || strings.ContainsRune(query, '#') {
		return nil, nil, errors.New("the URL has a fragment (#…), which means nothing here; escape a # in the password as %23")
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return nil, nil, errors.New("the query does not parse; want name=value pairs joined by &, with special characters escaped as %XX")
	}
	own, err := ownOptions(values)
	if err != nil {
		return nil, nil, err
	}
	if scheme == "unix" {
		if !strings.HasPrefix(base, "/") || len(base) < 2 {
			return nil, nil, errors.New("the URL names no socket; want unix:///path/to/redis.sock")
		}
	} else if err := checkAddress(scheme, base); err != nil {
		return nil, nil, err
	}
	if v, ok := values["db"]; ok && len(v) > 0 && !isNumber(v[len(v)-1]) {
		return nil, nil, fmt.Errorf("db=%q: want a database number, 0 or more", v[len(v)-1])
	}
	clean := scheme + "://" + base
	if len(values) > 0 {
		clean += "?" + values.Encode()
	}
	o, err := redis.ParseURL(clean)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error repeats the URL
		}
		return nil, nil, err
	}
	if hasUser {
		o.Username, o.Password = user, password
	}
	return o, own, nil
}

// userinfo decodes a URL's userinfo: user:password, :password, or a user
// name alone (go-redis's reading). Its errors quote none of it.
func userinfo(s string) (user, password string, err error) {
	user, password, _ = strings.Cut(s, ":")
	if user, err = url.PathUnescape(user); err != nil {
		return "", "", errors.New("the user name is not valid URL escaping; write a % in it as %25")
	}
	if password, err = url.PathUnescape(password); err != nil {
		return "", "", errors.New("the password is not valid URL escaping; write a % in it as %25")
	}
	return user, password, nil
}

// checkAddress checks the host, port and database of a redis:// or
// rediss:// URL: base is what follows the scheme and the userinfo, up to the
// query.
func checkAddress(scheme, base string) error {
	authority, db, hasPath := strings.Cut(base, "/")
	host, port, hasPort := authority, "", false
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return fmt.Errorf("host %q: an IPv6 address wants its closing ]", authority)
		}
		host = authority[1:end]
		if after := authority[end+1:]; after != "" {
			if after[0] != ':' {
				return fmt.Errorf("host %q: want [address]:port", authority)
			}
			port, hasPort = after[1:], true
		}
	} else if strings.Count(authority, ":") > 1 {
		return fmt.Errorf("host %q: write an IPv6 address in brackets, such as [::1]:6379", authority)
	} else {
		host, port, hasPort = strings.Cut(authority, ":")
	}
	if host == "" {
		return fmt.Errorf("the URL names no host; want %s://host[:port][/db]", scheme)
	}
	if hasPort {
		if err := checkPort(port); err != nil {
			return err
		}
	}
	if hasPath && db != "" {
		if strings.Contains(db, "/") {
			return fmt.Errorf("path /%s: want /DB, a database number", db)
		}
		if !isNumber(db) {
			return fmt.Errorf("database %q: want a number, 0 or more", db)
		}
	}
	return nil
}

// checkPort checks a URL's port: a number from 1 to 65535.
func checkPort(port string) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || !isNumber(port) {
		return fmt.Errorf("port %q: want a number from 1 to 65535", port)
	}
	return nil
}

// isNumber reports whether s is a decimal number, 0 or more, that fits an int.
func isNumber(s string) bool {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return false
	}
	_, err := strconv.Atoi(s)
	return err == nil
}

// ownOptions takes the backend's own query options (simba_prefix,
// simba_max_lease) out of values, which go-redis would refuse, and returns
// the options they set. It refuses any other simba_ option.
func ownOptions(values url.Values) ([]Option, error) {
	var opts []Option
	for _, key := range slices.Sorted(maps.Keys(values)) {
		v := values[key]
		last := ""
		if len(v) > 0 {
			last = v[len(v)-1]
		}
		switch key {
		case "simba_prefix":
			if err := validPrefix(last); err != nil {
				return nil, fmt.Errorf("simba_prefix=%q: want 1 to %d characters of [A-Za-z0-9._:-]", last, maxPrefixLen)
			}
			opts = append(opts, WithPrefix(last))
		case "simba_max_lease":
			d, err := time.ParseDuration(last)
			if err != nil || d < time.Millisecond {
				return nil, fmt.Errorf("simba_max_lease=%q: want a duration of at least 1ms, such as 30s", last)
			}
			opts = append(opts, WithMaxLease(d))
		default:
			if strings.HasPrefix(key, "simba_") {
				return nil, fmt.Errorf("unknown option %s; want simba_prefix or simba_max_lease", key)
			}
			continue
		}
		delete(values, key)
	}
	return opts, nil
}
