package engine

import (
	"testing"
	"time"
)

// A session given up at its deadline is closed on the store: once the
// slack between the local deadline and the store's expiry has passed, and
// again after each failure with a doubling backoff, until a close gets
// through — then no more — or until LeaseDuration after it was given up,
// when the store has expired it anyway and the last close says so (Again
// false, so that the driver forgets the session).
func TestMachineLostSessionClosed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int // closes that fail before one gets through; -1: all
	}{
		{"first close gets through", 0},
		{"third close gets through", 2},
		{"no close gets through", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testCfg)
			h.open()
			c := h.startElection("report", false, false)
			h.win(c, 7)
			dl := h.m.sess.deadline
			h.advanceTo(testCfg.RenewInterval)
			h.take(ReqKeepAlive) // never answered
			h.advanceTo(dl)
			givenUp := h.now
			var closes []Request
			for {
				if !h.has(ReqClose) {
					next, ok := h.m.nextWake()
					if !ok || next > givenUp+2*testCfg.LeaseDuration {
						break
					}
					h.advanceTo(max(next, h.now))
					if h.has(ReqOpen) {
						h.take(ReqOpen) // the new session's open: never answered here
					}
					continue
				}
				r := h.take(ReqClose)
				if len(closes) == 0 {
					slack := testCfg.Margin + time.Duration(testCfg.Drift*float64(testCfg.LeaseDuration))
					if h.now < givenUp+slack {
						t.Errorf("the first close was sent %v after the session was given up; want no sooner than the slack of D3, %v", h.now-givenUp, slack)
					}
				}
				closes = append(closes, r)
				if r.Gen != 1 {
					t.Fatalf("close of session generation %d; want 1, the one given up", r.Gen)
				}
				if tc.failures >= 0 && len(closes) > tc.failures {
					h.reply(r, Result{})
					continue
				}
				h.reply(r, Result{Err: errDown})
			}
			want := tc.failures + 1
			if tc.failures < 0 {
				if n := len(closes); n < 3 {
					t.Fatalf("%d closes sent while none got through; want retries", n)
				}
				last := closes[len(closes)-1]
				if last.Again {
					t.Errorf("the last close says Again; want the driver told it is the last")
				}
				for _, r := range closes[:len(closes)-1] {
					if !r.Again {
						t.Errorf("a close before the last says not Again")
					}
				}
				if h.now > givenUp+testCfg.LeaseDuration+testCfg.RenewInterval {
					t.Errorf("closes went on until %v after the session was given up; want them to stop by LeaseDuration (%v)", h.now-givenUp, testCfg.LeaseDuration)
				}
				return
			}
			if len(closes) != want {
				t.Errorf("%d closes sent; want %d (the first %d fail)", len(closes), want, tc.failures)
			}
			if len(h.m.lost) != 0 {
				t.Errorf("%d sessions still to close after one close got through", len(h.m.lost))
			}
		})
	}
}

// Retries back off: MinBackoff after the first failure, doubling up to
// RenewInterval.
func TestMachineLostSessionBackoff(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	dl := h.m.sess.deadline
	h.advanceTo(testCfg.RenewInterval)
	h.take(ReqKeepAlive)
	h.advanceTo(dl)
	var at []Mono
	for len(at) < 6 {
		if h.has(ReqClose) {
			at = append(at, h.now)
			h.reply(h.take(ReqClose), Result{Err: errDown})
			continue
		}
		next, ok := h.m.nextWake()
		if !ok {
			t.Fatal("no wake-up while a close is due again")
		}
		h.advanceTo(max(next, h.now))
		for h.has(ReqOpen) {
			h.take(ReqOpen)
		}
	}
	wait := max(testCfg.MinBackoff, time.Millisecond)
	for i := 1; i < len(at); i++ {
		if got := at[i] - at[i-1]; got < wait || got > wait+time.Millisecond {
			t.Errorf("close %d after %v; want %v", i+1, got, wait)
		}
		wait = min(2*wait, testCfg.RenewInterval)
	}
}
