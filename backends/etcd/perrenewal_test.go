package simbaetcd

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/simba-go/simba/backends"
)

// countingClient returns a client of s that counts every request it sends
// (unary calls, and each message sent on a stream), closed when the test
// ends.
func countingClient(t *testing.T, s *server, n *atomic.Int64) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + s.client}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
				cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				n.Add(1)
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
				method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				st, err := streamer(ctx, desc, cc, method, opts...)
				return countedStream{st, n}, err
			}),
		}})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

type countedStream struct {
	grpc.ClientStream
	n *atomic.Int64
}

func (s countedStream) SendMsg(m any) error {
	s.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// S1: a renewal is one request whatever the number of leases held, while
// nothing is written to etcd; when something was, one more (the digest's
// read), and the digest still says what the session holds.
func TestRequestsPerRenewal(t *testing.T) {
	srv := startServer(t) // private: nobody else writes to it
	var n atomic.Int64
	b := newBackend(t, countingClient(t, srv, &n))
	other := newClient(t, nil, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, held := range []int{1, 100} {
		t.Run(fmt.Sprint(held), func(t *testing.T) {
			s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: testTTL})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			var last backends.Digest
			for i := range held {
				g, err := s.Acquire(ctx, fmt.Sprintf("held-%d-%d", held, i))
				if err != nil {
					t.Fatal(err)
				}
				last = g.Digest
			}
			const renewals = 5
			before := n.Load()
			for range renewals {
				r, err := s.KeepAlive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if r.Digest != last {
					t.Errorf("KeepAlive digest %+v; want %+v, as after the last acquire", r.Digest, last)
				}
			}
			if got := n.Load() - before; got != renewals {
				t.Errorf("%d renewals holding %d leases on a quiet etcd sent %d requests; want one each", renewals, held, got)
			}
			if _, err := other.Put(ctx, "/elsewhere", "x"); err != nil {
				t.Fatal(err)
			}
			before = n.Load()
			r, err := s.KeepAlive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Load() - before; got != 2 {
				t.Errorf("a renewal after another client's write sent %d requests; want 2 (the renewal and the digest's read)", got)
			}
			if r.Digest != last || r.Digest.Leases != held {
				t.Errorf("KeepAlive digest %+v after a foreign write; want %+v with %d leases", r.Digest, last, held)
			}
		})
	}
}
