package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSource is a release channel in memory: each Subscribe opens a
// subscription fed by send; fail ends the current one with an error.
type fakeSource struct {
	mu        sync.Mutex
	attempts  int // calls of Subscribe
	subs      int // subscriptions opened
	pings     int
	cur       *fakeSub
	refuse    error // Subscribe fails with it, if set
	answerPng bool  // pings are answered within the call
	mute      bool  // pongs never arrive
}

type fakeSub struct {
	src    *fakeSource
	msgs   chan Release
	failed chan error
	closed chan struct{}
	once   sync.Once
}

func (s *fakeSource) Subscribe(ctx context.Context) (Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.refuse != nil {
		return nil, s.refuse
	}
	s.subs++
	s.cur = &fakeSub{src: s, msgs: make(chan Release, 16), failed: make(chan error, 1), closed: make(chan struct{})}
	return s.cur, nil
}

func (s *fakeSource) send(r Release) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.msgs <- r
}

func (s *fakeSource) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.failed <- err
}

func (s *fakeSource) counts() (subs, pings int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs, s.pings
}

func (u *fakeSub) Receive(ctx context.Context, timeout time.Duration) (Release, bool, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-u.msgs:
		return r, true, nil
	case err := <-u.failed:
		return Release{}, false, err
	case <-u.closed:
		return Release{}, false, errors.New("closed")
	case <-ctx.Done():
		return Release{}, false, ctx.Err()
	case <-t.C:
		return Release{}, false, nil
	}
}

func (u *fakeSub) Ping(ctx context.Context) (bool, error) {
	u.src.mu.Lock()
	defer u.src.mu.Unlock()
	u.src.pings++
	if u.src.answerPng {
		return true, nil
	}
	if !u.src.mute {
		u.msgs <- Release{} // the pong
	}
	return false, nil
}

func (u *fakeSub) Close() error {
	u.once.Do(func() { close(u.closed) })
	return nil
}

func TestFeedDelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{}
		f := NewFeed(src, nil)
		defer f.Close()
		var mine, theirs atomic.Int32
		f.Watch("s1", "x", func() { mine.Add(1) })
		stop := f.Watch("s2", "x", func() { theirs.Add(1) })
		synctest.Wait()
		if subs, _ := src.counts(); subs != 1 {
			t.Fatalf("%d subscriptions after two watches; want 1", subs)
		}
		src.send(Release{Name: "x", From: "s1"})
		src.send(Release{Name: "y", From: "s3"})
		synctest.Wait()
		if mine.Load() != 0 || theirs.Load() != 1 {
			t.Errorf("after s1 released x: s1's watch called %d times, s2's %d; want 0 and 1", mine.Load(), theirs.Load())
		}
		stop()
		src.send(Release{Name: "x", From: "s3"})
		synctest.Wait()
		if mine.Load() != 1 || theirs.Load() != 1 {
			t.Errorf("after s3 released x: calls %d and %d; want 1 and 1 (s2 stopped)", mine.Load(), theirs.Load())
		}
	})
}

// A lost subscription is reopened with back-off, and the reopening wakes
// every watch, since releases were lost meanwhile.
func TestFeedReconnectWakesAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{}
		f := NewFeed(src, nil)
		defer f.Close()
		var x, y atomic.Int32
		f.Watch("s1", "x", func() { x.Add(1) })
		f.Watch("s1", "y", func() { y.Add(1) })
		synctest.Wait()
		if x.Load() != 0 {
			t.Fatalf("the first subscription woke the watch %d times; want 0", x.Load())
		}
		src.mu.Lock()
		src.refuse = errors.New("connection refused")
		src.mu.Unlock()
		src.fail(errors.New("connection reset"))
		time.Sleep(time.Second) // several failed attempts, with back-off
		synctest.Wait()
		if subs, _ := src.counts(); subs != 1 || x.Load() != 0 {
			t.Fatalf("while refused: %d subscriptions, %d wakes; want 1 and 0", subs, x.Load())
		}
		src.mu.Lock()
		src.refuse = nil
		src.mu.Unlock()
		time.Sleep(maxBackoff)
		synctest.Wait()
		if subs, _ := src.counts(); subs != 2 {
			t.Fatalf("%d subscriptions after healing; want 2", subs)
		}
		if x.Load() != 1 || y.Load() != 1 {
			t.Errorf("after the resubscription: watches called %d and %d times; want 1 each", x.Load(), y.Load())
		}
	})
}

// A silent subscription is pinged only while some watch waits, and one whose
// ping goes unanswered is reopened.
func TestFeedLiveness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{}
		f := NewFeed(src, nil)
		defer f.Close()
		stop := f.Watch("s1", "x", func() {})
		stop() // the subscription stays, with nothing watched
		time.Sleep(10 * pingAfter)
		synctest.Wait()
		if _, pings := src.counts(); pings != 0 {
			t.Errorf("%d pings while nothing was watched; want 0", pings)
		}
		f.Watch("s1", "x", func() {})
		time.Sleep(3*pingAfter + time.Second)
		synctest.Wait()
		subs, pings := src.counts()
		if pings != 3 || subs != 1 {
			t.Errorf("over three silent periods with a watch: %d pings, %d subscriptions; want 3 and 1", pings, subs)
		}
		src.mu.Lock()
		src.mute = true
		src.mu.Unlock()
		time.Sleep(pingAfter + pongWithin + maxBackoff)
		synctest.Wait()
		if subs, _ := src.counts(); subs != 2 {
			t.Errorf("%d subscriptions after a ping went unanswered; want 2", subs)
		}
	})
}

// A store that cannot deliver notifications is given up after one try.
func TestFeedUnsupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{refuse: fmt.Errorf("LISTEN through a pooler: %w", ErrUnsupported)}
		f := NewFeed(src, nil)
		f.Watch("s1", "x", func() {})
		time.Sleep(time.Minute)
		synctest.Wait()
		f.Close()
		src.mu.Lock()
		defer src.mu.Unlock()
		if src.attempts != 1 {
			t.Errorf("%d attempts to subscribe in a minute; want 1", src.attempts)
		}
	})
}
