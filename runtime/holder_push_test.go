package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// On a store that tells every change of holder (the memory store,
// backends.HolderNotifier), WatchHolder in another client reports every
// lock turn, 2ms holds included, in order — with a receiver slower than
// the turns too. By polling, a hold shorter than a read was never reported.
func TestWatchHolderEveryShortHold(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow receiver %v", slow), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.New()
				locker := newClient(t, store, runtime.WithIdentity("locker"))
				watcher := newClient(t, store, runtime.WithIdentity("watcher"))
				defer closeClient(t, watcher)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ch, err := watcher.WatchHolder(ctx, "turn")
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				recv := make(chan struct{})
				go func() {
					defer close(recv)
					for h := range ch {
						if h.Free() {
							got = append(got, "free")
						} else {
							got = append(got, fmt.Sprintf("%s %d", h.Identity, h.Token))
						}
						if slow {
							time.Sleep(50 * time.Millisecond) // 25 turns pass meanwhile
						}
					}
				}()
				synctest.Wait() // the first read: free
				want := []string{"free"}
				for range 100 {
					term, err := locker.Lock(ctx, "turn")
					if err != nil {
						t.Fatal(err)
					}
					time.Sleep(2 * time.Millisecond)
					if err := locker.Unlock(ctx, term); err != nil {
						t.Fatal(err)
					}
					want = append(want, fmt.Sprintf("locker %d", term.Token()), "free")
				}
				closeClient(t, locker)
				time.Sleep(10 * time.Second) // the slow receiver catches up
				cancel()
				<-recv
				if !slices.Equal(got, want) {
					i := firstDifference(got, want)
					t.Errorf("WatchHolder reported %d holders, want %d (100 turns); first difference at %d: got %q, want %q",
						len(got), len(want), i, got[i:min(i+4, len(got))], want[i:min(i+4, len(want))])
				}
			})
		})
	}
}

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
