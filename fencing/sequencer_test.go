package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/fencing/fencingtest"
)

func TestSequencerRoundTrip(t *testing.T) {
	for _, seq := range []fencing.Sequencer{
		{Name: "report", Token: 1},
		{Name: "billing.3", Token: 1_796_029_244_739_692},
		{Name: "ns:a-b_c.d", Token: math.MaxInt64},
		{Name: strings.Repeat("n", backends.MaxNameLen), Token: 1<<53 - 1},
	} {
		text := seq.String()
		got, err := fencing.ParseSequencer(text)
		if err != nil || got != seq {
			t.Errorf("ParseSequencer(%q) = %+v, %v; want %+v", text, got, err, seq)
		}
	}
	if got, want := (fencing.Sequencer{Name: "report", Token: 42}).String(), "simba-seq/1 lease report 42"; got != want {
		t.Errorf("String = %q; want %q", got, want)
	}
}

// Text that is not a sequencer is refused with an error that names the
// problem.
func TestParseSequencerRefuses(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", "1 words separated by single spaces; want 4: simba-seq/1 lease NAME TOKEN"},
		{"simba-seq/1 lease report", "3 words"},
		{"simba-seq/1  lease report 42", "5 words"},
		{" simba-seq/1 lease report 42", "5 words"},
		{"simba-seq/1 lease report 42 ", "5 words"},
		{"simba-seq/1\tlease report 42", "3 words"},
		{"simba-seq/2 lease report 42", `version "simba-seq/2"; this release reads simba-seq/1 only`},
		{"chubby lease report 42", `first word "chubby"; want simba-seq/1`},
		{"simba-seq/1 permit report 42", `mode "permit"; want lease`},
		{"simba-seq/1 lease rep/ort 42", `lease name "rep/ort": character '/' at byte 3`},
		{"simba-seq/1 lease .. 42", `lease name "..": "." and ".." are reserved`},
		{"simba-seq/1 lease " + strings.Repeat("n", 129) + " 42", "129 bytes long; want at most 128"},
		{"simba-seq/1 lease report 0", `token "0"; want a decimal integer from 1 to 9223372036854775807`},
		{"simba-seq/1 lease report -4", `token "-4"`},
		{"simba-seq/1 lease report +4", `token "+4"`},
		{"simba-seq/1 lease report 042", `token "042"`},
		{"simba-seq/1 lease report 0x2a", `token "0x2a"`},
		{"simba-seq/1 lease report 4_2", `token "4_2"`},
		{"simba-seq/1 lease report 9223372036854775808", `token "9223372036854775808"`},
		{"simba-seq/1 lease report ", `token ""`},
	} {
		_, err := fencing.ParseSequencer(c.text)
		if !errors.Is(err, fencing.ErrInvalidSequencer) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSequencer(%q) = %v; want an error matching ErrInvalidSequencer containing %q", c.text, err, c.want)
		}
		var se *backends.SequencerError
		if !errors.As(err, &se) || se.Text != c.text {
			t.Errorf("ParseSequencer(%q): %v is not a *backends.SequencerError with the text", c.text, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "simba: invalid sequencer ") {
			t.Errorf("error %q does not start with the package's prefix", err)
		}
	}
	long := "simba-seq/1 lease report " + strings.Repeat("9", 10000)
	if _, err := fencing.ParseSequencer(long); err == nil || len(err.Error()) > 500 {
		t.Errorf("ParseSequencer of 10 kB = %d bytes of error; want the text cut short", len(err.Error()))
	}
}

