package simbamysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backends/internal/watch"
)

// DefaultBells is how many candidates' names a [Backend] waits on with a
// bell at once unless [WithBells] says otherwise.
const DefaultBells = 4

// Bell timing: how long a grant is held before its bell is taken (a lease
// released sooner rings nothing, and costs the bell connection nothing), how
// long one GET_LOCK of a waiter blocks before it checks again, the back-off
// of a waiter that finds no holder's bell, and of a holder whose bell a
// waiter holds for the instant of its wake-up, and how long taking a pool
// connection for a bell may take.
const (
	bellHoldAfter  = 3 * time.Millisecond
	bellWaitFor    = 10 // seconds
	bellMinBackoff = 2 * time.Millisecond
	bellMaxBackoff = 250 * time.Millisecond
	bellConnWithin = 200 * time.Millisecond
	bellBatch      = 500 // bells rung and taken in one statement, at most
)

// bellPrefix starts every bell's lock name; bellHolderPrefix, followed by
// its connection id, names the lock that marks a connection as one that
// holds bells (a waiter waits only on a bell such a connection holds, never
// on one another waiter holds for the instant of its wake-up).
const (
	bellPrefix       = "simba:b:"
	bellHolderPrefix = "simba:h:"
)

// bells are the backend's wake-up hints on top of the release poll: while a
// session of the backend holds a lease, one connection of the pool (the
// holding connection, one per backend) holds a named lock, the lease's bell
// (GET_LOCK); a candidate of another backend that waits for the lease blocks
// in GET_LOCK of the bell on a connection of its own, and wakes when the
// holder releases the lease and rings it (RELEASE_LOCK), or when the
// holder's connection ends. A bell is a hint, never ownership: it carries no
// token, and a woken candidate only tries Acquire, which the store decides.
// The poll goes on beneath it, so a bell lost, late or stale costs only
// speed. A server that refuses GET_LOCK (Galera) turns the bells off.
type bells struct {
	b   *Backend
	db  *sql.DB // the pool of their connections: the backend's own, or one of their own
	own bool    // db is the bells' own, closed with them
	max int     // names waited on with a bell at once; 0: none, and nothing held

	off atomic.Bool // the server refused GET_LOCK

	mu      sync.Mutex
	closed  bool
	holds   map[string]holdState // lease name → what the holding connection should do
	wakeAt  time.Time            // when the holding loop looks next; zero while it runs
	waiters map[string]*bellWaiter
	kick    chan struct{}
	cancel  context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
	started bool
	logged  bool
}

// holdState is one lease of the backend's sessions, as its bell stands.
type holdState struct {
	session string
	since   time.Time // when it was granted
	held    bool      // the holding connection holds its bell
}

// withBellDB gives the bells a pool of their own, db, which they close, and
// turns them on ([DefaultBells] unless WithBells says otherwise): what Open
// does, for backends that tests make with New.
func withBellDB(db *sql.DB) Option { return func(o *options) { o.bellDB = db } }

