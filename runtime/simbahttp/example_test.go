package simbahttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
	"github.com/simba-go/simba/runtime/simbahttp"
)

// Mount the health check and the status beside your own handlers; a probe
// reads /healthz/simba, a person or a script /debug/simba.
func Example() {
	client, err := runtime.NewClient(memory.New(), runtime.Config{}, runtime.WithIdentity("node-1"))
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())
	if _, err := client.Lock(context.Background(), "maintenance"); err != nil {
		panic(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/healthz/simba", simbahttp.NewHealth(client, simbahttp.HealthOptions{}))
	mux.Handle("/debug/simba", simbahttp.NewStatus(client, simbahttp.StatusOptions{}))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz/simba", nil))
	fmt.Print(rec.Code, " ", rec.Body)

	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/simba", nil))
	var st simbahttp.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		panic(err)
	}
	l := st.Leases[0]
	fmt.Println(st.Schema, st.Identity, st.Session.State)
	fmt.Println(l.Name, l.Kind, l.Role, "held by", l.Holder.Identity, "self:", l.Holder.Self)
	// Output:
	// 200 ok
	// simba.status/v1 node-1 live
	// maintenance lock leader held by node-1 self: true
}
