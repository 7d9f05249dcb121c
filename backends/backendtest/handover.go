package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// §13, H1, T2: a leader hands its lease over to the node it names, among
// three that accept a hand-over: the named node is elected next, promptly,
// with a greater token, and the node passed over is not elected; a
// hand-over to a node that does not contend changes nothing.
func testHandOver(t *testing.T, h *EngineHarness) {
	b := h.New(t)
	cl := enginetest.NewCluster(t, h.config())
	ctx, cancel := context.WithTimeout(context.Background(), 20*h.Lease)
	defer cancel()

	a := cl.NewNode("node-a", b)
	a.Start("lead", runtime.AcceptHandOver())
	ta := a.WaitElected(2 * h.Lease)
	bn := cl.NewNode("node-b", h.same(t, b))
	bn.Start("lead", runtime.AcceptHandOver())
	c := cl.NewNode("node-c", h.same(t, b))
	c.Start("lead", runtime.AcceptHandOver())
	for _, n := range []*enginetest.Node{bn, c} {
		awaitSuccessor(t, ctx, a.C, n.Name, 2*h.Lease)
	}

	start := time.Now()
	if err := a.E.HandOver(ctx, "node-c"); err != nil {
		t.Fatalf("node-a hands over to node-c: %v", err)
	}
	tc := c.WaitElected(2 * h.Lease)
	took := time.Since(start)
	t.Logf("hand-over to a chosen node took %v", took)
	if tc.Term.Token() <= ta.Term.Token() {
		t.Errorf("node-c's token %d; want > node-a's %d (T2)", tc.Term.Token(), ta.Term.Token())
	}
	if prompt := h.config().RenewInterval; took > prompt {
		t.Errorf("the hand-over took %v; want it within a renewal interval (%v), through the release notification", took, prompt)
	}
	bn.NotElected(h.config().RenewInterval)
	a.NotElected(10 * time.Millisecond)

	err := c.E.HandOver(ctx, "node-z")
	if !errors.Is(err, runtime.ErrNotCandidate) {
		t.Errorf("hand-over to a node that does not contend = %v; want ErrNotCandidate", err)
	}
	if c.E.Term() != tc.Term || !tc.Term.Valid() {
		t.Errorf("after a refused hand-over node-c's term is %v (valid %v); want %v, still valid", c.E.Term(), tc.Term.Valid(), tc.Term)
	}
}

// awaitSuccessor waits until the node of identity holds its successor
// lease for "lead", read through c.
func awaitSuccessor(t *testing.T, ctx context.Context, c *runtime.Client, identity string, within time.Duration) {
	t.Helper()
	name := runtime.SuccessorName("lead", identity)
	for end := time.Now().Add(within); ; {
		h, err := c.Holder(ctx, name)
		if err == nil && h.Identity == identity {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s does not hold its successor lease %s after %v: %v, %v", identity, name, within, h, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
