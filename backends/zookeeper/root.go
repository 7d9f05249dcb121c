package simbazk

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// layoutVersion is written in the root nodes this version creates; a root
// of layoutV1, written by earlier versions (no queues), is used as it is,
// without reservations (queue.go), so that those versions' clients, which
// do not see queues, may share it; a root of any other layout is refused
// with ErrLayout.
const (
	layoutVersion = "simbazk 2"
	layoutV1      = "simbazk 1"
)

// generation is what a session needs from the root node: the root's
// creation zxid (which identifies it: a root deleted and created again is
// another generation), the token base and the amnesia guard's end.
type generation struct {
	czxid    int64
	ctime    int64     // ms: with czxid, tells a root created again after a loss from the one before
	queues   bool      // the root's layout has queues: sessions reserve (queue.go)
	base     int64     // tokens are base + czxid
	guardEnd time.Time // on the store's clock: no grants before
}

// rootData is the root node's data: the layout version, the guard and the
// token floor its creator chose.
func rootData(guard time.Duration, floor int64) []byte {
	return fmt.Appendf(nil, "%s\nguard=%d\nfloor=%d\n", layoutVersion, guard.Milliseconds(), floor)
}

// parseGeneration reads a root node's data and Stat.
func (b *Backend) parseGeneration(data []byte, st *zk.Stat) (generation, error) {
	lines := strings.Split(string(data), "\n")
	if len(lines) == 0 || lines[0] != layoutVersion && lines[0] != layoutV1 {
		first := lines[0]
		if len(first) > 40 {
			first = first[:40] + "…"
		}
		return generation{}, fmt.Errorf("simbazk: root %s holds %q, not this package's layout %q: %w",
			b.root, first, layoutVersion, ErrLayout)
	}
	var guard, floor int64
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "guard":
			guard = n
		case "floor":
			floor = n
		}
	}
	g := generation{czxid: st.Czxid, ctime: st.Ctime, queues: lines[0] == layoutVersion}
	// Tokens: the root's creation time in nanoseconds of the store's clock,
	// or the floor its creator knew, plus the lease node's czxid.
	g.base = max(st.Ctime*int64(time.Millisecond), floor)
	wait := max(time.Duration(guard)*time.Millisecond, b.maxLease)
	g.guardEnd = time.UnixMilli(st.Ctime).Add(wait)
	return g, nil
}

// ensureNode makes a node of the layout exist on conn: create makes it,
// once more after ensureLayout if its parent is gone (a root ZooKeeper
// lost, or deleted); a node already there is no error.
func (b *Backend) ensureNode(conn *zk.Conn, create func() error) error {
	err := create()
	if errors.Is(err, zk.ErrNoNode) {
		if err = b.ensureLayout(conn); err == nil {
			err = create()
		}
	}
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// ensureLayout creates the root, its parents and its children where
// missing, on conn. The root and its children are created in one multi, so
// that a root exists only with its layout; its data records the guard and
// the token floor (the highest token this process has seen, in case the
// store lost a root it knew).
func (b *Backend) ensureLayout(conn *zk.Conn) error {
	p := b.paths
	for i := 1; i < len(b.root); i++ {
		if b.root[i] == '/' {
			if _, err := conn.Create(b.root[:i], nil, zk.FlagPersistent, b.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return err
			}
		}
	}
	_, err := conn.Multi(
		&zk.CreateRequest{Path: b.root, Data: rootData(b.maxLease, b.highest.Load()+1), Acl: b.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: p.sessions(), Acl: b.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: p.leases(), Acl: b.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: p.queues(), Acl: b.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: p.values(), Acl: b.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: p.groups(), Acl: b.acl, Flags: zk.FlagPersistent},
		&zk.CreateRequest{Path: p.clock(), Acl: b.acl, Flags: zk.FlagPersistent},
	)
	if err == nil {
		b.logger.Warn("simbazk: created the root; no lease is granted until the amnesia guard has passed, in case it replaces a root ZooKeeper lost",
			slog.String("root", b.root), slog.Duration("guard", b.maxLease))
		return nil
	}
	if !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	// The root exists: create any child someone deleted.
	for _, path := range []string{p.sessions(), p.leases(), p.queues(), p.values(), p.groups(), p.clock()} {
		if _, err := conn.Create(path, nil, zk.FlagPersistent, b.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// generationOf returns the generation of the root whose clock node has the
// Stat clock (created with the root, so with its czxid and ctime), reading
// the root on conn unless the cached one matches.
func (b *Backend) generationOf(conn *zk.Conn, clock *zk.Stat) (generation, error) {
	b.mu.Lock()
	g := b.gen
	b.mu.Unlock()
	if g.czxid == clock.Czxid && g.ctime == clock.Ctime && clock.Czxid != 0 {
		return g, nil
	}
	data, st, err := conn.Get(b.root)
	if err != nil {
		return generation{}, err
	}
	g, err = b.parseGeneration(data, st)
	if err != nil {
		return generation{}, err
	}
	if g.czxid != clock.Czxid {
		return generation{}, fmt.Errorf("the root %s was created again while a session opened; try again", b.root)
	}
	b.mu.Lock()
	b.gen = g
	b.mu.Unlock()
	return g, nil
}

// noteToken raises the highest token seen.
func (b *Backend) noteToken(t int64) {
	for {
		h := b.highest.Load()
		if t <= h || b.highest.CompareAndSwap(h, t) {
			return
		}
	}
}
