package simbapg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backends/backendurl"
	simbapg "github.com/simba-go/simba/backends/postgres"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// §12: every part of a postgres:// or postgresql:// URL is checked before
// anything dials, whatever the scheme's case, and the error names the part
// and the form expected, without a byte of the password.
func TestURLCheckedBeforeDial(t *testing.T) {
	l := noDial(t)
	for _, tt := range []struct{ url, want string }{
		{"postgres://u:s3cret@127.0.0.1:99999/x", `the URL does not parse: port "99999" of host "127.0.0.1:99999"; want a number from 1 to 65535`},
		{"postgres://u:s3cret@127.0.0.1:pg/x", `the URL does not parse: port "pg" of host "127.0.0.1:pg"; want a number from 1 to 65535`},
		{"postgres://u:s3cret@" + l + ",127.0.0.1:0/x", `the URL does not parse: port "0" of host "127.0.0.1:0"; want a number from 1 to 65535`},
		{"postgres://u:s3cret@" + l + "/x?port=-1", `port="-1": want a number from 1 to 65535 (several joined by ,)`},
		{"postgres://u:s3cret@/x", `it names no host; want postgres://user@host:port/database (or a host= parameter)`},
		{"POSTGRES://u:s3cret@" + l + "/x?simba_max_lease=soon", `simba_max_lease="soon": want a duration of at least 1ms, such as 60s`},
		{"PostgreSQL://u:s3cret@" + l + "/x?simba_max_lease=-1s", `simba_max_lease="-1s": want a duration of at least 1ms, such as 60s`},
		{"postgres://u:s3cret@" + l + "/x?simba_schema=Bad", `WithSchema("Bad"): byte 'B' at 0; want [a-z_] then [a-z0-9_]`},
		{"postgres://u:s3cret@" + l + "/x?simba_migrate=maybe", `simba_migrate="maybe": want true or false`},
		{"postgres://u:s3cret@" + l + "/x?simba_notify=false", `unknown option simba_notify; want simba_schema, simba_max_lease, simba_migrate or simba_notifications`},
		{"postgres://u:s3cret@" + l + "/x#top", `the URL has a fragment (#…); escape a # in the password as %23`},
		{"postgres:/" + l + "/x", `want a postgres:// or postgresql:// URL`},
	} {
		b, c, err := backendurl.Open(context.Background(), tt.url)
		if err == nil {
			c.Close()
			t.Errorf("Open(%s) = %T; want an error", backendurl.Redact(tt.url), b)
			continue
		}
		want := "simbapg: open " + backendurl.Redact(tt.url) + ": " + tt.want
		if err.Error() != want {
			t.Errorf("Open(%s) error:\n%s\nwant\n%s", backendurl.Redact(tt.url), err, want)
		}
		if strings.Contains(err.Error(), "s3cr") {
			t.Errorf("Open(%s) error shows the password: %s", backendurl.Redact(tt.url), err)
		}
	}
}

// backendurl lower-cases the scheme to find the backend; Open accepts
// whatever backendurl accepts.
func TestURLSchemeAnyCase(t *testing.T) {
	dsn := testservers.Postgres(t)
	var r [6]byte
	rand.Read(r[:])
	schema := "simbatest_case_" + hex.EncodeToString(r[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			c.Close(ctx)
		}
	})
	_, rest, _ := strings.Cut(dsn, "://")
	sep := "?"
	if strings.Contains(rest, "?") {
		sep = "&"
	}
	for _, scheme := range []string{"POSTGRES", "PostgreSQL"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		b, c, err := backendurl.Open(ctx, scheme+"://"+rest+sep+"simba_schema="+schema)
		cancel()
		if err != nil {
			t.Fatalf("Open(%s://…) = %v; want the PostgreSQL backend", scheme, err)
		}
		if pb, ok := b.(*simbapg.Backend); !ok || pb.Schema() != schema {
			t.Errorf("Open(%s://…) opened %T; want the PostgreSQL backend with schema %s", scheme, b, schema)
		}
		c.Close()
	}
}

// noDial returns the address of a loopback listener that fails the test if
// anything connects to it before the test ends: a URL checked before it is
// dialled never reaches it.
func noDial(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			t.Errorf("something dialled %s, which the URL check should have refused before dialling", ln.Addr())
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}
