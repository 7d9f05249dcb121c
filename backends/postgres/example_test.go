package simbapg_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	simbapg "github.com/simba-go/simba/backends/postgres"
	"github.com/simba-go/simba/runtime"
)

// A backend on a pgx pool the application already has: the pool stays the
// application's. The schema is created on first use.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/app?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	b, err := simbapg.New(pool, simbapg.WithSchema("billing"), simbapg.WithMaxLease(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	c, err := runtime.NewClient(b, runtime.ConfigFor(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	// c.StartElection, c.RunWhileLeader, c.Lock ...
}

// A backend from a URL: it owns its pool and closes it. The simba_
// parameters configure the backend; pgx never sees them.
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := simbapg.Open(ctx, "postgres://app:secret@127.0.0.1:5432/app?sslmode=disable&simba_schema=jobs&simba_max_lease=30s")
	if err != nil {
		log.Fatal(err) // the error never shows the URL's password
	}
	defer b.Close()
}

// The SQL a DBA runs to create a schema for a role that may not: the same as
// psql -1 -v schema=jobs -f schema.sql.
func ExampleSchemaSQL() {
	sql, err := simbapg.SchemaSQL("jobs")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(sql) > 0, simbapg.SchemaVersion)
	// Output: true 1
}
