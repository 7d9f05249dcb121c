package simbaotel_test

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/extra/simbaotel"
	"github.com/simba-go/simba/runtime"
)

// Make the instruments from your meter provider and give them to the
// client as its observer.
func Example() {
	reader := sdkmetric.NewManualReader() // yours exports, periodically
	metrics, err := simbaotel.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		panic(err)
	}
	client, err := runtime.NewClient(memory.New(), runtime.Config{}, runtime.WithObserver(metrics))
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())
	if _, err := client.Lock(context.Background(), "maintenance"); err != nil {
		panic(err)
	}

	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			panic(err)
		}
		if len(rm.ScopeMetrics) == 0 {
			continue // the observer gets events on a queue of its own: none recorded yet
		}
		for _, m := range rm.ScopeMetrics[0].Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "simba.lease.held" {
				p := sum.DataPoints[0]
				lease, _ := p.Attributes.Value("simba.lease")
				fmt.Println(m.Name, lease.AsString(), p.Value)
				return
			}
		}
	}
	// Output:
	// simba.lease.held maintenance 1
}
