package simbapg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	simbapg "github.com/simba-go/simba/backends/postgres"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// postgres:// and postgresql://, registered with backendurl, open the PostgreSQL backend with the URL's
// simba_ parameters, which the closer closes.
func TestOpenPostgres(t *testing.T) {
	dsn := testservers.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var rnd [6]byte
	rand.Read(rnd[:])
	schema := "backendurl_" + hex.EncodeToString(rnd[:])
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	for _, scheme := range []string{"postgres", "postgresql"} {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Scheme = scheme
		q := u.Query()
		q.Set("simba_schema", schema)
		q.Set("simba_max_lease", "3s")
		u.RawQuery = q.Encode()
		b, c, err := backendurl.Open(ctx, u.String())
		if err != nil {
			t.Fatalf("Open(%s): %v", backendurl.Redact(u.String()), err)
		}
		pb, ok := b.(*simbapg.Backend)
		if !ok {
			t.Fatalf("%s:// opened a %T", scheme, b)
		}
		if pb.Schema() != schema || pb.MaxLease() != 3*time.Second {
			t.Errorf("schema %q, MaxLease %v; want %q and 3s from the URL", pb.Schema(), pb.MaxLease(), schema)
		}
		s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.Close(ctx)
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second}); !errors.Is(err, backends.ErrClosed) {
			t.Errorf("OpenSession after the closer's Close = %v; want ErrClosed", err)
		}
	}
}

// §12: a PostgreSQL URL's password never shows in an error, whatever it
// holds; a URL without a host is refused.
func TestOpenPostgresErrors(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"postgres://simba:s3cret@127.0.0.1:1/simba", "unavailable"},
		{"postgres://u:s3c/ret@127.0.0.1:1/x", "unavailable"},
		{"postgres://u:s3c#ret@127.0.0.1:1/x", "unavailable"},
		{"postgres://u:s3c@ret@127.0.0.1:1/x", "unavailable"},
		{"postgresql://u:s3c?ret@127.0.0.1:1/x", "unavailable"},
		{"postgres://u:s3cret@db:bad port/x", "does not parse"},
		{"postgres://u:s3c%zzret@db/x", "does not parse"},
		{"postgres://u:s3cret@/x", "names no host"},
		{"postgres:///x", "names no host"},
		{"postgres://u:s3cret@127.0.0.1:1/x?simba_max_lease=forever", "simba_max_lease"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		b, closer, err := backendurl.Open(ctx, c.url)
		cancel()
		if err == nil || b != nil || closer != nil {
			t.Errorf("Open(%s) = %v, %v, %v; want an error", backendurl.Redact(c.url), b, closer, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s) = %v; want an error mentioning %q", backendurl.Redact(c.url), err, c.want)
		}
		if strings.Contains(err.Error(), "s3c") || strings.Contains(err.Error(), "ret@") {
			t.Errorf("Open(%s) error leaks the password: %v", backendurl.Redact(c.url), err)
		}
	}
}
