package simbazk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/internal/redact"
)

// The URL scheme this package registers with backendurl when it is
// imported: zk://.
func init() { backendurl.Register("zk", openURL) }

// openURL is the backendurl.Opener of this package: [Open] with the
// caller's logger. The backend owns its connections; the closer closes
// them.
func openURL(ctx context.Context, rawURL string, o backendurl.Options) (backends.Backend, io.Closer, error) {
	b, err := Open(ctx, rawURL, WithLogger(o.Logger))
	if err != nil {
		return nil, nil, err // Open redacts the URL itself
	}
	return b, b, nil
}

// Open returns a backend for a zk:// URL and checks that the ensemble
// answers and that the root is usable (it creates the root if needed, and
// writes its clock node: a wrong digest shows here). ctx bounds the check;
// an ensemble that does not answer in time fails with an error wrapping
// [backends.ErrUnavailable] that names the servers. The URL's form:
//
//	zk://[user:password@]host1:2181[,host2:2181…][/root][?option=value&…]
//
// The root defaults to [DefaultRoot]. The user and password, if given,
// are ZooKeeper digest credentials ([WithDigest]). Options, named as the
// other backends' URL options are: simba_max_lease ([WithMaxLease]),
// simba_tick_time ([WithTickTime]) and simba_dial_timeout
// ([WithDialTimeout]), each a Go duration ("60s", "500ms"). opts apply after
// the URL's. Credentials never appear in an error or a log line.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Backend, error) {
	shown := redact.URL(rawURL)
	servers, uopts, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("simbazk: open %s: %w", shown, err)
	}
	b, err := New(servers, append(uopts, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("simbazk: open %s: %w", shown, err)
	}
	if _, err := b.StoreTime(ctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("simbazk: open %s: %w", shown, err)
	}
	return b, nil
}

// parseURL splits a zk:// URL into its servers and options. It does not use
// net/url for the authority, which holds several host:port pairs.
func parseURL(raw string) ([]string, []Option, error) {
	rest, ok := strings.CutPrefix(raw, "zk://")
	if !ok {
		return nil, nil, errors.New("not a zk:// URL")
	}
	query := ""
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		rest, query = rest[:q], rest[q:]
	}
	authority, path := rest, ""
	if slash := strings.IndexByte(rest, '/'); slash >= 0 {
		authority, path = rest[:slash], rest[slash:]
	}
	var opts []Option
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo := authority[:at]
		authority = authority[at+1:]
		user, password, hasPass := strings.Cut(userinfo, ":")
		var err error
		if user, err = url.PathUnescape(user); err != nil {
			return nil, nil, errors.New("the user name is not valid URL escaping")
		}
		if password, err = url.PathUnescape(password); err != nil {
			return nil, nil, errors.New("the password is not valid URL escaping")
		}
		if !hasPass || user == "" {
			return nil, nil, errors.New("want digest credentials as user:password@")
		}
		opts = append(opts, WithDigest(user, password))
	}
	var servers []string
	for s := range strings.SplitSeq(authority, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, ":") {
			s += ":2181"
		}
		servers = append(servers, s)
	}
	if len(servers) == 0 {
		return nil, nil, errors.New("no servers; want zk://host:2181[,host2:2181…]/root")
	}
	if path != "" && path != "/" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return nil, nil, errors.New("the root path is not valid URL escaping")
		}
		opts = append(opts, WithRoot(strings.TrimSuffix(p, "/")))
	}
	if strings.HasPrefix(query, "#") {
		return nil, nil, errors.New("a fragment means nothing here")
	}
	if query != "" {
		q, err := url.ParseQuery(strings.TrimPrefix(query, "?"))
		if err != nil {
			return nil, nil, errors.New("the query is not valid")
		}
		for key, values := range q {
			var with func(time.Duration) Option
			switch key {
			case "simba_max_lease":
				with = WithMaxLease
			case "simba_tick_time":
				with = WithTickTime
			case "simba_dial_timeout":
				with = WithDialTimeout
			default:
				return nil, nil, fmt.Errorf("unknown option %q; want simba_max_lease, simba_tick_time or simba_dial_timeout", key)
			}
			d, err := time.ParseDuration(values[len(values)-1])
			if err != nil || d <= 0 {
				return nil, nil, fmt.Errorf("option %s: want a positive Go duration such as 500ms or 60s", key)
			}
			opts = append(opts, with(d))
		}
	}
	return servers, opts, nil
}
