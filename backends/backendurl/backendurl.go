// Package backendurl opens a backend from a URL (§12), so that a program,
// the examples and the simba command take one --backend / SIMBA_BACKEND
// setting. Backends register their URL schemes here when their package is
// imported, as database/sql drivers do; a program imports the backends it
// wants and links no other store's driver:
//
//	import _ "github.com/simba-go/simba/backends/redis" // redis://, rediss://, unix://
//	import _ "github.com/simba-go/simba/backends/all"   // every backend of this module
//
// The schemes of this repository's backends:
//
//	memory:                                   the process-wide memory store (always registered)
//	memory:NAME                               a process-wide memory store of its own, by name
//	redis://:pass@host:6379/0                 backends/redis (rediss:// for TLS, unix:// for a socket)
//	postgres://user:pass@host:5432/db         backends/postgres (postgresql:// too)
//	zk://host:2181,host2:2181/root            backends/zookeeper
//	mysql://user:pass@host:3306/db            backends/mysql (mariadb:// too)
//	etcd://host:2379,host2:2379/prefix        backends/etcd, a module of its own
//
// Each backend's package documents its URL's options. [Open] on a scheme
// whose backend is not imported says which package to import.
//
// Credentials in a URL never appear in an error or a log line: [Redact]
// replaces the password (and the query, which may hold one) with "xxxxx",
// and every registered backend keeps to the same rule.
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
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/redact"
	"github.com/simba-go/simba/backends/memory"
)

// Default is the backend URL used when none is given: the memory store.
const Default = "memory:"

// Options are what [Open] and [OpenInspector] pass to an [Opener].
type Options struct {
	// Logger receives the backend's own logs (warnings such as a store
	// that refuses grants while it recovers). Never nil: a logger that
	// discards when the caller gave none.
	Logger *slog.Logger

	// ReadOnly is set by [OpenInspector]: the backend is opened for
	// listing only, as status tools do, and must write nothing to the
	// store — no schema, no root, no check script.
	ReadOnly bool
}

// An Option configures [Open] and [OpenInspector].
type Option func(*Options)

// WithLogger hands l to the backend, so that its warnings reach the
// caller's log. The default discards them.
func WithLogger(l *slog.Logger) Option { return func(o *Options) { o.Logger = l } }

// An Opener opens the backend that rawURL names; the URL's scheme, in
// lower case, is one the Opener was registered for. It checks every part
// of the URL before it dials, and its errors name the part at fault and the
// form expected. No error of it may show a byte of a password or of a
// secret query value: quote the URL with [Redact]. The io.Closer releases
// what the backend holds; ctx bounds the connection to a server.
type Opener func(ctx context.Context, rawURL string, o Options) (backends.Backend, io.Closer, error)

var registry = struct {
	sync.RWMutex
	openers map[string]Opener
}{openers: make(map[string]Opener)}

// Register makes a backend available under scheme (lower case, as in RFC
// 3986: a letter, then letters, digits, "+", "-" or "."). Backends call it
// from an init function. It panics if scheme is invalid or registered
// twice, or if open is nil, as database/sql's Register does.
func Register(scheme string, open Opener) {
	if open == nil {
		panic("backendurl: Register of scheme " + fmt.Sprintf("%q", scheme) + " with a nil Opener")
	}
	if !validScheme(scheme) {
		panic("backendurl: Register: scheme " + fmt.Sprintf("%q", scheme) + " is not a lower-case URL scheme")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.openers[scheme]; dup {
		panic("backendurl: Register called twice for scheme " + fmt.Sprintf("%q", scheme))
	}
	registry.openers[scheme] = open
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.openers))
	for s := range registry.openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Open opens the backend that rawURL names. The closer releases what the
// backend holds (connections, for server backends); close it after the
// clients using the backend. ctx bounds the connection to a server.
func Open(ctx context.Context, rawURL string, opts ...Option) (backends.Backend, io.Closer, error) {
	return open(ctx, rawURL, Options{}, opts)
}