// newBells returns the bells of b, at most max names waited on at once, on
// connections of db, which they close if own.
func newBells(b *Backend, db *sql.DB, own bool, max int) *bells {
	ctx, cancel := context.WithCancel(context.Background())
	return &bells{b: b, db: db, own: own, max: max, holds: map[string]holdState{}, waiters: map[string]*bellWaiter{},
		kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// on reports whether the bells are in use.
func (bs *bells) on() bool { return bs.max > 0 && !bs.off.Load() }

// bellName is the lock name of lease name's bell: the lock namespace is the
// server's, so it covers the database and the prefix, and a digest keeps
// it within MySQL's 64 characters and free of quoting.
func (bs *bells) bellName(db, name string) string {
	h := sha256.Sum256([]byte(db + "\x00" + bs.b.prefix + "\x00" + name))
	return bellPrefix + hex.EncodeToString(h[:20])
}

// held records that session holds lease name: its bell is taken
// bellHoldAfter from now unless it is released before.
func (bs *bells) held(session, name string) {
	if !bs.on() {
		return
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.closed {
		return
	}
	if h, ok := bs.holds[name]; ok && h.session == session {
		return // a retry of the grant
	}
	h := bs.holds[name]
	h.session, h.since = session, time.Now()
	bs.holds[name] = h // a bell already held stays held
	bs.start()
	if bs.wakeAt.IsZero() || bs.wakeAt.After(h.since.Add(bellHoldAfter)) {
		bs.poke() // the loop would look too late
	}
}

// released records that session released lease name: its bell rings.
func (bs *bells) released(session, name string) {
	if !bs.on() {
		return
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if h, ok := bs.holds[name]; ok && h.session == session {
		h.session = ""
		bs.holds[name] = h
		if h.held {
			bs.poke() // a bell not taken yet is forgotten at the loop's next look
		}
	}
}

// ended records that session ended (closed, or found expired): every bell
// of its leases rings.
func (bs *bells) ended(session string) {
	if !bs.on() {
		return
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for name, h := range bs.holds {
		if h.session == session {
			h.session = ""
			bs.holds[name] = h
			if h.held {
				bs.poke()
			}
		}
	}
}

// poke wakes the holding loop. bs.mu is held.
func (bs *bells) poke() {
	select {
	case bs.kick <- struct{}{}:
	default:
	}
}

// start starts the holding loop once. bs.mu is held.
func (bs *bells) start() {
	if bs.started || bs.closed {
		return
	}
	bs.started = true
	bs.wg.Add(1)
	go bs.holdLoop()
}

// close stops the loops and waits for them; the connections they close
// release every bell.
func (bs *bells) close() {
	bs.mu.Lock()
	bs.closed = true
	bs.cancel()
	for _, w := range bs.waiters {
		w.cancel()
	}
	bs.mu.Unlock()
	bs.wg.Wait()
	if bs.own {
		bs.db.Close()
	}
}

// refused turns the bells off after the server refused GET_LOCK.
func (bs *bells) refused(err error) {
	bs.off.Store(true)
	bs.mu.Lock()
	logged := bs.logged
	bs.logged = true
	bs.mu.Unlock()
	if !logged {
		bs.b.logger.Warn("simbamysql: the server refuses named locks (GET_LOCK); candidates learn of releases by the poll alone",
			slog.String("prefix", bs.b.prefix), slog.Any("err", err))
	}
}

// errNotSupportedYet is ER_NOT_SUPPORTED_YET, Galera's answer to GET_LOCK.
const errNotSupportedYet = 1235

// refusal reports an error saying that the server does not support named
// locks.
func refusal(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errNotSupportedYet
}

// bellConn is a pool connection given to bells, with its id and database.
type bellConn struct {
	c  *sql.Conn
	id int64
	db string
}

// bellReleaseWithin bounds the statement that gives a bell connection's
// locks back when the bells stop with it.
const bellReleaseWithin = 250 * time.Millisecond

// release gives back the locks of a bell connection that the bells no longer
// use, and the connection to its pool. The statement is bounded: if the link
// went silent, its context ends it, and go-sql-driver then closes the
// connection without a word — where a connection returned idle would be
// closed later with COM_QUIT, a write that waits without a deadline unless
// the DSN sets writeTimeout, and would hold up Backend.Close (or the pool's
// Close). A connection that answers goes back to the pool holding nothing,
// so that no bell of a lease stays taken by an idle connection of the
// caller's pool.
func (bc *bellConn) release() {
	ctx, cancel := context.WithTimeout(context.Background(), bellReleaseWithin)
	defer cancel()
	if _, err := bc.c.ExecContext(ctx, "DO RELEASE_ALL_LOCKS()"); err != nil {
		bc.c.Raw(func(any) error { return driver.ErrBadConn }) // not back to the pool
	}
	bc.c.Close()
}

// takeConn takes a connection of the pool for bells, if the pool can spare
// one quickly, and marks it as a holding connection if holder.
func (bs *bells) takeConn(ctx context.Context, holder bool) (*bellConn, error) {
	cctx, cancel := context.WithTimeout(ctx, bellConnWithin)
	defer cancel()
	c, err := bs.db.Conn(cctx)
	if err != nil {
		return nil, err
	}
	if !bs.own {
		// The connection taken from the backend's pool may have been its
		// only idle one: leave another in its place, so that the next call
		// of a session is less likely to pay for a dial.
		if spare, err := bs.db.Conn(cctx); err == nil {
			spare.Close()
		}
	}
	bc := &bellConn{c: c}
	q := "SELECT CONNECTION_ID(), COALESCE(DATABASE(), '')"
	if holder {
		q = "SELECT CONNECTION_ID(), COALESCE(DATABASE(), ''), GET_LOCK(CONCAT('" + bellHolderPrefix + "', CONNECTION_ID()), 0)"
	}
	var mark sql.NullInt64
	dest := []any{&bc.id, &bc.db}
	if holder {
		dest = append(dest, &mark)
	}
	err = scanRow(ctx, c, q, dest...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		err = errors.New("no reply")
	case err == nil && holder && mark.Int64 != 1:
		err = errors.New("the holding connection's mark is taken")
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return bc, nil
}

// holdLoop keeps the holding connection's bells as holds says: it takes the
// bell of each lease held for bellHoldAfter, and rings those released, all
// in one statement per turn. It keeps a connection only while it holds a
// bell.
func (bs *bells) holdLoop() {
	defer bs.wg.Done()
	var (
		conn    *bellConn
		backoff = bellMinBackoff
		timer   = time.NewTimer(time.Hour)
		retry   time.Time // when a bell that could not be taken is tried again
	)
	defer timer.Stop()
	defer func() {
		if conn != nil {
			conn.release()
		}
	}()
	for {
		// What to ring, what to take now, and when to look again.
		now := time.Now()
		var ring, take []string
		next := time.Time{}
		bs.mu.Lock()
		bs.wakeAt = time.Time{} // running: held pokes again meanwhile
		for name, h := range bs.holds {
			switch {
			case h.session == "" && h.held:
				ring = append(ring, name)
			case h.session == "":
				delete(bs.holds, name)
			case !h.held && now.Sub(h.since) >= bellHoldAfter && !now.Before(retry):
				take = append(take, name)
			case !h.held:
				at := h.since.Add(bellHoldAfter)
				if at.Before(retry) {
					at = retry
				}
				if next.IsZero() || at.Before(next) {
					next = at
				}
			}
		}
		idle := len(bs.holds) == 0
		bs.mu.Unlock()
		if len(ring) > bellBatch { // the rest in the next turns
			ring, take = ring[:bellBatch], nil
		} else if len(ring)+len(take) > bellBatch {
			take = take[:bellBatch-len(ring)]
		}

		if idle && conn != nil {
			// Nothing held: the connection goes back to the pool, without
			// its mark.
			ctx, cancel := context.WithTimeout(bs.ctx, pollWithin)
			if _, err := conn.c.ExecContext(ctx, "DO RELEASE_ALL_LOCKS()"); err != nil {
				conn.c.Raw(func(any) error { return driver.ErrBadConn }) // not back to the pool
			}
			cancel()
			conn.c.Close()
			conn = nil
		}
		again := false
		if len(ring)+len(take) > 0 && !bs.off.Load() {
			if conn == nil {
				c, err := bs.takeConn(bs.ctx, true)
				if err != nil {
					if bs.ctx.Err() != nil {
						return
					}
					if refusal(err) {
						bs.refused(err)
					}
					bs.failed(err)
					next, backoff = now.Add(backoff), min(2*backoff, bellMaxBackoff)
					retry = next
					ring, take = nil, nil
				} else {
					conn = c
				}
			}
			if conn != nil {
				busy, err := bs.apply(conn, ring, take)
				switch {
				case err != nil:
					if bs.ctx.Err() != nil {
						return
					}
					conn.release() // its bells with it
					conn = nil
					bs.forgetHeld()
					bs.failed(err)
					retry, backoff = time.Now().Add(backoff), min(2*backoff, bellMaxBackoff)
					next = retry
				case busy:
					retry, backoff = time.Now().Add(backoff), min(2*backoff, bellMaxBackoff)
					next = retry
				default:
					backoff, again = bellMinBackoff, true
				}

			}
		}
		if again {
			continue // see what is left: maybe nothing, and the connection goes back
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), 0)
		}
		bs.mu.Lock()
		bs.wakeAt = time.Now().Add(wait)
		bs.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-bs.ctx.Done():
			return
		case <-bs.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// apply rings and takes bells on the holding connection in one statement,
// and records the outcome; busy reports a bell that another connection holds
// (a waiter, for the instant of its wake-up, or a holder that lost the
// lease and does not know it yet), to be tried again.
func (bs *bells) apply(conn *bellConn, ring, take []string) (busy bool, err error) {
	var q strings.Builder
	q.WriteString("SELECT ")
	for i, name := range ring {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("RELEASE_LOCK('" + bs.bellName(conn.db, name) + "')")
	}
	for i, name := range take {
		if i > 0 || len(ring) > 0 {
			q.WriteString(", ")
		}
		q.WriteString("GET_LOCK('" + bs.bellName(conn.db, name) + "', 0)")
	}
	ctx, cancel := context.WithTimeout(bs.ctx, pollWithin)
	defer cancel()
	got := make([]sql.NullInt64, len(ring)+len(take))
	dest := make([]any, len(got))
	for i := range got {
		dest[i] = &got[i]
	}
	if err := scanRow(ctx, conn.c, q.String(), dest...); err != nil {
		if refusal(err) {
			bs.refused(err)
		}
		return false, err
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, name := range ring {
		if h, ok := bs.holds[name]; ok && h.session == "" {
			delete(bs.holds, name)
		} else if ok {
			h.held = false // granted again meanwhile: taken again in the next turn
			bs.holds[name] = h
		}
	}
	for i, name := range take {
		h, ok := bs.holds[name]
		if got[len(ring)+i].Int64 != 1 {
			busy = true
			continue
		}
		if ok {
			h.held = true
			bs.holds[name] = h
			if h.session == "" {
				bs.poke() // released meanwhile: ring it next
			}
		}
	}
	return busy, nil
}

// forgetHeld records that the holding connection is gone, and its bells
// with it.
func (bs *bells) forgetHeld() {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for name, h := range bs.holds {
		h.held = false
		bs.holds[name] = h
	}
}

// failed logs a bell connection's failure at debug level: the poll carries
// on.
func (bs *bells) failed(err error) {
	bs.b.logger.Debug("simbamysql: bell connection failed; the poll carries on",
		slog.String("prefix", bs.b.prefix), slog.Any("err", err))
}

// watch starts a waiter on name's bell for fn, unless max waiters run
// already (the poll alone serves the others), and returns its stop.
func (bs *bells) watch(name string, fn func()) (stop func()) {
	if !bs.on() {
		return func() {}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.closed {
		return func() {}
	}
	w := bs.waiters[name]
	if w == nil {
		if len(bs.waiters) >= bs.max {
			return func() {}
		}
		ctx, cancel := context.WithCancel(bs.ctx)
		w = &bellWaiter{bs: bs, name: name, cancel: cancel}
		bs.waiters[name] = w
		bs.wg.Add(1)
		go w.run(ctx)
	}
	w.users++
	stopWatch := w.fns.Add(name, fn)
	var once sync.Once
	return func() {
		once.Do(func() {
			stopWatch()
			bs.mu.Lock()
			defer bs.mu.Unlock()
			if w.users--; w.users == 0 {
				w.cancel() // ends its GET_LOCK: its connection is closed
				if bs.waiters[name] == w {
					delete(bs.waiters, name)
				}
			}
		})
	}
}

// bellWaiter waits on one lease's bell, on a connection of its own.
type bellWaiter struct {
	bs     *bells
	name   string
	cancel context.CancelFunc
	users  int // watches of the name (bs.mu)
	fns    watch.Registry
}

// run arms the bell — only when a holding connection holds it — then blocks
// in GET_LOCK; when it gets the lock it gives it back in the same statement
// and calls the watches. It ends when its watches stop or the backend
// closes.
func (w *bellWaiter) run(ctx context.Context) {
	defer w.bs.wg.Done()
	defer w.cancel()
	backoff := bellMinBackoff
	var conn *bellConn
	defer func() {
		if conn != nil {
			conn.release()
		}
	}()
	sleep := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(backoff*3/2, bellMaxBackoff) // gently: a holder takes its bell bellHoldAfter after its grant
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	var armed, rang string
	for ctx.Err() == nil && w.bs.on() {
		if conn == nil {
			c, err := w.bs.takeConn(ctx, false)
			if err != nil {
				if ctx.Err() == nil {
					w.bs.failed(err)
				}
				if !sleep() {
					return
				}
				continue
			}
			conn = c
			bell := w.bs.bellName(c.db, w.name)
			armed = "SELECT COALESCE(IS_USED_LOCK('" + bell + "') = IS_USED_LOCK(CONCAT('" + bellHolderPrefix + "', IS_USED_LOCK('" + bell + "'))), FALSE)"
			rang = "SELECT GET_LOCK('" + bell + "', " + strconv.Itoa(bellWaitFor) + ") AND RELEASE_LOCK('" + bell + "')"
		}
		var ok sql.NullBool
		err := scanRow(ctx, conn.c, armed, &ok)
		if err == nil && !ok.Bool {
			// No holder rings it (the lease is free, its holder's backend
			// has no bells, or a waiter holds it for an instant): look again
			// later; the poll serves meanwhile.
			if !sleep() {
				return
			}
			continue
		}
		if err == nil {
			err = scanRow(ctx, conn.c, rang, &ok)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if refusal(err) {
				w.bs.refused(err)
				return
			}
			conn.release()
			conn = nil
			w.bs.failed(err)
			if !sleep() {
				return
			}
			continue
		}
		backoff = bellMinBackoff
		if ok.Bool {
			w.fns.FireFrom("", w.name)
		}
	}
}
