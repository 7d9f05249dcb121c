package simbaotel

import (
	"context"
	"errors"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/simba-go/simba/runtime"
)

// ScopeName is the instrumentation scope of the meter New makes.
const ScopeName = "github.com/simba-go/simba/extra/simbaotel"

// Attribute keys, in one place.
const (
	keyLease   = attribute.Key("simba.lease")
	keyGroup   = attribute.Key("simba.group")
	keyReason  = attribute.Key("simba.reason")
	keyState   = attribute.Key("simba.state")
	keyOutcome = attribute.Key("simba.outcome")
)

// Metrics holds the instruments; it is the [runtime.Observer] of one
// client, and [Metrics.Observer] returns one for each further client of
// the process, recording to the same instruments.
type Metrics struct {
	held          metric.Int64UpDownCounter
	ownership     metric.Int64Counter
	termsEnded    metric.Int64Counter
	renewal       metric.Float64Histogram
	state         metric.Int64UpDownCounter
	sessionsEnded metric.Int64Counter
	runs          metric.Int64Counter
	partitions    metric.Int64UpDownCounter
	partsLost     metric.Int64Counter

	first *observer
}

// New makes the instruments with a meter of provider, named [ScopeName].
// It fails only if the provider refuses an instrument.
func New(provider metric.MeterProvider) (*Metrics, error) {
	meter := provider.Meter(ScopeName)
	var errs []error
	check := func(err error) { errs = append(errs, err) }
	m := &Metrics{}
	var err error
	m.held, err = meter.Int64UpDownCounter("simba.lease.held", metric.WithUnit("{term}"),
		metric.WithDescription("1 while a client of this process holds a term of the lease (the number of such clients, with several)."))
	check(err)
	m.ownership, err = meter.Int64Counter("simba.lease.ownership_changes", metric.WithUnit("{term}"),
		metric.WithDescription("Terms of the lease that clients of this process began: each is one change of ownership."))
	check(err)
	m.termsEnded, err = meter.Int64Counter("simba.lease.terms_ended", metric.WithUnit("{term}"),
		metric.WithDescription("Terms of the lease held here that ended, by simba.reason."))
	check(err)
	m.renewal, err = meter.Float64Histogram("simba.session.renewal.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of successful session renewals."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384))
	check(err)
	m.state, err = meter.Int64UpDownCounter("simba.session.state", metric.WithUnit("{client}"),
		metric.WithDescription("Clients of this process whose session is in simba.state: opening, live, suspended, closed."))
	check(err)
	m.sessionsEnded, err = meter.Int64Counter("simba.session.ended", metric.WithUnit("{session}"),
		metric.WithDescription("Sessions that ended, by simba.reason: deadline_passed or session_expired (expiries), stopped (closed)."))
	check(err)
	m.runs, err = meter.Int64Counter("simba.schedule.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Scheduled runs that ended, by simba.outcome (succeeded, failed), per lease, or per group for a group's partitions."))
	check(err)
	m.partitions, err = meter.Int64UpDownCounter("simba.group.partitions.held", metric.WithUnit("{partition}"),
		metric.WithDescription("Partitions of the group that clients of this process hold."))
	check(err)
	m.partsLost, err = meter.Int64Counter("simba.group.partitions.lost", metric.WithUnit("{partition}"),
		metric.WithDescription("Partition terms of the group held here that ended, by simba.reason."))
	check(err)
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("simbaotel: making the instruments"), err)
	}
	m.first = &observer{m: m}
	return m, nil
}

// Observe records the events of one client, the first; give each further
// client its own [Metrics.Observer].
func (m *Metrics) Observe(e runtime.Event) { m.first.Observe(e) }

// Observer returns an observer for another client of this process: its
// events add to the same instruments, and its session counts in
// simba.session.state on its own.
func (m *Metrics) Observer() runtime.Observer { return &observer{m: m} }

// observer is one client's view: its session state and what it holds, so
// that its revocations undo only its own elections.
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
	ctx, m := context.Background(), o.m
	one := func(kv ...attribute.KeyValue) metric.MeasurementOption { return metric.WithAttributes(kv...) }
	if !o.started {
		// A client opens its first session before its first event.
		o.started, o.state = true, runtime.SessionOpening
		o.holding, o.parts = make(map[string]bool), make(map[string]bool)
		m.state.Add(ctx, 1, one(keyState.String(o.state.String())))
	}
	switch e.Kind {
	case runtime.EventSessionState:
		if e.State != o.state {
			m.state.Add(ctx, -1, one(keyState.String(o.state.String())))
			m.state.Add(ctx, 1, one(keyState.String(e.State.String())))
			o.state = e.State
		}
	case runtime.EventSessionRenewed:
		m.renewal.Record(ctx, e.Duration.Seconds())
	case runtime.EventSessionEnded:
		m.sessionsEnded.Add(ctx, 1, one(keyReason.String(word(e.Reason.String()))))
	case runtime.EventElected:
		if e.Group != "" {
			return // counted per group, by EventPartitionGained
		}
		lease := one(keyLease.String(e.Name))
		if !o.holding[e.Name] {
			o.holding[e.Name] = true
			m.held.Add(ctx, 1, lease)
		}
		m.ownership.Add(ctx, 1, lease)
	case runtime.EventRevoked:
		if e.Group != "" {
			return // EventPartitionLost
		}
		if o.holding[e.Name] {
			delete(o.holding, e.Name)
			m.held.Add(ctx, -1, one(keyLease.String(e.Name)))
		}
		m.termsEnded.Add(ctx, 1, one(keyLease.String(e.Name), keyReason.String(word(e.Reason.String()))))
	case runtime.EventPartitionGained:
		if !o.parts[e.Name] {
			o.parts[e.Name] = true
			m.partitions.Add(ctx, 1, one(keyGroup.String(e.Group)))
		}
	case runtime.EventPartitionLost:
		if o.parts[e.Name] {
			delete(o.parts, e.Name)
			m.partitions.Add(ctx, -1, one(keyGroup.String(e.Group)))
		}
		m.partsLost.Add(ctx, 1, one(keyGroup.String(e.Group), keyReason.String(word(e.Reason.String()))))
	case runtime.EventRunSucceeded, runtime.EventRunFailed:
		outcome := "succeeded"
		if e.Kind == runtime.EventRunFailed {
			outcome = "failed"
		}
		name := e.Name
		if e.Group != "" {
			name = e.Group
		}
		m.runs.Add(ctx, 1, one(keyLease.String(name), keyOutcome.String(outcome)))
	}
}

// word turns a runtime word ("stepped down") into an attribute value
// ("stepped_down").
func word(s string) string { return strings.ReplaceAll(s, " ", "_") }
