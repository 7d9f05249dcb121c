package mysqlfence_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/fencing/fencingtest"
	"github.com/simba-go/simba/fencing/mysqlfence"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// db connects to the test database (internal/testkit/testservers) with or without
// clientFoundRows: skipped on a bare machine, failed under make test when
// MariaDB is missing.
func db(t testing.TB, foundRows bool) *sql.DB {
	t.Helper()
	u := testservers.MySQL(t)
	_, rest, _ := strings.Cut(u, "://")
	user, hostPath, _ := strings.Cut(rest, "@")
	host, database, _ := strings.Cut(hostPath, "/")
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName, cfg.ClientFoundRows = user, "tcp", host, database, foundRows
	if name, pass, ok := strings.Cut(user, ":"); ok {
		cfg.User, cfg.Passwd = name, pass
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := sql.OpenDB(c)
	t.Cleanup(func() { d.Close() })
	return d
}

// newTable creates a table of its own for the test and drops it afterwards,
// so that tests never see each other's rows.
func newTable(t testing.TB, d *sql.DB, opts ...mysqlfence.Option) (*mysqlfence.Table, string) {
	t.Helper()
	name := "fence_test_" + strings.ToLower(rand.Text()[:10])
	tab, err := mysqlfence.New(d, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return tab, name
}

// TestConformance runs the conformance kit on the MySQL recipe (F3, F4),
// with connections that count changed rows (go-sql-driver's default) and
// with clientFoundRows (Connector/J's default): a new resource id per check,
// in one table.
func TestConformance(t *testing.T) {
	for _, foundRows := range []bool{false, true} {
		t.Run(fmt.Sprintf("clientFoundRows=%v", foundRows), func(t *testing.T) {
			tab, _ := newTable(t, db(t, foundRows))
			n := 0
			fencingtest.Run(t, func(testing.TB) fencing.Resource {
				n++
				return tab.Resource(fmt.Sprintf("resource-%d", n))
			})
		})
	}
}

// F1, F3: the seed's recipe: a retry with the same token and value is
// accepted whether the connection counts changed rows or matched ones; a
// lower token is stale and changes nothing.
func TestWrite(t *testing.T) {
	for _, foundRows := range []bool{false, true} {
		t.Run(fmt.Sprintf("clientFoundRows=%v", foundRows), func(t *testing.T) {
			d := db(t, foundRows)
			tab, name := newTable(t, d)
			ctx := t.Context()
			if err := tab.Write(ctx, "invoice:1", 3, []byte("v3")); err != nil {
				t.Fatalf("first write: %v", err)
			}
			if err := tab.Write(ctx, "invoice:1", 3, []byte("v3")); err != nil {
				t.Fatalf("retry with the same token and value: %v", err)
			}
			err := tab.Write(ctx, "invoice:1", 2, []byte("v2"))
			if !errors.Is(err, fencing.ErrStaleToken) {
				t.Fatalf("write with token 2 after 3 = %v; want ErrStaleToken", err)
			}
			if !strings.Contains(err.Error(), `"invoice:1"`) || !strings.Contains(err.Error(), "token 2") {
				t.Errorf("the error does not name the resource and token: %v", err)
			}
			if err := tab.Write(ctx, "invoice:1", 3, []byte("v2")); err != nil {
				t.Fatalf("another write of the same term: %v", err)
			}
			if err := tab.Write(ctx, "invoice:2", 1, nil); err != nil {
				t.Fatalf("write to another id: %v", err)
			}
			var rows int
			if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+name).Scan(&rows); err != nil || rows != 2 {
				t.Fatalf("rows = %d, %v; want 2 (one per resource)", rows, err)
			}
			if v, tok, err := tab.Read(ctx, "invoice:1"); err != nil || tok != 3 || string(v) != "v2" {
				t.Errorf("Read(invoice:1) = (%q, %d, %v); want (v2, 3, nil)", v, tok, err)
			}
			if v, tok, err := tab.Read(ctx, "invoice:3"); err != nil || tok != 0 || v != nil {
				t.Errorf("Read of a resource never written = (%q, %d, %v); want (nil, 0, nil)", v, tok, err)
			}
			if err := tab.Init(ctx, "invoice:4"); err != nil {
				t.Fatal(err)
			}
			if v, tok, err := tab.Read(ctx, "invoice:4"); err != nil || tok != 0 || v != nil {
				t.Errorf("Read of a resource initialised but never written = (%q, %d, %v); want (nil, 0, nil)", v, tok, err)
			}
		})
	}
}

// Resource ids are bytes: ids differing only in case are two resources,
// whatever the server's default collation.
func TestIDsAreBytes(t *testing.T) {
	tab, _ := newTable(t, db(t, false))
	ctx := t.Context()
	if err := tab.Write(ctx, "a", 5, []byte("lower")); err != nil {
		t.Fatal(err)
	}
	if err := tab.Write(ctx, "A", 1, []byte("upper")); err != nil {
		t.Errorf("write to id A after id a took token 5 = %v; want accepted: another resource", err)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := mysqlfence.New(nil, "t"); err == nil {
		t.Error("New(nil) succeeded")
	}
	for _, name := range []string{"", "a.b.c", "bad-name", "123", strings.Repeat("x", 65)} {
		if _, err := mysqlfence.New(&sql.DB{}, name); err == nil {
			t.Errorf("New(table %q) succeeded; want an error", name)
		}
	}
	tab, err := mysqlfence.New(&sql.DB{}, "app.ledger", mysqlfence.WithMaxValueSize(4))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := tab.Write(ctx, "r", 0, nil); !errors.Is(err, fencing.ErrInvalidToken) {
		t.Errorf("token 0: %v; want ErrInvalidToken", err)
	}
	if err := tab.Write(ctx, "r", 1, []byte("12345")); !errors.Is(err, fencing.ErrValueTooLarge) {
		t.Errorf("5 bytes over a 4-byte limit: %v; want ErrValueTooLarge", err)
	}
	if err := tab.Write(ctx, strings.Repeat("i", 256), 1, nil); err == nil || !strings.Contains(err.Error(), "256 bytes") {
		t.Errorf("a 256-byte id: %v; want an error naming its length", err)
	}
}
