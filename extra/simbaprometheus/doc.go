// Package simbaprometheus exports a Simba client's metrics to Prometheus: a
// [runtime.Observer] that feeds a [prometheus.Collector]. It is a module of
// its own, so that the simba module does not depend on client_golang.
//
//	metrics := simbaprometheus.New(simbaprometheus.Options{})
//	prometheus.MustRegister(metrics)
//	client, err := runtime.NewClient(backend, runtime.Config{}, runtime.WithObserver(metrics))
//
// A process with several clients gives each further one metrics.Observer():
// the series then add up over the process's clients.
//
// # Series
//
// Every series is labelled by lease or group name only (never by session
// id or token), so their number is bounded by the names the code uses;
// partitions are counted per group, not per partition.
//
//	simba_lease_held{lease}                     gauge: 1 while this process holds a term of the lease
//	simba_lease_ownership_changes_total{lease}  counter: terms this process began (summed over processes: the lease's changes of owner)
//	simba_lease_terms_ended_total{lease,reason} counter: terms held here that ended, by reason
//	simba_session_renewal_duration_seconds      histogram: latency of successful renewals
//	simba_session_state{state}                  gauge: clients in each state (opening, live, suspended, closed)
//	simba_sessions_ended_total{reason}          counter: sessions ended (deadline_passed, session_expired: expiries; stopped: closed)
//	simba_schedule_runs_total{lease,outcome}    counter: scheduled runs by outcome (succeeded, failed); a group's by group name
//	simba_group_partitions_held{group}          gauge: partitions of the group held here
//	simba_group_partitions_lost_total{group,reason} counter: partition terms held here that ended
//
// reason is one of stopped, stepped_down, deadline_passed, session_expired,
// taken_over (runtime.Reason in words, with underscores). [Metrics.Expect]
// makes a lease's held series read 0 before this process first holds it.
//
// # Alerts
//
// The engine guarantees at most one valid term per lease; the series let
// you see that it holds, and notice when leadership is missing or unstable.
// Rules to start from (tune the windows to your LeaseDuration; 15s here):
//
//	# No holder: nobody has held the lease for longer than a fail-over takes.
//	- alert: SimbaLeaseNoHolder
//	  expr: max by (lease) (simba_lease_held) == 0
//	  for: 1m
//
//	# Two holders seen by a scraper. Scrapes of two processes are taken at
//	# different instants, so during a hand-off one scrape may still show the
//	# old holder: alert only if it lasts longer than a scrape interval and a
//	# lease. A real overlap means a paused holder, or a backend that lost
//	# writes (see fencing): the token is what protects the resource.
//	- alert: SimbaLeaseTwoHolders
//	  expr: sum by (lease) (simba_lease_held) > 1
//	  for: 2m
//
//	# Flapping: the lease changes owner more than a few times an hour.
//	- alert: SimbaLeaseFlapping
//	  expr: sum by (lease) (increase(simba_lease_ownership_changes_total[1h])) > 6
//
//	# Expiries: a term or session ended because renewals failed, not because
//	# the code stopped it: the backend is slow or unreachable, or the process
//	# paused (GC, CPU starvation).
//	- alert: SimbaExpiries
//	  expr: sum by (instance) (increase(simba_sessions_ended_total{reason=~"deadline_passed|session_expired"}[15m])) > 0
//
//	# Renewals slower than a renewal interval's third: a step towards expiry.
//	- alert: SimbaSlowRenewals
//	  expr: histogram_quantile(0.99, sum by (le, instance) (rate(simba_session_renewal_duration_seconds_bucket[5m]))) > 1.5
//
//	# A schedule whose runs fail.
//	- alert: SimbaScheduleFailing
//	  expr: sum by (lease) (increase(simba_schedule_runs_total{outcome="failed"}[1h])) > 0
//
// The same rules in words, and what to do when they fire, are in
// docs/operations.md.
package simbaprometheus
