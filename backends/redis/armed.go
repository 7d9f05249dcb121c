package simbaredis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// The armed scripts: the guarded scripts (open, keep-alive, owned, acquire)
// without the INFO they read for the amnesia guard, on Redis 7 and later.
//
// A guarded script reads the run id of the Redis process it runs in (INFO)
// and compares it with the one the namespace's meta hash records, so that no
// lease is granted in a process that has not run the guard (a restart, an
// older snapshot, a promoted replica). The armed variant gets the same
// assurance from the script cache instead, which Redis 7 neither persists
// nor replicates (verified on Redis 7.0: a script loaded on a primary is not
// on its replica, and not after a restart with RDB and AOF):
//
//   - Arming a process runs, in one MULTI/EXEC transaction, the guarded
//     check (EVAL with its source, so it cannot fail for a missing script)
//     and SCRIPT LOAD of the armed scripts, whose source carries the run id
//     the check reported just before, as RUN. A transaction runs in one
//     process; the errors that would stop the check (OOM, READONLY, MOVED,
//     ACL) are raised when it is queued and abort it whole (EXECABORT,
//     verified for OOM). So an armed script is in a process's cache only
//     after the guard's check ran in that process.
//   - An armed script hands back (ARM) unless the meta hash records RUN,
//     so it also notices what the guarded script notices within one
//     process: data reloaded from an older snapshot, a namespace that lost
//     its meta hash. The backend then arms again, which runs the check.
//   - A fail-over or a restart empties the cache: EVALSHA fails with
//     NOSCRIPT, and the backend arms the new process.
//
// The renewal scripts keep the guard's other duty, reaping; only INFO goes.
// On Redis before 7, which saves scripts with the data and replicates them,
// the backend never arms and runs the guarded scripts. Armed scripts are
// cached per Redis process, one set per process run, not per client.

// armedSet is the armed scripts of one Redis process run.
type armedSet struct {
	run string
	sha map[*script]string
}

// armed holds a backend's armed scripts, and how to arm.
type armed struct {
	mu      sync.Mutex // serialises arming
	set     atomic.Pointer[armedSet]
	refused atomic.Bool // the server or the client cannot be armed: use the guarded scripts
}

// armedScripts are the scripts with an armed variant.
var armedScripts = []*script{scriptOpen, scriptKeepAlive, scriptOwned, scriptAcquire, scriptAcquireBatch}

// errNoArm reports a server or client that cannot be armed.
var errNoArm = errors.New("cannot arm")

// runArmed runs the armed variant of sc, arming the process first when it
// is not (or no longer) armed. ok is false when the guarded script must run
// instead: a server or client that cannot be armed, or an arming that
// failed (the guarded script then reports what is wrong).
func (b *Backend) runArmed(ctx context.Context, sc *script, argv []any) (res any, ok bool, err error) {
	if b.armed.refused.Load() {
		return nil, false, nil
	}
	for range 2 {
		set := b.armed.set.Load()
		if set == nil {
			if set, err = b.arm(ctx); err != nil {
				return nil, false, nil
			}
		}
		res, err = b.client.EvalSha(ctx, set.sha[sc], b.metaKeys, argv...).Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") || err == nil && reply(asList(res)).status() == "ARM" {
			b.armed.set.CompareAndSwap(set, nil) // another process, or its guard must run: arm again
			continue
		}
		return res, true, err
	}
	return nil, false, nil
}

func asList(res any) []any {
	l, _ := res.([]any)
	return l
}

// arm runs the guarded check in the Redis process that holds the namespace,
// and loads the armed scripts there, in one transaction (see above).
func (b *Backend) arm(ctx context.Context) (*armedSet, error) {
	b.armed.mu.Lock()
	defer b.armed.mu.Unlock()
	if set := b.armed.set.Load(); set != nil {
		return set, nil // armed by another call meanwhile
	}
	node, err := b.armNode(ctx)
	if err != nil {
		return nil, err
	}
	checkArgs := []any{b.baseArg, noSession, b.maxLeaseArg}
	// Which process, and which version?
	first, err := node.Eval(ctx, scriptCheck.src, b.metaKeys, checkArgs...).Result()
	if err != nil {
		return nil, err
	}
	r := reply(asList(first))
	if r.status() != "OK" {
		return nil, fmt.Errorf("check: %v", []any(r))
	}
	if r.int(2) < 7 {
		b.armed.refused.Store(true) // the script cache persists and replicates
		return nil, errNoArm
	}
	set := &armedSet{run: r.str(1), sha: make(map[*script]string, len(armedScripts))}
	pipe := node.TxPipeline()
	check := pipe.Eval(ctx, scriptCheck.src, b.metaKeys, checkArgs...)
	for _, sc := range armedScripts {
		src := strings.Replace(sc.armed, runPlaceholder, set.run, 1)
		sum := sha1.Sum([]byte(src))
		set.sha[sc] = hex.EncodeToString(sum[:])
		pipe.ScriptLoad(ctx, src)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	if r := reply(asList(check.Val())); r.status() != "OK" || r.str(1) != set.run {
		// The process changed between the two calls (a fail-over): what
		// was loaded names another run and hands back. Arm again later.
		return nil, fmt.Errorf("arming: the process changed (%v)", []any(r))
	}
	b.armed.set.Store(set)
	return set, nil
}

// armNode returns a client of the one Redis process that holds the
// namespace, for the arming transaction: the client itself, or the Cluster
// master of the namespace's slot. Other clients (a Ring, a client the
// backend does not know) are not armed.
func (b *Backend) armNode(ctx context.Context) (*redis.Client, error) {
	switch c := b.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, b.keys.meta())
	}
	b.armed.refused.Store(true)
	return nil, errNoArm
}
