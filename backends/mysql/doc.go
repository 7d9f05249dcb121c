// Package simbamysql is the MySQL and MariaDB backend of Simba: sessions,
// leases, values and groups in InnoDB tables of the application's database,
// each operation one CALL of a stored procedure, expiry measured by the
// database's clock, and release notifications by a poll, with named locks
// (GET_LOCK) as bells on top of it. Its package name is
// simbamysql, not mysql, so that it names what it is next to
// go-sql-driver/mysql.
//
// Rule names such as C2 refer to docs/design.md in the repository.
//
// It implements the contract of package backends in full — sessions
// implement [backends.Session] and [backends.Notifier], the backend
// [backends.Backend], [backends.StoreClock] and [backends.Inspector] — and
// passes the conformance suite (package backendtest) against a real MariaDB
// with every hook: sessions expired behind the client's back, a server whose
// data directory is wiped and initialised again, a server killed and started
// again with its data, and a server that cannot be reached.
//
// # Use
//
// With a database/sql pool of go-sql-driver/mysql you already have (it
// stays yours: the backend never closes it):
//
//	db, err := sql.Open("mysql", "app:secret@tcp(db.internal:3306)/app")
//	...
//	b, err := simbamysql.New(db, simbamysql.WithPrefix("simba"))
//	...
//	defer b.Close() // stops the release poll
//	c, err := runtime.NewClient(b, runtime.DefaultConfig())
//
// From a URL, with a pool the backend owns and closes:
//
//	b, err := simbamysql.Open(ctx, "mysql://app:secret@db.internal:3306/app?simba_prefix=jobs")
//
// [Open] takes mysql:// and mariadb:// URLs and go-sql-driver DSNs, with the
// driver's parameters and the backend's own (simba_prefix, simba_max_lease,
// simba_migrate=false, simba_poll_interval; see [ParamPrefix] and its
// siblings), which it removes before the driver sees the rest. It checks
// every part before it dials, and never shows the credentials in an error or
// a log line, in either form. Importing the package registers both schemes
// with package backendurl, so that every example and tool takes one
// --backend setting (backends/all imports it).
//
// Options: [WithPrefix] (default "simba"), [WithMaxLease] (the longest
// session time to live granted, and the amnesia guard's lock-delay; default
// 60 s; use the same value on every node), [WithPollInterval] (default
// 50 ms), [WithBells] (default 4 with [Open], on a pool of their own; none
// with [New] unless asked, since they take the caller's connections),
// [WithoutMigration], [WithReadOnly] and [WithLogger].
//
// The backend depends on no DSN setting of the pool: it reads no
// RowsAffected (clientFoundRows does not matter), sends one statement per
// call (multiStatements is not needed), reads no DATETIME (parseTime does
// not matter) and keeps every time as microseconds since the epoch (the
// session's time_zone does not matter: TestDSNSettings moves it to +05:00
// and -09:30). It sends each call as one text query with its arguments
// written as hexadecimal literals, so that a call is one round trip whatever
// interpolateParams says, and it leaves no prepared statement to close (a
// write that go-sql-driver sends with no deadline unless the DSN sets
// writeTimeout, under database/sql's pool lock: one into a silent link
// stopped the whole pool). The pool must run
// with autocommit on (the driver's default). Every call takes a context
// whose deadline bounds it (D2); go-sql-driver ends a call whose context
// ended by closing its connection, and the server may still commit it: the
// outcome is then unknown, as for any store, and every operation may run
// twice (a second acquire returns the same token, a second release or close
// does nothing), so a call that failed on a broken connection, a deadlock or
// a lock wait is sent again, within its context. Keep-alives share the pool
// with acquisitions: give it connections enough for every node's candidates.
//
// # The tables
//
// The backend creates its tables and procedures on first use, or in [Open],
// or when [Backend.Migrate] is called — unless it was opened
// [WithoutMigration], when it only checks that they are there, at
// [SchemaVersion]. The SQL is schema.sql, embedded in the package and
// shipped beside it as a script a DBA can run with the mysql client, once
// per prefix; [SchemaSQL] returns it for another prefix. Every name starts
// with the prefix: prefix_meta, prefix_seq, prefix_sessions, prefix_leases,
// prefix_groups, prefix_members, and the procedures prefix_acquire, …. The
// migration is versioned: tables of a newer version are refused with an
// error wrapping [ErrSchema], and so is a prefix whose tables exist without
// its meta table, or are in another engine than InnoDB (the procedures need
// its transactions and row locks; a server without InnoDB, or with
// NO_ENGINE_SUBSTITUTION off, may have created them in another). Within a
// version, releases may make the procedures faster but never change their
// signatures or the tables: code of any release works with the procedures of
// any other of the same version. The meta table records the procedures'
// revision, and a migration replaces those of an older one (CREATE OR
// REPLACE on MariaDB, so that calls running meanwhile never find them
// missing). Two processes migrating at once wait for each other on a named
// lock (GET_LOCK; a server that refuses it, such as Galera, gets idempotent
// statements without it). A user that may not create tables and routines
// gets an error naming the privileges and the file to run instead; the
// procedures run with their definer's rights, so a user needs only EXECUTE
// (and SELECT for the read-only listing).
//
//	meta      one row: the version, the procedures' revision, when the tables
//	          were created, and when the amnesia guard began
//	seq       counters: the last token (row 1), the groups' revision (row 3)
//	sessions  id, identity, granted TTL, expiry (µs since the epoch, by the
//	          database's clock; 0 once ended), the digest's lease count and
//	          version, the revision of the session's last leave
//	leases    name → holder (NULL when free), its last token, its value, the
//	          group and index of a partition name, and its last release
//	          (the clock in µs, and who released it) for the poll
//	groups    name → partition count, epoch; while it has members
//	members   (group, session)
//
// Names and ids are VARBINARY: compared byte by byte, whatever the
// database's default collation. Lease records are never deleted: a released
// lease keeps its last token and its value (values outlive terms). Records
// of sessions that ended are deleted.
//
// # Operations
//
// Every operation is one statement, CALL prefix_operation(…): one round
// trip, its reply one row.
// Each procedure that writes runs one READ COMMITTED transaction (no gap
// locks; a locking read sees the latest committed row) and bounds its lock
// waits to a second (innodb_lock_wait_timeout, set for the call and put
// back, unless the connection's is one second already: set
// innodb_lock_wait_timeout=1 in the DSN to spare the two SETs), as well as by
// the context. Time is read only as @@timestamp in microseconds: the
// database's clock in UTC, at the start of the statement that reads it.
// NOW(6) and UTC_TIMESTAMP(6) are fixed at a statement's start, before its
// lock waits (seen: NOW(6), SLEEP(0.2), NOW(6) reads one time twice), so a
// conditional UPDATE … WHERE expires > NOW(6) that waited for a lock judges
// expiry with a time from before the wait; a statement inside a procedure
// gets its own start time. So the rules, as on PostgreSQL:
//
//  1. A call locks its own session's row first, then reads the clock in a
//     later statement: a keep-alive that waited for its row can never renew
//     a session that expired while it waited.
//  2. A token is minted only after the lease's row is locked, so that tokens
//     follow the order of the terms (the conformance case TermOrder): the
//     greatest of the counter plus one, the lease's last token plus one and
//     the clock in microseconds, written to the counter row with
//     LAST_INSERT_ID(…) and read with LAST_INSERT_ID() by the next statement
//     of the same procedure, on the same connection.
//  3. A lease whose holder expired is taken over only by ending the holder's
//     session in the same transaction, with its row locked (SKIP LOCKED: a
//     takeover never waits for another session; a holder it cannot lock is
//     busy, and counts as alive, whatever expiry its row showed — the call
//     that holds it may be its keep-alive, renewing it): the holder's
//     keep-alive either came first and renewed it, and the takeover is
//     refused, or finds its session ended (the conformance case
//     KeepAliveRacesTakeover, and TestKeepAliveRacesTakeoverMany, which runs
//     hundreds of such races: until routines revision 3 a busy holder's old
//     expiry was compared with a clock read a statement later, so the lease
//     went to the candidate without ending the holder, whose renewal then
//     committed — two valid terms).
//
// Locks are taken in one order — sessions (the caller's own first), then
// lease records, then counters and groups — with STRAIGHT_JOIN where one
// statement locks a session and a lease, so that calls rarely deadlock; one
// that InnoDB picks as a deadlock's victim anyway is sent again. A new lease
// record is created with INSERT … ON DUPLICATE KEY UPDATE, never INSERT
// IGNORE, whose shared lock on a duplicate two candidates would both hold
// and both want to upgrade.
//
// A refused acquire is answered from one read without locks when the lease's
// holder and the calling session are both alive: it names the holder, in a
// *[backends.HeldError] (session, identity, token, and remaining time by the
// database's clock), takes no lock and writes nothing, so that candidates
// never queue on their own session's row. The common grant — a free record
// that is not a partition — runs, after that read, four statements and the
// commit: an UPDATE that locks the session's row and counts the lease in its
// digest, only if the row is still as the read saw it (its expiry and
// version); a lock of the lease's record, only if it is still free (SKIP
// LOCKED: a record that another call holds locked — a competing grant, the
// holder's release — is refused at once, as held, so that the candidates one
// release wakes do not line up behind each other and the release;
// conformance's TermOrder, eight sessions on one name, runs in a second
// instead of two); the counter's update; and an UPDATE that grants the lease
// if the session is still alive by the clock of that statement, read after
// every lock. Anything else — a new name, a partition, a retry of a grant, a
// holder that expired, a session row that changed since the read — rolls
// that back and takes the general path: a lock of the session's row, a lock
// of the lease's (SKIP LOCKED), the counter's update, an UPDATE of each row,
// and the commit. A release of a
// lease that is not a partition runs an UPDATE of the session's row (its
// lock, and the count in its digest), an UPDATE that frees the record if
// this session holds it with this token, a read of the digest and the commit
// (no clock after its locks is needed: only the holder with its token frees
// the lease, and freeing is what it asked); a partition's release, and one
// that frees nothing, take a transaction that locks both rows and decides.
// Rows already locked are written with single-table UPDATEs: a multi-table
// UPDATE costs MariaDB a temporary table per call.
//
// What that costs: an acquire and a release are two round trips and two
// durable commits (InnoDB flushes its log at a COMMIT inside a procedure as
// at any other), as the raw pair is — two single-row conditional UPDATEs —
// but the procedures run about a dozen statements where the raw pair runs
// two, and MariaDB spends 10 to 25 µs of CPU on each statement of a
// procedure (it opens and locks its tables and optimises it anew at every
// CALL; a CALL of an empty procedure sent as text costs what a SELECT 1
// does, and a CALL of a procedure of one UPDATE what the UPDATE does: the
// cost is in the statements, about a dozen per pair): a profile of the server during pairs puts three quarters of
// its samples under sp_head::execute, a third of those in the commits. So a pair takes about 1.3 to 1.5 times the raw pair
// of bench/'s comparison (UPDATEs sent unprepared, as database/sql sends
// them by default: two round trips each) and about twice the prepared raw
// pair of BenchmarkAcquireRelease, not the 1.3 of the other stores; the
// common grant's four statements (six before) cut the server's CPU per pair
// by 8% and its time by 3%, within the noise of the machine. A keep-alive locks the session's row, renews it,
// commits, and then reaps (see Reaping below): its cost does not grow with the leases
// held (S1; BenchmarkKeepAlive counts one command per renewal at 1, 100 and
// 1,000 leases). Its reply carries the digest (lease count, a version one
// higher per lease acquired or released, the groups' revision), the time to
// live granted and the database's time; the replies to Acquire and Release
// carry the lease count and version right after their change (a release's,
// read just after its commit, may include another call of the same session
// that committed in between: the engine then reads Owned, as for any change
// it did not make).
//
// Reaping: the calls that open and renew sessions end, after their own
// commit, sessions that expired — the oldest first, at most 16 of them and
// 1,000 of their leases and memberships per call, in a transaction of their
// own that skips what another transaction holds (SKIP LOCKED): a session
// another reaper is at, and the groups' revision counter, which ending a
// session moves, while a leave, a join or another reaping holds it; the next
// call reaps instead (TestReapSkipsBusyCounter; until routines revision 4 a
// keep-alive's reply waited for the counter, up to the 1 s lock wait bound).
// An acquire does not wait for reaping: it takes over a lease whose holder
// expired itself (3. above).
//
// A session that expired is dead at once — every call checks its expiry,
// and a lease or membership of a dead session counts as free — and is ended
// lazily: the calls that open and renew sessions end up to 16 expired
// sessions each (oldest first, SKIP LOCKED, in a transaction of their own
// that never fails the call), releasing at most 1,000 of their leases and
// memberships per call, so a crashed node's leases are released within a
// renewal period of any live node; there is no event scheduler. A join ends
// the group's expired members first. Close ends its session in its first
// call and releases up to 1,000 leases and memberships per call, calling
// again until none is left.
//
// Tokens are strictly increasing per name and never reused: the counter row
// and the lease rows persist (a restart with the data keeps them), and the
// clock in microseconds is their floor, so tokens also exceed every token of
// tables that were lost, or of an older copy of the data that came back
// (TestServerRestartAndOlderCopy), as long as fewer than a million leases
// are granted per second on average and the clock did not step back.
//
// # Release notifications
//
// MySQL and MariaDB have no LISTEN/NOTIFY. A release, a close and the end of
// an expired session record, in the lease's row, the clock in microseconds
// and the session that released it; while some candidate of a backend waits
// for a release ([backends.Notifier]), the backend asks the database for the
// releases since its last poll (CALL prefix_poll, one indexed read), every
// poll interval ([WithPollInterval], 50 ms by default), and wakes the
// watches of the names released by other sessions. A backend whose
// candidates wait for nothing polls nothing, so a node that holds what it
// wants keeps its keep-alive as its only request. A release is numbered
// when its transaction runs and may commit a moment later, so each poll
// reads again the second before its last one (a release seen twice wakes
// its watches once). A poll that fails is retried with back-off, and when it
// works again every watch wakes (a hint only: candidates try again, which
// is always safe). So with the poll alone a graceful hand-off to a waiting
// candidate takes at most the poll interval plus two round trips (its
// acquire, and the poll itself), about half the interval on average; without
// the poll (0) a candidate takes over at its next attempt, every
// RenewInterval/2 plus jitter. A crashed holder is replaced at its expiry in
// any case: a refusal carries the holder's remaining time, and the candidate
// tries again right then (A1).
//
// # Bells
//
// On top of the poll, a backend with bells ([WithBells]; [Open]'s have
// them) rings waiting candidates of other backends at once. While a session
// of the backend holds a lease, one connection of the backend's (the holding
// connection) holds a named lock, the lease's bell: GET_LOCK of a name made
// from the database, the prefix and the lease's name, taken 3 ms after the
// grant (a lease released sooner never takes it), and given up
// (RELEASE_LOCK) as soon as the release, the close or the expiry of its
// session is known to the backend — after the release's commit. The holding
// connection also holds a lock named after its own connection id, which
// marks it as one. A candidate that waits for a lease ([backends.Notifier])
// blocks, on a connection of its own, in GET_LOCK of the lease's bell,
// gives the lock back in the same statement once it has it, and wakes its
// watches; it waits only while a holding connection holds the bell (never
// on a bell that another waiter holds for the instant of its wake-up, so
// waiters do not wake each other), and otherwise looks again, after 2 ms
// and then half as long again each time, up to every 250 ms.
//
// A bell is a hint, never ownership: the lock carries no token and is tied
// to a connection, and a woken candidate only tries Acquire, which the
// procedures decide as always. The poll goes on beneath, so a bell that is
// lost (its connection broke: that rings it too), late (not yet taken) or
// stale (kept by a node that has not yet learnt that its session expired)
// costs only speed, never safety; a server that refuses named locks (Galera
// answers GET_LOCK with ER_NOT_SUPPORTED_YET) turns the bells off, with one
// log line, and the poll carries on alone.
//
// The connections: a backend waits with a bell on at most n names at once
// (WithBells(n), 4 by default; further names are left to the poll), one
// connection each while a candidate waits for it, and takes one more, the
// holding connection, while its sessions hold a lease (it goes back when
// they hold none). [Open] gives the bells a small pool of their own, dialled
// with the same settings, so that they never take the calls' connections;
// [New] has no bells unless WithBells asks, and then takes them from the
// caller's pool: with SetMaxOpenConns(m) set before New, at most m/4 of its
// connections, and none if m < 8. A connection taken from the caller's pool
// may be its only idle one: a spare is dialled at once in its place, but
// under high latency a call may still have to wait for a dial (the engine
// tests with 200 ms of reply latency pass only with the bells on a pool of
// their own).
//
// Measured on a 2-core VM shared with other work (load average 6 to 8),
// BenchmarkHandOff and BenchmarkHandOffPollOnly in one run: a backend-level
// hand-off took 9.5 ms at the median with bells (the waiter woken 0.8 ms
// after the release returned) against 43 ms with the poll alone (woken
// after 35 ms), beside a floor of 3.5 to 6.2 ms (two raw durable UPDATEs
// after the same idle); through the engine, 6.8 ms against 30 ms, and in a
// quieter run (load 3) 3.1 ms with a p99 of 11 ms against 30 ms and 51 ms
// (150 hand-offs each; runs at load 6 and more show stalls of 100 ms in
// either). bench/'s
// comparison, its MySQL row run before and after the bells back to back:
// 30.6 and 30.0 ms with the poll alone, 8.6 and 11.1 ms with bells, beside
// floors of 2.5 to 6.5 ms. A tail remains: a release that comes before the
// candidate's GET_LOCK is armed (a holder takes its bell 3 ms after its
// grant, and a candidate that found none looks again later) rings nobody,
// and the poll bounds that hand-off at its interval plus the round trips;
// the machine's own stalls of tens of milliseconds (a slow commit) show too.
//
// # The amnesia guard
//
// InnoDB keeps its data across restarts, and a restart with the data
// changes nothing: sessions whose time to live has not run out renew, and
// hold their leases (the conformance case DurableRestart kills the server
// and starts it again). But a database can lose its data while clients
// still believe they hold leases until their local deadlines: a wiped data
// directory, a new server, the tables dropped by hand. A grant at once would
// make two leaders. So the migration that creates the tables records their
// creation, and no lease is granted until MaxLease after it (Acquire fails
// with a *[backends.RecoveringError], matching [backends.ErrRecovering] and
// [backends.ErrLeaseHeld], that says why and for how long; Inspect's
// Inventory.Recovering, and so `simba status`, say it too): by then every old holder's local deadline has
// passed, since no session was granted more (§15, Chubby's lock-delay).
// Sessions open meanwhile. Tables that vanish under running sessions end
// them — their calls fail with [backends.ErrSessionExpired] — and the next
// call creates them again, with their guard (unless the backend runs
// WithoutMigration). A new deployment therefore waits MaxLease for its
// first grant; set simba_max_lease (or WithMaxLease) to the cluster's lease
// duration to shorten it.
//
// The tests cover a server whose data directory is wiped and initialised
// again (mariadb-install-db), under the conformance suite's AmnesiaGuard.
//
// What the guard cannot cover:
//
//   - An older copy of the data coming back (a file-system snapshot or a
//     dump restored, a fail-over to an asynchronously replicated replica that
//     missed recent grants and renewals, §11): the tables exist, and cannot
//     tell. Tokens still do not go back (their floor is the clock), but a
//     session the copy forgot, or whose renewals it lost, may still lead by
//     its own clock while the copy hands its leases out. After such an
//     event, before clients reach the server, start the guard by hand: CALL
//     prefix_start_guard() ends every session, grants no lease for MaxLease
//     from then on, and moves the token counter to the clock in microseconds
//     (or above the highest token recorded), keeping the values
//     (TestOlderCopyStartGuard). Grant EXECUTE on it to no application user.
//   - A database host's clock that steps: expiry is measured with it, so
//     every lease shrinks or grows at once (§11). Keep it slewing.
//
// # Errors
//
// A session that expired, was closed or was lost (its tables gone): an
// error wrapping [backends.ErrSessionExpired]. A lease held: a
// *[backends.HeldError], wrapping [backends.ErrLeaseHeld]; the guard: a
// *[backends.RecoveringError], matching [backends.ErrRecovering] and
// [backends.ErrLeaseHeld]. Network
// errors, timeouts and errors from the server: wrapping both
// [backends.ErrUnavailable] and the driver's error (a *mysql.MySQLError
// carries the error number), and the context's error when it ended. Tables
// of another version, a foreign prefix or another engine: wrapping
// [ErrSchema]; missing tables under WithoutMigration: [ErrNoSchema]. A
// closed backend: wrapping [backends.ErrClosed].
//
// # Versions
//
// The tests run against MariaDB 10.11 (Debian 12's mariadb-server), with
// go-sql-driver/mysql v1.10. The procedures use what MySQL 8.0 has as well —
// SKIP LOCKED (MariaDB 10.6+, MySQL 8.0+), STRAIGHT_JOIN, multi-table
// UPDATE, LAST_INSERT_ID(expr), SIGNAL-free error handlers, @@timestamp —
// and nothing of MariaDB's own in their bodies; only the migration differs:
// on MariaDB it replaces procedures with CREATE OR REPLACE, on MySQL with
// DROP and CREATE (a call in that instant fails with "does not exist" and
// is sent again by the engine). What differs on MySQL 8, untested here
// (Debian 12 ships no MySQL 8): @@timestamp is a statement's start there too
// (the rule above holds); the default binlog_format is ROW (fine: READ
// COMMITTED needs ROW or MIXED, and refuses STATEMENT); creating the
// function prefix_groups_digest needs log_bin_trust_function_creators, or
// SUPER, when the binary log is on (it is on by default in MySQL 8, off in
// MariaDB's Debian package); the listing's GROUP_CONCAT raises
// group_concat_max_len (1,024 bytes by default in MySQL 8) with a SET_VAR
// hint that MariaDB ignores. The bells hold several named locks on one
// connection, which MySQL 5.7 and MariaDB 10.0.2 brought, and use
// IS_USED_LOCK and RELEASE_ALL_LOCKS, which both have. A Galera cluster
// (MariaDB Galera, Percona XtraDB Cluster) is untested: SKIP LOCKED and the
// named lock of migrations behave differently there. MariaDB Galera
// answered GET_LOCK with error 1235, ER_NOT_SUPPORTED_YET ("GET_LOCK in
// cluster"), until MDEV-31325: that answer turns the bells off (no test here
// could produce it); where a cluster grants named locks, a bell may be
// local to one node, and candidates on another are woken by the poll.
package simbamysql
