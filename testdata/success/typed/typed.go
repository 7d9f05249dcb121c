// Package typed covers typed steps (G2): sources that return
// iter.Seq2[T, error] or ([]T, error), functions and methods, scheduled and
// partitioned, and a generic item type.
package typed

import (
	"context"
	"errors"
	"iter"
	"sync"

	"github.com/simba-go/simba/runtime"
)

// Batch is a unit of work.
type Batch struct {
	ID     int
	Amount int64
}

// Envelope is a generic item type: the items are Envelope[Batch].
type Envelope[T any] struct {
	Body T
	Key  string
}

// Ledger writes batches and records each with the token it was written
// with.
type Ledger struct {
	// OnWrite, if set, is called at the start of each Write, for tests.
	OnWrite func(b Batch, t *runtime.Term)

	mu      sync.Mutex
	pending []Batch
	written []Written
}

// NewLedger returns a ledger with batches to write.
func NewLedger(pending ...Batch) *Ledger { return &Ledger{pending: pending} }

// Written returns what was written so far.
func (l *Ledger) Written() []Written {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Written(nil), l.written...)
}

// Written is one batch written with a token.
type Written struct {
	Batch Batch
	Token runtime.Token
}

// Write is one step: it gets the term, and so the token, with each batch.
//
//simba:scheduled lease=typed.ledger rate=20ms step=10ms items=PendingBatches
func (l *Ledger) Write(ctx context.Context, t *runtime.Term, b Batch) error {
	if l.OnWrite != nil {
		l.OnWrite(b, t)
	}
	if b.Amount < 0 {
		return errors.New("negative amount") // ends the run: later batches wait
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.written = append(l.written, Written{b, t.Token()})
	return nil
}

// PendingBatches yields the batches still to write.
func (l *Ledger) PendingBatches(ctx context.Context, t *runtime.Term) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		for {
			l.mu.Lock()
			if len(l.pending) == 0 {
				l.mu.Unlock()
				return
			}
			b := l.pending[0]
			l.pending = l.pending[1:]
			l.mu.Unlock()
			if !yield(b, nil) {
				return
			}
		}
	}
}

// Ship is a function whose source is a function returning a slice, with no
// step: the check before each item is then that the term is valid at all.
//
//simba:scheduled lease=typed.ship delay=1m items=outbox
func Ship(ctx context.Context, t *runtime.Term, e Envelope[Batch]) error { return nil }

func outbox(ctx context.Context, t *runtime.Term) ([]Envelope[Batch], error) {
	return nil, errors.New("not reached in the test")
}

// Matcher reconciles partitions.
type Matcher struct{ Name string }

// Reconcile is partitioned typed steps: the source and the step both get
// the partition.
//
//simba:partitioned group=typed.reconcile partitions=4 step=1s items=Unmatched
func (m *Matcher) Reconcile(ctx context.Context, t *runtime.Term, partition int, id int) error {
	return nil
}

// Unmatched is a method with a value receiver of the same type; the
// wrapper calls it through the pointer.
func (m Matcher) Unmatched(ctx context.Context, t *runtime.Term, partition int) ([]int, error) {
	return nil, nil
}