// FuzzParseSequencer: whatever ParseSequencer accepts prints back to the
// same text, and is a sequencer a term can have; whatever it refuses gets
// an error matching ErrInvalidSequencer.
func FuzzParseSequencer(f *testing.F) {
	for _, s := range []string{"simba-seq/1 lease report 42", "simba-seq/1 lease a 1", "simba-seq/1 lease report 042",
		"simba-seq/1 lease report +42", "simba-seq/1 lease . 1", "simba-seq/1 lease r 9223372036854775807",
		"simba-seq/1 lease r 9223372036854775808", "simba-seq/1  lease r 1", "", "simba-seq/1 lease é 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		seq, err := fencing.ParseSequencer(text)
		if err != nil {
			if !errors.Is(err, fencing.ErrInvalidSequencer) {
				t.Fatalf("ParseSequencer(%q) = %v; want an error matching ErrInvalidSequencer", text, err)
			}
			return
		}
		if again := seq.String(); again != text {
			t.Fatalf("ParseSequencer(%q) = %+v, which prints as %q", text, seq, again)
		}
		if seq.Token < 1 || backends.ValidateName(seq.Name) != nil {
			t.Fatalf("ParseSequencer(%q) accepted %+v, which no term has", text, seq)
		}
	})
}

func seqOf(name string, token backends.Token) fencing.Sequencer {
	return fencing.Sequencer{Name: name, Token: token}
}

func TestSequencersCheck(t *testing.T) {
	var s fencing.Sequencers
	for _, c := range []struct {
		seq   fencing.Sequencer
		stale bool
	}{
		{seqOf("a", 40), false},
		{seqOf("a", 40), false}, // equal: the same term again
		{seqOf("a", 57), false}, // higher: recorded
		{seqOf("a", 56), true},  // lower by one
		{seqOf("a", 40), true},
		{seqOf("b", 3), false}, // names are independent
		{seqOf("a", 57), false},
	} {
		err := s.Check(c.seq)
		if c.stale != errors.Is(err, fencing.ErrStaleToken) || !c.stale && err != nil {
			t.Fatalf("Check(%v) = %v; want stale=%v", c.seq, err, c.stale)
		}
	}
	if h := s.Highest("a"); h != 57 {
		t.Errorf("Highest(a) = %d; want 57", h)
	}
	if h := s.Highest("b"); h != 3 {
		t.Errorf("Highest(b) = %d; want 3", h)
	}
	if h := s.Highest("c"); h != 0 {
		t.Errorf("Highest(c) = %d; want 0", h)
	}
	err := s.Check(seqOf("a", 9))
	if want := `simba: stale fencing token: lease "a": token 9 is lower than the highest token admitted, 57`; err == nil || err.Error() != want {
		t.Errorf("error = %v; want %q", err, want)
	}
}

func TestSequencersBadInput(t *testing.T) {
	var s fencing.Sequencers
	for _, c := range []struct {
		seq  fencing.Sequencer
		want error
	}{
		{seqOf("a", 0), fencing.ErrInvalidToken},
		{seqOf("a", -1), fencing.ErrInvalidToken},
		{seqOf("", 1), backends.ErrInvalidName},
		{seqOf("a b", 1), backends.ErrInvalidName},
	} {
		if err := s.Check(c.seq); !errors.Is(err, c.want) {
			t.Errorf("Check(%+v) = %v; want %v", c.seq, err, c.want)
		}
		err := s.Do(context.Background(), c.seq, func(context.Context) error { t.Error("work ran"); return nil })
		if !errors.Is(err, c.want) {
			t.Errorf("Do(%+v) = %v; want %v", c.seq, err, c.want)
		}
	}
	if err := s.Do(context.Background(), seqOf("a", 1), nil); err == nil {
		t.Error("Do with nil work = nil; want an error")
	}
	var nilS *fencing.Sequencers
	if err := nilS.Check(seqOf("a", 1)); err == nil {
		t.Error("(*Sequencers)(nil).Check = nil; want an error")
	}
}

// seqResource is a fenced resource built on Sequencers.Do: the work of a
// write stores the value with its token. The conformance kit checks that
// Do fences whatever its work does (F1, F2).
type seqResource struct {
	guard fencing.Sequencers
	mu    sync.Mutex
	value []byte
	token backends.Token
}

func (r *seqResource) Write(ctx context.Context, token backends.Token, value []byte) error {
	return r.guard.Do(ctx, seqOf("resource", token), func(context.Context) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.value, r.token = slices.Clone(value), token
		return nil
	})
}

func (r *seqResource) Read(context.Context) ([]byte, backends.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.value), r.token, nil
}

