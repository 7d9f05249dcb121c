package bench

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// NodeNet is one node's network path to its store: every connection the node
// makes goes through its dialer, which counts the requests the node writes
// (with the store's wire framing) and lets the harness blackhole the node, as
// a crash or a dropped route would. It is safe for concurrent use.
type NodeNet struct {
	link    *faultnet.Link
	framing Framing

	requests  atomic.Int64
	lastReply atomic.Int64 // Unix ns of the last read that returned data

	mu       sync.Mutex
	commands map[string]int64 // RESP: requests by command name
}

// Commands returns the requests counted so far by command name, where the
// framing names them (RESP), or nil.
func (n *NodeNet) Commands() map[string]int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.commands == nil {
		return nil
	}
	m := make(map[string]int64, len(n.commands))
	for k, v := range n.commands {
		m[k] = v
	}
	return m
}

// newNodeNet returns a NodeNet that is up and counts requests with f.
func newNodeNet(f Framing) *NodeNet {
	return &NodeNet{link: faultnet.New(), framing: f}
}

// Dial dials addr through the node's path. Its signature is go-redis's and
// pgx's dialer.
func (n *NodeNet) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := n.link.Dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: n, counter: n.framing.newCounter()}, nil
}

// DialTimeout is Dial bounded by timeout. Its signature is go-zookeeper's
// dialer.
func (n *NodeNet) DialTimeout(network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return n.Dial(ctx, network, addr)
}

// GRPCDial is Dial in the shape of grpc.WithContextDialer.
func (n *NodeNet) GRPCDial(ctx context.Context, addr string) (net.Conn, error) {
	return n.Dial(ctx, "tcp", addr)
}

// Requests returns the number of requests the node has sent so far: counted
// on its connections by the framing, plus those added with [NodeNet.Add].
func (n *NodeNet) Requests() int64 { return n.requests.Load() }

// Add counts k requests that the framing cannot see (etcd's, counted by a
// gRPC interceptor).
func (n *NodeNet) Add(k int64) { n.requests.Add(k) }

// LastReply returns when the store last sent the node anything, or the zero
// Time.
func (n *NodeNet) LastReply() time.Time {
	ns := n.lastReply.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Crash blackholes the node: its connections stay open but nothing gets
// through any more, in either direction, and new dials wait.
func (n *NodeNet) Crash() { n.link.Blackhole() }

// Cut closes the node's connections and refuses new ones: used to end a
// crashed node quickly.
func (n *NodeNet) Cut() { n.link.Cut() }

// countingConn counts the requests written on one connection.
type countingConn struct {
	net.Conn
	n *NodeNet

	mu      sync.Mutex
	counter requestCounter
}

func (c *countingConn) Write(p []byte) (int, error) {
	k, err := c.Conn.Write(p)
	if k > 0 && c.counter != nil {
		c.mu.Lock()
		reqs := c.counter.feed(p[:k])
		var names []string
		if cn, ok := c.counter.(commandNamer); ok {
			names = cn.names()
		}
		c.mu.Unlock()
		if len(names) > 0 {
			c.n.mu.Lock()
			if c.n.commands == nil {
				c.n.commands = map[string]int64{}
			}
			for _, name := range names {
				c.n.commands[name]++
			}
			c.n.mu.Unlock()
		}
		if reqs > 0 {
			c.n.requests.Add(int64(reqs))
		}
	}
	return k, err
}

func (c *countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	if k > 0 {
		c.n.lastReply.Store(time.Now().UnixNano())
	}
	return k, err
}
