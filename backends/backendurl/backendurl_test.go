package backendurl

import (
	"context"
	"strings"
	"testing"

	"github.com/simba-go/simba/backends/memory"
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

// SPEC §12: credentials in URLs are redacted in every error.
func TestOpenErrors(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"postgres://simba:s3cret@db:5432/simba", `simba: backend URL "postgres://simba:xxxxx@db:5432/simba": the PostgreSQL backend is not built into this version; use memory: or memory:NAME`},
		{"redis://:s3cret@cache:6379/0", `simba: backend URL "redis://:xxxxx@cache:6379/0": the Redis backend is not built into this version; use memory: or memory:NAME`},
		{"zk://zk1:2181,zk2:2181/simba", `simba: backend URL "zk://zk1:2181,zk2:2181/simba": the ZooKeeper backend is not built into this version; use memory: or memory:NAME`},
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
		"redis://:pw@h:6379":           "redis://:xxxxx@h:6379",
		"postgres://u:pw@h/db?x=1":     "postgres://u:xxxxx@h/db?x=1",
		"postgres://u@h/db":            "postgres://u@h/db",
		"postgres://u:p@w@h:bad port/": "postgres://u:xxxxx@h:bad port/",
		"memory:jobs":                  "memory:jobs",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q; want %q", in, got, want)
		}
	}
}
