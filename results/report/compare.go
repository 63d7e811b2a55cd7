package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gangbench/gangbench/results/compare"
)

var errNilReport = errors.New("report: nil comparison")

// WriteCompareText writes a comparison for a terminal: the headline, both sides, a metric table, the
// changed assertions with a count of unchanged ones, then notes.
func WriteCompareText(w io.Writer, r *compare.Report) error {
	if r == nil {
		return errNilReport
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gangbench compare: %s\n", headline(r))
	fmt.Fprintf(&b, "old: %s (%s)\n", oneLine(r.Old.Label), oneLine(sideLine(r.Old)))
	fmt.Fprintf(&b, "new: %s (%s)\n", oneLine(r.New.Label), oneLine(sideLine(r.New)))
	b.WriteString("\n" + decisionSummary(r) + "\n")
	deciding, other, still := splitMetrics(r)
	for _, m := range deciding {
		b.WriteString("  " + oneLine(decisionLine(m)) + "\n")
	}
	for _, a := range regressedAssertions(r) {
		b.WriteString("  " + oneLine(assertionLine(a)) + "\n")
	}
	b.WriteString(method(r) + "\n")

	metricTable := func(title string, ms []compare.MetricResult) error {
		if len(ms) == 0 {
			return nil
		}
		fmt.Fprintf(&b, "\n%s (%d)\n", title, len(ms))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "metric\tunit\told\tnew\tratio [CI]\tp\tverdict")
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(m.DisplayName()), oneLine(m.Unit),
				summaryCell(m.Old), summaryCell(m.New), ratioCell(m), pCell(m), verdictCell(m))
		}
		return tw.Flush()
	}
	if err := metricTable("metrics that moved", append(deciding, other...)); err != nil {
		return err
	}
	if err := metricTable("metrics with no significant change, or not comparable", still); err != nil {
		return err
	}

	if len(r.Assertions) > 0 {
		unchanged := unchangedCount(r)
		fmt.Fprintf(&b, "\nassertions: %d changed, %d unchanged\n", len(r.Assertions)-unchanged, unchanged)
		if unchanged < len(r.Assertions) {
			tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "id\tsuite\told\tnew\tchange\tassertion")
			for _, a := range r.Assertions {
				if a.Changed() {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(a.ID), oneLine(a.Suite), verdictsCell(a.Old, a.OldVerdicts),
						verdictsCell(a.New, a.NewVerdicts), oneLine(changeCell(a)), oneLine(a.Name))
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}

	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	for _, n := range r.Notes {
		b.WriteString("note: " + oneLine(n) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCompareMarkdown writes a comparison as GitHub-flavoured markdown for a PR comment: the
// headline, both sides, the metric table, the conformance diff (changed rows only, then the count of
// unchanged assertions) and notes.
func WriteCompareMarkdown(w io.Writer, r *compare.Report) error {
	if r == nil {
		return errNilReport
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## gangbench compare: %s\n\n", headline(r))
	b.WriteString("| | old | new |\n|---|---|---|\n")
	row := func(k, o, n string) {
		if o != "" || n != "" {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", k, mdCell(o), mdCell(n))
		}
	}
	row("label", r.Old.Label, r.New.Label)
	row("scheduler", r.Old.SchedulerVersion, r.New.SchedulerVersion)
	row("scheduler binary", r.Old.SchedulerBinary, r.New.SchedulerBinary)
	row("Kubernetes", r.Old.KubernetesVersion, r.New.KubernetesVersion)
	row("runs", fmt.Sprint(r.Old.Runs), fmt.Sprint(r.New.Runs))
	b.WriteString("\n**" + decisionSummary(r) + "**\n\n")
	deciding, other, still := splitMetrics(r)
	for _, m := range deciding {
		b.WriteString("- " + mdCell(decisionLine(m)) + "\n")
	}
	for _, a := range regressedAssertions(r) {
		b.WriteString("- " + mdCell(assertionLine(a)) + "\n")
	}
	b.WriteString("\n" + method(r) + "\n")

	metricRows := func(ms []compare.MetricResult) {
		b.WriteString("| metric | unit | old | new | ratio [CI] | p | verdict |\n|---|---|---:|---:|---:|---:|---|\n")
		for _, m := range ms {
			v := mdCell(verdictCell(m))
			if m.Regression && m.Gated {
				v = "**" + v + "**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", mdCell(m.DisplayName()), mdCell(m.Unit),
				summaryCell(m.Old), summaryCell(m.New), ratioCell(m), pCell(m), v)
		}
	}
	b.WriteString("\n### Performance\n\n")
	switch movedMs := append(deciding, other...); {
	case len(r.Metrics) == 0:
		b.WriteString("No perf metrics in these runs.\n")
	case len(movedMs) == 0:
		fmt.Fprintf(&b, "No metric moved significantly.\n")
	default:
		fmt.Fprintf(&b, "Metrics that moved (%d):\n\n", len(movedMs))
		metricRows(movedMs)
	}
	if len(still) > 0 {
		// GitHub renders <details> collapsed; a blank line after <summary> lets the table inside render.
		fmt.Fprintf(&b, "\n<details><summary>%d metrics with no significant change, or not comparable</summary>\n\n", len(still))
		metricRows(still)
		b.WriteString("\n</details>\n")
	}

	b.WriteString("\n### Conformance\n\n")
	unchanged := unchangedCount(r)
	if unchanged < len(r.Assertions) {
		b.WriteString("| ID | suite | assertion | old | new | change |\n|---|---|---|---|---|---|\n")
		for _, a := range r.Assertions {
			if !a.Changed() {
				continue
			}
			c := mdCell(changeCell(a))
			if a.Change == compare.ChangeRegressed {
				c = "**" + c + "**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdCell(a.ID), mdCell(a.Suite), mdCell(a.Name),
				verdictsCell(a.Old, a.OldVerdicts), verdictsCell(a.New, a.NewVerdicts), c)
		}
		b.WriteString("\n")
	}
	switch {
	case len(r.Assertions) == 0:
		b.WriteString("No assertions in these runs.\n")
	case unchanged == len(r.Assertions):
		fmt.Fprintf(&b, "All %d assertions unchanged.\n", unchanged)
	default:
		fmt.Fprintf(&b, "%d assertions unchanged.\n", unchanged)
	}

	if len(r.Notes) > 0 {
		b.WriteString("\n### Notes\n\n")
	}
	for _, n := range r.Notes {
		b.WriteString("- " + mdCell(n) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCompareJSON writes the report as indented JSON (non-finite statistics as null, see
// compare.Summary), for tools and dashboards.
func WriteCompareJSON(w io.Writer, r *compare.Report) error {
	if r == nil {
		return errNilReport
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: encoding comparison: %w", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}
