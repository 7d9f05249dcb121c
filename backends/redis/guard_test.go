package simbaredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// §15, F5: the amnesia guard covers every namespace of a Redis, not only the
// first to run a script after a restart. Two prefixes share one server, and
// so one script cache: the scripts are the same, the prefix is an argument.
// Redis reloads an older snapshot; namespace a runs its scripts first, and
// loads them into the new process's cache. Namespace b then finds them
// loaded, and must still notice the restart: in each namespace, no lease is
// granted until MaxLease has passed since the restart, the sessions restored
// from the snapshot are ended, and tokens stay above every token issued
// before the restart, including those issued after the snapshot.
func TestAmnesiaEveryNamespace(t *testing.T) {
	srv := startRedis(t)
	admin := newClient(t, srv.Addr)
	const maxLease = 1500 * time.Millisecond
	client := newClient(t, srv.Addr)
	nsA := newBackend(t, client, admin, WithMaxLease(maxLease))
	nsB := newBackend(t, client, admin, WithMaxLease(maxLease)) // each waits for its guard
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	type namespace struct {
		name     string
		b        *Backend
		restored backends.Session // in the snapshot, holding "in-snapshot"
		last     backends.Token   // the last token issued before the restart
	}
	spaces := []*namespace{{name: "a", b: nsA}, {name: "b", b: nsB}}
	for _, ns := range spaces {
		s, _, err := ns.b.OpenSession(ctx, backends.SessionOptions{TTL: maxLease})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Acquire(ctx, "in-snapshot"); err != nil {
			t.Fatal(err)
		}
		ns.restored = s
	}
	if err := admin.Save(ctx).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	// Grants after the snapshot, lost in the restart: their holders still
	// believe they hold "lost" until their local deadlines.
	for _, ns := range spaces {
		s, _, err := ns.b.OpenSession(ctx, backends.SessionOptions{TTL: maxLease})
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.Acquire(ctx, "lost")
		if err != nil {
			t.Fatal(err)
		}
		ns.last = g.Token
	}

	restartAt := time.Now()
	srv.restart() // SHUTDOWN NOSAVE; the new process loads the older dump.rdb
	if n, err := admin.HExists(ctx, nsB.keys.meta(), field(fieldExpiry, string(spaces[1].restored.ID()))).Result(); err != nil || !n {
		t.Fatalf("b's session after the reload: on record = %v, %v; want the snapshot loaded", n, err)
	}

	// Namespace a first: it loads the scripts into the new process.
	sessions := make([]backends.Session, len(spaces))
	for i, ns := range spaces {
		s, _, err := ns.b.OpenSession(ctx, backends.SessionOptions{TTL: maxLease})
		if err != nil {
			t.Fatalf("namespace %s: OpenSession after the restart: %v", ns.name, err)
		}
		defer s.Close(ctx)
		sessions[i] = s
		if _, err := s.Acquire(ctx, "lost"); !errors.Is(err, backends.ErrRecovering) {
			t.Errorf("namespace %s: Acquire of a lease granted after the snapshot, %v after the restart = %v; "+
				"want ErrRecovering (§15)", ns.name, time.Since(restartAt), err)
		}
	}
	for _, ns := range spaces {
		if _, err := ns.restored.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("namespace %s: KeepAlive of a session restored from the snapshot = %v; want ErrSessionExpired", ns.name, err)
		}
	}

	// Each namespace grants again once MaxLease has passed since the
	// restart, and not before.
	granted := make([]bool, len(spaces))
	for done := 0; done < len(spaces); {
		for i, ns := range spaces {
			if granted[i] {
				continue
			}
			g, err := sessions[i].Acquire(ctx, "lost")
			if err != nil {
				if !errors.Is(err, backends.ErrRecovering) {
					t.Fatalf("namespace %s: Acquire during the guard = %v; want ErrRecovering", ns.name, err)
				}
				if _, err := sessions[i].KeepAlive(ctx); err != nil {
					t.Fatal(err)
				}
				continue
			}
			granted[i] = true
			done++
			if since := time.Since(restartAt); since < maxLease {
				t.Errorf("namespace %s: Acquire succeeded %v after the restart; want no grant before MaxLease %v (§15)", ns.name, since, maxLease)
			}
			if g.Token <= ns.last {
				t.Errorf("namespace %s: token after the restart %d; want > %d, the last before it (F5, §15)", ns.name, g.Token, ns.last)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}
