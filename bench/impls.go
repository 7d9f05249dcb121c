package bench

import simbamysql "github.com/simba-go/simba/backends/mysql"

// Impls returns the rows of the table, ours first, each one entry: a backend
// of ours or a peer is added here and nowhere else.
func Impls() []Impl {
	return []Impl{
		{
			Name: "simba Lock", Store: "Redis",
			Config: "runtime.Config{LeaseDuration: 2s} (renewal every 667 ms, one session per node); simbaredis.New(client, WithPrefix, WithMaxLease(2s)); Lock/Unlock",
			Open:   simbaOnRedis(false),
		},
		{
			Name: "simba Election", Store: "Redis",
			Config: "as simba Lock; StartElection, OnElected, Stop",
			Open:   simbaOnRedis(true),
		},
		{
			Name: "simba Lock", Store: "PostgreSQL",
			Config: "runtime.Config{LeaseDuration: 2s}; a pgxpool per node (pgx defaults); simbapg.New(pool, WithSchema, WithMaxLease(2s)), notifications on; Lock/Unlock",
			Open:   simbaOnPostgres(false),
		},
		{
			Name: "simba Lock", Store: "MySQL",
			Config: "runtime.Config{LeaseDuration: 2s}; a database/sql pool per node (go-sql-driver defaults); simbamysql.New(db, WithPrefix, WithMaxLease(2s), WithBells(4)): bells (GET_LOCK wake-ups) over the release poll every 50 ms; Lock/Unlock; tested on MariaDB 10.11",
			Open:   simbaOnMySQL(false, simbamysql.DefaultBells),
		},
		{
			Name: "simba Lock (poll only)", Store: "MySQL",
			Config: "as simba Lock on MySQL, with WithBells(0): candidates learn of a release by the release poll alone (every 50 ms)",
			Open:   simbaOnMySQL(false, 0),
		},
		{
			Name: "simba Lock", Store: "ZooKeeper",
			Config: "runtime.Config{LeaseDuration: 2s}; simbazk.New(servers, WithRoot, WithMaxLease(2s), WithTickTime(500ms)) per node; Lock/Unlock",
			Open:   simbaOnZooKeeper(false),
		},
		{
			Name: "simba Lock", Store: "etcd (embedded)",
			Config: "runtime.Config{LeaseDuration: 2s}; a clientv3.Client per node; simbaetcd.New(client, WithPrefix, WithMaxLease(2s)); Lock/Unlock",
			Open:   simbaOnEtcd(false),
		},
		{
			Name: "simba Election", Store: "etcd (embedded)",
			Config: "as simba Lock on etcd; StartElection, OnElected, Stop",
			Open:   simbaOnEtcd(true),
		},
		{
			Name: "redislock", Store: "Redis",
			Config: "Obtain(ttl 2s, LinearBackoff(100ms)); Refresh(2s) every 667 ms per lock; Release",
			Open:   redislockRow,
		},
		{
			Name: "redsync", Store: "Redis",
			Config: "one goredis pool; NewMutex(WithExpiry(2s), default retry delay 50–250 ms, unbounded tries); ExtendContext every 667 ms per lock; UnlockContext",
			Open:   redsyncRow,
		},
		{
			Name: "etcd Mutex", Store: "etcd (embedded)",
			Config: "concurrency.NewSession(WithTTL(2)) per node; NewMutex(session, prefix); Lock/Unlock",
			Open:   etcdRow(false),
		},
		{
			Name: "etcd Election", Store: "etcd (embedded)",
			Config: "concurrency.NewSession(WithTTL(2)) per node; NewElection(session, prefix); Campaign/Resign",
			Open:   etcdRow(true),
		},
		{
			Name: "zk Lock", Store: "ZooKeeper",
			Config: "zk.Connect(servers, 2s) per node (pings every 667 ms); zk.NewLock(conn, path, WorldACL); Lock/Unlock",
			Open:   zkLockRow,
		},
	}
}
