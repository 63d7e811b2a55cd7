// Package report renders gangbench results for people: comparisons of two scheduler versions as text,
// markdown (for PR comments) and JSON, and one self-contained HTML page (inline CSS and SVG plots, no
// scripts, no external references) for a single run or a comparison. All output is deterministic, so
// it is golden-tested and diffable.
package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/results/compare"
)

// num formats a measurement with about 4 significant digits and no exponent in the usual range, so
// that columns of rates and latencies read alike: 120.5, 0.1234, 15230.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "∞"
	case math.IsInf(v, -1):
		return "-∞"
	case v == 0:
		return "0"
	}
	a := math.Abs(v)
	if a >= 1e7 || a < 1e-4 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	decimals := max(0, 3-int(math.Floor(math.Log10(a))))
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// pctRange is benchstat's "±x%": the larger distance from the median to an end of its confidence
// interval, relative to the median; "(no CI, n=5)" when there are too few samples for an interval
// (benchmath needs 6 at 95 %), rather than an infinite range that reads like a measurement.
func pctRange(s compare.Summary) string {
	switch {
	case s.N == 0:
		return ""
	case math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) || math.IsNaN(s.Lo) || math.IsNaN(s.Hi):
		return fmt.Sprintf("(no CI, n=%d)", s.N)
	case s.Center == 0:
		if s.Lo == 0 && s.Hi == 0 {
			return "±0%"
		}
		return "±?"
	case math.Signbit(s.Center) != math.Signbit(s.Lo) || math.Signbit(s.Center) != math.Signbit(s.Hi):
		return "±?" // the interval crosses zero: a relative width means nothing
	}
	return fmt.Sprintf("±%.0f%%", 100*math.Max(s.Hi/s.Center-1, 1-s.Lo/s.Center))
}

// summaryCell is "median ±x%", or "-" without samples.
func summaryCell(s compare.Summary) string {
	if s.N == 0 {
		return "-"
	}
	return num(s.Center) + " " + pctRange(s)
}

func ratioNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 0):
		return num(v)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// ratioCell is "1.200 [1.180, 1.220]"; the interval is left out when there is none.
func ratioCell(m compare.MetricResult) string {
	s := ratioNum(m.Ratio)
	if m.RatioLo > 0 && m.RatioHi > 0 {
		s += " [" + ratioNum(m.RatioLo) + ", " + ratioNum(m.RatioHi) + "]"
	}
	return s
}

// pCell is "0.002 (n=6)" or "0.002 (n=5+6)", benchstat's form, plus the Holm-corrected value for a
// gate metric; "-" when no test ran.
func pCell(m compare.MetricResult) string {
	n := fmt.Sprintf("n=%d", m.Old.N)
	if m.Old.N != m.New.N {
		n = fmt.Sprintf("n=%d+%d", m.Old.N, m.New.N)
	}
	if math.IsNaN(m.PValue) {
		return "- (" + n + ")"
	}
	if !math.IsNaN(m.PAdjusted) {
		// A gate metric is judged on the corrected value; the raw one is what benchstat would print.
		return fmt.Sprintf("%.3f (%s), Holm %.3f", m.PValue, n, m.PAdjusted)
	}
	return fmt.Sprintf("%.3f (%s)", m.PValue, n)
}

// verdictCell is the verdict with what a reader needs next to it: which way "faster" points, the
// regression flag, or why the metric is not comparable.
func verdictCell(m compare.MetricResult) string {
	switch {
	case m.Regression && m.Gated:
		return string(m.Verdict) + " (regression)"
	case m.Regression:
		return string(m.Verdict) + " (not a gate metric)"
	case m.Verdict == compare.NotComparable && m.Reason != "":
		return string(m.Verdict) + ": " + m.Reason
	}
	return string(m.Verdict)
}

// verdictsCell is a side's verdict of an assertion: the verdict when the repetitions agree, else how
// many repetitions had each verdict ("4 pass, 2 error"); "-" when the side did not run it.
func verdictsCell(v results.Verdict, all []results.Verdict) string {
	if v == "" {
		return "-"
	}
	var order []results.Verdict
	count := map[results.Verdict]int{}
	for _, x := range all {
		if count[x] == 0 {
			order = append(order, x)
		}
		count[x]++
	}
	if len(order) <= 1 {
		return string(v)
	}
	parts := make([]string, len(order))
	for i, x := range order {
		parts[i] = fmt.Sprintf("%d %s", count[x], x)
	}
	return strings.Join(parts, ", ")
}

func changeCell(a compare.AssertionChange) string {
	if a.Reason != "" {
		return a.Change + " (" + a.Reason + ")"
	}
	return a.Change
}

func headline(r *compare.Report) string {
	if r.Regressed {
		return "REGRESSED"
	}
	return "no regression"
}

// method states how verdicts were reached, so a reader can judge a "no significant change".
func method(r *compare.Report) string {
	return fmt.Sprintf("Medians with %.0f%% confidence intervals; Mann–Whitney U test at α = %g; changes of the median under %g%% are reported as no significant change.",
		100*(1-r.Options.Alpha), r.Options.Alpha, 100*r.Options.MinEffect)
}

func sideLine(s compare.SideInfo) string {
	var parts []string
	if s.SchedulerVersion != "" {
		parts = append(parts, "scheduler "+s.SchedulerVersion)
	}
	if s.SchedulerBinary != "" {
		parts = append(parts, "binary "+s.SchedulerBinary)
	}
	if s.KubernetesVersion != "" {
		parts = append(parts, "Kubernetes "+s.KubernetesVersion)
	}
	parts = append(parts, fmt.Sprintf("%d runs", s.Runs))
	return strings.Join(parts, ", ")
}

func unchangedCount(r *compare.Report) int {
	n := 0
	for _, a := range r.Assertions {
		if !a.Changed() {
			n++
		}
	}
	return n
}

// oneLine keeps text from run files on one line, without terminal escapes.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(results.StripANSI(s))
}
