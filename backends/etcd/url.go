package simbaetcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/internal/redact"
)

// The URL scheme this package registers with backendurl when it is
// imported: etcd://.
func init() { backendurl.Register("etcd", openURL) }

// openURL is the backendurl.Opener of this package: [Open] with the
// caller's logger. The backend owns its client; the closer closes it.
func openURL(ctx context.Context, rawURL string, o backendurl.Options) (backends.Backend, io.Closer, error) {
	b, err := Open(ctx, rawURL, WithLogger(o.Logger))
	if err != nil {
		return nil, nil, err // Open redacts the URL itself
	}
	return b.Backend(), b, nil
}

// DefaultDialTimeout bounds the first connection of a client [Open] makes
// unless [WithDialTimeout] or simba_dial_timeout says otherwise.
const DefaultDialTimeout = 5 * time.Second

// clientOptions are the options of the client Open makes.
type clientOptions struct {
	user, password string
	auth           bool
	tls            *tls.Config
	dialTimeout    time.Duration
	dial           []grpc.DialOption
}

// WithCredentials authenticates the client [Open] makes as user with
// password (etcd's user authentication). The password never appears in an
// error or a log line. It is ignored by [New], whose client is the
// caller's.
func WithCredentials(user, password string) Option {
	return func(o *options) { o.client.user, o.client.password, o.client.auth = user, password, true }
}

// WithTLS makes the client [Open] makes connect with TLS, configured by c
// (roots, client certificate, server name). It is ignored by [New].
func WithTLS(c *tls.Config) Option { return func(o *options) { o.client.tls = c } }

// WithDialTimeout bounds the first connection of the client [Open] makes.
// The default is [DefaultDialTimeout]. It is ignored by [New].
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.client.dialTimeout = d } }

// WithDialOptions adds gRPC dial options to the client [Open] makes (a
// dialer through a proxy, interceptors). It is ignored by [New].
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.client.dial = append(o.client.dial, opts...) }
}

// Open returns a backend on a client of its own for an etcd:// URL, and
// checks that the cluster answers: it reads the prefix's meta key, and
// writes nothing (the layout is created by the first session opened). ctx
// bounds the check. The URL's form:
//
//	etcd://[user:password@]host1:2379[,host2:2379…][/prefix][?option=value&…]
//
// A host without a port gets 2379. The prefix defaults to [DefaultPrefix];
// "/billing" is the prefix "/billing/". The user and password, if given,
// are etcd credentials ([WithCredentials]). Options, named as the other
// backends' URL options are: simba_max_lease ([WithMaxLease]) and
// simba_dial_timeout ([WithDialTimeout]), each a Go duration ("60s");
// simba_clock=local ([WithLocalClock]); and TLS: simba_tls=true (the
// system's roots), simba_tls_ca (a PEM file of roots), simba_tls_cert and
// simba_tls_key (PEM files of a client certificate and its key),
// simba_tls_server_name (the name the servers' certificates must have);
// any of them turns TLS on. opts apply after the URL's. Credentials never
// appear in an error or a log line. [Backend.Close] closes the client.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Backend, error) {
	shown := redact.URL(rawURL)
	endpoints, uopts, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("simbaetcd: open %s: %w", shown, err)
	}
	o := options{prefix: DefaultPrefix, maxLease: DefaultMaxLease}
	for _, opt := range append(uopts, opts...) {
		if opt != nil {
			opt(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("simbaetcd: open %s: %w", shown, err)
	}
	c := o.client
	scheme := "http://"
	if c.tls != nil {
		scheme = "https://"
	}
	for i, e := range endpoints {
		endpoints[i] = scheme + e
	}
	if c.dialTimeout <= 0 {
		c.dialTimeout = DefaultDialTimeout
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: c.dialTimeout,
		TLS:         c.tls,
		Logger:      zap.NewNop(),
		Context:     context.Background(),
		DialOptions: append([]grpc.DialOption{ReconnectParams()}, c.dial...),
	}
	if c.auth {
		cfg.Username, cfg.Password = c.user, c.password
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("simbaetcd: open %s: %w", shown, noSecret(err, c.password))
	}
	b, err := newFromOptions(cli, true, o)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("simbaetcd: open %s: %w", shown, err)
	}
	if _, err := cli.Get(ctx, b.keys.meta()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("simbaetcd: open %s: %w: %w", shown, backends.ErrUnavailable, noSecret(err, c.password))
	}
	return b, nil
}

