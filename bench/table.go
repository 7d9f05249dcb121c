package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// rawWhat says what each store's raw pair is.
var rawWhat = map[string]string{
	"Redis":           "SET NX PX + DEL",
	"etcd (embedded)": "two Puts",
	"ZooKeeper":       "Create + Delete",
	"PostgreSQL":      "two single-row conditional UPDATEs",
	"MySQL":           "two single-row conditional UPDATEs (InnoDB, durable commits)",
}

// Markdown writes the table of rows, then a note per row: its
// configuration, its renewal period, the spread of its rounds, and any
// measurement that failed.
func Markdown(w io.Writer, rows []Row, o Options) {
	o = o.withDefaults()
	sizes := make([]string, len(o.Sizes))
	for i, n := range o.Sizes {
		sizes[i] = groupDigits(n)
	}
	fmt.Fprintf(w, "| implementation | store | hand-off p50 | hand-off p99 | raw pair after the same idle, p50 (max) | crash fail-over ÷ lease, median (max) | requests per renewal, %s leases | acquire+release p50 (rounds) | acquire+release p99 | raw pair p50 | ÷ raw | ÷ redislock | Redis CPU per pair (÷ redislock) |\n",
		strings.Join(sizes, " / "))
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var ref *Row
	for i := range rows {
		if rows[i].Impl.Name == "redislock" && len(rows[i].AcqRel) > 0 {
			ref = &rows[i]
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.Skipped != "" {
			fmt.Fprintf(w, "| %s | %s | not run: %s ||||||||||\n", r.Impl.Name, r.Impl.Store, oneLine(r.Skipped))
			continue
		}
		c := []string{r.Impl.Name, r.Impl.Store}
		c = append(c, dur(quantile(r.HandOff, 0.5)), dur(quantile(r.HandOff, 0.99)), idleRaw(r.IdleRaw))
		if len(r.FailOver) > 0 {
			c = append(c, fmt.Sprintf("%.2f (%.2f)", median(r.FailOver), slices.Max(r.FailOver)))
		} else {
			c = append(c, "—")
		}
		var per []string
		for _, n := range o.Sizes {
			if v, ok := r.PerRenewal[n]; ok {
				per = append(per, fmt.Sprintf("%.2f", v))
			} else {
				per = append(per, "—")
			}
		}
		c = append(c, strings.Join(per, " / "))
		ar, raw := quantile(r.AcqRel, 0.5), quantile(r.Raw, 0.5)
		spread := ""
		if len(r.AcqRelRounds) > 1 {
			spread = fmt.Sprintf(" (%s–%s)", durNum(slices.Min(r.AcqRelRounds)), durNum(slices.Max(r.AcqRelRounds)))
		}
		c = append(c, dur(ar)+spread, dur(quantile(r.AcqRel, 0.99)), dur(raw), ratio(ar, raw))
		if r.Impl.Store == "Redis" && ref != nil {
			c = append(c, ratio(ar, quantile(ref.AcqRel, 0.5)))
		} else {
			c = append(c, "")
		}
		if r.Commands != nil {
			cpu := dur(r.CPU)
			if ref != nil && ref.CPU > 0 {
				cpu += " (" + ratio(r.CPU, ref.CPU) + ")"
			}
			c = append(c, cpu)
		} else {
			c = append(c, "")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(c, " | "))
	}
	fmt.Fprintln(w)
	for i := range rows {
		r := &rows[i]
		if r.Skipped != "" {
			continue
		}
		fmt.Fprintf(w, "- **%s** (%s): %s.", r.Impl.Name, r.Impl.Store, r.Impl.Config)
		if r.Period > 0 {
			fmt.Fprintf(w, " Renewal period %s.", dur(r.Period))
		}
		if len(r.RenewalCommands) > 0 {
			fmt.Fprintf(w, " Requests per renewal with %s lease(s), by command: %s.", groupDigits(o.Sizes[0]), rateList(r.RenewalCommands))
		}
		if len(r.RawRounds) > 0 {
			fmt.Fprintf(w, " Raw pair: %s, rounds' medians %s.", rawWhat[r.Impl.Store], durList(r.RawRounds))
		}
		if len(r.AcqRelRounds) > 1 {
			fmt.Fprintf(w, " Acquire+release rounds' medians %s.", durList(r.AcqRelRounds))
		}
		if len(r.FailOver) > 0 {
			fo := make([]string, len(r.FailOver))
			for i, f := range r.FailOver {
				fo[i] = fmt.Sprintf("%.2f", f)
			}
			fmt.Fprintf(w, " Fail-overs ÷ lease: %s.", strings.Join(fo, ", "))
		}
		if r.Commands != nil {
			fmt.Fprintf(w, " Redis per pair: CPU %s (raw pair %s); commands %s.", dur(r.CPU), dur(r.RawCPU), commandList(r.Commands))
		}
		for _, e := range r.Errors {
			fmt.Fprintf(w, " FAILED %s.", oneLine(e))
		}
		fmt.Fprintln(w)
	}
}

// commandList formats per-pair command rates, most time first.
func commandList(m map[string]commandRate) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if m[a].Usec != m[b].Usec {
			if m[a].Usec > m[b].Usec {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(names))
	for _, n := range names {
		if m[n].Calls < 0.005 {
			continue // a call or two in the whole run: a node's start, not the pairs
		}
		parts = append(parts, fmt.Sprintf("%s ×%.2f %.1f µs", strings.ToUpper(n), m[n].Calls, m[n].Usec))
	}
	return strings.Join(parts, ", ")
}

// rateList formats requests per period by command, most first.
func rateList(m map[string]float64) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, m[n])
	}
	return strings.Join(parts, ", ")
}

func median(f []float64) float64 {
	s := slices.Clone(f)
	slices.Sort(s)
	return s[len(s)/2]
}

func ratio(a, b time.Duration) string {
	if a <= 0 || b <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

// dur formats a duration to three significant figures at most: "684 µs",
// "1.65 ms", "2.16 s"; "—" for none.
func dur(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	switch {
	case d < time.Millisecond:
		return sig(float64(d)/1e3) + " µs"
	case d < time.Second:
		return sig(float64(d)/1e6) + " ms"
	}
	return sig(float64(d)/1e9) + " s"
}

// durNum is dur without its unit for the spread after a figure, in the
// unit of the figure itself when both are in one range.
func durNum(d time.Duration) string {
	s := dur(d)
	if i := strings.IndexByte(s, ' '); i > 0 && d < time.Millisecond {
		return s[:i]
	}
	return s
}

func durList(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = dur(d)
	}
	return strings.Join(parts, ", ")
}

func sig(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func groupDigits(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", "\\|")
}

// idleRaw is the median of the raw pairs timed after idling, with their
// worst beside it: a slow stretch of the machine shows in the hand-off's
// p99 and in that maximum alike.
func idleRaw(d []time.Duration) string {
	if len(d) == 0 {
		return "—"
	}
	return fmt.Sprintf("%s (%s)", dur(quantile(d, 0.5)), dur(slices.Max(d)))
}
