// Package simbahttp serves a client's health and status over HTTP, with the
// standard library only: mount them beside your own handlers.
//
//	mux.Handle("/healthz/simba", simbahttp.NewHealth(client, simbahttp.HealthOptions{}))
//	mux.Handle("/debug/simba", simbahttp.NewStatus(client, simbahttp.StatusOptions{}))
//
// # Health
//
// [Health] answers 200 "ok" while the client's session is live, and also
// while it is suspended (a renewal failed, the local deadline has not
// passed) or opening a new session, for up to [HealthOptions.Grace] — by
// default the client's LeaseDuration: a session that cannot renew for a
// whole lease has lost every term it held, and a probe that restarts the
// process is then a fair remedy. Past the grace, and once the client is
// closed, it answers 503 with the reason in the body. The grace is counted
// from the first check that saw the session not live, so with probes every
// P seconds a check fails within Grace + P of the first failed renewal.
//
// Like client-go's leader-election HealthzAdaptor, Health has Name and
// Check(*http.Request) error, the shape of Kubernetes' healthz checkers, so
// it can be added to such a list as it is; it is also an [http.Handler].
//
// While the store refuses grants because it is new or lost its state (its
// amnesia guard: [runtime.Snapshot].Recovering), a live client is healthy
// — restarting it would not make the store grant sooner — and Health
// answers 200 with a body that says so, why and until when, instead of
// "ok":
//
//	ok, waiting: no lease is granted until 12:00:41.123Z (in 41s): the store is new or lost
//	its state, and waits out the longest lease it grants (1m0s), …; see docs/design.md §15
//
// Health reads only the client's own state ([runtime.Client.Snapshot]): a
// check makes no call to the store.
//
// # Status
//
// The handler [NewStatus] returns serves the client's snapshot as JSON, the
// document [Status] describes, schema "simba.status/v1". Every field is
// always present unless its line says "omitted when …"; durations are whole
// milliseconds, times RFC 3339 on this host's wall clock; lists are [] when
// empty, never null.
//
//	{
//	  "schema": "simba.status/v1",
//	  "time": "2026-12-01T10:00:00.123Z",  when the snapshot was taken
//	  "identity": "host/4242",              the client's identity (runtime.WithIdentity)
//	  "session": {
//	    "id": "3fa0…",                      "" while none is open
//	    "state": "live",                    opening | live | suspended | closed
//	    "remaining_ms": 14200,              until the session's local deadline; 0 if none
//	    "renew_period_ms": 5000,            the current renewal period
//	    "last_error": "…"                   the backend's last failure; omitted after a success
//	  },
//	  "leases": [{                          every election, lock and schedule, in start order
//	    "name": "report",
//	    "kind": "schedule",                 election | lock | schedule
//	    "role": "leader",                   candidate | leader | handing_off | cooling_down
//	    "token": 17,                        this client's term's token; 0 unless leader or handing_off
//	    "remaining_ms": 9800,               the term's validity left; 0 unless leader
//	    "cooldown_ms": 0,                   the cooldown left; 0 unless cooling_down
//	    "holder": {                         who holds the lease; null if it was not read
//	      "free": false,                    true: nobody holds it (the other holder fields are zero)
//	      "session": "3fa0…", "identity": "node-2", "token": 17,
//	      "self": true                      the holder is this client's session
//	    },
//	    "holder_error": "…",                why the holder could not be read; omitted otherwise
//	    "schedule": {                       omitted unless kind is schedule
//	      "next": "…",                      when the next run is due; omitted if none is planned
//	      "last_run": "…",                  when the last run started; omitted before the first
//	      "last_error": "…",                the last run's error; omitted if it succeeded
//	      "runs": 3                         runs started, over every term of this client
//	    }
//	  }],
//	  "groups": [{                          every partition group, in start order
//	    "name": "billing", "partitions": 8,
//	    "members": 3,                       members in the last view read; 0 before the first
//	    "joined": true,                     a member on the current session
//	    "held": [{                          the partitions this member holds, ascending
//	      "index": 0, "token": 18, "remaining_ms": 9800,
//	      "schedule": {…}                   as above; omitted unless the group runs on a schedule
//	    }],
//	    "last_error": "…"                   the last failed group call; omitted otherwise
//	  }],
//	  "recovering": {                       omitted unless the store refuses grants (amnesia guard)
//	    "until": "…",                       when grants resume; omitted if the store does not say
//	    "remaining_ms": 41000,              until then
//	    "max_lease_ms": 60000,              the guard's length, the store's longest lease
//	    "why": "…",                         what the store may have lost, in the backend's words
//	    "message": "no lease is granted until …"  why the client waits and until when, in one line
//	  }
//	}
//
// The holders: for a lease this client holds, the holder is itself; for the
// others, the handler reads the holder from the store through the client
// ([runtime.Client.Holder]), one read per lease, all bounded together by
// [StatusOptions.HolderTimeout]. [StatusOptions.SkipHolders] turns the
// reads off (holder is then null unless this client holds the lease).
// Partition holders other than this member are not read: a group's members
// are listed by the simba command (cmd/simba), which reads the whole store.
package simbahttp
