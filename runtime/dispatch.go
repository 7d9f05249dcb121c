package runtime

import (
	"runtime/debug"
	"sync"
)

// serialQueue runs functions one at a time, in order, each on a goroutine
// obtained from exec (L2). It holds no goroutine while empty.
type serialQueue struct {
	exec func(func()) error

	mu      sync.Mutex
	items   []queued
	running bool
}

type queued struct {
	run      func()
	mustRun  bool        // run it on a goroutine of ours if exec refuses (L1)
	rejected func(error) // called instead of run when exec refuses
}

func goExec(f func()) error {
	go f()
	return nil
}

func newSerialQueue(exec func(func()) error) *serialQueue {
	if exec == nil {
		exec = goExec
	}
	return &serialQueue{exec: exec}
}

func (q *serialQueue) push(it queued) {
	q.mu.Lock()
	q.items = append(q.items, it)
	if q.running {
		q.mu.Unlock()
		return
	}
	q.running = true
	q.mu.Unlock()
	q.next()
}

// idle reports whether q has nothing queued and nothing running.
func (q *serialQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.running && len(q.items) == 0
}

// add queues it without starting a goroutine: the caller then calls runHere
// (a push meanwhile starts one, which runs it in order).
func (q *serialQueue) add(it queued) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
}

// kick starts running q's items, as push does, if any are queued and none
// runs (add queued them).
func (q *serialQueue) kick() {
	q.mu.Lock()
	if q.running || len(q.items) == 0 {
		q.mu.Unlock()
		return
	}
	q.running = true
	q.mu.Unlock()
	q.next()
}

// runHere runs up to limit queued items, in order, on the caller's
// goroutine, unless a goroutine runs them already; the rest, if any, go to
// goroutines as push sends them.
func (q *serialQueue) runHere(limit int) {
	q.mu.Lock()
	if q.running || len(q.items) == 0 {
		q.mu.Unlock()
		return
	}
	q.running = true
	q.mu.Unlock()
	for range limit {
		it, ok := q.pop()
		if !ok {
			return
		}
		it.run()
	}
	q.next()
}

// pop takes the first queued item; with none left, it records that nothing
// runs the queue any more.
func (q *serialQueue) pop() (queued, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		q.running = false
		return queued{}, false
	}
	it := q.items[0]
	q.items[0] = queued{}
	q.items = q.items[1:]
	return it, true
}

// next hands the first item to exec; the item's goroutine calls next again
// when it has run, so items never overlap.
func (q *serialQueue) next() {
	for {
		it, ok := q.pop()
		if !ok {
			return
		}
		chain := func() { it.run(); q.next() }
		err := q.exec(chain)
		if err == nil {
			return
		}
		if it.mustRun {
			go chain()
			return
		}
		it.rejected(err)
	}
}

// protect calls f and turns a panic into a *PanicError (L7).
func protect(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}
