// Package simbazk is the ZooKeeper backend of Simba: every Simba session is
// one ZooKeeper session, a lease is an ephemeral node whose creation zxid
// makes its fencing token, and candidates watch the lease node to take over
// at once when it is deleted. Its package name is simbazk, not zk, so that
// it does not clash with go-zookeeper's package in code that uses both.
//
// Rule names such as C2 refer to docs/design.md in the repository.
//
// It implements the contract of package backends in full — sessions, leases,
// values, groups, release notifications ([backends.Notifier]), the store's
// clock ([backends.StoreClock]) and a read-only listing
// ([backends.Inspector]) — on github.com/go-zookeeper/zk, and passes the
// conformance suite (package backendtest) against a real ZooKeeper 3.8,
// including sessions expired behind the client's back, a server restarted
// with its data kept and one restarted with its data wiped, and a server
// that cannot be reached. A three-server ensemble is tested in the tests
// module (tests/zookeeper): servers killed, the leader killed, a follower
// cut off from the quorum.
//
// # Use
//
// The backend owns its connections (a ZooKeeper session is a connection):
//
//	b, err := simbazk.New([]string{"zk1:2181", "zk2:2181", "zk3:2181"},
//		simbazk.WithRoot("/billing/simba"),
//		simbazk.WithTickTime(2*time.Second), // the servers' tickTime
//		simbazk.WithDigest("billing", password))
//	...
//	defer b.Close()
//	c, err := runtime.NewClient(b, runtime.ConfigFor(15*time.Second))
//
// or from a URL, checking at once that the ensemble answers:
//
//	b, err := simbazk.Open(ctx, "zk://billing:secret@zk1:2181,zk2:2181/billing/simba?simba_tick_time=2s")
//
// Options: [WithRoot] (go-zookeeper has no chroot: every path is under the
// root, default [DefaultRoot]), [WithTickTime] (see "Remaining time"),
// [WithMaxLease] (the longest session asked for, and the amnesia guard),
// [WithDigest] (digest authentication and ACLs), [WithDialer] and
// [WithDialTimeout] (how servers are dialled), [WithLogger], and
// [WithReadOnly] for status tools (backendurl.OpenInspector sets it): that
// backend writes nothing — no root, no clock node — and lists a root that
// does not exist as empty. Credentials never appear in an error or a log
// line. [Open] checks every part of a URL before it dials (the scheme in
// any case, each server's host and port, the options), with errors that
// name the part and the form expected.
//
// # Nodes
//
// Under the root r:
//
//	r                 layout version, amnesia guard, token floor
//	r/clock           written by StoreTime: its mtime is the store's clock
//	r/o/<sid>         a session: a container node holding the session's identity;
//	r/o/<sid>/@       its ephemeral marker, and
//	r/o/<sid>/<name>  an ephemeral child per lease it holds
//	r/l/<name>        the ephemeral lease node: "<sid>\n<identity>"
//	r/v/<name>        the persistent value node
//	r/g/<group>       a group: its partition count; ephemeral children
//	                  m:<sid> (members) and h:<i>:<sid> (partition holders)
//
// The session id is ZooKeeper's, in hexadecimal (S2). Session nodes are
// containers: ZooKeeper deletes them once their ephemeral children are
// gone, so a crashed node leaves nothing behind. Value and group nodes stay
// (values outlive terms).
//
// # Operations
//
// Every call runs on a goroutine of its own and is bounded by its context:
// go-zookeeper's calls take none, so the caller returns when its context
// ends and the call finishes by itself when ZooKeeper answers or the
// connection closes. A call whose connection failed under it ("connection
// closed": it may or may not have run) waits, within its context, for
// go-zookeeper to reconnect, so that a session ZooKeeper expired meanwhile
// is reported as expired rather than unreachable.
//
// KeepAlive is one write of the session node (it goes through the leader,
// so it fails when the connected server cannot reach a quorum); its Stat is
// the digest: the children count less the marker is the number of leases,
// the children version (cversion) rises by exactly one per lease acquired or
// released, and the mtime is the store's time. Its cost does not grow with
// the number of leases; the session's groups add one pipelined read each.
//
// Acquire is one multi — create the lease node, the session's child for it
// and, for a partition of a group, the holder marker; write the session node
// for the digest — whose transaction zxid is the lease node's czxid, and a
// read of the value node pipelined right behind it (B6: two requests, one
// round trip; ZooKeeper answers a session's requests in order, so the read
// sees what the previous holders stored). A lease node that exists is read
// to name its holder (a *[backends.HeldError], Remaining 0: ZooKeeper does
// not tell another session's time left). Release and PutValue check the
// token against the session's own record (B4: ZooKeeper's check operation
// compares data versions, not czxids) and then act in one multi that fails
// unless the session's child for the lease exists. Holder is one read of the
// lease node. Join is a compare-and-swap of the group node's data version
// (which holds the partition count); Members reads the group node and its
// children, pipelined. Owned lists the session node's children with the
// digest of the same instant.
//
// # Reservations
//
// A candidate refused a lease that goes on waiting for it — the engine
// watches the name right after the refusal — queues a reservation: the
// session's watch goroutine creates an ephemeral sequential node under
// r/q/<name> (one write, while it waits) and watches its predecessor, or
// the lease node if it is first. The holder of a name is its lease node
// while that exists, else the first reservation: a release hands the lease
// over with no write by the next holder, whose token is the reservation's
// czxid. A reservation that knows the deletion of the node it watches makes
// it the holder — it watches the lease node while it is first, or the
// first reservation while no lease node exists — is granted by that
// deletion's event: its Acquire makes no call at all, since the session
// also watches the value node meanwhile and keeps its data (ZooKeeper
// delivers a connection's events in the order of the changes, so a value
// stored before the release has told its event first; any change of the
// connection's state drops what it kept, and a value not known is read).
// Otherwise its Acquire is one round trip of reads (the queue, then,
// pipelined behind it, the lease node and the value node), sent by
// go-zookeeper's event callback itself as soon as the deletion of the
// watched node arrives, so that the engine's Acquire, a few goroutine hops
// later, finds them answered or on their way; it uses them only if they
// grant (a grant does not go stale, see below), and reads again otherwise.
// A graceful hand-off between two nodes is thus the release's write and
// the event, where go-zookeeper's lock recipe reads the children after
// the event. No path that frees the first place goes untold: a deletion
// told while the watch on that node is still being recorded counts, a
// reservation found first with no lease node when its watch is set (the
// release came before the watch) is told at once, and a session that was
// granted a turn and gave the lease back (a hand-over to another node)
// sets its watch again.
// A lease node is created only in a multi that also creates and deletes the
// queue node, so only while no queue exists: every reservation was created
// after the lease node of its time, reservations are granted in the order
// of their sequence numbers, which is their czxids' order, and tokens rise
// in grant order. A first reservation stays the holder until it is
// deleted, so a stale read cannot make a second holder. Holder and Inspect
// read the first reservation where no lease node exists, and never list a
// reservation that waits. A watch of a session without a reservation of
// the name (a follower of the holder, such as the runtime's WatchHolder)
// also watches the queue's children, so it is called when the lease passes
// from one reservation to the next.
//
// A Watch reserves only if the session's last call about the name was an
// Acquire that another session's lease refused: the engine watches right
// after such a refusal, before any other call about the name, while a
// follower reads the holder before it watches, and a refusal that no watch
// follows (a TryLock) reserves nothing. Stopping the watch (an election
// stopped, a Lock whose context ended; any watch of the name) deletes the
// session's reservation at once, unless it became the lease; partitions
// (names ending in ".<i>") never reserve, since group members watch
// partitions they may not want. A lease held through a reservation has no
// child under the session node: the session adds those leases, their
// acquisitions and releases to the digest itself, and checks them in Owned
// with a read each.
//
// Roots are created with the layout "simbazk 2". A root of the earlier
// layout, "simbazk 1" (no queues), is used as it is, without reservations:
// its other clients may be of an earlier version, which does not see
// queues, so nobody queues there and every hand-off is a release and an
// acquisition, as in those versions; earlier versions refuse a "simbazk 2"
// root with ErrLayout, so the two never share a root that has queues. To
// get reservations on an existing deployment, start it on a new root.
//
// Digest.Groups is the largest of the joined groups' pzxids (the zxid of
// their last child change: a member joining, leaving or ending, a partition
// changing holder) and of the zxid of the session's last leave: it changes
// whenever something changed, and only then.
//
// # Remaining time (B1) and renewals (B2)
//
// ZooKeeper does not say how long a session has left, and any packet from
// the client renews the session on the server. The backend therefore bounds
// the remaining time itself: the negotiated session timeout (read from the
// connect reply, which go-zookeeper keeps private), counted from the latest
// touch of the session the ensemble's leader has surely seen.
//
// A standalone server is the leader of its own sessions: a renewal touches
// the session when the server receives it, so Remaining is the whole
// timeout, counted from when the renewal was sent. The backend learns what
// the server is once per connection, from ZooKeeper's configuration node
// (/zookeeper/config, empty on a standalone server), read on that very
// connection beside the first call made on it (the session node's creation,
// or the first renewal after a reconnection); until it knows, and on any
// server that does not say (ZooKeeper before 3.5), it counts the server as
// a member of an ensemble.
//
// A member of an ensemble reports its sessions' touches to the leader only
// when the leader pings it, every half tick; a write that went through the
// leader proves the member's reports up to about a tick earlier arrived
// (the same connection carried them), so that touch is the latest request
// or ping written on the connection at least one tick before the renewal
// was sent — or the connection's handshake, which the leader handles
// itself. The renewal's Remaining is thus the timeout less one tick, or
// less the time since the previous write if that is longer: with a renewal
// every RenewInterval and nothing else, the timeout less the interval. A
// client cannot tell which member leads, so this holds for the leader's
// clients too. Tell the backend the servers' tickTime with [WithTickTime]
// (default 2 s, never more than half the timeout); too large is safe. On
// the tests' ensemble (tick 500 ms, 3 s lease), a client that knew only a
// follower, cut off from the quorum, lost its term 0.4–1.8 s before the
// quorum expired its session (0.5–0.9 s when it asked for the whole lease,
// see "Crash fail-over"); a client that could reach the quorum moved there
// within two thirds of the timeout and kept its term.
//
// On an ensemble, Remaining is therefore usually less than the lease asked:
// use a RenewInterval of at most a quarter of the lease there
// (runtime.ConfigFor uses a third). Otherwise the engine often finds two
// renewals do not fit in the local validity and renews every third of it
// instead (C2), which is safe but reports a shortened lease. On a
// standalone server runtime.ConfigFor's third is right.
//
// # Crash fail-over
//
// ZooKeeper ends sessions in batches, on tick boundaries: a session whose
// holder crashed ends up to a tick after its timeout. So that its leases
// are free within the lease of the holder's last renewal, as on the other
// stores, the backend asks ZooKeeper for a session a tick shorter than the
// lease where that leaves renewals their pace: with one server configured
// (taken to be a standalone server), when the tick is at most a quarter of
// the lease; with several (an ensemble), at most an eighth. Each renewal's
// Remaining then stays at least three quarters of the lease, and the
// holder's local validity is a tick shorter than it would be. One address
// of a member of an ensemble gets the standalone rule: its renewals prove
// the timeout less a tick, so with a tick above an eighth of the lease the
// engine renews at C2's shortened pace — safe, but more often. On the tests'
// server (tick 500 ms), a holder cut off right after a renewal lost a 3 s
// lease 2.85–2.92 s after that renewal was sent, where a 3 s session took
// 3.41–3.45 s (TestCutHolderFreedWithinLease).
//
// A session is renewed only by KeepAlive (B2): when no keep-alive has
// succeeded for the remaining time of the last one, counted from when it was
// sent, the backend closes the session itself, whatever pings did
// meanwhile, and the session never comes back; a keep-alive that would go
// after that moment is not sent, and one answered after the backend decided
// to close the session fails with it.
//
// A session closed (by Close, or by B2) while go-zookeeper reconnects is
// closed on the server once it has reconnected: go-zookeeper's Conn.Close
// sends no closeSession while it is not connected (v1.0.4), which would
// leave the session's leases taken until the server expired it. The wait is
// at most the session's timeout, no call runs meanwhile, and a closed
// backend does not wait.
//
// go-zookeeper pings the server every third of the session timeout,
// whatever else it wrote. The backend drops those pings and pings a
// connection only once half the timeout passed without a write, as
// ZooKeeper's Java client does: a session renewed more often than that
// sends one request per renewal and nothing else, and go-zookeeper's read
// deadline (two thirds of the timeout after the last reply) stays fed.
//
// # Expiry and S3
//
// The same *zk.Conn opens a new ZooKeeper session, silently, after its
// session expired, and a call queued meanwhile would run in it. The backend
// closes the connection when go-zookeeper reports the expiry, and its
// dialer refuses, before it is sent, any connect request for another
// session than the one the connection began with: no call of an expired
// session can run in a new one. Each dial and each connect handshake is
// bounded by a quarter of the session timeout ([WithDialTimeout] can bound
// it further): go-zookeeper would otherwise wait up to ten times two thirds
// of the timeout for a frozen server's connect reply. Reconnecting backs off
// from 25 ms to 250 ms between rounds of the servers, not go-zookeeper's
// whole second.
//
// # Tokens and the amnesia guard
//
// A token is the root's base plus the lease node's czxid: czxids strictly
// increase in the order ZooKeeper commits, across names and terms, also
// when parent nodes (r/l, r/v) are deleted and created again, since zxids
// only grow. The base is the root's creation time in nanoseconds of the
// leader's clock (or a floor its creator knew, if higher), so tokens stay
// below 2^63 until the 23rd century.
//
// A ZooKeeper whose data was lost (a wiped data directory, a root deleted
// with everything under it) restarts zxids from zero and forgets every
// session, while clients may still believe they hold leases until their
// local deadlines. The backend cannot tell a root created anew after such a
// loss from a new one, so after creating a root it grants no lease for
// MaxLease on the store's clock (Acquire fails with a
// *[backends.RecoveringError], which matches [backends.ErrRecovering] and
// [backends.ErrLeaseHeld] and says until when on the store's clock and how
// to shorten the wait; the backend logs it once per guard period; sessions
// open meanwhile): every old holder's deadline has passed by then, since no
// session of the root was asked for more. Tokens then come from the new
// root's base: its creation time in nanoseconds, greater than every earlier
// token as long as the leader's clock did not go back and the lost root's
// largest czxid was smaller than its age in nanoseconds (zxids count
// transactions in their low 32 bits and leader elections in their high
// ones: about one election per 4.3 s of the root's life would be needed to
// break it). Every session is bound to the root it was opened under: a root
// created again has lost the session nodes, so the old sessions fail as
// expired. The first start of a deployment therefore waits MaxLease before
// its first term; set WithMaxLease to the longest lease your nodes use.
//
// A root this backend creates cannot prove that no earlier grant exists, so
// the guard is not skipped for it: a root deleted by hand while its holders
// run on, a data directory wiped and an ensemble started afresh, or a
// connection string that now names another ensemble all look, from the new
// root, like a path where nothing ever was; ZooKeeper keeps no trace of a
// deleted node, and a server's start bounds only a restart. MaxLease from
// the root's creation is the tight bound, since no session was asked for
// more; a shorter WithMaxLease (simba_max_lease= in a URL) shortens it.
//
// # Release notifications
//
// Watch sets an exists-watch on the lease node from a goroutine of the
// session, started by its first Watch, and sets it again after each event;
// go-zookeeper's event callback, which must not block, records events (and
// sends a reservation's reads, see "Reservations"). A deletion of the lease
// node — a release, or the end of its holder's session — calls the watch
// functions, except for the session's own releases; a session with a
// reservation watches its predecessor instead, once it has one, and one
// without also watches the queue's children (see "Reservations"). After a
// reconnection go-zookeeper sets the watches again with the last zxid seen,
// and ZooKeeper then delivers what happened meanwhile. A graceful hand-off
// thus takes the release, the event and the next holder's acquisition,
// which for a candidate that had queued is no call, or a read: about a
// millisecond.
//
// # ACLs
//
// With [WithDigest], every connection authenticates with the digest scheme
// before it sends anything else — the backend sends no request on a new
// connection before the credentials are accepted, and go-zookeeper sends
// them first on every reconnection — and every node the backend creates has
// the ACL "digest user: all,
// anyone: read": only clients with the credentials can create, write or
// delete the backend's nodes — ZooKeeper checks the delete right on the
// parent, r/l, so no other client can delete a lease node and so take the
// lease — while anyone may read who holds what. A wrong password, or none,
// is refused by ZooKeeper at the first write (opening a session) with an
// error wrapping [ErrNotAuthorized]; the backend does not retry it.
// Without WithDigest, nodes are open to every client (world:anyone all).
//
// # Errors
//
// A session that expired, was closed, closed itself (B2) or lost its node:
// an error wrapping [backends.ErrSessionExpired]. A lease held: a
// *[backends.HeldError]; the amnesia guard: a *[backends.RecoveringError],
// matching [backends.ErrRecovering] and [backends.ErrLeaseHeld]. A backend
// opened read-only asked for a session or the store's time: [ErrReadOnly].
// Network failures,
// timeouts and ZooKeeper's other errors: wrapping [backends.ErrUnavailable]
// and go-zookeeper's error (and the context's, if it ended); an ensemble
// that cannot be reached names the servers and their dial errors. ACLs:
// [ErrNotAuthorized]. A root of another layout: [ErrLayout]. A closed
// backend: [backends.ErrClosed].
//
// # Versions
//
// Tested with go-zookeeper v1.0.4 against ZooKeeper 3.8 (Debian 12's
// package): standalone, and a three-server ensemble. Container nodes need
// ZooKeeper 3.5 or later.
//
// go-zookeeper v1.0.4 has a data race of its own: when a connection
// reconnects while watches are armed, it reads Conn.lastZxid to re-arm them
// as its receive loop writes it (go-zookeeper/zk#35). Under -race, a test
// of yours that makes a candidate's connection reconnect may report it;
// this package's fault tests build without -race for that reason.
package simbazk