func TestSequencersDoIsFenced(t *testing.T) {
	fencingtest.Run(t, func(testing.TB) fencing.Resource { return new(seqResource) })
}

// Work under a higher token waits until the work under lower tokens has
// returned, and admitting it cancels that work's context; lower tokens are
// refused from then on, and work under one token runs side by side.
func TestSequencersDoOrdersTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s fencing.Sequencers
		var (
			mu  sync.Mutex
			ran []string
		)
		note := func(f string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, fmt.Sprintf(f, args...))
		}
		wantRan := func(want ...string) {
			t.Helper()
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(ran, want) {
				t.Fatalf("ran %q; want %q", ran, want)
			}
		}
		// run starts Do(token) whose work notes its start and waits for
		// release or its context; it returns Do's error on a channel.
		run := func(token backends.Token, release <-chan struct{}) <-chan error {
			out := make(chan error, 1)
			go func() {
				out <- s.Do(context.Background(), seqOf("job", token), func(ctx context.Context) error {
					note("start %d", token)
					select {
					case <-release:
						note("end %d", token)
						return nil
					case <-ctx.Done():
						note("cancelled %d", token)
						<-release // still busy: the newer term waits for it
						return context.Cause(ctx)
					}
				})
			}()
			return out
		}

		r41 := make(chan struct{})
		a, b := run(41, r41), run(41, r41)
		wantRan("start 41", "start 41") // one token: side by side

		r57 := make(chan struct{})
		c := run(57, r57)
		wantRan("start 41", "start 41", "cancelled 41", "cancelled 41") // 57 waits for 41's work
		if err := s.Check(seqOf("job", 41)); !errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("Check(41) after 57 = %v; want ErrStaleToken", err)
		}

		close(r41)
		for _, ch := range []<-chan error{a, b} {
			if err := <-ch; !errors.Is(err, fencing.ErrStaleToken) || !strings.Contains(err.Error(), "superseded by token 57") {
				t.Fatalf("Do(41) = %v; want its context's cause, a stale token superseded by 57", err)
			}
		}
		wantRan("start 41", "start 41", "cancelled 41", "cancelled 41", "start 57")
		close(r57)
		if err := <-c; err != nil {
			t.Fatal(err)
		}
		wantRan("start 41", "start 41", "cancelled 41", "cancelled 41", "start 57", "end 57")
	})
}

// A call that waits for older work gives up when a higher token supersedes
// it, or when its own context ends, without running its work.
func TestSequencersDoWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s fencing.Sequencers
		started := make(chan backends.Token, 10)
		block := func(release <-chan struct{}) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				<-release
				return nil
			}
		}
		do := func(ctx context.Context, token backends.Token, work func(context.Context) error) <-chan error {
			out := make(chan error, 1)
			go func() {
				out <- s.Do(ctx, seqOf("job", token), func(ctx context.Context) error {
					started <- token
					return work(ctx)
				})
			}()
			return out
		}

		release := make(chan struct{})
		first := do(context.Background(), 10, block(release))
		synctest.Wait()
		ctx, cancel := context.WithCancelCause(context.Background())
		gaveUp := do(ctx, 20, block(nil))
		superseded := do(context.Background(), 20, block(nil))
		synctest.Wait()
		cancel(errors.New("client went away"))
		if err := <-gaveUp; err == nil || err.Error() != "client went away" {
			t.Fatalf("Do(20) whose context ended while it waited = %v; want the context's cause", err)
		}
		last := do(context.Background(), 30, func(context.Context) error { return nil })
		if err := <-superseded; !errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("Do(20) superseded by 30 while it waited = %v; want ErrStaleToken", err)
		}
		synctest.Wait()
		if len(started) != 1 {
			t.Fatalf("%d works started; want only token 10's while it runs", len(started))
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-last; err != nil {
			t.Fatal(err)
		}
		close(started)
		var got []backends.Token
		for tok := range started {
			got = append(got, tok)
		}
		if !slices.Equal(got, []backends.Token{10, 30}) {
			t.Fatalf("works started for tokens %v; want [10 30]", got)
		}
	})
}
