package simbaetcd

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// testTTL is the sessions' time to live in the conformance suite: etcd
// counts leases in whole seconds. TermOrder's eight sessions win 80 terms
// one after another, a raft entry or more each (several seconds under -race,
// where the embedded server is instrumented too); they renew as they go, so
// the TTL need not cover the loop, and 5 s holds under -race too. (It was
// 15 s under -race, which made KeepAliveExtends and Unreachable take 34 s
// each and the package 100 s of make test.)
const testTTL = 5 * time.Second

// backendOf returns the *Backend behind a backend New or Open returned.
func backendOf(t testing.TB, b backends.Backend) *Backend {
	t.Helper()
	switch b := b.(type) {
	case *Backend:
		return b
	case clockBackend:
		return b.Backend
	}
	t.Fatalf("backend is %T, not this package's", b)
	return nil
}

// The conformance suite on the embedded etcd, every hook given: sessions
// expired behind the client's back (their lease revoked), a member wiped
// and restarted (the amnesia guard), a member restarted with its data, and
// a client cut off through the fault dialer.
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, newClient(t, nil, shared.get(t))).Backend()
		},
		TTL:         testTTL,
		MaxLease:    testMaxLease,
		ExpiryGrace: time.Second, // the leader looks for expired leases every 500 ms
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			revokeBehindBack(t, backendOf(t, b), id)
		},
		NewRestartable: func(t *testing.T) (backends.Backend, func() time.Duration) {
			s := startServer(t)
			b := newBackend(t, newClient(t, nil, s))
			return b.Backend(), func() time.Duration {
				s.wipe()
				if err := s.start(true); err != nil {
					t.Fatal(err)
				}
				return b.MaxLease()
			}
		},
		NewDurable: func(t *testing.T) (backends.Backend, func()) {
			s := startServer(t)
			b := newBackend(t, newClient(t, nil, s))
			return b.Backend(), func() {
				s.kill()
				if err := s.start(false); err != nil {
					t.Fatal(err)
				}
			}
		},
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			link := faultnet.New()
			b := newBackend(t, newClient(t, link, shared.get(t)))
			return b.Backend(), func() func() {
				link.Cut()
				return link.Heal
			}
		},
	})
}

// The engine end to end on the embedded etcd, with the fault scenarios: a
// node's path is a faultnet link in its client's dialer; a session's lease
// is revoked behind its back (revokeBehindBack).
func TestEngine(t *testing.T) {
	backendtest.RunEngine(t, backendtest.EngineHarness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, newClient(t, nil, shared.get(t))).Backend()
		},
		Same: func(t *testing.T, b backends.Backend) backends.Backend {
			return newBackend(t, newClient(t, nil, shared.get(t)), WithPrefix(backendOf(t, b).Prefix())).Backend()
		},
		Lease: testTTL,
		NewPath: func(t *testing.T, b backends.Backend) (backends.Backend, backendtest.Path) {
			link := faultnet.New()
			return newBackend(t, newClient(t, link, shared.get(t)), WithPrefix(backendOf(t, b).Prefix())).Backend(), link
		},
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			revokeBehindBack(t, backendOf(t, b), id)
		},
	})
}
