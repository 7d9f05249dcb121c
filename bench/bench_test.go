package bench

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testkit/testservers"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // a crashed node's failed dials
	os.Exit(m.Run())
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// TestSmoke runs every row of the table once, with QuickOptions: every
// measurement of every implementation runs (a couple of hand-offs, one
// crash fail-over, requests per renewal with 1 and 3 leases, a few
// acquire+release pairs), so that the comparison keeps compiling and
// working. The figures mean nothing at these sizes and are not checked,
// except that each was produced, and that a fail-over took a good part of
// the lease (a crash that stopped nothing would show at once). The rows run
// at once, each in a namespace of its own (a dozen seconds in all), and are
// then checked one subtest each. A row whose shared server is missing is
// skipped, or fails under CI=true or SIMBA_REQUIRE_SERVICES (the rule of
// internal/testkit/testservers).
func TestSmoke(t *testing.T) {
	env := NewEnv()
	defer env.Close()
	if _, err := exec.LookPath("redis-server"); err != nil {
		env.RedisAddr = testservers.Redis(t) // no private Redis: the shared one
	}
	o := QuickOptions()
	impls := Impls()
	rows := make([]Row, len(impls))
	var wg sync.WaitGroup
	for i, im := range impls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rows[i] = Run(ctx, env, []Impl{im}, o)[0]
		})
	}
	wg.Wait()
	for i, im := range impls {
		t.Run(im.Name+" on "+im.Store, func(t *testing.T) {
			switch im.Store {
			case "ZooKeeper":
				testservers.ZooKeeper(t)
			case "PostgreSQL":
				testservers.Postgres(t)
			}
			r := rows[i]
			if r.Skipped != "" {
				t.Fatalf("not run: %s", r.Skipped)
			}
			for _, e := range r.Errors {
				t.Error(e)
			}
			if len(r.HandOff) != o.HandOffs {
				t.Errorf("%d hand-offs measured; want %d", len(r.HandOff), o.HandOffs)
			}
			if len(r.FailOver) != o.FailOvers {
				t.Errorf("%d fail-overs measured; want %d", len(r.FailOver), o.FailOvers)
			}
			for _, f := range r.FailOver {
				if f < 0.5 {
					t.Errorf("a fail-over took %.2f × the lease from the holder's last renewal; a crashed holder's lease lasts longer", f)
				}
			}
			for _, n := range o.Sizes {
				if v, ok := r.PerRenewal[n]; !ok || v <= 0 {
					t.Errorf("requests per renewal with %d leases: %v, %v; want a positive count", n, v, ok)
				}
			}
			if len(r.AcqRel) != o.Rounds*o.Pairs || len(r.Raw) != len(r.AcqRel) {
				t.Errorf("%d acquire+release and %d raw pairs timed; want %d each", len(r.AcqRel), len(r.Raw), o.Rounds*o.Pairs)
			}
			if im.Store == "Redis" && r.CPU <= 0 {
				t.Errorf("Redis CPU per pair %v; want it measured", r.CPU)
			}
		})
	}
}
