package partitioned

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// The generated RegisterIndex joins the group; the only member holds all
// four partitions and runs Index once per term of each, with its token.
func TestRegisterIndex(t *testing.T) {
	c, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	reg, err := RegisterIndex(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.(*runtime.Group); !ok || reg.Name() != "partitioned.index" {
		t.Fatalf("RegisterIndex = %T %q; want the *runtime.Group partitioned.index", reg, reg.Name())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		Seen.Range(func(k, v any) bool {
			if v.(runtime.Token) <= 0 {
				t.Errorf("partition %v ran with token %v; want > 0", k, v)
			}
			n++
			return true
		})
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Index ran for %d partitions in 10s; want 4", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := reg.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := RegisterAll(c); err != nil {
		t.Fatalf("RegisterAll after stopping: %v", err)
	}
}
