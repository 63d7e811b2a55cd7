package results

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gangbench/gangbench/internal/markdown"
)

// idWidth is the minimum width of the ID column, so live lines (one case at a time) line up.
const idWidth = 8

const interruptedBanner = "*** INTERRUPTED: partial results ***"

// FormatCaseLine is the one-line form of a case used by WriteText and for live progress, e.g.
// "BAR-03   pass    2.1s  pods wait for the PodGroup object".
func FormatCaseLine(c Case) string { return formatCaseLine(c, idWidth, len(Error)) }

// FormatCaseDetail is the indented first line of a non-passing case's message, shown under its
// FormatCaseLine; "" when there is nothing to show.
func FormatCaseDetail(c Case) string { return formatCaseDetail(c, idWidth) }

func formatCaseLine(c Case, width, verdictWidth int) string {
	line := fmt.Sprintf("%-*s %-*s %6s  %s", width, c.ID, verdictWidth, c.Verdict, seconds(c.Duration), firstLine(StripANSI(c.Name)))
	return strings.TrimRight(line, " ")
}

func formatCaseDetail(c Case, width int) string {
	msg := strings.TrimSpace(firstLine(StripANSI(c.Message)))
	if c.Verdict == Pass || msg == "" {
		return ""
	}
	return strings.Repeat(" ", width+1) + msg
}

// failureLines caps how much of a failure's message the text report shows; the rest is in
// run.json and the artifacts.
const failureLines = 12

