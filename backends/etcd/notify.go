package simbaetcd

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch calls fn each time name may have become free: etcd deleted its
// lease key (a release, or the revocation of its holder's lease: a Close,
// an expiry), unless this session deleted it itself. The etcd watch starts
// right after the revision at which this session was last refused name, so
// that a release between the refusal and the watch is delivered too (A1);
// etcd brings a watch that starts in the past up to date within its sync
// loop's 100 ms. fn runs on a goroutine of the session, one call at a
// time; the returned stop waits for a call in progress. A watch that etcd
// cancels (a compaction past its start, a member that lost its leader)
// calls fn once, as a hint, and starts again from the present.
func (s *session) Watch(name string, fn func()) (stop func()) {
	if fn == nil { // backends.Notifier: a nil fn watches nothing
		return func() {}
	}
	s.mu.Lock()
	if s.dead != nil || s.watchCtx == nil {
		s.mu.Unlock()
		return func() {}
	}
	start := s.refused[name]
	ctx, cancel := context.WithCancel(s.watchCtx)
	s.watchers.Add(1)
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer s.watchers.Done()
		defer close(done)
		s.watch(ctx, name, start, fn)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// watch runs one name's watch until ctx ends.
func (s *session) watch(ctx context.Context, name string, after int64, fn func()) {
	key := s.b.keys.lease(name)
	sid := string(s.id)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		opts := []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithPrevKV()}
		if after > 0 {
			opts = append(opts, clientv3.WithRev(after+1))
		}
		wch := s.b.cli.Watch(clientv3.WithRequireLeader(ctx), key, opts...)
		healthy := false
		for resp := range wch {
			if err := resp.Err(); err != nil || resp.Canceled {
				break
			}
			healthy = true
			for _, ev := range resp.Events {
				after = ev.Kv.ModRevision
				if ev.Type != mvccpb.DELETE {
					continue
				}
				if ev.PrevKv != nil {
					if holder, _ := parseLeaseRecord(ev.PrevKv.Value); holder == sid {
						continue // this session's own release
					}
				}
				s.forgetRefusal(name) // the next Acquire goes to the transaction at once
				fn()
			}
		}
		if ctx.Err() != nil {
			return
		}
		// The watch ended under us: what happened meanwhile is unknown.
		s.forgetRefusal(name)
		fn()
		after = 0
		if healthy {
			backoff = 50 * time.Millisecond
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
