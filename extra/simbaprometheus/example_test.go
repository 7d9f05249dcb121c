package simbaprometheus_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/extra/simbaprometheus"
	"github.com/simba-go/simba/runtime"
)

// Register the metrics, give them to the client as its observer, and
// serve them with promhttp as usual.
func Example() {
	metrics := simbaprometheus.New(simbaprometheus.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	metrics.Expect("report") // reads 0 until this process leads it

	client, err := runtime.NewClient(memory.New(), runtime.Config{}, runtime.WithObserver(metrics))
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())
	if _, err := client.Lock(context.Background(), "maintenance"); err != nil {
		panic(err)
	}

	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if body := rec.Body.String(); strings.Contains(body, `simba_lease_held{lease="maintenance"} 1`) {
			for line := range strings.Lines(body) {
				if strings.HasPrefix(line, "simba_lease_held") || strings.HasPrefix(line, `simba_session_state{state="live"}`) {
					fmt.Print(line)
				}
			}
			break
		}
	}
	// Output:
	// simba_lease_held{lease="maintenance"} 1
	// simba_lease_held{lease="report"} 0
	// simba_session_state{state="live"} 1
}
