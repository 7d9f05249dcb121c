package simbazk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/internal/redact"
)

// The URL scheme this package registers with backendurl when it is
// imported: zk://.
func init() { backendurl.Register("zk", openURL) }

// openURL is the backendurl.Opener of this package: [Open] with the
// caller's logger, read-only for listing ([WithReadOnly]). The backend owns
// its connections; the closer closes them.
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

// Open returns a backend for a zk:// URL and checks that the ensemble
// answers and that the root is usable (it creates the root if needed, and
// writes its clock node: a wrong digest shows here); under [WithReadOnly] it
// only reads whether the root exists. ctx bounds the check; an ensemble
// that does not answer in time fails with an error wrapping
// [backends.ErrUnavailable] that names the servers. The URL's form:
//
//	zk://[user:password@]host1:2181[,host2:2181…][/root][?option=value&…]
//
// The scheme may be in any case. A server without a port is on 2181; ports
// are numbers from 1 to 65535, and an IPv6 address is written in brackets.
// The root defaults to [DefaultRoot]. The user and password, if given, are
// ZooKeeper digest credentials ([WithDigest]); the userinfo ends at the
// URL's last "@", so a password may hold any character ("%" escapes are
// decoded; write a "@" in the root as %40). Options, named as the other
// backends' URL options are: simba_max_lease ([WithMaxLease]),
// simba_tick_time ([WithTickTime]) and simba_dial_timeout
// ([WithDialTimeout]), each a positive Go duration ("60s", "500ms"); any
// other option is refused. opts apply after the URL's. Open checks every part
// of the URL before it dials, its errors naming the part at fault and the
// form expected; credentials never appear in an error or a log line.
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
	if b.readOnly {
		err = b.adminErr(ctx, "open", b.adminDo(ctx, "open", func(c *zk.Conn) error {
			_, _, err := c.Exists(b.root)
			return err
		}))
	} else {
		_, err = b.StoreTime(ctx)
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("simbazk: open %s: %w", shown, err)
	}
	return b, nil
}

// parseURL checks a zk:// URL part by part, before anything dials, and
// splits it into its servers and options. The userinfo ends at the URL's
// last "@", as redact.URL takes it, so that a password may hold any
// character and no error quotes a byte of it; every error names the part at
// fault and the form expected. It does not use net/url for the authority,
// which holds several host:port pairs.
func parseURL(raw string) ([]string, []Option, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !strings.EqualFold(scheme, "zk") {
		return nil, nil, errors.New("want a zk:// URL: zk://[user:password@]host:2181[,host2:2181…][/root]")
	}
	var opts []Option
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user, password, hasPass := strings.Cut(rest[:at], ":")
		rest = rest[at+1:]
		var err error
		if user, err = url.PathUnescape(user); err != nil {
			return nil, nil, errors.New("the user name is not valid URL escaping; write a % in it as %25")
		}
		if password, err = url.PathUnescape(password); err != nil {
			return nil, nil, errors.New("the password is not valid URL escaping; write a % in it as %25")
		}
		if !hasPass || user == "" || strings.Contains(user, ":") {
			return nil, nil, errors.New("want digest credentials as user:password@")
		}
		opts = append(opts, WithDigest(user, password))
	}
	base, query, _ := strings.Cut(rest, "?")
	if strings.ContainsRune(base, '#') || strings.ContainsRune(query, '#') {
		return nil, nil, errors.New("the URL has a fragment (#…), which means nothing here; escape a # in the password as %23")
	}
	authority, path := base, ""
	if slash := strings.IndexByte(base, '/'); slash >= 0 {
		authority, path = base[:slash], base[slash:]
	}
	var servers []string
	for s := range strings.SplitSeq(authority, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		server, err := checkServer(s)
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers, server)
	}
	if len(servers) == 0 {
		return nil, nil, errors.New("no servers; want zk://host:2181[,host2:2181…]/root")
	}
	if path != "" && path != "/" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return nil, nil, fmt.Errorf("root %q: not valid URL escaping; write a %% in it as %%25", path)
		}
		opts = append(opts, WithRoot(strings.TrimSuffix(p, "/")))
	}
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, nil, errors.New("the query does not parse; want name=value pairs joined by &, with special characters escaped as %XX")
		}
		for _, key := range slices.Sorted(maps.Keys(q)) {
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
			v := q[key][len(q[key])-1]
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || key == "simba_max_lease" && d < time.Millisecond {
				return nil, nil, fmt.Errorf("option %s: want a positive Go duration such as 500ms or 60s", key)
			}
			opts = append(opts, with(d))
		}
	}
	return servers, opts, nil
}

// checkServer checks one host[:port] of a URL's server list and returns it
// as host:port, the port 2181 unless given.
func checkServer(s string) (string, error) {
	host, port, hasPort := s, "", false
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", fmt.Errorf("server %q: an IPv6 address wants its closing ]", s)
		}
		host = s[1:end]
		if after := s[end+1:]; after != "" {
			if after[0] != ':' {
				return "", fmt.Errorf("server %q: want [address]:port", s)
			}
			port, hasPort = after[1:], true
		}
	} else if strings.Count(s, ":") > 1 {
		return "", fmt.Errorf("server %q: write an IPv6 address in brackets, such as [::1]:2181", s)
	} else {
		host, port, hasPort = strings.Cut(s, ":")
	}
	if host == "" {
		return "", fmt.Errorf("server %q: no host; want host:port", s)
	}
	if !hasPort {
		port = "2181"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
		return "", fmt.Errorf("server %q: port %q; want a number from 1 to 65535", s, port)
	}
	return net.JoinHostPort(host, port), nil
}
