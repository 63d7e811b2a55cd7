package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gangbench/gangbench/internal/markdown"
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
	var md markdown.Writer
	md.Heading(2, "gangbench compare: "+headline(r))
	md.Table(markdown.Col(""), markdown.Col("old"), markdown.Col("new"))
	row := func(k, o, n string) {
		if o != "" || n != "" {
			md.Row(k, oneLine(o), oneLine(n))
		}
	}
	row("label", r.Old.Label, r.New.Label)
	row("scheduler", r.Old.SchedulerVersion, r.New.SchedulerVersion)
	row("scheduler binary", r.Old.SchedulerBinary, r.New.SchedulerBinary)
	row("Kubernetes", r.Old.KubernetesVersion, r.New.KubernetesVersion)
	row("runs", fmt.Sprint(r.Old.Runs), fmt.Sprint(r.New.Runs))
	md.Paragraph("**" + decisionSummary(r) + "**")
	deciding, other, still := splitMetrics(r)
	var decisions []string
	for _, m := range deciding {
		decisions = append(decisions, oneLine(decisionLine(m)))
	}
	for _, a := range regressedAssertions(r) {
		decisions = append(decisions, oneLine(assertionLine(a)))
	}
	md.List(decisions...)
	md.Paragraph(method(r))

	metricRows := func(ms []compare.MetricResult) {
		md.Table(markdown.Col("metric"), markdown.Col("unit"), markdown.Num("old"), markdown.Num("new"),
			markdown.Num("ratio [CI]"), markdown.Num("p"), markdown.Col("verdict"))
		for _, m := range ms {
			v := oneLine(verdictCell(m))
			if m.Regression && m.Gated {
				v = "**" + v + "**"
			}
			md.Row(oneLine(m.DisplayName()), oneLine(m.Unit), summaryCell(m.Old), summaryCell(m.New), ratioCell(m), pCell(m), v)
		}
	}
	md.Heading(3, "Performance")
	switch movedMs := append(deciding, other...); {
	case len(r.Metrics) == 0:
		md.Paragraph("No perf metrics in these runs.")
	case len(movedMs) == 0:
		md.Paragraph("No metric moved significantly.")
	default:
		md.Paragraph(fmt.Sprintf("Metrics that moved (%d):", len(movedMs)))
		metricRows(movedMs)
	}
	if len(still) > 0 {
		// GitHub renders <details> collapsed; a blank line after <summary> lets the table inside render.
		md.Paragraph(fmt.Sprintf("<details><summary>%d metrics with no significant change, or not comparable</summary>", len(still)))
		metricRows(still)
		md.Paragraph("</details>")
	}

	md.Heading(3, "Conformance")
	unchanged := unchangedCount(r)
	if unchanged < len(r.Assertions) {
		md.Table(markdown.Col("ID"), markdown.Col("suite"), markdown.Col("assertion"), markdown.Col("old"), markdown.Col("new"), markdown.Col("change"))
		for _, a := range r.Assertions {
			if !a.Changed() {
				continue
			}
			c := oneLine(changeCell(a))
			if a.Change == compare.ChangeRegressed {
				c = "**" + c + "**"
			}
			md.Row(oneLine(a.ID), oneLine(a.Suite), oneLine(a.Name), verdictsCell(a.Old, a.OldVerdicts), verdictsCell(a.New, a.NewVerdicts), c)
		}
	}
	switch {
	case len(r.Assertions) == 0:
		md.Paragraph("No assertions in these runs.")
	case unchanged == len(r.Assertions):
		md.Paragraph(fmt.Sprintf("All %d assertions unchanged.", unchanged))
	default:
		md.Paragraph(fmt.Sprintf("%d assertions unchanged.", unchanged))
	}

	if len(r.Notes) > 0 {
		md.Heading(3, "Notes")
	}
	notes := make([]string, len(r.Notes))
	for i, n := range r.Notes {
		notes[i] = oneLine(n)
	}
	md.List(notes...)
	_, err := io.WriteString(w, md.String())
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
