package fencing

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/simba-go/simba/backends"
)

// Sequencer identifies one term of one lease: its name and fencing token,
// carried to a downstream service as one opaque string, "simba-seq/1 lease
// NAME TOKEN" (§7). It is [backends.Sequencer]; runtime's terms give theirs
// (term.Sequencer()), and [Transport] sends it with every write when asked.
type Sequencer = backends.Sequencer

// ErrInvalidSequencer reports text that is not a sequencer: the error is a
// *backends.SequencerError, which says what is wrong.
var ErrInvalidSequencer = backends.ErrInvalidSequencer

// ParseSequencer reads a sequencer's text form, as Sequencer.String writes
// it, and nothing else: whatever it accepts prints back byte for byte. Any
// other text gives an error matching [ErrInvalidSequencer] that names the
// first problem.
func ParseSequencer(text string) (Sequencer, error) {
	seq, err := backends.ParseSequencer(text)
	if err != nil {
		return Sequencer{}, fmt.Errorf("simba: %w", err)
	}
	return seq, nil
}

// Sequencers is the guard of a service downstream of lease holders: per
// lease name, the highest token it has admitted, and the work running under
// each (F1, F2). A sequencer whose token is lower than the highest admitted
// for its name is stale and refused with an error wrapping [ErrStaleToken];
// an equal one is admitted (the same term again); a higher one is admitted
// and recorded.
//
// [Sequencers.Do] goes further than a check: it runs the work of a
// sequencer so that, per name, no work under a lower token runs alongside
// or after work under a higher one. Admitting a higher token cancels the
// contexts of the work still running under lower ones, and the higher
// token's work waits until they have returned. So what that work does is
// fenced as a whole, whatever it writes, as long as it is over when it
// returns. Work under one token runs concurrently. [SequencerHandler] puts
// Do in front of an HTTP handler.
//
// The zero Sequencers is ready to use, with nothing admitted. It is safe
// for concurrent use, and must not be copied after first use. It keeps one
// small record per name it has admitted, for as long as it lives: serve it
// to the lease holders you trust, not to anyone who can invent names.
type Sequencers struct {
	mu    sync.Mutex
	names map[string]*nameState
}

// nameState is what Sequencers knows of one name. Guarded by Sequencers.mu.
type nameState struct {
	cur *generation // the highest token admitted, and the work under it

	// older counts the calls of Do under lower tokens (superseded
	// generations) that have not returned yet, running or waiting to run;
	// drained is closed when it drops to 0, and nil while it is 0.
	older   int
	drained chan struct{}
}

// generation is the work admitted under one token of one name.
type generation struct {
	token  backends.Token
	active int // calls of Do under this token that have not returned
	ctx    context.Context
	cancel context.CancelCauseFunc // called when a higher token is admitted
}

// errNilSequencers is returned by the methods of a nil *Sequencers.
var errNilSequencers = errors.New("simba: fencing: nil Sequencers")

// checkSequencer returns an error naming what is wrong with seq, if it is
// not a sequencer a term can have.
func checkSequencer(seq Sequencer) error {
	if err := backends.ValidateName(seq.Name); err != nil {
		return fmt.Errorf("simba: sequencer's lease name: %w", err)
	}
	return CheckToken(seq.Token)
}

// admit records seq's token for its name if it is not lower than the highest
// admitted, superseding the work under lower tokens, and returns its
// generation and the state of its name. The caller holds s.mu.
func (s *Sequencers) admit(seq Sequencer) (*nameState, *generation, error) {
	st := s.names[seq.Name]
	if st == nil {
		if s.names == nil {
			s.names = make(map[string]*nameState)
		}
		st = new(nameState)
		s.names[seq.Name] = st
	}
	switch cur := st.cur; {
	case cur == nil:
	case seq.Token < cur.token:
		return nil, nil, fmt.Errorf("%w: lease %q: token %d is lower than the highest token admitted, %d",
			ErrStaleToken, seq.Name, seq.Token, cur.token)
	case seq.Token == cur.token:
		return st, cur, nil
	default:
		if cur.cancel != nil {
			cur.cancel(fmt.Errorf("%w: lease %q: token %d superseded by token %d", ErrStaleToken, seq.Name, cur.token, seq.Token))
		}
		if cur.active > 0 {
			st.older += cur.active
			if st.drained == nil {
				st.drained = make(chan struct{})
			}
		}
	}
	st.cur = &generation{token: seq.Token}
	return st, st.cur, nil
}

// Check admits seq without running anything: it returns nil and records
// seq's token if it is not lower than the highest admitted for its name,
// cancelling the contexts of work running under lower tokens (but not
// waiting for it), and an error wrapping [ErrStaleToken] otherwise. A
// sequencer with an invalid name or token gives an error saying so
// ([ErrInvalidToken] for a token below 1).
//
// Check and what follows it are two steps: a write that passed the check
// can land after a higher token was admitted. Use it when the write
// carries the token to a resource that checks it again (F2), and
// [Sequencers.Do] otherwise.
func (s *Sequencers) Check(seq Sequencer) error {
	if s == nil {
		return errNilSequencers
	}
	if err := checkSequencer(seq); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _, err := s.admit(seq)
	return err
}

// Do admits seq as [Sequencers.Check] does and runs work under it: only
// once no work under a lower token of the same name is still running, and
// with a context that is ctx, cancelled also (with a cause wrapping
// [ErrStaleToken]) when a higher token of the name is admitted. It returns
// work's error, or, without calling work, an error wrapping ErrStaleToken
// if seq is stale or was superseded while it waited, or the cause of ctx if
// ctx ended while it waited.
//
// Work under one token runs concurrently; only a higher token waits. work
// must not return before what it started is over, and should return
// promptly once its context is done: a higher token's work waits for it.
func (s *Sequencers) Do(ctx context.Context, seq Sequencer, work func(ctx context.Context) error) error {
	if s == nil {
		return errNilSequencers
	}
	if err := checkSequencer(seq); err != nil {
		return err
	}
	if work == nil {
		return errors.New("simba: fencing.Sequencers.Do: nil work function")
	}
	s.mu.Lock()
	st, g, err := s.admit(seq)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancelCause(context.Background())
	}
	g.active++
	wait := st.drained
	s.mu.Unlock()
	defer s.done(st, g)

	if wait != nil {
		select {
		case <-wait:
		case <-g.ctx.Done():
			return context.Cause(g.ctx)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })
	defer stop()
	if g.ctx.Err() != nil { // superseded as the wait ended
		return context.Cause(g.ctx)
	}
	return work(wctx)
}

// done records that a call of Do under g returned.
func (s *Sequencers) done(st *nameState, g *generation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.cur == g {
		g.active--
		return
	}
	st.older--
	if st.older == 0 && st.drained != nil {
		close(st.drained)
		st.drained = nil
	}
}

// Highest returns the highest token admitted for name, 0 if none.
func (s *Sequencers) Highest(name string) backends.Token {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.names[name]; st != nil && st.cur != nil {
		return st.cur.token
	}
	return 0
}
