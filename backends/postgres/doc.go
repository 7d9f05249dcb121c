// Package simbapg is the PostgreSQL backend of Simba: sessions, leases,
// values and groups in tables of one schema, each operation one call of a
// PL/pgSQL function, expiry measured by the database's clock, and release
// notifications by LISTEN/NOTIFY. Its package name is simbapg, not postgres,
// so that it names what it is next to pgx's packages.
//
// Rule names such as C2 refer to docs/design.md in the repository.
//
// It implements the contract of package backends in full — sessions
// implement [backends.Session], [backends.Notifier] and
// [backends.HolderNotifier], the backend
// [backends.Backend], [backends.StoreClock] and [backends.Inspector] — and
// passes the conformance suite (package backendtest) against a real
// PostgreSQL with every hook: sessions expired behind the client's back, a
// server whose data directory is wiped and initialised again, a server
// restarted with its data, and a server that cannot be reached.
//
// # Use
//
// With a pgx pool you already have (it stays yours: the backend never
// closes it):
//
//	pool, err := pgxpool.New(ctx, "postgres://app@db.internal:5432/app")
//	...
//	b, err := simbapg.New(pool, simbapg.WithSchema("simba"))
//	...
//	defer b.Close() // stops the LISTEN connection
//	c, err := runtime.NewClient(b, runtime.DefaultConfig())
//
// From a URL, with a pool the backend owns and closes:
//
//	b, err := simbapg.Open(ctx, "postgres://app:secret@db.internal:5432/app?simba_schema=jobs")
//
// [Open] takes what pgxpool.ParseConfig takes (postgres:// or postgresql://,
// sslmode, pool_max_conns, …) and the backend's own parameters, which it
// removes before pgx sees the URL: simba_schema, simba_max_lease (a Go
// duration), simba_migrate=false and simba_notifications=false (see the
// constants [ParamSchema] and its siblings; any other simba_ parameter is
// refused). It checks every part of the URL before it dials — the scheme,
// in any case; a host; ports from 1 to 65535; the backend's parameters —
// with errors that name the part and the form expected, then checks that
// PostgreSQL answers and migrates the schema. It never shows the URL's
// credentials in an error or a log line: the userinfo is taken to end at the
// URL's last "@", so a password needs no escaping of "/", "#", "?" or "@".
// Opened read-only (backendurl.OpenInspector, for status tools), it neither
// creates nor migrates the schema and does not LISTEN. Package
// backendurl opens postgres:// URLs with it, so every example and tool takes
// one --backend setting.
//
// Options: [WithSchema] (default "simba"), [WithMaxLease] (the longest
// session time to live granted, and the amnesia guard's lock-delay; default
// 60 s; use the same value on every node), [WithoutMigration],
// [WithNotifications] and [WithLogger].
//
// Every call takes a context whose deadline bounds it (D2); pgx ends a
// call whose context ends by closing its connection, and the server may still
// commit it: the outcome is then unknown, as for any store. The pool's
// settings are the caller's: its statement cache mode, TLS, size. Keep-alives
// share the pool with acquisitions: give it connections enough for every
// node's candidates, or a renewal may wait for one past its deadline.
//
// # The schema
//
// The backend creates its schema on first use, or in [Open], or when
// [Backend.Migrate] is called — unless it was opened [WithoutMigration],
// when it only checks that the schema is there, at [SchemaVersion]. The SQL is
// schema.sql, embedded in the package and shipped beside it as a psql script
// a DBA can run by hand, once per schema, in one transaction:
//
//	psql -1 -v schema=simba -f schema.sql
//	psql -c 'GRANT USAGE ON SCHEMA simba TO app'
//
// [SchemaSQL] returns the same SQL with the schema's name filled in, for
// migration tools. The migration is versioned and idempotent: running it
// again changes nothing; a schema of a newer version is refused with an error
// wrapping [ErrSchema], and so is an existing schema that holds anything
// else (an empty schema a DBA created is used). Within a version, releases
// may make the functions faster, or add one, but never change the
// signatures of those there are or the tables: code of any release works
// with the functions of any other of the same version (a function a
// revision added is called only on a schema of that revision or later). The comment of the meta table records the functions'
// revision, and a migration replaces those of an older one (a role that may
// not, or a backend opened WithoutMigration, uses them as they are, and logs
// a warning that running schema.sql again installs the new ones). Two
// processes migrating at once wait for each other, on an advisory lock. A
// role that may not create the schema gets an error naming the privilege it
// lacks (CREATE on the database, or on the schema), the GRANT that gives it,
// and the file to run instead.
//
// The functions run with the rights of the schema's owner (SECURITY DEFINER,
// with a fixed search_path): a role needs only USAGE on the schema to use
// the backend, and reaches the tables only through them.
//
//	meta              one row: the schema's version, when it was created, and
//	                  when its amnesia guard began
//	sessions          id, identity, granted TTL, expiry (database clock), the
//	                  digest's lease count and version, the revision of the
//	                  session's last leave
//	leases            name → holder (NULL when free), its last token, its value,
//	                  and the group and index of a partition name
//	partition_groups  name → partition count, epoch; while it has members
//	members           (group, session)
//	token_seq         the tokens; rev_seq: the groups' epochs
//
// Lease records are never deleted: a released lease keeps its last token
// and its value (values outlive terms). Records of sessions that ended are
// deleted.
//
// # Operations
//
// Every operation is one statement, SELECT * FROM schema.function(…): one
// round trip (pgx prepares and caches a statement the first time a
// connection runs it, one round trip more, once; pgxpool pings a
// connection idle for over a second before handing it out). Expiry is
// measured by clock_timestamp() — the database's clock when it reads it, not
// now(), the start of the transaction — and never by a client's clock
// (D1). Three rules keep the decisions sound under concurrency; each was a
// bug seen on PostgreSQL 15, and each has a test that fails without it:
//
//  1. A token is taken from token_seq only after the lease's row is locked,
//     so that tokens follow the order of the terms (nextval() before the
//     lock gave a later term a lower token: the conformance case TermOrder).
//     It is also at least one more than the lease's last token.
//  2. A call locks its own session's row first, then reads the clock. After
//     a lock wait PostgreSQL re-checks an UPDATE's WHERE only for rows that
//     changed, and now() is when the statement began, so "UPDATE … SET
//     expires_at = now() + ttl WHERE expires_at > now()" renews a session
//     that expired while it waited (TestKeepAliveAfterLockWait).
//  3. A lease whose holder expired is taken over only by ending the holder's
//     session in the same transaction, with its row locked (SKIP LOCKED: a
//     takeover never waits for another session; a holder it cannot lock is
//     busy, and counts as alive): the holder's keep-alive either came first
//     and renewed it, and the takeover is refused, or finds its session
//     ended (the conformance case KeepAliveRacesTakeover).
//
// Locks are taken in one order — sessions (the caller's own first), then
// lease records, then groups, each in name order — so that calls do not
// deadlock; a call that PostgreSQL picks as a deadlock's victim anyway, or
// whose connection broke, is sent again (every operation may run twice: a
// second acquire returns the same token, a second release or close does
// nothing).
//
// A refused acquire names the holder, in a *[backends.HeldError]: its
// session, the identity it was opened with, its token, and its remaining
// time by the database's clock; a refusal takes no lock and writes nothing.
// Holder reads the same. A keep-alive reads the session's row and the
// epochs of the groups it joined: its cost does not grow with the leases
// held (S1). Its reply carries the digest (lease count, a version one
// higher per lease acquired or released, the groups' epoch), the time to
// live granted and the database's time; the replies to Acquire and Release
// carry the lease count and version right after their change (Groups is 0
// there).
//
// Acquiring a free lease and releasing one are the calls a lock makes, and
// are kept short: each locks its session's row with the UPDATE that counts
// its change in the digest (whose RETURNING reads the clock, after the lock),
// and undoes the count if it then changes nothing. An acquire of a free lease
// runs four statements in its function (a read without locks, that UPDATE,
// the lock of the lease record, its UPDATE), a release two and its NOTIFY;
// retries, takeovers and lost races take the general path, which locks first
// and decides after.
//
// A release that frees a lease commits without waiting for its WAL to be
// flushed to disk (synchronous_commit off, for that transaction only): the
// fsync a durable commit waits for is most of a release's time. Losing a
// release can only keep a lease taken longer, never give it to two sessions.
// A database that crashes within a moment of the release comes back with the
// lease held by the session that released it; that session's next renewal
// finds a digest it did not expect, reads its leases and releases the one
// nobody there holds (or the session expires). And any grant that follows
// the release waits for the WAL to be flushed up to its own commit, and so
// past the release. Every other call that changes something waits for the
// flush: a renewal lost in a crash could make the database expire a session
// sooner than its client was told.
//
// A session that expired is dead at once — every call checks its expiry, and
// a lease or membership of a dead session counts as free — and is ended
// lazily: the calls that open and renew sessions end up to 16 expired
// sessions each (oldest first, SKIP LOCKED), releasing at most 1,000 of
// their leases and memberships per call and notifying watchers, so a crashed
// node's leases are released within a renewal period of any live node, and
// no call holds locks for long on another's behalf; there is no cron. A join
// ends the group's expired members first. Close ends its session in its
// first call and releases up to 1,000 leases and memberships per call; the
// backend calls again, after Close returned, until none is left.
//
// Many acquires (releases) of one session go in one statement, in one
// transaction ([backends.BatchSession], which the runtime uses when it has
// many to make at once): one round trip and one commit per batch. Releases
// call the release function once per lease. Acquires call acquire_batch,
// which locks the session's row and checks the session, the clock and the
// amnesia guard once, and grants the names that are free or new (no
// partition, none repeated) in a few statements for the whole batch, tokens
// taken in order once their records are locked; every other name goes
// through the acquire function, at its place in the batch. A client took
// 100,000 leases in 5.5 s with a call of acquire per name in one statement,
// where it took 45–51 s with a call each; a million in 52–63 s that way on
// a busy machine, and 30.6 s on a quiet one, where acquire_batch took
// 14.8–18.7 s (three runs; BenchmarkHeldLeases, batches of 256).
//
// Tokens come from one sequence per schema, started at the database's clock
// in microseconds when the schema was created: they increase across names,
// terms and restarts, and exceed every token of a schema lost before (as
// long as fewer than a million leases are granted per second on average).
//
// # Release notifications
//
// Releases, closes and the ends of expired sessions NOTIFY the schema's
// channel, schema + ".released" ([Backend.Channel]; channels are shared by
// the whole database), with the lease name and the id of the session that
// held it. A backend keeps one connection of its own LISTENing on it,
// started by the first Watch of any of its sessions (see
// [backends.Notifier]) and ended by [Backend.Close]: dialled from the pool's
// connection config (and its BeforeConnect hook), never borrowed from the
// pool, with application_name "simbapg listener" unless the config sets
// one. A session's own releases do not wake its own watches; other
// sessions' watches wake, those of the same backend included. While some
// watch waits, the connection is pinged when it has been silent for 5 s, and
// it reconnects with back-off when it fails; notifications sent while it was
// down are lost, so every reconnection wakes every watch (a hint only:
// candidates try again, which is always safe). A graceful hand-off takes a
// few round trips, not a candidate's retry interval.
//
// Behind a pooler in transaction mode (PgBouncer's pool_mode = transaction)
// LISTEN seems to work, but notifications go to whichever client has the
// server connection next. Each new LISTEN connection therefore sends itself a
// probe through the pool and waits for it: when the connection answers a
// ping but the probe does not come back within 3 s, the backend logs once
// that notifications are not supported and stops trying; candidates then
// take over at their next attempts. Point the backend at PostgreSQL itself,
// or at a pooler in session mode, for notifications. [WithNotifications]
// (false) turns them off altogether: no LISTEN and no NOTIFY (PostgreSQL
// serialises the commits of notifying transactions cluster-wide, which
// matters at thousands of releases per second).
//
// # Holder changes
//
// A session's WatchHolder ([backends.HolderNotifier], what the runtime's
// Client.WatchHolder uses) is told every grant and every end of a term of
// the name, short holds included, in commit order. The ends are the release
// notifications above, which carry the ended term's token ("name session
// token"). Grants notify only for names some backend follows, since a
// notifying commit serialises on a global lock: a backend whose sessions
// watch names holds a shared advisory lock per name, keyed by
// hashtextextended(channel || ' ' || name, 0), on one more connection of its
// own (application_name "simbapg follower"); a grant tries an exclusive
// transaction lock on the key and, only if that fails, NOTIFYs " g token
// remaining session name identity". A grant nobody follows costs one lock
// of the lock manager, and writes nothing more; a follower writes nothing
// at all (the locks are not rows), and a crashed one's locks go with its
// connection. The backend takes its locks only once its LISTEN connection
// works (never through a pooler in transaction mode, where WatchHolder then
// tells nothing and the runtime reads the holder on its own schedule),
// reads the followed holders once the locks are in place, after every
// reconnection, and every 5 s (a follower connection that died took its
// locks with it), and tells each watch only what is newer than what it
// was told. An advisory lock of another application that shares a key
// costs at most a notification nobody reads. Functions of a revision before
// 4 (a role that may not replace them) notify no grants.
//
// # The amnesia guard
//
// PostgreSQL keeps its data across restarts, and a durable restart changes
// nothing: sessions whose time to live has not run out renew, and hold their
// leases. But a database can lose its data while clients still believe they
// hold leases until their local deadlines: restored from an empty or older
// backup, replaced by a new cluster, the schema dropped by hand. A grant at
// once would make two leaders. So the migration that creates the schema
// records its creation, and no lease is granted until MaxLease after it
// (Acquire fails with a *[backends.RecoveringError], which matches
// [backends.ErrRecovering] and [backends.ErrLeaseHeld] and says how long the
// guard has left and how to shorten it; the backend logs it through its
// logger once per guard period): by then every old holder's local deadline has
// passed, since no session was granted more (§15, Chubby's
// lock-delay). Sessions open meanwhile. A schema that vanishes under running
// sessions ends them — their calls fail with [backends.ErrSessionExpired] —
// and the next call creates it again, with its guard (unless the backend
// runs WithoutMigration). A new deployment therefore waits MaxLease for its
// first grant; set simba_max_lease (or WithMaxLease) to the cluster's lease
// duration to shorten it.
//
// The tests cover a server whose data directory is wiped and initialised
// again (initdb), and a schema dropped under running sessions.
//
// Why even a schema this backend creates, in a database where it never
// existed, waits: it cannot prove that no earlier grant exists, because
// "never existed" is not something a database can know of itself. A restore
// of an older backup would bring an old schema back — but then the schema
// exists, and the guard is for the cases where it does not: a schema dropped
// by hand while its holders run on (their terms stay valid until their
// local deadlines, whatever the database forgot), a backup from before the
// schema existed, a fail-over to a standby that never received the schema,
// or a connection string that now points at another, fresh server or
// database. Each of these looks, from inside, exactly like a database where
// the schema never was; none leaves a trace the backend could read (a
// dropped schema leaves no catalogue entry; a server's start time bounds only
// a restart, not a drop or another server). So the guard stays: MaxLease from
// the schema's creation, the tight bound, since no session was granted more.
// To shorten a first deployment's wait, give the schema the lease duration
// the clients use (simba_max_lease=15s, or WithMaxLease), on every node.
//
// What the guard cannot cover:
//
//   - A restore that brings the schema back with older contents (a logical
//     dump of it, a file-system snapshot of the data directory): the schema
//     exists, and cannot tell. Nor can a fail-over to an asynchronously
//     replicated standby that missed recent grants, renewals and token
//     values (§11). After such an event, start the guard by hand, as the
//     schema's owner: SELECT schema.start_guard() ends every session, grants
//     no lease for MaxLease from then on, and moves the token sequence to
//     the database's clock in microseconds (above every token issued before,
//     if the clock is right), keeping the values.
//   - A database host's clock that steps: expiry is measured with it, so
//     every lease shrinks or grows at once (§11). Keep it slewing.
//
// # Errors
//
// A session that expired, was closed or was lost (its schema gone): an
// error wrapping [backends.ErrSessionExpired]. A lease held: a
// *[backends.HeldError], wrapping [backends.ErrLeaseHeld]; the guard: a
// *[backends.RecoveringError], matching [backends.ErrRecovering] and
// [backends.ErrLeaseHeld]. Network
// errors, timeouts and errors from PostgreSQL: wrapping both
// [backends.ErrUnavailable] and pgx's error (a *pgconn.PgError carries the
// SQLSTATE), and the context's error when it ended. A schema of another
// version, or a foreign one: wrapping [ErrSchema]. A closed backend:
// wrapping [backends.ErrClosed].
//
// # Versions
//
// The tests run against PostgreSQL 15. The schema needs PostgreSQL 14 or
// later (SQL-standard function bodies).
package simbapg
