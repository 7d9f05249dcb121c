package bench

import (
	"context"
	"errors"
	"fmt"
	gonet "net"
	"path"
	"time"

	"github.com/go-zookeeper/zk"
)

// The ZooKeeper row: go-zookeeper's lock recipe (zk.NewLock) on the shared
// ZooKeeper. Each node is one zk.Conn with a 2 s session timeout (the
// server, whose tickTime is 500 ms, grants it as asked), so the driver
// pings every third of it (667 ms) and the server expires a silent session
// within [2 s, 2 s + zkTickTime]. The lock is the recipe's: an ephemeral sequential
// node under the lock's path, the children listed, and, if an older node
// exists, a watch on the one just before it. Everything else is
// go-zookeeper's default.
type zkLockTarget struct {
	servers []string
	root    string
	admin   *zk.Conn // for the raw pair and the cleanup
}

func zkLockRow(ctx context.Context, env *Env) (Target, error) {
	if err := reachable("ZooKeeper", env.ZooKeeper[0]); err != nil {
		return nil, err
	}
	c, err := zkConnect(env.ZooKeeper, nil)
	if err != nil {
		return nil, err
	}
	root := "/" + unique("zklock")
	if _, err := c.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating %s: %w", root, err)
	}
	return &zkLockTarget{servers: env.ZooKeeper, root: root, admin: c}, nil
}

// zkConnect connects with a 2 s session timeout, through net if it is not
// nil, and waits until the session is established.
func zkConnect(servers []string, net *NodeNet) (*zk.Conn, error) {
	dial := zk.Dialer(gonet.DialTimeout)
	if net != nil {
		dial = net.DialTimeout
	}
	c, events, err := zk.Connect(servers, Lease, zk.WithDialer(dial), zk.WithLogger(quietZK{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("ZooKeeper: %w", err)
	}
	timeout := time.After(callWithin)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return c, nil
			}
		case <-timeout:
			c.Close()
			return nil, fmt.Errorf("ZooKeeper at %v: no session within %v", servers, callWithin)
		}
	}
}

// quietZK discards go-zookeeper's log lines (a crashed node's reconnects).
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

func (t *zkLockTarget) Framing() Framing { return FramingZooKeeper }

// Raw is Create and Delete of a persistent node: the lock's create and the
// unlock's delete are each one such durable write.
func (t *zkLockTarget) Raw(context.Context) (func(ctx context.Context) error, func(), error) {
	p := t.root + "/raw"
	acl := zk.WorldACL(zk.PermAll)
	return func(context.Context) error {
		if _, err := t.admin.Create(p, nil, 0, acl); err != nil {
			return err
		}
		return t.admin.Delete(p, -1)
	}, func() {}, nil
}

func (t *zkLockTarget) Close() error {
	defer t.admin.Close()
	return zkDeleteAll(t.admin, t.root)
}

// zkDeleteAll deletes p and everything under it.
func zkDeleteAll(c *zk.Conn, p string) error {
	children, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := zkDeleteAll(c, path.Join(p, ch)); err != nil {
			return err
		}
	}
	if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

func (t *zkLockTarget) NewNode(_ context.Context, net *NodeNet) (Node, error) {
	c, err := zkConnect(t.servers, net)
	if err != nil {
		return nil, err
	}
	return &zkLockNode{c: c, net: net, root: t.root}, nil
}

// zkLockNode is one zk.Conn: one ZooKeeper session.
type zkLockNode struct {
	c    *zk.Conn
	net  *NodeNet
	root string
}

// Acquire runs the recipe's Lock, which takes no context: if ctx ends first,
// the Lock goes on in the background (and the node is not reused).
func (n *zkLockNode) Acquire(ctx context.Context, name string) (Held, error) {
	l := zk.NewLock(n.c, n.root+"/"+name, zk.WorldACL(zk.PermAll))
	done := make(chan error, 1)
	go func() { done <- l.Lock() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return zkHeld{l}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// LastRenewal is the last reply from the server: the server resets a
// session's timer on every packet it gets, and each reply proves one got
// through.
func (n *zkLockNode) LastRenewal() time.Time { return n.net.LastReply() }

// RenewalPeriod is go-zookeeper's ping interval: a third of the session
// timeout.
func (n *zkLockNode) RenewalPeriod() time.Duration { return Lease / 3 }

// Close closes the session: the server deletes its ephemeral nodes.
func (n *zkLockNode) Close(context.Context) error {
	n.c.Close()
	return nil
}

type zkHeld struct{ l *zk.Lock }

func (h zkHeld) Release(context.Context) error { return h.l.Unlock() }

// zkTickTime is the shared ZooKeeper's tickTime (scripts/services.sh): a
// session is expired within a tick after its timeout.
const zkTickTime = 500 * time.Millisecond
