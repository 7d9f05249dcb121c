// Package simbaredis is the Redis backend of Simba: sessions, leases, values
// and groups in Redis, with one Lua script per operation. Its package name is
// simbaredis, not redis, so that it does not clash with go-redis's package in
// the code that uses both.
//
// Rule names such as S3 or §15 refer to docs/design.md in the repository.
//
// It implements the contract of package backends in full and passes the
// conformance suite (package backendtest) against a real Redis, including
// the fault hooks: sessions expired behind the client's back, a Redis that
// restarts without its data, and a Redis that cannot be reached.
//
// # Use
//
// With a go-redis client you already have (it stays yours: the backend never
// closes it):
//
//	client := redis.NewClient(&redis.Options{
//		Addr:                  "127.0.0.1:6379",
//		ContextTimeoutEnabled: true, // required: calls must end by their deadline
//	})
//	b, err := simbaredis.New(client, simbaredis.WithPrefix("billing"))
//	...
//	defer b.Close() // stops the release subscription and sweeps in progress
//	c, err := runtime.NewClient(b, runtime.DefaultConfig())
//
// From a URL, with a client the backend owns and closes:
//
//	b, err := simbaredis.Open(ctx, "redis://:password@10.0.0.7:6379/0")
//
// [Open] takes what go-redis's redis.ParseURL takes (redis://, rediss:// for
// TLS, unix://, and its query options, the scheme in any case), checks every
// part of the URL before it dials — the port, the database number, the
// host, the backend's own options — with errors that name the part and the
// form expected, then checks that Redis answers and that the namespace fits.
// The URL's userinfo ends at its last "@", so a password may hold any
// character; no error or log line shows a byte of it. For Redis Cluster or
// Sentinel, build the client (redis.NewClusterClient,
// redis.NewFailoverClient) and use [New].
//
// Every call takes a context whose deadline bounds it (D2). go-redis
// honours deadlines only with ContextTimeoutEnabled; [New] refuses a
// *redis.Client, *redis.ClusterClient or *redis.Ring without it. Set its
// retries low if you need failures reported fast: go-redis retries a failed
// dial five times, 100 ms apart, by default.
//
// Options: [WithPrefix] (the namespace, default "simba"), [WithMaxLease]
// (the longest session time to live granted, and the amnesia guard's
// lock-delay; default 60 s; use the same value on every node) and
// [WithLogger].
//
// # Keys
//
// All keys of a namespace start with the hash tag {prefix}, so that they live
// in one Redis Cluster slot:
//
//	{p}:meta          hash: the namespace's layout version, run id, guard, last
//	                  token and revision; and the records of its sessions and
//	                  leases, as fields (below)
//	{p}:sessions      sorted set: session id → expiry, in µs of Redis time
//	{p}:o:<id>        sorted set: lease name → token, the leases the session holds
//	{p}:j:<id>        set: the groups the session joined
//	{p}:g:<group>     hash: partition count and epoch, while the group has members
//	{p}:m:<group>     set: the group's members
//	{p}:h:<group>     hash: partition index → holder
//	{p}:q:<name>      sorted set: the backends waiting for the lease
//	{p}:w:<node>      pub/sub channel of one backend: the releases it waits for
//
// The meta hash holds, per session, its expiry, time to live, digest (leases
// held and version), last group leave and identity (fields e:, d:, n:, r:, m:
// and i: followed by the session id), and per lease its holder, token and
// value, and whether anyone may wait for it (l:, t:, v: and q: followed by the
// name). Keeping them in one hash lets an acquire or a release read all it
// checks in one command and write in one (see Cost below); keys.go has the
// details. The hash is kept as a hash table, not a listpack (its about field,
// which says what the namespace is, is longer than a listpack takes).
//
// A release deletes the lease's holder and token; its value, if one was
// stored, stays (values outlive terms and are never deleted). The fields and
// keys of sessions that ended are deleted. The layout is versioned: the meta
// hash records it, and every script that opens, renews or grants refuses a
// namespace written by another version with an error wrapping [ErrLayout], so
// that two versions never share a namespace silently.
//
// On Redis Cluster, a script's first key (the meta hash) routes it; the
// scripts build the other key names themselves, all in the same slot, which
// Redis allows for scripts without a shebang line. PUBLISH on a cluster
// reaches every node, so the release channel works there too.
//
// # Operations
//
// Every operation is one script, called with EVALSHA (and EVAL after a
// NOSCRIPT reply), so it is one atomic round trip. Each script reads Redis's
// clock (TIME, or the clock INFO reports, which acquire reads when it reads
// INFO anyway): expiry is measured by Redis, never by a client's clock (D1).
// Each checks, before it decides or writes anything else, that the calling
// session is alive by that clock (the hot ones read the session's expiry in
// the same command as the fields they need next), so a command that reaches
// Redis late — held back by the network or by go-redis's retries — can
// neither extend nor revive a session that expired, nor release or write
// what another session now holds (S3).
//
// A refused acquire names the holder (a *[backends.HeldError]: its session,
// the identity the session was opened with, its token, and its remaining
// time by Redis's clock), and so does Holder, in one script each.
// [Backend.Inspect] lists the namespace for status tools with plain reads in
// pages, never a script that walks everything.
//
// A keep-alive costs the same whatever the number of leases held: it reads
// the session's counters and the epochs of the groups it joined (S1).
// A session that expired is dead at once — every script checks its expiry,
// and a lease or membership of a dead session counts as free — and its
// records are cleared lazily: the renewal scripts of every node end up to 16
// dead sessions each (oldest first), releasing at most 1,000 of their leases
// and memberships per call, so that a crashed node's leases and memberships
// are released, and watchers woken, within a renewal period of any live node
// (a few periods for a node that held many thousands), and no renewal blocks
// Redis for more than a few milliseconds on another node's behalf. Close
// ends its session in its one call, which releases up to 1,000 leases and
// memberships, and returns; the backend then sweeps what a bigger session
// left on record, 1,000 per call, on a goroutine of its own that
// [Backend.Close] stops and waits for.
//
// Tokens come from one counter per namespace: each new token is the larger
// of the last token plus one and Redis's clock in microseconds, so tokens
// increase across names, terms, expiries and restarts, and stay below 2^53,
// the largest integer a Lua number holds exactly (until the year 2255).
//
// # Cost
//
// What a script costs Redis is mostly the commands it calls — about 1 to
// 2.5 µs each on the test machine, its arguments and reply included — on top
// of about 2.3 µs for the script itself. The checks an acquire and a release
// make therefore read fields of one hash, the meta hash, in one command, and
// write in one: granting a free lease takes four commands (TIME; one HMGET of
// the guard's fields, the session's expiry and digest, and the lease's
// record and value; one HSET of the token counter, the record and the digest;
// one ZADD of the session's owned set), and releasing it five (TIME; one
// HMGET; one HDEL of the record, one HSET of the digest, one ZREM), and the
// wake-up only if someone may wait. An acquire and a release took about
// 19.5 µs of Redis time together on the test machine (INFO commandstats, the
// median of interleaved blocks), where layout 4, a command per check, took 27
// and two bare scripts of one and two commands (bsm/redislock's) take 6. A
// field of an HMGET or HSET costs about 0.1 µs. What each check costs of it,
// and why it stays:
//
//   - Redis's clock (TIME, about 1 µs a script): expiry is Redis's, never a
//     client's (D1); there is no cheaper clock in a script.
//   - The amnesia guard (§15): on Redis 7 and later, three fields of the
//     HMGET (layout, run id, guard), as the armed scripts compare the run id
//     written into them; on older Redis, INFO, about 7 µs an acquire. It is
//     what keeps a restarted, reloaded or failed-over Redis from granting
//     what clients still believe they hold.
//   - The session alive by Redis's clock (S3): one field of the HMGET. A
//     late command must not act for a session that expired.
//   - Token order (T2, below 2^53): one field read and written in the same
//     commands. Tokens from a counter, not the clock alone, keep increasing
//     when the clock steps back.
//   - Ownership by session and token (T5): two fields of the release's
//     HMGET. A late release must not free a later term.
//   - The digest (S1): two fields read and written. It is what lets a
//     keep-alive cost the same whatever the leases held.
//   - The session's owned set (about 1.1 µs a script): the list Owned reads
//     in pages and the reapers release in bounded batches when a session
//     ends; without it either would have to read every lease of the
//     namespace.
//
// Many acquires (releases) of one session in one call — the sessions
// implement [backends.BatchSession], which the runtime uses when it has
// many to make at once — run the same script's code for each lease in turn
// inside one batch script (lua/acquire_batch.lua), so that the round trip,
// the script's start and the clock are paid once per batch: one client took
// a million leases in 26–27 s this way, where it took 60–91 s with a script
// call each (BenchmarkHeldLeases on the shared test machine), and a
// pipeline of the single scripts was about a fifth slower than the batch
// script.
//
// # Release notifications
//
// A refused acquire records the backend (its node id, one per [Backend])
// among the lease's waiters, {p}:q:<name>; a Holder read records it too, at a
// lower rank. A release — and a close or a reaped expiry that frees the
// lease — PUBLISHes "name session" on the wake channels {p}:w:<node> of the
// two waiters ranked highest (the candidates refused last, then readers),
// and only if someone waits: a release costs Redis the same whether 10 or
// 10,000 nodes wait, and one nobody waits for costs no command: whether
// anyone may wait is a field of the meta hash that the release reads with
// the lease's record.
// The others try on their own schedule, or when the holder's session runs
// out, which their refusal told them (backends.HeldError). A backend keeps
// one subscription to its own channel, started by the first Watch of any of
// its sessions (see [backends.Notifier]) and ended by [Backend.Close]. A
// session's own releases do not wake its own watches: its node knows what it
// released. Other sessions' watches wake, those of the same backend included
// (several runtime clients, each a node with its own session, may share
// one). While some watch waits, the subscription pings Redis when it has been
// silent for 5 s (an idle subscription costs Redis nothing), and it
// reconnects, with back-off, when the connection fails; since releases
// published while it was down are lost, every reconnection wakes every
// watcher (a hint only: candidates try again, which is always safe). A
// graceful hand-off therefore takes a few round trips (about a millisecond on
// loopback), not a candidate's retry interval.
//
// # Holder changes
//
// A session's WatchHolder ([backends.HolderNotifier], what the runtime's
// Client.WatchHolder uses) is told every grant and every end of a term of
// the name (a release, a close, a reaped expiry), short holds included, in
// Redis's order. The backend marks the name as followed by its node,
// {p}:f:<name> (node → deadline, 30 s, renewed every 10 s; the key expires
// with the latest, so a crashed process's marks go away), and sets the
// name's f: field of the meta hash. Acquire and release read that field in
// the HMGET they make anyway, so a name nobody follows costs them no
// command; a followed one costs a ZRANGEBYSCORE and a PUBLISH per follower
// on its wake channel ({p}:w:<node>, the same subscription as the release
// notifications): " g token remaining session name identity" for a grant,
// " e token name" for the end of a term. The marking script replies with the
// names' holders as of the same instant; the backend marks (and so reads)
// again after every reconnection of its subscription and every 10 s, and
// tells each watch only what is newer than what it was told: a lost message
// leaves a gap, never a reordering. Marks are writes, made only for sessions
// (a read-only backend makes none).
//
// # The amnesia guard
//
// Redis often runs without persistence: a restart then forgets every
// session, lease and token while clients still believe they hold leases
// until their local deadlines. A restart that reloads an older snapshot, and
// a fail-over to a replica that missed recent writes, bring back state older
// than what clients believe. Handing a lease out at once would make two
// leaders. So the backend detects that Redis may have lost state, and then
// refuses every grant (Acquire fails with an error wrapping
// [backends.ErrRecovering] and [backends.ErrLeaseHeld]) until MaxLease has
// passed — by then every old holder's local deadline has passed, since no
// session was granted more (§15, Chubby's lock-delay). Sessions may open
// meanwhile; every session that existed before is ended, and its client opens
// a new one.
//
// Detection compares the run id of the Redis process — random, and new in
// every process: after a restart, and on every replica — with the one
// recorded in the namespace's meta hash; not only a marker key, which an
// older snapshot would bring back intact. The acquire script reads the run id
// (INFO, inside the script, so in the very process that then grants) on every
// call, and so do the scripts that open and renew sessions (open,
// keep-alive, owned, check): no lease is granted, in any namespace, before
// that namespace's guard has run in the current process, whichever namespace
// runs first and whatever the script cache holds (it is shared by every
// namespace of a Redis, and Redis before 7 saves it with the data). On a
// mismatch, the guard starts from that moment and every session of the
// namespace ends: its client gets [backends.ErrSessionExpired] at its next
// call and opens a new session. The scripts that grant nothing — release,
// holder, put value, join, leave, members, close — do not read it: they act
// only for a session that is alive, one that a guarded script opened and
// renewed.
//
// Reading the run id costs about 5 to 7 µs of Redis time per call (INFO), so
// on Redis 7 and later the backend arms each Redis process instead, once: a
// MULTI/EXEC transaction runs the guarded check and loads copies of the
// guarded scripts that carry that process's run id and read no INFO. Redis 7
// neither saves its script cache with the data nor replicates it, and a
// transaction runs in one process (the errors that would stop the check abort
// it whole), so a copy exists only in a process where the check ran; a copy
// also hands back to the guarded script when the meta hash records another
// run (an older snapshot reloaded in place). After a restart or a fail-over
// the copies are gone (NOSCRIPT), and the backend arms the new process. On
// Redis before 7, whose scripts persist and replicate, the guarded scripts
// run every time. armed.go gives the argument in full; the tests check that
// an armed process reads no INFO and still starts the guard.
//
// The tests cover, against a private redis-server, a restart without data and
// a restart that reloads an older snapshot, in every namespace of the server.
//
// A namespace whose meta hash is missing is either new or was lost with the
// whole of Redis's data; the scripts cannot tell which, so they guard it until
// MaxLease after Redis booted (from INFO's uptime, which counts whole seconds,
// so rounded towards later; or from now, if that is sooner). On a Redis that
// has been up for longer than MaxLease, a new namespace grants at once; on a
// Redis that just started, even a new namespace waits out the rest of
// MaxLease. A namespace that lost its meta hash but still has sessions is
// guarded from the first guarded call that notices.
//
// Tokens after the guard are at least Redis's clock in microseconds at the
// time of the grant, so they exceed every token issued before the loss, as
// long as the clock of the Redis host did not go back by more than MaxLease.
//
// Fail-over to an asynchronously replicated replica (§11) can lose
// recent writes: grants, releases, renewals, the token counter, values stored
// with PutValue. The promoted replica is another process, with its own run
// id, while the meta hash it holds, replicated from the old primary, records
// the old primary's; so in each namespace the first guarded call on the new
// primary — an acquire, or any node's next keep-alive — starts the guard there,
// every session of the namespace ends, no lease is granted for MaxLease, and
// tokens stay above those issued before. What the replica missed stays lost
// (a schedule may run a slot again). A test fails a private Sentinel-managed
// primary over to its replica (SIGKILL of the primary) and checks that no
// lease is granted until MaxLease after the crash, and that tokens stay
// above those issued before. The conformance suite also runs on a
// three-master Redis Cluster.
// Persistence (appendonly) narrows what a restart loses but does not make the
// guard unnecessary: after any restart, reload or fail-over, no grant for
// MaxLease.
//
// What the guard cannot cover:
//
//   - Keys deleted while Redis runs: FLUSHALL, FLUSHDB, a DEL of lease
//     records, and eviction. Run Redis with maxmemory-policy noeviction (the
//     default) or on a dedicated instance: under an allkeys-* policy Redis may
//     evict lease records and the token counter. A namespace deleted whole on a
//     Redis up for longer than MaxLease looks new and grants at once.
//   - An old primary that keeps serving clients after a replica was promoted
//     in its place (a network partition with Sentinel or Cluster): both grant
//     leases. Redis's min-replicas-to-write and min-replicas-max-lag narrow
//     this window; fencing tokens close it.
//   - A fail-over and a fail-back before any guarded call of the namespace ran
//     on the interim primary: the old primary, resynchronised from it, has
//     its own run id again, the one the meta hash records, and cannot tell
//     that writes were lost. While any node of the namespace is alive, a
//     keep-alive runs at least every RenewInterval, so this takes two
//     fail-overs within one renewal interval.
//   - A namespace created on a primary moments before a fail-over: if its
//     meta hash had not reached the replica, the promoted replica finds the
//     namespace empty and, if it has been up for longer than MaxLease,
//     grants at once, though the old primary granted leases in it. This
//     takes a fail-over within the replication lag after the namespace's
//     first call.
//   - A fail-over where the promoted replica's clock is behind the old
//     primary's: tokens are taken from the clock, so they could go back by the
//     difference. Keep the hosts' clocks in sync (§11); only fencing
//     protects against a stepped clock.
//
// # Visible, and as short as Redis allows
//
// A refusal is a *[backends.RecoveringError]: it says why, how long grants
// wait and until when on Redis's clock, and that a shorter maximum lease
// ([WithMaxLease], simba_max_lease= in a URL) shortens the wait. The
// backend logs it through its logger ([WithLogger], or the one
// backendurl.Open hands it), at the Warn level, once per guard period rather
// than once per refusal.
//
// The guard cannot be skipped for a namespace that seems new, because
// nothing Redis holds proves that no earlier grant exists: an empty
// namespace in a process whose run id no namespace records is exactly what a
// restart without persistence leaves behind, and an older snapshot reloaded
// later would hide a loss that happened after it. What bounds a loss of that
// kind is the boot — a namespace lost in a restart was lost when the process
// started — so the guard of an empty namespace ends MaxLease after Redis
// booted, and on a Redis up for longer than that a new namespace grants at
// once. A loss Redis notices later (another run id in the meta hash, a meta
// hash gone while sessions remain) happened at the latest when it is
// noticed, so that guard ends MaxLease after it. No proof is available for
// less; MaxLease itself is the tight bound, the longest lease an old holder
// can have been granted, and only a shorter [WithMaxLease] shortens it.
//
// # Redis versions
//
// The tests run against Redis 7.0. The scripts need Redis 5 or later: they
// read the clock (TIME) before writing, which needs Redis to replicate their
// effects rather than the scripts themselves, the default from Redis 5 on.
// Where INFO has no server_time_usec (older versions), acquire reads TIME too.
//
// # Errors
//
// A session that expired, was closed or was lost: an error wrapping
// [backends.ErrSessionExpired]. A lease held: wrapping [backends.ErrLeaseHeld];
// the guard: a *[backends.RecoveringError], which matches
// [backends.ErrRecovering] and [backends.ErrLeaseHeld]. Network errors, timeouts
// and error replies from Redis: wrapping both [backends.ErrUnavailable] and
// go-redis's error (or the context's). A namespace of another layout
// version: wrapping [ErrLayout]. A closed backend: wrapping
// [backends.ErrClosed].
package simbaredis
