// Package backendurl opens a backend from a URL (SPEC §12), so that the
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
// password with "xxxxx".
//
// A backend opened here is closed through the io.Closer that [Open]
// returns, after the clients that use it are closed.
package backendurl

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	simbaredis "github.com/simba-go/simba/backends/redis"
)

// Default is the backend URL used when none is given: the memory store.
const Default = "memory:"

// Open opens the backend that rawURL names. The closer releases what the
// backend holds (connections, for server backends); close it after the
// clients using the backend. ctx bounds the connection to a server.
func Open(ctx context.Context, rawURL string) (backends.Backend, io.Closer, error) {
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
		b, err := simbaredis.Open(ctx, rawURL)
		if err != nil {
			return nil, nil, err // Open redacts the URL itself
		}
		return b, b, nil
	case "postgres", "postgresql", "zk":
		if _, err := url.Parse(rawURL); err != nil {
			return nil, nil, fmt.Errorf("simba: backend URL %q is not a valid URL", Redact(rawURL))
		}
		return nil, nil, fmt.Errorf("simba: backend URL %q: the %s backend is not built into this version; use memory:, memory:NAME or redis://",
			Redact(rawURL), name(scheme))
	}
	return nil, nil, fmt.Errorf("simba: backend URL %q: unknown scheme %q; want memory:, memory:NAME, postgres://…, redis://… or zk://…",
		Redact(rawURL), scheme)
}

func name(scheme string) string {
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return "PostgreSQL"
	case "redis", "rediss":
		return "Redis"
	}
	return "ZooKeeper"
}

// Redact returns rawURL with any password replaced by "xxxxx", for logs and
// errors. It redacts even a URL that does not parse, by the userinfo
// before the first "@" of its authority.
func Redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	authority, path, _ := strings.Cut(rest, "/")
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return rawURL
	}
	user, _, hasPass := strings.Cut(authority[:at], ":")
	if !hasPass {
		return rawURL
	}
	redacted := scheme + "://" + user + ":xxxxx" + authority[at:]
	if len(rest) > len(authority) {
		redacted += "/" + path
	}
	return redacted
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