// WriteText writes a human report. A red run tells its story first: the per-suite counts, then each
// failing case with its message (up to failureLines lines) and artifacts; then a line per case (with
// the first message line of non-passing cases) and the total line "passed N, failed N, skipped N,
// errors N" last, where a terminal's last screen shows it.
func WriteText(w io.Writer, r *Run) error {
	var b strings.Builder
	sum := r.Summary()
	fmt.Fprintf(&b, "%s: %s\n", strings.TrimSpace(title(r)+" run "+r.ID), r.Headline())
	if r.Interrupted {
		b.WriteString(interruptedBanner + "\n")
	}
	if s := timing(r); s != "" {
		b.WriteString(s + "\n")
	}
	if s := envSummary(r.Environment); s != "" {
		b.WriteString(s + "\n")
	}
	width, vwidth := idWidth, len(Error)
	for _, c := range r.Cases {
		width, vwidth = max(width, len(c.ID)), max(vwidth, len(c.Verdict))
	}
	nameW := len("total")
	for _, n := range sum.Suites {
		nameW = max(nameW, len(n))
	}
	slo := sum.SLOViolations > 0
	row := func(name string, s SuiteSummary) {
		fmt.Fprintf(&b, "%-*s %6d %6d %7d %6d", nameW, name, s.Passed, s.Failed, s.Skipped, s.Errors)
		if slo {
			fmt.Fprintf(&b, " %14d", s.SLOViolations)
		}
		fmt.Fprintf(&b, " %8s\n", seconds(s.Duration))
	}
	if len(sum.Suites) > 0 {
		b.WriteString("\n")
		fmt.Fprintf(&b, "%-*s %6s %6s %7s %6s", nameW, "suite", "passed", "failed", "skipped", "errors")
		if slo {
			fmt.Fprintf(&b, " %14s", "slo-violations")
		}
		fmt.Fprintf(&b, " %8s\n", "time")
		for _, n := range sum.Suites {
			row(n, sum.BySuite[n])
		}
	}
	var failing []Case
	for _, c := range r.Cases {
		if c.Verdict.Failing() {
			failing = append(failing, c)
		}
	}
	if len(failing) > 0 {
		fmt.Fprintf(&b, "\nfailures (%d):\n", len(failing))
	}
	for _, c := range failing {
		b.WriteString("\n" + formatCaseLine(c, width, vwidth) + "\n")
		lines := strings.Split(strings.TrimSpace(StripANSI(c.Message)), "\n")
		if len(lines) > failureLines {
			lines = append(lines[:failureLines], fmt.Sprintf("… %d more lines in run.json", len(lines)-failureLines))
		}
		for _, l := range lines {
			if l = strings.TrimRight(l, " "); l != "" {
				b.WriteString(strings.Repeat(" ", width+1) + l + "\n")
			}
		}
		if len(c.Artifacts) > 0 {
			b.WriteString(strings.Repeat(" ", width+1) + "artifacts: " + strings.Join(c.Artifacts, ", ") + "\n")
		}
	}
	if len(r.Cases) > 0 {
		b.WriteString("\nall assertions:\n")
	}
	for _, c := range r.Cases {
		b.WriteString(formatCaseLine(c, width, vwidth) + "\n")
		if d := formatCaseDetail(c, width); d != "" {
			b.WriteString(d + "\n")
		}
	}
	b.WriteString("\n" + totalLine(sum) + "\n")
	if r.Interrupted {
		b.WriteString(interruptedBanner + "\n")
	}
	for _, n := range r.Notes {
		b.WriteString("note: " + StripANSI(n) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes a GitHub-flavoured markdown summary, e.g. for $GITHUB_STEP_SUMMARY. A red
// run tells its story first: totals, the suites, then each failure with its message and artifacts;
// the environment, skips and measurements follow.
func WriteMarkdown(w io.Writer, r *Run) error {
	var md markdown.Writer
	sum := r.Summary()
	md.Heading(1, title(r)+": "+r.Headline())
	if r.Interrupted {
		md.Paragraph("> **INTERRUPTED: partial results.** The run was stopped by a signal; cases that did not run are missing.")
	}
	md.Paragraph(totalLine(sum) + ".")
	slo := sum.SLOViolations > 0
	md.Heading(2, "Suites")
	cols := []markdown.Column{markdown.Col("suite"), markdown.Num("passed"), markdown.Num("failed"), markdown.Num("skipped"), markdown.Num("errors")}
	if slo {
		cols = append(cols, markdown.Num("SLO violations"))
	}
	md.Table(append(cols, markdown.Num("time"))...)
	row := func(name string, s SuiteSummary) {
		cells := []string{name, strconv.Itoa(s.Passed), strconv.Itoa(s.Failed), strconv.Itoa(s.Skipped), strconv.Itoa(s.Errors)}
		if slo {
			cells = append(cells, strconv.Itoa(s.SLOViolations))
		}
		md.Row(append(cells, seconds(s.Duration))...)
	}
	for _, n := range sum.Suites {
		row(StripANSI(n), sum.BySuite[n])
	}
	row("**total**", SuiteSummary{Passed: sum.Passed, Failed: sum.Failed, Skipped: sum.Skipped,
		Errors: sum.Errors, SLOViolations: sum.SLOViolations, Duration: sum.Duration})

	var failing, skipped []Case
	var measured bool
	for _, c := range r.Cases {
		switch {
		case c.Verdict == Skip:
			skipped = append(skipped, c)
		case c.Verdict.Failing():
			failing = append(failing, c)
		}
		measured = measured || len(c.Measurements) > 0
	}
	if len(failing) > 0 {
		md.Heading(2, "Failures")
	}
	for _, c := range failing {
		md.Heading(3, StripANSI(c.ID)+" "+StripANSI(firstLine(c.Name))+" ("+string(c.Verdict)+")")
		line := "suite " + mdInline(suiteName(c))
		if c.Ref != "" {
			line += ", ref " + mdInline(c.Ref)
		}
		md.Paragraph(line + ", " + seconds(c.Duration))
		if msg := strings.TrimRight(StripANSI(c.Message), "\n"); msg != "" {
			md.Code("text", msg)
		}
		if len(c.Artifacts) > 0 {
			arts := make([]string, len(c.Artifacts))
			for i, a := range c.Artifacts {
				arts[i] = "`" + strings.ReplaceAll(a, "`", "'") + "`"
			}
			md.Paragraph("artifacts (in the run directory): " + strings.Join(arts, ", "))
		}
	}
	e := r.Environment
	env := false
	cell := func(k, v string) {
		if v != "" && v != "0" {
			if !env {
				md.Heading(2, "Environment")
				md.Table(markdown.Col(""), markdown.Col(""))
				env = true
			}
			md.Row(k, StripANSI(v))
		}
	}
	cell("run", r.ID)
	cell("timing", timing(r))
	cell("provider", e.Provider)
	cell("Kubernetes", e.KubernetesVersion)
	cell("scheduler", e.SchedulerVersion)
	cell("scheduler binary", e.SchedulerBinary)
	cell("nodes", strconv.Itoa(e.Nodes))
	cell("GPUs per node", strconv.Itoa(e.GPUsPerNode))
	cell("host", hostSummary(e.Host))
	var gates []string
	for _, k := range sortedKeys(e.FeatureGates) {
		gates = append(gates, k+"="+e.FeatureGates[k])
	}
	cell("feature gates", strings.Join(gates, ", "))
	for _, k := range sortedKeys(e.Extra) {
		cell(StripANSI(k), e.Extra[k])
	}

	if len(skipped) > 0 {
		md.Heading(2, "Skipped")
	}
	var skips []string
	for _, c := range skipped {
		line := strings.TrimSpace(StripANSI(c.ID + " " + firstLine(c.Name)))
		if msg := StripANSI(firstLine(c.Message)); msg != "" {
			line += ": " + msg
		}
		skips = append(skips, line)
	}
	md.List(skips...)
	if measured {
		md.Heading(2, "Measurements")
		md.Table(markdown.Col("case"), markdown.Col("measurement"), markdown.Num("value"))
		for _, c := range r.Cases {
			for _, k := range sortedKeys(c.Measurements) {
				md.Row(StripANSI(c.ID), StripANSI(k), formatFloat(c.Measurements[k]))
			}
		}
	}
	if len(r.Notes) > 0 {
		md.Heading(2, "Notes")
	}
	notes := make([]string, len(r.Notes))
	for i, n := range r.Notes {
		notes[i] = StripANSI(n)
	}
	md.List(notes...)
	_, err := io.WriteString(w, md.String())
	return err
}

func title(r *Run) string { return strings.TrimSpace("gangbench " + r.Command) }

func totalLine(s Summary) string {
	line := fmt.Sprintf("passed %d, failed %d, skipped %d, errors %d", s.Passed, s.Failed, s.Skipped, s.Errors)
	if s.SLOViolations > 0 {
		line += fmt.Sprintf(", slo-violations %d", s.SLOViolations)
	}
	return line
}

func timing(r *Run) string {
	if r.Started.IsZero() {
		return ""
	}
	s := "started " + r.Started.UTC().Format(time.RFC3339)
	if !r.Finished.IsZero() {
		s += ", took " + seconds(r.Finished.Sub(r.Started))
	}
	return s
}

func envSummary(e Environment) string {
	var parts []string
	add := func(label, v string) {
		if v != "" {
			parts = append(parts, label+v)
		}
	}
	add("provider ", e.Provider)
	add("Kubernetes ", e.KubernetesVersion)
	add("scheduler ", e.SchedulerVersion)
	add("scheduler binary ", e.SchedulerBinary)
	if e.Nodes > 0 {
		parts = append(parts, fmt.Sprintf("%d nodes x %d GPUs", e.Nodes, e.GPUsPerNode))
	}
	add("host ", hostSummary(e.Host))
	return strings.Join(parts, ", ")
}

func hostSummary(h Host) string {
	var parts []string
	if h.Cores > 0 {
		parts = append(parts, fmt.Sprintf("%d cores", h.Cores))
	}
	if h.GOOS != "" || h.GOARCH != "" {
		parts = append(parts, h.GOOS+"/"+h.GOARCH)
	}
	rest := strings.Join(parts, ", ")
	if h.Hostname == "" || rest == "" {
		return h.Hostname + rest
	}
	return h.Hostname + " (" + rest + ")"
}

// mdInline makes s safe on one markdown line or table cell: no ANSI, no line breaks, no pipes or HTML.
func mdInline(s string) string { return markdown.Inline(StripANSI(s)) }

// formatFloat is short and deterministic: plain decimals when compact, else 6 significant digits.
func formatFloat(v float64) string {
	if s := strconv.FormatFloat(v, 'f', -1, 64); len(s) <= 12 {
		return s
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
