// Command simba shows what a Simba backend holds: every held lease with its
// holder's identity and session, its fencing token, the time the holder's
// session has left, its group and partition, and the last slot a schedule
// recorded under it; the groups and their free partitions; the live
// sessions. status and watch only read: they open no session, hold nothing
// and write nothing, on any backend that lists its contents
// (backends.Inspector). handover is the one command that writes (see
// below). status and watch open the backend with backendurl.OpenInspector,
// read-only where the backend offers it (Redis: simbaredis.WithReadOnly, a
// PING rather than the check script that records the namespace and reaps).
//
// Usage:
//
//	simba status [--backend URL] [--json] [--lease NAME] [--timeout D]
//	simba watch  [--backend URL] [--json] [--lease NAME] [--timeout D]
//	             [--interval D] [--count N] [--for D] [--plain]
//	simba handover [--backend URL] --lease NAME --to IDENTITY [--timeout D]
//
// The backend URL is --backend, or $SIMBA_BACKEND: redis://host:6379/0
// (with simba_prefix=NAME for a namespace other than the default),
// postgres://… and zk://… where those backends are built in, or memory:NAME
// — the memory store lives in one process, so memory: URLs are for programs
// and tests that run the command in-process. Credentials in a URL are never
// printed: every URL shown, in tables, JSON and errors, has its password
// and query replaced with "xxxxx" and "…".
//
// status prints the store's inventory once, as tables:
//
//	redis://127.0.0.1:6379/0 at 2026-12-01 10:22:00.970Z (store clock): 4 leases, 3 sessions, 1 group
//
//	LEASE      HOLDER  SESSION    TOKEN             REMAINING  GROUP    PART  LAST SLOT
//	billing.0  node-3  …57a67021  1796120520949989  2.0s       billing  0     -
//	nightly    node-2  …8cd4f5d4  1796120520924955  2.0s       -        -     2026-12-01 10:22:00.000Z (1.0s ago)
//	…
//
// While the store's amnesia guard refuses every grant (a store that is new
// or lost its state, docs/design.md §15), a line under the header says so:
//
//	grants resume in 41.0s (at 10:22:41.970Z on the store's clock): the store is new or lost its state, …
//
// Memory, Redis, PostgreSQL (with the URL's simba_max_lease), ZooKeeper
// (on this host's clock) and etcd report it;
// a Redis namespace nobody has called since a restart starts its guard at
// the first call, which status does not make.
//
// REMAINING is how long the holder's session has unless it is renewed, as
// the store measured it ("-" where the store does not measure it, as on
// ZooKeeper). LAST SLOT is, for a fixed-rate schedule, the start of the
// last slot whose run completed; for a fixed-delay one, "ended" and when
// the last run ended; both on the store's clock, followed by how long ago
// that was. A slot may start a few milliseconds before its boundary on the
// store's clock (a node estimates that clock from its last renewal, ahead by
// up to one round trip), so a slot that has just started can read as later
// than the store's clock; it is then shown without "ago". Session ids are
// cut to their last 8 characters; --json has them whole.
//
// --lease NAME keeps only the lease NAME, or the partitions of the group
// NAME, and the sessions involved; status then exits 3 if nobody holds it,
// so that a script can ask "is report led right now?".
//
// watch reads the store every --interval (1s) and shows what changed
// between two reads: a lease acquired, handed off to another session, held
// with a new token by the same session, or freed; a session opened or
// ended (closed, or expired). On a terminal it redraws the table each time,
// marks the leases that just changed holder with "« new holder" for a few
// reads, and lists the recent changes under it. Elsewhere (a pipe, a file, or with --plain)
// it prints the table once, then one line per change:
//
//	10:22:19.475  report: HANDOFF node-1 (c5f5511f…) token 1796120538926760 → node-2 (d1b4b1a4…) token 1796120539453850
//	10:22:19.475  session c5f5511f… of node-1 ended
//
// Changes are seen between reads: a lease freed and taken again within one
// interval shows as one hand-off. A read that fails is reported (on
// standard error, or as an "error" line with --json) and watching goes on.
// --count N stops after N reads and --for D after D; otherwise watch runs
// until interrupted.
//
// # Hand-over on request
//
// handover asks the leader of the election NAME to hand its lease over to
// the node whose client has IDENTITY (runtime.WithIdentity), which must
// contend with runtime.AcceptHandOver. It is the one command that writes,
// and it works only on a leader that opted in: its election runs with
// runtime.AcceptHandOverRequests (off by default). It reads the store
// first: if nobody holds NAME it exits 3, if IDENTITY does not contend it
// exits 4, if IDENTITY already holds NAME it exits 0 — nothing written.
// Otherwise it opens a session with the identity "simba handover to
// IDENTITY", holds the lease NAME.handover-request (the request the leader
// follows), waits until IDENTITY holds NAME — printing
//
//	lead: handed over to node-2 (session d1b4b1a4…), token 1796120539453850
//
// — and releases the request and its session. After --timeout (30s) it
// exits 1, saying the leader did not hand over. See docs/design.md §13.
//
// # JSON
//
// status --json prints one document, schema "simba.inventory/v1"; every
// field is always present unless marked optional:
//
//	{
//	  "schema": "simba.inventory/v1",
//	  "backend": "redis://127.0.0.1:6379/0",     the URL, redacted
//	  "store_time": "2026-12-01T10:22:00.98Z",   the store's clock; optional (a store without one)
//	  "leases": [{                               held leases, by name
//	    "name": "nightly",
//	    "session": "8cd4f5d489a2d470eec4e6f57cee7171",
//	    "identity": "node-2",                    "" if the holder gave none
//	    "token": 1796120520924955,
//	    "remaining_ms": 1942,                    null where the store does not measure it
//	    "group": "billing", "partition": 0,      optional: only for a partition of a group
//	    "last_slot": {"kind": "rate", "at": "2026-12-01T10:22:00Z"}   optional: only under a schedule
//	  }],
//	  "sessions": [{"id": "…", "identity": "node-2", "remaining_ms": 1942, "leases": 1}],
//	  "groups": [{"name": "billing", "partitions": 2, "members": ["…"], "held": 2, "free": []}],
//	  "recovering": {                            optional: only while the store's amnesia guard refuses grants
//	    "remaining_ms": 41000, "until": "…",     until grants resume; until optional (a store without a clock)
//	    "max_lease_ms": 60000, "why": "…"        the guard's length; what the store may have lost
//	  }
//	}
//
// watch --json prints one JSON object per line: first
// {"kind":"inventory","time":…,"inventory":{…}}, then one per change, with
// "kind" acquired, handoff, new_term or freed (with "lease", "from" and
// "to" holders as {"session","identity","token"}; freed has "ended": true
// when the holder's session ended too), session_opened or session_ended
// (with "session"), or error (with "error"). "time" is this host's clock
// when the read returned.
//
// # Exit codes
//
//	0  done
//	1  the backend could not be opened or read (unreachable, refused, a
//	   backend that cannot list what it holds); for watch, the last read
//	   failed
//	2  usage: an unknown command or flag, a bad value, no backend given
//	   handover: the hand-over did not happen within --timeout
//	3  status --lease NAME, or handover: nobody holds NAME
//	4  handover: IDENTITY does not contend for NAME with runtime.AcceptHandOver
package main