// ReconnectParams is the gRPC dial option of the clients [Open] makes:
// after a failed connection, try again within 50 ms to 1 s, not gRPC's
// default of 1 s growing to 2 min, so that a session finds a restarted
// server well within its lease. Give it to a client you make for [New].
func ReconnectParams() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: time.Second,
	})
}

// noSecret returns err, or an error with its text and without the
// password if the text shows it.
func noSecret(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, redact.Mask))
}

// parseURL splits an etcd:// URL into its endpoints (host:port) and
// options. It does not use net/url for the authority, which holds several
// host:port pairs.
func parseURL(raw string) ([]string, []Option, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !strings.EqualFold(scheme, "etcd") {
		return nil, nil, errors.New("not an etcd:// URL")
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
			return nil, nil, errors.New("want credentials as user:password@")
		}
		opts = append(opts, WithCredentials(user, password))
	}
	var endpoints []string
	for h := range strings.SplitSeq(authority, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "2379")
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" || port == "" {
			return nil, nil, fmt.Errorf("endpoint %q: want host:port", h)
		}
		endpoints = append(endpoints, h)
	}
	if len(endpoints) == 0 {
		return nil, nil, errors.New("no endpoints; want etcd://host:2379[,host2:2379…]/prefix")
	}
	if path != "" && path != "/" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return nil, nil, errors.New("the prefix is not valid URL escaping")
		}
		opts = append(opts, WithPrefix(p))
	}
	if strings.HasPrefix(query, "#") {
		return nil, nil, errors.New("a fragment means nothing here")
	}
	if query == "" {
		return endpoints, opts, nil
	}
	q, err := url.ParseQuery(strings.TrimPrefix(query, "?"))
	if err != nil {
		return nil, nil, errors.New("the query is not valid")
	}
	var t tlsFiles
	for key, values := range q {
		v := values[len(values)-1]
		switch key {
		case "simba_max_lease", "simba_dial_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, nil, fmt.Errorf("option %s: want a positive Go duration such as 5s or 60s", key)
			}
			if key == "simba_max_lease" {
				opts = append(opts, WithMaxLease(d))
			} else {
				opts = append(opts, WithDialTimeout(d))
			}
		case "simba_clock":
			if v != "local" {
				return nil, nil, errors.New("option simba_clock: want local (this process's clock; see the package documentation)")
			}
			opts = append(opts, WithLocalClock())
		case "simba_tls":
			switch v {
			case "true", "1":
				t.on = true
			case "false", "0":
			default:
				return nil, nil, errors.New("option simba_tls: want true or false")
			}
		case "simba_tls_ca":
			t.on, t.ca = true, v
		case "simba_tls_cert":
			t.on, t.cert = true, v
		case "simba_tls_key":
			t.on, t.key = true, v
		case "simba_tls_server_name":
			t.on, t.serverName = true, v
		default:
			return nil, nil, fmt.Errorf("unknown option %q; want simba_max_lease, simba_dial_timeout, simba_clock, simba_tls, simba_tls_ca, simba_tls_cert, simba_tls_key or simba_tls_server_name", key)
		}
	}
	if t.on {
		c, err := t.config()
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, WithTLS(c))
	}
	return endpoints, opts, nil
}

// tlsFiles are the TLS options of a URL.
type tlsFiles struct {
	on                        bool
	ca, cert, key, serverName string
}

func (t tlsFiles) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.serverName}
	if t.ca != "" {
		pem, err := os.ReadFile(t.ca)
		if err != nil {
			return nil, fmt.Errorf("option simba_tls_ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("option simba_tls_ca: %s holds no PEM certificate", t.ca)
		}
	}
	if (t.cert == "") != (t.key == "") {
		return nil, errors.New("options simba_tls_cert and simba_tls_key: want both or neither")
	}
	if t.cert != "" {
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, fmt.Errorf("options simba_tls_cert and simba_tls_key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