// OpenInspector opens the backend that rawURL names for listing only, as
// status tools do: opening it writes nothing to the store ([Options.ReadOnly]).
// It fails if the backend cannot list what it holds (backends.Inspector).
func OpenInspector(ctx context.Context, rawURL string, opts ...Option) (backends.Inspector, io.Closer, error) {
	b, c, err := open(ctx, rawURL, Options{ReadOnly: true}, opts)
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

func open(ctx context.Context, rawURL string, o Options, opts []Option) (backends.Backend, io.Closer, error) {
	if ctx == nil {
		return nil, nil, fmt.Errorf("simba: open backend %s: nil context", Redact(rawURL))
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || scheme == "" {
		return nil, nil, fmt.Errorf("simba: backend URL %q has no scheme; want %s", Redact(rawURL), want())
	}
	scheme = strings.ToLower(scheme)
	registry.RLock()
	opener := registry.openers[scheme]
	registry.RUnlock()
	if opener == nil {
		if pkg, known := importPaths[scheme]; known && validScheme(scheme) {
			also := " (or backends/all)"
			if scheme == "etcd" {
				also = ", a module of its own,"
			}
			return nil, nil, fmt.Errorf("simba: backend URL %q: no backend is registered for %q; import _ %q%s in the program",
				Redact(rawURL), scheme+":", pkg, also)
		}
		if !strings.Contains(rawURL, "://") && strings.Contains(rawURL, "@") {
			// What reads as a scheme may be a user name before a password.
			return nil, nil, fmt.Errorf("simba: backend URL %q: unknown scheme; want %s", Redact(rawURL), want())
		}
		return nil, nil, fmt.Errorf("simba: backend URL %q: unknown scheme %q; want %s", Redact(rawURL), scheme, want())
	}
	b, c, err := opener(ctx, rawURL, o)
	if err != nil {
		return nil, nil, err
	}
	if b == nil || c == nil {
		if c != nil {
			c.Close()
		}
		return nil, nil, fmt.Errorf("simba: backend URL %q: the %s backend returned no backend and no error", Redact(rawURL), scheme)
	}
	return b, c, nil
}

// importPaths names the package that registers each scheme of this
// repository's backends, for the error of a scheme nobody registered.
var importPaths = map[string]string{
	"redis":      "github.com/simba-go/simba/backends/redis",
	"rediss":     "github.com/simba-go/simba/backends/redis",
	"unix":       "github.com/simba-go/simba/backends/redis",
	"postgres":   "github.com/simba-go/simba/backends/postgres",
	"postgresql": "github.com/simba-go/simba/backends/postgres",
	"zk":         "github.com/simba-go/simba/backends/zookeeper",
	"mysql":      "github.com/simba-go/simba/backends/mysql",
	"mariadb":    "github.com/simba-go/simba/backends/mysql",
	"etcd":       "github.com/simba-go/simba/backends/etcd",
}

// want lists the registered schemes for an error message.
func want() string {
	var b strings.Builder
	for i, s := range Schemes() {
		if i > 0 {
			b.WriteString(", ")
		}
		if s == "memory" {
			b.WriteString("memory:, memory:NAME")
		} else {
			b.WriteString(s + "://…")
		}
	}
	return b.String()
}

func validScheme(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Redact returns rawURL with its credentials hidden, for logs and errors:
// the password in its userinfo, whatever characters it holds (an unescaped
// "/", "#", "@" …), and its query, which may carry one, are replaced.
func Redact(rawURL string) string { return redact.URL(rawURL) }

func init() { Register("memory", openMemory) }

// openMemory opens memory: (the process-wide default store) or memory:NAME
// (a process-wide store of its own): the embedded default, registered here.
func openMemory(_ context.Context, rawURL string, _ Options) (backends.Backend, io.Closer, error) {
	s, err := memory.OpenURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	return s, nopCloser{}, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
