package memory_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/memory"
)

// Read-only tools only read (§12): OpenInspector and Inspect leave the
// store as they found it — they do not even reap a session that expired,
// which the listing leaves out.
func TestInspectorWritesNothing(t *testing.T) {
	var r [6]byte
	rand.Read(r[:])
	name := "readonly-" + hex.EncodeToString(r[:])
	store := memory.Open(name)
	ctx := context.Background()
	s, _, err := store.OpenSession(ctx, backends.SessionOptions{TTL: 10 * time.Second, Identity: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	g, err := s.Acquire(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutValue(ctx, "report", g.Token, []byte("slot 7")); err != nil {
		t.Fatal(err)
	}
	if err := s.Join(ctx, "billing", 2); err != nil {
		t.Fatal(err)
	}
	// A session that has expired by the next call, which any call but
	// Inspect would reap.
	if _, _, err := store.OpenSession(ctx, backends.SessionOptions{TTL: time.Nanosecond, Identity: "node-2"}); err != nil {
		t.Fatal(err)
	}
	before := store.State()

	in, closer, err := backendurl.OpenInspector(ctx, "memory:"+name)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := in.Inspect(ctx)
	closer.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Sessions) != 1 || inv.Sessions[0].ID != s.ID() || len(inv.Leases) != 1 || string(inv.Leases[0].Value) != "slot 7" || len(inv.Groups) != 1 {
		t.Errorf("Inspect = %+v; want the live session, its lease report with its value, and the group billing", inv)
	}
	if after := store.State(); after != before {
		t.Errorf("the store changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
