package simbapg

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
)

// Read-only tools only read (§12): OpenInspector and Inspect leave every
// table and sequence of the schema as they found it (a checksum of each),
// and a schema that does not exist lists as empty and is not created.
func TestInspectorWritesNothing(t *testing.T) {
	dsn := sharedDSN(t)
	pool := newPool(t, dsn, nil)
	b := newBackend(t, pool, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 10 * time.Second, Identity: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	g, err := s.Acquire(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutValue(ctx, "report", g.Token, []byte("slot 7")); err != nil {
		t.Fatal(err)
	}
	if err := s.Join(ctx, "billing", 2); err != nil {
		t.Fatal(err)
	}
	before := checksums(t, pool, b.Schema())

	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	in, closer, err := backendurl.OpenInspector(ctx, dsn+sep+"simba_schema="+b.Schema())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := in.Inspect(ctx)
	closer.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Leases) != 1 || inv.Leases[0].Name != "report" || string(inv.Leases[0].Value) != "slot 7" || len(inv.Groups) != 1 {
		t.Errorf("Inspect = %+v; want the lease report with its value, and the group billing", inv)
	}
	if after := checksums(t, pool, b.Schema()); after != before {
		t.Errorf("the schema changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	missing := uniqueSchema()
	in, closer, err = backendurl.OpenInspector(ctx, dsn+sep+"simba_schema="+missing)
	if err != nil {
		t.Fatal(err)
	}
	inv, err = in.Inspect(ctx)
	closer.Close()
	if err != nil || len(inv.Sessions)+len(inv.Leases)+len(inv.Groups) != 0 {
		t.Errorf("Inspect of a schema that does not exist = %+v, %v; want nothing", inv, err)
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", missing).Scan(&exists); err != nil || exists {
		dropSchema(t, pool, missing)
		t.Errorf("OpenInspector and Inspect created the schema %s (%v)", missing, err)
	}
}

// checksums describes every table and sequence of schema: an md5 of each
// table's rows, and each sequence's state, sorted.
func checksums(t *testing.T, pool *pgxpool.Pool, schema string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'S')`, schema)
	if err != nil {
		t.Fatal(err)
	}
	type rel struct{ name, kind string }
	var rels []rel
	for rows.Next() {
		var r rel
		if err := rows.Scan(&r.name, &r.kind); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rels) < 5 {
		t.Fatalf("schema %s has %d tables and sequences; want Simba's", schema, len(rels))
	}
	var lines []string
	for _, r := range rels {
		name := pgx.Identifier{schema, r.name}.Sanitize()
		var sum string
		q := "SELECT coalesce(md5(string_agg(t::text, E'\\n' ORDER BY t::text)), '') FROM " + name + " t"
		if r.kind == "S" {
			q = "SELECT last_value::text || ' ' || is_called::text FROM " + name
		}
		if err := pool.QueryRow(ctx, q).Scan(&sum); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		lines = append(lines, fmt.Sprintf("%s %s", r.name, sum))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
