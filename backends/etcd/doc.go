// Package simbaetcd is the etcd backend of Simba: every Simba session is one
// etcd lease, a lease is a key on that lease whose CreateRevision makes its
// fencing token, and candidates watch the key to take over at once when it
// is deleted. It is a module of its own (github.com/simba-go/simba/backends/etcd),
// so that users of the root module never inherit gRPC and etcd's tree: a
// program that imports only backends/redis lists none of it in
// `go list -m all`.
//
// It implements the contract of package backends in full — sessions,
// leases, values, groups, release notifications ([backends.Notifier]), a
// read-only listing ([backends.Inspector]) and, opted into, a store clock
// ([backends.StoreClock]) — on go.etcd.io/etcd/client/v3 v3.7, and passes
// the conformance suite (package backendtest) against an etcd server
// embedded in its tests, with every hook: sessions whose lease is revoked
// behind the client's back, a member wiped and restarted, a member
// restarted with its data, a client cut off. Its fault tests also run a
// three-member cluster in the test process: a follower lost, the leader
// killed.
//
// # Use
//
// With a client you already have (the backend never closes it):
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"etcd1:2379", "etcd2:2379"}})
//	...
//	b, err := simbaetcd.New(cli, simbaetcd.WithPrefix("/billing/simba/"))
//	...
//	defer b.Close()
//	c, err := runtime.NewClient(b.Backend(), runtime.ConfigFor(15*time.Second))
//
// or from a URL, on a client of its own that [Backend.Close] closes:
//
//	b, err := simbaetcd.Open(ctx, "etcd://app:secret@etcd1:2379,etcd2:2379/billing?simba_clock=local")
//
// or through package backendurl, once this package is imported:
//
//	import _ "github.com/simba-go/simba/backends/etcd" // registers etcd://
//
// Options: [WithPrefix] (default [DefaultPrefix]), [WithMaxLease] (the
// longest session granted, and the amnesia guard), [WithLocalClock] (see
// "Schedules and the store clock"), [WithLogger]; for the client [Open]
// makes: [WithCredentials], [WithTLS], [WithDialTimeout], [WithDialOptions].
// Credentials never appear in an error or a log line. A client you make
// for [New] should carry [ReconnectParams], so that it finds a restarted
// server within a lease rather than after gRPC's default back-off.
//
// # Keys
//
// Under the prefix p:
//
//	p meta              layout version and token base; its CreateRevision is rev0
//	p guard             the amnesia guard: a key on a lease of MaxLease
//	p s/<sid>           a session: its identity, on the session's etcd lease
//	p r/<sid>           the session's release counter, on its lease
//	p l/<name>          a lease: "<sid>\n<identity>", on the holder's etcd lease
//	p v/<name>          a lease's value, on no lease (values outlive terms)
//	p g/<group>/n       a group's partition count
//	p g/<group>/e       a group's epoch
//	p g/<group>/m/<sid> a member, on its session's lease
//
// Session ids are 128 random bits (S2). Everything a session holds is on
// its etcd lease, so a revocation — Close, an expiry, a revocation by
// someone else — deletes it all in one step and wakes the watchers.
//
// # Operations
//
// OpenSession is a Grant of the TTL, in whole seconds rounded down (etcd
// counts leases in seconds; a TTL below a second is refused, one above
// MaxLease clamped), then one transaction that puts the session key and the
// release counter, guarded by the meta key. etcd raises a TTL below its
// minimum (about 1.5 × the election timeout: 2 s with etcd's defaults);
// the renewal still reports what was asked, a lower bound (B1), and a
// crashed holder's leases are then freed after the longer TTL (logged
// once).
//
// Every other operation is one transaction (B6) guarded by the session key
// — its CreateRevision is the session's, so a session etcd revoked fails
// with [backends.ErrSessionExpired] and can touch nothing (S3). Acquire
// creates the lease key on the session's lease if it does not exist and the
// amnesia guard has passed, puts the session key (its version counts
// acquisitions), and reads the value and the digest; if the key exists it
// reads its holder for the [backends.HeldError] (Remaining 0: etcd would
// need a request per holder to tell it; candidates learn of an expiry from
// their watch instead). etcd runs every transaction that may write through
// raft, refused or not, so a candidate that was refused a name and has seen
// no deletion of it since first reads the key without raft (a serializable
// read) and refuses from that read: its retries cost etcd no log entry.
// Release deletes the lease key if its
// CreateRevision is the token's and it is on the session's lease, and puts
// the release counter. PutValue makes the same check. Join, Leave and
// Members use nested transactions: the count is recorded by a join while
// the group has no members (a comparison over the members' range), and
// every join, leave and change of a partition's holder puts the group's
// epoch.
//
// # Renewals and the digest (S1, B1, B2)
//
// KeepAlive is one KeepAliveOnce: one request on a stream of its own,
// whose reply's TTL the leader counted from when it handled the request, so
// a deadline counted from the send stays safe (B1). The client library's
// background keep-alive stream is never used: only KeepAlive renews (B2),
// and a session nobody renews expires on etcd's clock. The server refuses
// to renew a lease it has expired, even before it revoked it, and since
// etcd 3.6 a leader checks that it still leads before it renews.
//
// The digest is counted by keys the operations already write, so reading
// it costs the same however many leases the session holds: Leases is the
// session key's version less the release counter's, Version their sum less
// two; Groups is a hash of each joined group's epoch (its ModRevision) and
// member count (which falls when a member's session ends, without a
// write). KeepAlive reads them in one read-only transaction after the
// renewal — unless etcd's revision in the renewal's reply is no later than
// the revision of the last digest the session read or wrote (every
// operation's reply carries one): then nothing at all was written to etcd
// since, and the known digest is returned. On an etcd that serves only
// Simba and is quiet, a renewal is one request; on a busy one, two, one
// after the other. A reply from a follower carries its own applied
// revision, which may trail the leader's: the read then waits for the next
// renewal, which the engine tolerates (it only ever learns later of a
// change it did not make).
//
// # Tokens and the amnesia guard
//
// A token is the prefix's base plus the lease key's CreateRevision less
// rev0, the meta key's: revisions are cluster-wide and strictly increase
// with every write, so tokens rise across names and terms, also when keys
// are deleted (F5). The base is the microseconds of the clock of the node
// that created the meta key (or above the highest token that node had
// seen). An etcd whose data was lost (a wiped data directory, a new
// cluster, the prefix deleted) restarts revisions from one and forgets
// every lease, while clients may still believe they hold leases until
// their local deadlines. The backend cannot tell a prefix created after
// such a loss from a new one, so the transaction that creates the meta key
// also puts the guard key on an etcd lease of MaxLease; Acquire compares
// the guard's absence, and fails with [backends.ErrRecovering] and
// [backends.ErrLeaseHeld] while it exists: every old holder's deadline has
// passed by the time etcd expires the guard, since no session of the
// prefix was granted more, and the guard's lease runs on the same clock
// as theirs. Tokens then come from the new base: greater than every earlier
// one as long as the creators' clocks did not go back and the lost prefix
// saw fewer writes than microseconds of its life (etcd commits tens of
// thousands per second at most). The first start of a deployment therefore
// waits MaxLease before its first term; set WithMaxLease to the longest
// lease your nodes use.
//
// What the guard cannot see: `etcdutl snapshot restore` of an older
// snapshot keeps the meta key but restarts revisions from the snapshot's,
// so tokens can go back and holders since the snapshot are forgotten.
// Restore with --bump-revision larger than the writes since the snapshot
// and --mark-compacted, and wait MaxLease before starting nodes; or use a
// new prefix.
//
// # Release notifications
//
// Watch starts an etcd watch of the lease key from the revision at which
// the session was last refused it, so that a release between the refusal
// and the watch is delivered too (A1), and calls the watch function on each
// deletion of the key except the session's own releases. A watch that
// starts in the past is brought up to date by etcd's sync loop within
// 100 ms; one that etcd cancels (a compaction, a member that lost its
// leader: the watches require a leader) calls the function once, as a
// hint, and starts again from the present. A graceful hand-off thus takes
// the release, the event and the next holder's acquisition: a few
// milliseconds.
//
// # Schedules and the store clock
//
// etcd has no clock a client can read: its leader measures leases, but
// tells only whole seconds left. By default the backend has no
// [backends.StoreClock], and runtime's schedules refuse to start on it with
// an error saying so. With [WithLocalClock] (simba_clock=local in a URL)
// the backend's StoreTime is the node's own wall clock, read after one
// request to etcd so that it fails when etcd does (B5). Slots are recorded
// by number in the lease's value, written with the term's token, so a
// recorded slot never runs twice, whatever the clocks say (B5); but the
// nodes' clocks decide when slots start: a node whose clock is ahead runs
// the next slot early, one behind runs it late, and a fixed-delay schedule
// waits Delay on the next holder's clock after the end the last holder
// recorded on its own. Keep the nodes' clocks synchronised (NTP) to well
// under a schedule's Rate.
//
// # Errors
//
// A session that expired, was closed or revoked: an error wrapping
// [backends.ErrSessionExpired]. A lease held: a *[backends.HeldError]; the
// amnesia guard: wrapping [backends.ErrRecovering] and
// [backends.ErrLeaseHeld]. Network failures, timeouts and etcd's other
// errors: wrapping [backends.ErrUnavailable] and the client's error (and
// the context's, if it ended). A prefix of another layout: [ErrLayout]. A
// closed backend: [backends.ErrClosed].
//
// # An etcd to try it on
//
// The demo and your own trials need an etcd on loopback. Debian's
// etcd-server package (3.4 in Debian 12) is enough:
//
//	apt-get install etcd-server && etcd --data-dir /tmp/etcd-demo
//
// or, with nothing to install, the member this module's tests embed:
//
//	cd backends/etcd && go run ./cmd/etcdlocal   # 127.0.0.1:2379, data in a temporary directory
//
// and then, from the repository's root:
//
//	make demo BACKEND='etcd://127.0.0.1:2379/demo?simba_clock=local&simba_max_lease=3s'
//
// The demo's schedules need the local clock, and simba_max_lease=3s (the
// demo's lease) keeps a new prefix's amnesia guard to 3 s instead of the
// default minute.
//
// # Versions
//
// Tested with go.etcd.io/etcd/client/v3 v3.7.3 against the embedded
// go.etcd.io/etcd/server/v3 v3.7.3: one member, and three in one process.
// Nested transactions need etcd 3.3 or later.
//
// Rule names such as S1, B1 or F5, and sections such as §15, refer to
// docs/design.md in the repository.
package simbaetcd
