package fencing_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/simba-go/simba/fencing"
)

// BenchmarkGateDo is what the gate adds to a write: the term's check, and a
// context joined with the term's end, released after the write.
func BenchmarkGateDo(b *testing.B) {
	_, term := lockTerm(b, "bench-gate")
	gate := fencing.Gate{Term: term}
	ctx := context.Background()
	write := func(context.Context) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := gate.Do(ctx, "write", write); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// answer is an http.RoundTripper that answers every request at once, so
// that BenchmarkTransportWrite measures the gate and not the network.
type answer struct{}

func (answer) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// BenchmarkTransportWrite is what Transport adds to a write over HTTP,
// the request's copy and its sequencer header included.
func BenchmarkTransportWrite(b *testing.B) {
	_, term := lockTerm(b, "bench-transport")
	tr := &fencing.Transport{Gate: fencing.Gate{Term: term}, Base: answer{}, SendSequencer: true}
	req, _ := http.NewRequest(http.MethodPost, "http://service.internal/items", nil)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// BenchmarkSequencersDo is the downstream guard's cost per request of one
// term, from goroutines in parallel.
func BenchmarkSequencersDo(b *testing.B) {
	var guard fencing.Sequencers
	seq := fencing.Sequencer{Name: "ledger", Token: 1_796_029_244_739_692}
	ctx := context.Background()
	work := func(context.Context) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := guard.Do(ctx, seq, work); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
