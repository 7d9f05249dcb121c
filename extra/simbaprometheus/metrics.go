package simbaprometheus

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simba-go/simba/runtime"
)

// Options configure [New].
type Options struct {
	// Namespace prefixes every series name. Empty means "simba".
	Namespace string

	// ConstLabels are added to every series, to tell apart the clients
	// of several processes scraped as one target (rarely needed: the
	// scrape adds job and instance).
	ConstLabels prometheus.Labels

	// RenewalBuckets are the upper bounds, in seconds, of the renewal
	// latency histogram. Nil means 0.5ms to 16s, doubling.
	RenewalBuckets []float64
}

// Metrics holds the series of the clients it observes; see the package
// documentation for each. It is a [prometheus.Collector]: register it once.
// It is also the [runtime.Observer] of one client; [Metrics.Observer]
// returns one for each further client of the process, adding to the same
// series.
type Metrics struct {
	held          *prometheus.GaugeVec
	ownership     *prometheus.CounterVec
	termsEnded    *prometheus.CounterVec
	renewal       prometheus.Histogram
	state         *prometheus.GaugeVec
	sessionsEnded *prometheus.CounterVec
	runs          *prometheus.CounterVec
	partitions    *prometheus.GaugeVec
	partsLost     *prometheus.CounterVec
	collectors    []prometheus.Collector

	first *observer // Observe's
}

// New returns the series, at zero, and the observer of a first client.
func New(opts Options) *Metrics {
	ns := opts.Namespace
	if ns == "" {
		ns = "simba"
	}
	buckets := opts.RenewalBuckets
	if buckets == nil {
		buckets = prometheus.ExponentialBuckets(0.0005, 2, 16)
	}
	c := opts.ConstLabels
	m := &Metrics{
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "lease_held", ConstLabels: c,
			Help: "1 while a client of this process holds a term of the lease (the number of such clients, with several)."},
			[]string{labelLease}),
		ownership: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "lease_ownership_changes_total", ConstLabels: c,
			Help: "Terms of the lease that clients of this process began: each is one change of ownership; summed over every process, the lease's ownership changes."},
			[]string{labelLease}),
		termsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "lease_terms_ended_total", ConstLabels: c,
			Help: "Terms of the lease held here that ended, by reason: stopped, stepped_down, deadline_passed, session_expired, taken_over."},
			[]string{labelLease, labelReason}),
		renewal: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "session_renewal_duration_seconds", ConstLabels: c,
			Help: "Latency of successful session renewals (one call per renewal interval, whatever the leases held).", Buckets: buckets}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "session_state", ConstLabels: c,
			Help: "Clients of this process whose session is in the state: opening, live, suspended, closed."},
			[]string{labelState}),
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "sessions_ended_total", ConstLabels: c,
			Help: "Sessions that ended, by reason: deadline_passed or session_expired (expiries: every term of the session was lost), stopped (the client closed)."},
			[]string{labelReason}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "schedule_runs_total", ConstLabels: c,
			Help: "Scheduled runs that ended, by outcome (succeeded, failed), per lease, or per group for a group's partitions."},
			[]string{labelLease, labelOutcome}),
		partitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "group_partitions_held", ConstLabels: c,
			Help: "Partitions of the group that clients of this process hold."},
			[]string{labelGroup}),
		partsLost: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "group_partitions_lost_total", ConstLabels: c,
			Help: "Partition terms of the group held here that ended, by reason (stopped: moved by a rebalance, or the member stopped)."},
			[]string{labelGroup, labelReason}),
	}
	for _, s := range []runtime.SessionState{runtime.SessionOpening, runtime.SessionLive, runtime.SessionSuspended, runtime.SessionClosed} {
		m.state.WithLabelValues(s.String())
	}
	m.collectors = []prometheus.Collector{m.held, m.ownership, m.termsEnded, m.renewal, m.state, m.sessionsEnded,
		m.runs, m.partitions, m.partsLost}
	m.first = &observer{m: m}
	return m
}

// Label names, in one place.
const (
	labelLease   = "lease"
	labelGroup   = "group"
	labelReason  = "reason"
	labelState   = "state"
	labelOutcome = "outcome"
)

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors {
		c.Describe(ch)
	}
}

// Collect implements [prometheus.Collector].
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors {
		c.Collect(ch)
	}
}

// Expect shows each lease name with simba_lease_held 0 until a client of
// this process holds it, so that a lease that nobody ever held reads 0
// rather than missing (see the "no holder" alert).
func (m *Metrics) Expect(names ...string) {
	for _, n := range names {
		m.held.WithLabelValues(n).Add(0)
	}
}

// Observe feeds the series from the events of one client, the first; give
// each further client its own [Metrics.Observer].
func (m *Metrics) Observe(e runtime.Event) { m.first.Observe(e) }

// Observer returns an observer for another client of this process: its
// events add to the same series, and its session counts in
// simba_session_state on its own.
func (m *Metrics) Observer() runtime.Observer { return &observer{m: m} }

// observer is one client's view: its session state and the leases it
// holds, so that its revocations undo only its own elections.
type observer struct {
	m *Metrics

	mu      sync.Mutex
	started bool
	state   runtime.SessionState
	holding map[string]bool // leases held, by name
	parts   map[string]bool // partitions held, by partition lease name
}

// Observe implements [runtime.Observer].
func (o *observer) Observe(e runtime.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.m
	if !o.started {
		// A client opens its first session before its first event.
		o.started, o.state = true, runtime.SessionOpening
		o.holding, o.parts = make(map[string]bool), make(map[string]bool)
		m.state.WithLabelValues(o.state.String()).Inc()
	}
	switch e.Kind {
	case runtime.EventSessionState:
		if e.State != o.state {
			m.state.WithLabelValues(o.state.String()).Dec()
			m.state.WithLabelValues(e.State.String()).Inc()
			o.state = e.State
		}
	case runtime.EventSessionRenewed:
		m.renewal.Observe(e.Duration.Seconds())
	case runtime.EventSessionEnded:
		m.sessionsEnded.WithLabelValues(word(e.Reason.String())).Inc()
	case runtime.EventElected:
		if e.Group != "" {
			return // counted per group, by EventPartitionGained
		}
		if !o.holding[e.Name] {
			o.holding[e.Name] = true
			m.held.WithLabelValues(e.Name).Inc()
		}
		m.ownership.WithLabelValues(e.Name).Inc()
	case runtime.EventRevoked:
		if e.Group != "" {
			return // EventPartitionLost
		}
		if o.holding[e.Name] {
			delete(o.holding, e.Name)
			m.held.WithLabelValues(e.Name).Dec()
		}
		m.termsEnded.WithLabelValues(e.Name, word(e.Reason.String())).Inc()
	case runtime.EventPartitionGained:
		if !o.parts[e.Name] {
			o.parts[e.Name] = true
			m.partitions.WithLabelValues(e.Group).Inc()
		}
	case runtime.EventPartitionLost:
		if o.parts[e.Name] {
			delete(o.parts, e.Name)
			m.partitions.WithLabelValues(e.Group).Dec()
		}
		m.partsLost.WithLabelValues(e.Group, word(e.Reason.String())).Inc()
	case runtime.EventRunSucceeded, runtime.EventRunFailed:
		outcome := "succeeded"
		if e.Kind == runtime.EventRunFailed {
			outcome = "failed"
		}
		name := e.Name
		if e.Group != "" {
			name = e.Group
		}
		m.runs.WithLabelValues(name, outcome).Inc()
	}
}

// word turns a runtime word ("stepped down") into a label value
// ("stepped_down").
func word(s string) string { return strings.ReplaceAll(s, " ", "_") }
