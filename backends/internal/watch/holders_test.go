package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
)

func grant(tok backends.Token) backends.Holder { return backends.Holder{Session: "s", Token: tok} }
func end(tok backends.Token) backends.Holder   { return backends.Holder{Token: tok} }

// A watch tells each change once and in order, whatever order messages and
// reads arrive in: a grant only if newer than every term told, an end only
// of the term last told as granted (or a later one).
func TestHoldersDropOlder(t *testing.T) {
	var r Holders
	var got []string
	stop := r.Add("x", func(h backends.Holder) {
		if h.Session == "" {
			got = append(got, fmt.Sprintf("end %d", h.Token))
		} else {
			got = append(got, fmt.Sprintf("grant %d", h.Token))
		}
	})
	for _, h := range []backends.Holder{
		end(3),   // a read of a free lease before anything was told: nothing to end
		grant(4), // told
		grant(4), // the same grant, read after its message: dropped
		end(3),   // an older end arriving late: dropped
		end(4),   // told
		end(4),   // twice: dropped
		grant(5), // told
		end(9),   // a read after a gap: free, the counter at 9 (grant 6 … were missed)
		grant(7), // a message from before the read: dropped
		end(7),   // dropped
		grant(10),
	} {
		r.Tell("x", h)
	}
	r.Tell("y", grant(11)) // another name: nobody watches it
	want := []string{"grant 4", "end 4", "grant 5", "end 9", "grant 10"}
	if !slices.Equal(got, want) {
		t.Errorf("told %q; want %q", got, want)
	}
	stop()
	r.Tell("x", end(10))
	if len(got) != len(want) || r.Len() != 0 {
		t.Errorf("after stop: told %q, %d names watched; want nothing more, 0", got[len(want):], r.Len())
	}
}

// The feed follows a watched name once its subscription is confirmed, again
// after every resubscription (messages were lost) and every period; it tells
// what the reads found and what the messages say, through the filter; a
// change that is also a release hint wakes release watches too.
func TestFeedFollows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{}
		f := NewFeed(src, nil)
		defer f.Close()
		var (
			mu      sync.Mutex
			follows [][]string
			read    = grant(5)
			got     []backends.Holder
		)
		f.Follow(func(_ context.Context, names []string) (map[string]backends.Holder, error) {
			mu.Lock()
			defer mu.Unlock()
			follows = append(follows, slices.Clone(names))
			return map[string]backends.Holder{"x": read}, nil
		}, time.Minute)
		f.WatchHolder("x", func(h backends.Holder) { got = append(got, h) })
		var hints atomic.Int32
		f.Watch("s1", "x", func() { hints.Add(1) })
		synctest.Wait()
		src.send(Release{Name: "x", From: "s2", Change: &backends.Holder{Token: 5}, Wake: true})
		src.send(Release{Name: "x", Change: &backends.Holder{Session: "s2", Token: 6}})
		synctest.Wait()
		mu.Lock()
		read = grant(8)
		mu.Unlock()
		src.fail(errors.New("connection reset"))
		time.Sleep(maxBackoff)
		synctest.Wait()
		mu.Lock()
		n := len(follows)
		mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []backends.Holder{grant(5), end(5), {Session: "s2", Token: 6}, grant(8)}
		if !slices.Equal(got, want) {
			t.Errorf("told %+v; want %+v", got, want)
		}
		if n != 2 || len(follows) != 3 || !slices.Equal(follows[0], []string{"x"}) {
			t.Errorf("follows %q (%d before the period); want [x] after each of the two subscriptions, then once a period", follows, n)
		}
		if hints.Load() != 2 { // the release, and the resubscription
			t.Errorf("release watch woken %d times; want 2", hints.Load())
		}
	})
}
