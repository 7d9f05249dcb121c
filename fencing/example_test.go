package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/runtime"
)

// A Guard fences state that lives in this process. Each write passes the
// token of the term it belongs to (term.Token() in package runtime); a write
// from an older term, arriving late, is refused.
func ExampleGuard() {
	var (
		guard  fencing.Guard
		report string
	)
	publish := func(token backends.Token, text string) error {
		return guard.Do(token, func() error {
			report = text
			return nil
		})
	}

	fmt.Println(publish(7, "report of term 7"))
	fmt.Println(publish(8, "report of term 8"))
	err := publish(7, "late report of term 7") // the old holder woke up
	fmt.Println(errors.Is(err, fencing.ErrStaleToken))
	fmt.Println(report)
	// Output:
	// <nil>
	// <nil>
	// true
	// report of term 8
}

// A Transport lets a leader's writes through only while its term is valid,
// and refuses them once it ended; reads pass. Here the term is a lock's,
// on the in-process memory store, and the service a local test server.
func ExampleTransport() {
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s done", r.Method)
	}))
	defer service.Close()
	base := &http.Transport{} // shared by the terms
	defer base.CloseIdleConnections()

	ctx := context.Background()
	node, _ := runtime.NewClient(memory.New(), runtime.ConfigFor(3*time.Second))
	defer node.Close(ctx)
	term, _ := node.Lock(ctx, "invoices")

	client := &http.Client{Transport: &fencing.Transport{
		Gate:          fencing.Gate{Term: term, Min: 500 * time.Millisecond},
		Base:          base,
		SendSequencer: true, // for the service to check (SequencerHandler)
	}}
	send := func(method string) {
		req, _ := http.NewRequestWithContext(ctx, method, service.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(errors.Is(err, fencing.ErrGateClosed), errors.Is(err, runtime.ReasonStopped))
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(string(body))
	}

	send(http.MethodPost)
	_ = node.Unlock(ctx, term) // the term ends
	send(http.MethodPost)      // refused: it never reaches the service
	send(http.MethodGet)       // reads pass
	// Output:
	// POST done
	// true true
	// GET done
}

// Gate.Do puts the gate in front of any write that takes a context: a gRPC
// call, a message sent to a broker.
func ExampleGate_Do() {
	ctx := context.Background()
	node, _ := runtime.NewClient(memory.New(), runtime.ConfigFor(3*time.Second))
	defer node.Close(ctx)
	term, _ := node.Lock(ctx, "outbox")
	gate := fencing.Gate{Term: term, Min: 500 * time.Millisecond}

	publish := func(ctx context.Context) error { return nil } // send a message with ctx
	fmt.Println(gate.Do(ctx, "publish", publish))
	_ = node.Unlock(ctx, term)
	err := gate.Do(ctx, "publish", publish)
	var refused *fencing.GateError
	if errors.As(err, &refused) {
		fmt.Println(refused.Op, refused.Name, refused.InFlight, refused.Reason)
	}
	// Output:
	// <nil>
	// publish outbox false stopped
}

// A service downstream of the leaders puts a SequencerHandler in front of
// its handlers: a request from a former leader, whose sequencer is older than
// one the service has seen, is refused with 409 Conflict.
func ExampleSequencerHandler() {
	guard := new(fencing.Sequencers)
	service := &fencing.SequencerHandler{Guard: guard, Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "applied")
	})}
	send := func(seq fencing.Sequencer) {
		req := httptest.NewRequest(http.MethodPost, "/ledger", nil)
		fencing.SetSequencer(req, seq)
		rec := httptest.NewRecorder()
		service.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}

	send(fencing.Sequencer{Name: "ledger", Token: 57}) // the current leader
	send(fencing.Sequencer{Name: "ledger", Token: 41}) // a former one, late
	// Output:
	// 200 applied
	// 409 simba: stale fencing token: lease "ledger": token 41 is lower than the highest token admitted, 57; the request's sequencer is "simba-seq/1 lease ledger 41"
}

// A sequencer travels as one string; the service parses it back.
func ExampleParseSequencer() {
	text := fencing.Sequencer{Name: "report", Token: 1796029244739692}.String()
	fmt.Println(text)
	seq, err := fencing.ParseSequencer(text)
	fmt.Println(seq.Name, seq.Token, err)
	_, err = fencing.ParseSequencer("report#1796029244739692")
	fmt.Println(err)
	// Output:
	// simba-seq/1 lease report 1796029244739692
	// report 1796029244739692 <nil>
	// simba: invalid sequencer "report#1796029244739692": 1 words separated by single spaces; want 4: simba-seq/1 lease NAME TOKEN
}

// A leader's database writes go through a Connector: one *sql.DB per term,
// over a connector the terms share. (Not run: it needs PostgreSQL.)
func ExampleConnector() {
	ctx := context.Background()
	node, _ := runtime.NewClient(memory.New(), runtime.DefaultConfig())
	defer node.Close(ctx)
	config, err := pgx.ParseConfig("postgres://app@db.internal:5432/app")
	if err != nil {
		return
	}
	base := stdlib.GetConnector(*config)

	term, _ := node.Lock(ctx, "invoices")
	db := sql.OpenDB(&fencing.Connector{Gate: fencing.Gate{Term: term, Min: time.Second}, Base: base})
	defer db.Close()

	// A write: refused once the term ended, cancelled if it ends meanwhile.
	_, err = db.ExecContext(ctx, "UPDATE invoice SET sent = true WHERE id = $1 AND fencing_token <= $2", 7, term.Token())
	if errors.Is(err, fencing.ErrGateClosed) {
		return // no longer the leader
	}
	// A read-only transaction passes whatever the term: the database
	// enforces that it writes nothing.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err == nil {
		_ = tx.Rollback()
	}
	// INSERT … RETURNING goes through Query: mark it a write.
	var id int
	_ = db.QueryRowContext(fencing.AsWrite(ctx), "INSERT INTO invoice (total) VALUES ($1) RETURNING id", 12).Scan(&id)
}
