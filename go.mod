module github.com/simba-go/simba

// The go line is the oldest release this module can declare: its code needs
// Go 1.25 (testing/synctest, sync.WaitGroup.Go) and go/ast.ParseDirective
// (1.26), and golang.org/x/tools, golang.org/x/sys and go-redis declare
// go 1.26.0. Their last releases for 1.25 are no way down: simbagen built
// with golang.org/x/tools v0.49.0 cannot read Go 1.27's export data.
go 1.26.0

require (
	github.com/dave/jennifer v1.7.1
	github.com/go-zookeeper/zk v1.0.4
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/robfig/cron/v3 v3.0.1
	github.com/rogpeppe/go-internal v1.16.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
	golang.org/x/tools v0.52.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-sql-driver/mysql v1.10.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

tool github.com/simba-go/simba/cmd/simbagen
