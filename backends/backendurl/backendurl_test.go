package backendurl

import (
	"context"
	"strings"
	"testing"

	"github.com/simba-go/simba/backends/memory"
	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/internal/testservers"
)

func TestOpenMemory(t *testing.T) {
	ctx := context.Background()
	b, c, err := Open(ctx, "memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b != memory.Open("") {
		t.Error("memory: is not the process-wide default store")
	}
	jobs1, _, _ := Open(ctx, "memory:jobs")
	jobs2, _, _ := Open(ctx, "memory:jobs")
	other, _, _ := Open(ctx, "memory:other")
	if jobs1 != jobs2 || jobs1 == other || jobs1 == b {
		t.Error("memory:NAME: want one store per name, shared within the process")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// §12: credentials in URLs are redacted in every error.
func TestOpenErrors(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"postgres://simba:s3cret@db:5432/simba", `simba: backend URL "postgres://simba:xxxxx@db:5432/simba": the PostgreSQL backend is not built into this version; use memory:, memory:NAME or redis://`},
		{"zk://zk1:2181,zk2:2181/simba", `simba: backend URL "zk://zk1:2181,zk2:2181/simba": the ZooKeeper backend is not built into this version; use memory:, memory:NAME or redis://`},
		{"postgres://u:s3cret@db:bad port/x", `simba: backend URL "postgres://u:xxxxx@db:bad port/x" is not a valid URL`},
		{"mysql://u:s3cret@db/x", `simba: backend URL "mysql://u:xxxxx@db/x": unknown scheme "mysql"; want memory:, memory:NAME, postgres://…, redis://… or zk://…`},
		{"localhost", `simba: backend URL "localhost" has no scheme; want memory:, memory:NAME, postgres://…, redis://… or zk://…`},
		{"memory://x", `simba: backend URL "memory://x": write memory: or memory:NAME, without //`},
	} {
		b, c, err := Open(context.Background(), tt.url)
		if err == nil || b != nil || c != nil {
			t.Errorf("Open(%q) = %v, %v, %v; want an error", tt.url, b, c, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Open(%q) error:\n%s\nwant\n%s", tt.url, err, tt.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error leaks the password: %s", tt.url, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:pw@h:6379":           "redis://xxxxx@h:6379",
		"redis://u:p/w#x@h:6379/0":     "redis://u:xxxxx@h:6379/0",
		"postgres://u:pw@h/db?x=1":     "postgres://u:xxxxx@h/db?…",
		"postgres://u@h/db":            "postgres://xxxxx@h/db",
		"postgres://u:p@w@h:bad port/": "postgres://u:xxxxx@h:bad port/",
		"memory:jobs":                  "memory:jobs",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q; want %q", in, got, want)
		}
	}
}

// A redis:// URL opens the Redis backend, which the closer closes; a
// password in the URL never appears in an error.
func TestOpenRedis(t *testing.T) {
	addr := testservers.Redis(t)
	// Database 13, the test's own: the default namespace in database 0 may
	// be a running example's (README), and examples/ledger's test uses 14.
	// A namespace written by another version of the backend, left by
	// another checkout on this shared server, makes Open fail with
	// simbaredis.ErrLayout, as it should; start from none.
	testservers.ClearRedis(t, addr, 13, "{"+simbaredis.DefaultPrefix+"}:*")
	b, c, err := Open(context.Background(), "redis://"+addr+"/13")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.(*simbaredis.Backend); !ok {
		t.Errorf("redis:// opened a %T", b)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	_, _, err = Open(context.Background(), "redis://:s3cret@127.0.0.1:1/0")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of an unreachable Redis with a password = %v; want an error without the password", err)
	}
}
