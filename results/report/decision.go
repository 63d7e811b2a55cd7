package report

import (
	"fmt"

	"github.com/gangbench/gangbench/results/compare"
)

// A comparison is read for its verdict first: which gate metrics moved, by how much and how sure,
// and which assertions regressed. Every format leads with that, then what else moved, and only
// then (collapsed where the format allows) the metrics and assertions that did not change.

// moved reports whether a metric's verdict is a significant change either way.
func moved(m compare.MetricResult) bool {
	return m.Verdict == compare.Faster || m.Verdict == compare.Slower
}

// splitMetrics returns the gate metrics that moved (regressions first), the other metrics that
// moved, and the rest, each in report order.
func splitMetrics(r *compare.Report) (deciding, other, still []compare.MetricResult) {
	var faster []compare.MetricResult
	for _, m := range r.Metrics {
		switch {
		case moved(m) && m.Gated && m.Regression:
			deciding = append(deciding, m)
		case moved(m) && m.Gated:
			faster = append(faster, m)
		case moved(m):
			other = append(other, m)
		default:
			still = append(still, m)
		}
	}
	return append(deciding, faster...), other, still
}

// regressedAssertions are the assertions that went from pass to fail: each alone regresses a comparison.
func regressedAssertions(r *compare.Report) []compare.AssertionChange {
	var out []compare.AssertionChange
	for _, a := range r.Assertions {
		if a.Change == compare.ChangeRegressed {
			out = append(out, a)
		}
	}
	return out
}

// decisionLine is one gate metric's move in a line: "bindingRate.Average slower (regression): new/old
// 0.170 [0.150, 0.190] (45.10 → 7.700 pods/s), p 0.002 (n=6)".
func decisionLine(m compare.MetricResult) string {
	unit := ""
	if m.Unit != "" {
		unit = " " + m.Unit
	}
	return fmt.Sprintf("%s %s: new/old %s (%s → %s%s), p %s", m.DisplayName(), verdictCell(m), ratioCell(m),
		num(m.Old.Center), num(m.New.Center), unit, pCell(m))
}

// decisionSummary says in one sentence what decided the verdict.
func decisionSummary(r *compare.Report) string {
	deciding, _, _ := splitMetrics(r)
	gates := 0
	for _, m := range r.Metrics {
		if m.Gated {
			gates++
		}
	}
	reg := regressedAssertions(r)
	switch {
	case len(deciding) == 0 && len(reg) == 0:
		return fmt.Sprintf("No gate metric moved significantly (%d tested) and no assertion went from pass to fail.", gates)
	case len(reg) == 0:
		return fmt.Sprintf("%d of %d gate metrics moved significantly; no assertion went from pass to fail.", len(deciding), gates)
	}
	return fmt.Sprintf("%d of %d gate metrics moved significantly; %d %s from pass to fail.", len(deciding), gates, len(reg), plural(len(reg), "assertion went", "assertions went"))
}

// assertionLine is one regressed assertion in a line.
func assertionLine(a compare.AssertionChange) string {
	return fmt.Sprintf("%s (%s) %s: %s → %s", a.ID, a.Suite, a.Name, verdictsCell(a.Old, a.OldVerdicts), verdictsCell(a.New, a.NewVerdicts))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
