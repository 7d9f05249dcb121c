package simbamysql_test

import (
	"fmt"
	"strings"

	simbamysql "github.com/simba-go/simba/backends/mysql"
)

// Credentials never appear where a URL or a DSN is shown.
func ExampleRedact() {
	fmt.Println(simbamysql.Redact("mysql://app:s3cret@db.internal:3306/app?simba_prefix=jobs"))
	fmt.Println(simbamysql.Redact("app:s3cret@tcp(db.internal:3306)/app?tls=true"))
	// Output:
	// mysql://app:xxxxx@db.internal:3306/app?…
	// xxxxx@tcp(db.internal:3306)/app?…
}

// SchemaSQL gives a DBA the tables and procedures of a prefix, as a script
// for the mysql client.
func ExampleSchemaSQL() {
	sql, err := simbamysql.SchemaSQL("jobs")
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"jobs_sessions", "jobs_leases", "jobs_acquire", "jobs_keep_alive"} {
		fmt.Println(name, strings.Contains(sql, name))
	}
	_, err = simbamysql.SchemaSQL("Jobs-1")
	fmt.Println(err)
	// Output:
	// jobs_sessions true
	// jobs_leases true
	// jobs_acquire true
	// jobs_keep_alive true
	// simbamysql: WithPrefix("Jobs-1"): byte 'J' at 0; want a letter [a-z] first, then [a-z0-9_]
}
