package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// module is stripped from package paths in the tables: every package is ours.
const module = "github.com/gangbench/gangbench/"

// pkgRun is one run of a package's test binary: go test's, or a fuzz target's.
type pkgRun struct {
	Step, Package, Result string
	Elapsed               time.Duration
	Passed, Failed, Skip  int
}

// testRun is one top-level test.
type testRun struct {
	Step, Package, Test, Result string
	Elapsed                     time.Duration
}

type summary struct {
	Packages []pkgRun
	Tests    []testRun
	// Passed, Failed and Skipped count every test and subtest that ended: the suites' assertions
	// are subtests.
	Passed, Failed, Skipped int
	// Wall is, per step, the time from its first event to its last: builds included, which the
	// packages' own times leave out.
	Wall map[string]time.Duration
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func summarize(evs []event) summary {
	s := summary{Wall: map[string]time.Duration{}}
	type key struct{ step, pkg string }
	pkgs := map[key]*pkgRun{}
	var order []key
	first := map[string]time.Time{}
	// When each top-level test last started or resumed: a parallel test's Elapsed leaves out its
	// parallel subtests (TestProofMutants reports 0.01 s for its thirteen clusters), so its time is
	// the wall clock from its last resume ("cont", after the serial tests) to its end.
	resumed := map[[3]string]time.Time{}
	for _, ev := range evs {
		if !ev.Time.IsZero() {
			if f, ok := first[ev.Step]; !ok || ev.Time.Before(f) {
				first[ev.Step] = ev.Time
			}
			if d := ev.Time.Sub(first[ev.Step]); d > s.Wall[ev.Step] {
				s.Wall[ev.Step] = d
			}
		}
		tk := [3]string{ev.Step, ev.Package, ev.Test}
		if (ev.Action == "run" || ev.Action == "cont") && ev.Test != "" && !strings.Contains(ev.Test, "/") {
			resumed[tk] = ev.Time
		}
		if ev.Action != "pass" && ev.Action != "fail" && ev.Action != "skip" {
			continue
		}
		k := key{ev.Step, ev.Package}
		p := pkgs[k]
		if p == nil {
			p = &pkgRun{Step: ev.Step, Package: strings.TrimPrefix(ev.Package, module)}
			pkgs[k] = p
			order = append(order, k)
		}
		if ev.Test == "" {
			p.Result, p.Elapsed = ev.Action, seconds(ev.Elapsed)
			continue
		}
		switch ev.Action {
		case "pass":
			s.Passed++
			p.Passed++
		case "fail":
			s.Failed++
			p.Failed++
		default:
			s.Skipped++
			p.Skip++
		}
		if !strings.Contains(ev.Test, "/") {
			d := seconds(ev.Elapsed)
			if start, ok := resumed[tk]; ok && !start.IsZero() && !ev.Time.IsZero() {
				d = max(d, ev.Time.Sub(start))
			}
			s.Tests = append(s.Tests, testRun{Step: ev.Step, Package: p.Package, Test: ev.Test, Result: ev.Action, Elapsed: d})
		}
	}
	for _, k := range order {
		s.Packages = append(s.Packages, *pkgs[k])
	}
	sort.SliceStable(s.Packages, func(i, j int) bool { return s.Packages[i].Elapsed > s.Packages[j].Elapsed })
	sort.SliceStable(s.Tests, func(i, j int) bool { return s.Tests[i].Elapsed > s.Tests[j].Elapsed })
	return s
}

// resultWord is go test's word for a package or test result.
func resultWord(action string) string {
	switch action {
	case "pass":
		return "ok"
	case "fail":
		return "FAIL"
	case "skip":
		return "skip"
	}
	return "?" // the package never reported: its binary was killed
}

func round(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// writeTable prints the packages by time, the top slowest top-level tests, the wall time per step
// and the closing count line (in the plain "N passed, N failed" form that CI reads).
func writeTable(w io.Writer, s summary, top int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\ntime by package (each test binary's run; builds not included)")
	fmt.Fprintln(tw, "  step\tpackage\tresult\tpassed\tfailed\tskipped\ttime\t")
	var total time.Duration
	for _, p := range s.Packages {
		total += p.Elapsed
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", p.Step, p.Package, resultWord(p.Result), p.Passed, p.Failed, p.Skip, round(p.Elapsed))
	}
	fmt.Fprintf(tw, "  \ttotal\t\t%d\t%d\t%d\t%s\t\n", s.Passed, s.Failed, s.Skipped, round(total))
	if top > 0 && len(s.Tests) > 0 {
		n := min(top, len(s.Tests))
		fmt.Fprintf(tw, "\nslowest top-level tests (%d of %d; a parallel one from its resume to its end, subtests included)\n", n, len(s.Tests))
		fmt.Fprintln(tw, "  package\ttest\tresult\ttime\t")
		for _, t := range s.Tests[:n] {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", t.Package, t.Test, resultWord(t.Result), round(t.Elapsed))
		}
	}
	steps := make([]string, 0, len(s.Wall))
	for st := range s.Wall {
		steps = append(steps, st)
	}
	sort.Strings(steps)
	fmt.Fprintln(tw, "\nwall time per step (builds included)")
	for _, st := range steps {
		fmt.Fprintf(tw, "  %s\t%s\t\n", st, round(s.Wall[st]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\ntests: %d passed, %d failed, %d skipped\n", s.Passed, s.Failed, s.Skipped)
	return err
}
