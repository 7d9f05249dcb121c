package simbaredis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/simba-go/simba/backends/backendurl"
	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// A redis:// URL, registered with backendurl, opens the Redis backend, which the closer closes; a
// password in the URL never appears in an error.
func TestOpenRedis(t *testing.T) {
	addr := testservers.Redis(t)
	// Database 13, the test's own: the default namespace in database 0 may
	// be a running example's (README), and examples/ledger's test uses 14.
	// A namespace written by another version of the backend, left by
	// another checkout on this shared server, makes Open fail with
	// simbaredis.ErrLayout, as it should; start from none.
	testservers.ClearRedis(t, addr, 13, "{"+simbaredis.DefaultPrefix+"}:*")
	b, c, err := backendurl.Open(context.Background(), "redis://"+addr+"/13")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.(*simbaredis.Backend); !ok {
		t.Errorf("redis:// opened a %T", b)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	_, _, err = backendurl.Open(context.Background(), "redis://:s3cret@127.0.0.1:1/0")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of an unreachable Redis with a password = %v; want an error without the password", err)
	}
}
