package fencingtest

import (
	"context"
	"crypto/rand"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// The broken twins of the recipes in pgfence and redisfence: each reads the
// highest token in one round trip and writes in another, the mistake F2
// warns about. The round trip between them is the window, widened by a yield
// so that it stays open when the tests run with one P (GOMAXPROCS=1 under
// -race, where writers otherwise tend to run one after another). The kit must
// catch both every time.

// pgReadThenWrite keeps the resource in a row of its own table.
type pgReadThenWrite struct {
	db    *pgxpool.Pool
	table string
}

func (r pgReadThenWrite) Write(ctx context.Context, token backends.Token, v []byte) error {
	if err := fencing.CheckToken(token); err != nil {
		return err
	}
	var highest int64
	err := r.db.QueryRow(ctx, "SELECT fencing_token FROM "+r.table+" WHERE id = 1").Scan(&highest)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if int64(token) < highest {
		return fencing.StaleError(token, backends.Token(highest))
	}
	runtime.Gosched() // the window between the read and the write, even with one P
	_, err = r.db.Exec(ctx, "INSERT INTO "+r.table+" (id, fencing_token, value) VALUES (1, $1, $2) "+
		"ON CONFLICT (id) DO UPDATE SET fencing_token = excluded.fencing_token, value = excluded.value", int64(token), v)
	return err
}

func (r pgReadThenWrite) Read(ctx context.Context) ([]byte, backends.Token, error) {
	var (
		v   []byte
		tok int64
	)
	err := r.db.QueryRow(ctx, "SELECT value, fencing_token FROM "+r.table+" WHERE id = 1").Scan(&v, &tok)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	return v, backends.Token(tok), err
}

func newPGReadThenWrite(t testing.TB) fencing.Resource {
	p, err := pgxpool.New(context.Background(), testservers.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	table := "fencingtest_broken_" + strings.ToLower(rand.Text()[:10])
	if _, err := p.Exec(t.Context(), "CREATE TABLE "+table+" (id int PRIMARY KEY, fencing_token bigint NOT NULL, value bytea)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Exec(context.Background(), "DROP TABLE "+table) })
	return pgReadThenWrite{p, table}
}

// redisReadThenWrite keeps the resource in two keys of its own.
type redisReadThenWrite struct {
	c      *redis.Client
	prefix string
}

func (r redisReadThenWrite) Write(ctx context.Context, token backends.Token, v []byte) error {
	if err := fencing.CheckToken(token); err != nil {
		return err
	}
	s, err := r.c.Get(ctx, r.prefix+"token").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	highest, _ := strconv.ParseInt(s, 10, 64)
	if int64(token) < highest {
		return fencing.StaleError(token, backends.Token(highest))
	}
	runtime.Gosched() // the window between the read and the write, even with one P
	return r.c.MSet(ctx, r.prefix+"token", int64(token), r.prefix+"value", v).Err()
}

func (r redisReadThenWrite) Read(ctx context.Context) ([]byte, backends.Token, error) {
	vals, err := r.c.MGet(ctx, r.prefix+"token", r.prefix+"value").Result()
	if err != nil {
		return nil, 0, err
	}
	s, _ := vals[0].(string)
	v, _ := vals[1].(string)
	tok, _ := strconv.ParseInt(s, 10, 64)
	if tok == 0 {
		return nil, 0, nil
	}
	return []byte(v), backends.Token(tok), nil
}

func newRedisReadThenWrite(t testing.TB) fencing.Resource {
	c := redis.NewClient(&redis.Options{Addr: testservers.Redis(t), MaxRetries: 1})
	t.Cleanup(func() { c.Close() })
	prefix := "simba-test:fencingtest-broken:{" + rand.Text()[:10] + "}:"
	t.Cleanup(func() { c.Del(context.Background(), prefix+"token", prefix+"value") })
	return redisReadThenWrite{c, prefix}
}

func TestKitCatchesReadThenWriteOnServers(t *testing.T) {
	const k = 10
	for _, c := range []struct {
		name  string
		new   func(testing.TB) fencing.Resource
		check func(testing.TB) // the server is there (with the real t: fails under make test)
	}{
		{"PostgreSQL", newPGReadThenWrite, func(t testing.TB) { testservers.Postgres(t) }},
		{"Redis", newRedisReadThenWrite, func(t testing.TB) { testservers.Redis(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.check(t)
			caught := 0
			for range k {
				failures := runCheck(t, checkAtomic, c.new)
				switch {
				case len(failures) == 0:
				case strings.Contains(failures[0], "not one atomic step (F2)"):
					caught++
				default:
					t.Fatalf("the check failed for another reason: %s", failures[0])
				}
			}
			t.Logf("caught %d/%d", caught, k)
			if caught != k {
				t.Errorf("AtomicCheckAndWrite caught the read-then-write %s resource %d/%d times; want %d/%d", c.name, caught, k, k, k)
			}
		})
	}
}
