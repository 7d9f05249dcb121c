package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// F7: a term's sequencer names its lease and token, and reads back the
// same through the shared format.
func TestTermSequencer(t *testing.T) {
	c, err := runtime.NewClient(memory.New(), runtime.ConfigFor(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	term, err := c.Lock(context.Background(), "seq.report")
	if err != nil {
		t.Fatal(err)
	}
	seq := term.Sequencer()
	if seq.Name != "seq.report" || seq.Token != term.Token() {
		t.Fatalf("Sequencer() = %+v; want the term's name and token %d", seq, term.Token())
	}
	back, err := backends.ParseSequencer(seq.String())
	if err != nil || back != seq {
		t.Fatalf("ParseSequencer(%q) = %+v, %v; want %+v", seq.String(), back, err, seq)
	}
}
