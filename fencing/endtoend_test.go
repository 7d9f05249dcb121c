package fencing_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/fencing/pgfence"
	"github.com/simba-go/simba/fencing/redisfence"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// F1, E2, §11 "leader paused longer than the lease": node A checks its term,
// then pauses between the check and its write (a handshake stands in for
// the pause, since a SIGSTOP cannot be timed to land there). Meanwhile its
// session expires in the backend, node B takes the lease over and writes.
// When A resumes, its write carries its older token and every recipe
// refuses it: nothing stale lands.
func TestPausedHolderIsFencedOff(t *testing.T) {
	recipes := map[string]func(t *testing.T) fencing.Resource{
		"in-process": func(*testing.T) fencing.Resource { return &fencing.Cell{} },
		"postgres": func(t *testing.T) fencing.Resource {
			pool, err := pgxpool.New(t.Context(), testservers.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			name := "fencing_e2e_" + strings.ToLower(rand.Text()[:10])
			table, err := pgfence.New(pool, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := table.CreateTable(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+name) })
			return table.Resource("ledger")
		},
		"redis": func(t *testing.T) fencing.Resource {
			client := redis.NewClient(&redis.Options{Addr: testservers.Redis(t)})
			t.Cleanup(func() { _ = client.Close() })
			prefix := "fencing-e2e-" + rand.Text()[:10] + ":"
			store, err := redisfence.New(client, prefix)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = client.Del(context.Background(), prefix+"{ledger}:token", prefix+"{ledger}:value").Err()
			})
			return store.Resource("ledger")
		},
	}
	for name, newResource := range recipes {
		t.Run(name, func(t *testing.T) {
			res := newResource(t)
			ctx := t.Context()
			store := memory.New()
			cfg := runtime.ConfigFor(2 * time.Second)
			a, err := runtime.NewClient(store, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close(context.Background())
			b, err := runtime.NewClient(store, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close(context.Background())

			termA, err := a.Lock(ctx, "ledger")
			if err != nil {
				t.Fatal(err)
			}
			checked, resume, wrote := make(chan struct{}), make(chan struct{}), make(chan error)
			go func() { // node A's step
				if err := termA.EnsureValid(time.Second); err != nil {
					wrote <- err
					return
				}
				close(checked)
				<-resume // paused between the check and the write
				wrote <- res.Write(ctx, termA.Token(), []byte("written by A"))
			}()
			<-checked

			// A's session expires behind its back; B takes over and writes.
			store.Faults().ExpireSession(a.Snapshot().Session)
			termB, err := b.Lock(ctx, "ledger")
			if err != nil {
				t.Fatal(err)
			}
			if termB.Token() <= termA.Token() {
				t.Fatalf("B's token %d is not above A's %d", termB.Token(), termA.Token())
			}
			if err := res.Write(ctx, termB.Token(), []byte("written by B")); err != nil {
				t.Fatalf("B's write: %v", err)
			}

			close(resume)
			err = <-wrote
			if !errors.Is(err, fencing.ErrStaleToken) {
				t.Fatalf("A's stale write = %v, want ErrStaleToken", err)
			}
			v, tok, err := res.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(v) != "written by B" || tok != termB.Token() {
				t.Fatalf("resource holds %q with token %d, want B's write with token %d", v, tok, termB.Token())
			}
		})
	}
}
