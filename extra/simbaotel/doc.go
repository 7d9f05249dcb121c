// Package simbaotel records a Simba client's metrics with OpenTelemetry: a
// [runtime.Observer] that feeds instruments of a [metric.MeterProvider]. It
// is a module of its own, so that the simba module does not depend on
// OpenTelemetry.
//
//	metrics, err := simbaotel.New(otel.GetMeterProvider())
//	if err != nil { … }
//	client, err := runtime.NewClient(backend, runtime.Config{}, runtime.WithObserver(metrics))
//
// A process with several clients gives each further one metrics.Observer().
//
// # Instruments
//
// The same series as package simbaprometheus (extra/simbaprometheus), named
// the OpenTelemetry way; attributes are lease or group names only, never a
// session id or a token:
//
//	simba.lease.held               UpDownCounter {term}       simba.lease      1 while this process holds a term
//	simba.lease.ownership_changes  Counter       {term}       simba.lease      terms this process began
//	simba.lease.terms_ended        Counter       {term}       simba.lease, simba.reason
//	simba.session.renewal.duration Histogram     s                             successful renewals' latency
//	simba.session.state            UpDownCounter {client}     simba.state      opening, live, suspended, closed
//	simba.session.ended            Counter       {session}    simba.reason     deadline_passed, session_expired, stopped
//	simba.schedule.runs            Counter       {run}        simba.lease, simba.outcome (succeeded, failed); a group's by group name
//	simba.group.partitions.held    UpDownCounter {partition}  simba.group
//	simba.group.partitions.lost    Counter       {partition}  simba.group, simba.reason
//
// simba.reason is one of stopped, stepped_down, deadline_passed,
// session_expired, taken_over.
//
// # Alerts
//
// Set the alerts of package simbaprometheus on whatever back end stores
// these (with an OTLP-to-Prometheus pipeline the names become
// simba_lease_held, simba_lease_ownership_changes_total, …): no holder (the
// maximum of simba.lease.held over processes is 0 for a minute), two
// holders seen by a scraper (the sum above 1 for longer than a scrape
// interval and a lease), flapping (more than a few ownership changes an
// hour), expiries (any simba.session.ended with reason deadline_passed or
// session_expired). docs/operations.md says what to do when they fire.
package simbaotel
