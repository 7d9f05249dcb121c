package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
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

// Open connects to the Redis server of a URL (redis://[[user]:password@]host[:port][/db],
// rediss:// for TLS, unix:///path; go-redis's redis.ParseURL takes the same
// query options) and returns a backend that owns the client: Close closes
// it. It checks that Redis answers and that the namespace's layout fits
// ([Backend.Check]). For Redis Cluster or Sentinel, build the client and use
// [New]. Credentials in the URL never appear in errors or logs.
//
// Two query options set the backend's own options; they come before opts,
// which may override them:
//
//	simba_prefix=billing    WithPrefix("billing")
//	simba_max_lease=30s     WithMaxLease(30 * time.Second)
//
// The client Open makes dials once per attempt (go-redis retries a failed dial
// five times by default), so that an unreachable server fails fast; its dial
// timeout is go-redis's (dial_timeout= in the query). go-redis logs some
// failures through a process-wide logger: see [SetDriverLogger].
func Open(ctx context.Context, rawURL string, opts ...Option) (*Backend, error) {
	shown := redact.URL(rawURL)
	rest, own, err := urlOptions(rawURL)
	if err != nil {
		return nil, fmt.Errorf("simbaredis: open %s: %w", shown, err)
	}
	o, err := redis.ParseURL(rest)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("simbaredis: open %s: %w", shown, err)
	}
	if u, err := url.Parse(rest); err == nil && u.Scheme != "unix" && u.Hostname() == "" {
		// go-redis would dial localhost.
		return nil, fmt.Errorf("simbaredis: open %s: the URL names no host; want redis://host[:port][/db]", shown)
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

// urlOptions takes the backend's own query options (simba_prefix,
// simba_max_lease) out of a URL, which go-redis would refuse, and returns the
// rest and the options they set.
func urlOptions(rawURL string) (rest string, opts []Option, err error) {
	base, query, ok := strings.Cut(rawURL, "?")
	if !ok {
		return rawURL, nil, nil
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", nil, fmt.Errorf("invalid query: %w", err)
	}
	if v, ok := values["simba_prefix"]; ok {
		opts = append(opts, WithPrefix(v[len(v)-1]))
		delete(values, "simba_prefix")
	}
	if v, ok := values["simba_max_lease"]; ok {
		d, err := time.ParseDuration(v[len(v)-1])
		if err != nil || d <= 0 {
			return "", nil, fmt.Errorf("simba_max_lease=%q: want a duration such as 30s", v[len(v)-1])
		}
		opts = append(opts, WithMaxLease(d))
		delete(values, "simba_max_lease")
	}
	if len(values) == 0 {
		return base, opts, nil
	}
	return base + "?" + values.Encode(), opts, nil
}
