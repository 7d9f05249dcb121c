// Package backendurl opens a backend from a URL (§12), so that the
// examples, the demo and any tool take one --backend / SIMBA_BACKEND
// setting:
//
//	memory:                                   the process-wide memory store
//	memory:NAME                               a process-wide memory store of its own, by name
//	postgres://user:pass@host:5432/db         PostgreSQL (not built into this version)
//	redis://:pass@host:6379/0                 Redis (rediss:// for TLS, unix:// for a socket)
//	zk://host:2181,host2:2181/chroot          ZooKeeper (not built into this version)
//
// Credentials in a URL never appear in an error: [Redact] replaces the
// password (and the query, which may hold one) with "xxxxx".
//
// A backend opened here is closed through the io.Closer that [Open]
// returns, after the clients that use it are closed.
//
// Rule names such as §12 refer to docs/design.md in the repository.
package backendurl

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/redact"
	"github.com/simba-go/simba/backends/memory"
	simbaredis "github.com/simba-go/simba/backends/redis"
)

// Default is the backend URL used when none is given: the memory store.
const Default = "memory:"

// Open opens the backend that rawURL names. The closer releases what the
// backend holds (connections, for server backends); close it after the
// clients using the backend. ctx bounds the connection to a server.
func Open(ctx context.Context, rawURL string) (backends.Backend, io.Closer, error) {
	return open(ctx, rawURL, false)
}

// OpenInspector opens the backend that rawURL names for listing only, as
// status tools do: where the backend can, it is opened read-only, so that
// opening it writes nothing to the store (Redis: no check script; see
// simbaredis.WithReadOnly). It fails if the backend cannot list what it holds
// (backends.Inspector).
func OpenInspector(ctx context.Context, rawURL string) (backends.Inspector, io.Closer, error) {
	b, c, err := open(ctx, rawURL, true)
	if err != nil {
		return nil, nil, err
	}
	in, ok := b.(backends.Inspector)
	if !ok {
		c.Close()
		return nil, nil, fmt.Errorf("simba: the backend at %s (%T) cannot list what it holds: it does not implement backends.Inspector", Redact(rawURL), b)
	}
	return in, c, nil
}

func open(ctx context.Context, rawURL string, readOnly bool) (backends.Backend, io.Closer, error) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok || scheme == "" {
		return nil, nil, fmt.Errorf("simba: backend URL %q has no scheme; want memory:, memory:NAME, postgres://…, redis://… or zk://…", Redact(rawURL))
	}
	switch strings.ToLower(scheme) {
	case "memory":
		if strings.HasPrefix(rest, "//") {
			return nil, nil, fmt.Errorf("simba: backend URL %q: write memory: or memory:NAME, without //", Redact(rawURL))
		}
		return memory.Open(rest), nopCloser{}, nil
	case "redis", "rediss", "unix":
		var opts []simbaredis.Option
		if readOnly {
			opts = append(opts, simbaredis.WithReadOnly())
		}
		b, err := simbaredis.Open(ctx, rawURL, opts...)
		if err != nil {
			return nil, nil, err // Open redacts the URL itself
		}
		return b, b, nil
	case "postgres", "postgresql":
		return openPostgres(ctx, rawURL)
	case "zk":
		return openZooKeeper(ctx, rawURL)
	}
	return nil, nil, fmt.Errorf("simba: backend URL %q: unknown scheme %q; want memory:, memory:NAME, postgres://…, redis://… or zk://…",
		Redact(rawURL), scheme)
}

// notBuilt is the error of a scheme whose backend this version lacks.
func notBuilt(rawURL, backend string) error {
	if _, err := url.Parse(rawURL); err != nil {
		return fmt.Errorf("simba: backend URL %q is not a valid URL", Redact(rawURL))
	}
	return fmt.Errorf("simba: backend URL %q: the %s backend is not built into this version; use memory:, memory:NAME or redis://",
		Redact(rawURL), backend)
}

// Redact returns rawURL with its credentials hidden, for logs and errors:
// the password in its userinfo, whatever characters it holds (an unescaped
// "/", "#", "@" …), and its query, which may carry one, are replaced.
func Redact(rawURL string) string { return redact.URL(rawURL) }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
