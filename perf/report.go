package perf

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gangbench/gangbench/internal/markdown"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// Formats of WriteReport.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
	// FormatBench prints only the Go benchmark lines, for benchstat.
	FormatBench = "bench"
)

// Formats lists the accepted report formats.
func Formats() []string { return []string{FormatText, FormatMarkdown, FormatJSON, FormatBench} }

// WriteReport renders a run from its record alone (no cluster).
func WriteReport(w io.Writer, r *results.Run, format string) error {
	switch format {
	case FormatText:
		return writeText(w, r)
	case FormatMarkdown:
		return writeMarkdown(w, r)
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case FormatBench:
		_, err := io.WriteString(w, strings.Join(BenchLines(r), "\n")+"\n")
		return err
	}
	return fmt.Errorf("unknown format %q (accepted: %s)", format, strings.Join(Formats(), ", "))
}

// Verdict is the run's overall outcome and the exit code it maps to.
type Verdict struct {
	Headline string // PASS, SLO VIOLATION, ERROR, INTERRUPTED
	ExitCode int    // 0 pass, 3 SLO violation, 1 harness or cluster error
}

// VerdictOf judges a finished run: harness errors and interrupts win over SLO violations (the
// figures of a broken run are not evidence), and SLO violations over a pass.
func VerdictOf(r *results.Run) Verdict {
	s := r.Summary()
	switch {
	case r.Interrupted:
		return Verdict{"INTERRUPTED", 1}
	case s.Errors > 0 || s.Failed > 0:
		return Verdict{"ERROR", 1}
	case s.SLOViolations > 0:
		return Verdict{"SLO VIOLATION", 3}
	}
	return Verdict{"PASS", 0}
}

// row is one (scenario, repetition) of the figures table.
type row struct {
	scenario, rep, nodes string
	items                map[string]results.DataItem
}

func (rw row) get(item, bucket string) (float64, bool) {
	it, ok := rw.items[item]
	if !ok {
		return 0, false
	}
	v, ok := it.Data[bucket]
	return v, ok
}

// cells is the row's line of the figures table: scenario, nodes, repetition, then each column's
// figure, or missing where the run has none.
func (rw row) cells(missing string) []string {
	cells := []string{rw.scenario, rw.nodes, rw.rep}
	for _, c := range columns() {
		if v, ok := rw.get(c.item, c.bucket); ok {
			cells = append(cells, format(v, c.digits))
		} else {
			cells = append(cells, missing)
		}
	}
	return cells
}

// rows groups the data items by scenario and repetition, in the order they were recorded.
func rows(r *results.Run) []row {
	var out []row
	idx := map[string]int{}
	for _, it := range r.DataItems {
		sc := it.Labels["scenario"]
		// Per-phase, per-component and reference items have tables of their own.
		if sc == "" || it.Labels["phase"] != "" || it.Labels["component"] != "" || it.Labels["workload"] != "" || it.Labels[LabelAgainst] != "" {
			continue
		}
		k := sc + "\x00" + it.Labels["repetition"]
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, row{scenario: sc, rep: it.Labels["repetition"], nodes: it.Labels["nodes"], items: map[string]results.DataItem{}})
		}
		out[i].items[it.Name] = it
	}
	return out
}

// column is one figure of the table and of the benchmark lines.
type column struct {
	head, item, bucket string
	// bench is the benchstat unit; empty leaves the figure out of the benchmark line.
	bench  string
	digits int
}

func columns() []column {
	return []column{
		{"bind/s", measure.ItemBindingRate, "Average", "pods/s", 1},
		{"p50/s", measure.ItemBindingRate, "Perc50", "", 0},
		{"p90/s", measure.ItemBindingRate, "Perc90", "", 0},
		{"p99/s", measure.ItemBindingRate, "Perc99", "", 0},
		{"max/s", measure.ItemBindingRate, "Max", "max-pods/s", 0},
		{"apiserver/s", measure.ItemAPIServerBindingRate, "Average", "apiserver-pods/s", 1},
		{"create/s", measure.ItemCreationRate, "Average", "create-pods/s", 1},
		{"gang p50", measure.ItemGangLatency, "Perc50", "gang-p50-s", 2},
		{"gang p99", measure.ItemGangLatency, "Perc99", "gang-p99-s", 2},
		{"gang max", measure.ItemGangLatency, "Max", "", 2},
		{"spread p99", measure.ItemBindSpread, "Perc99", "spread-p99-s", 3},
		{"partial", measure.ItemPartialGangs, measure.Value, "partial-gangs", 0},
		{"unbound", measure.ItemUnboundFitting, measure.Value, "", 0},
		{"status", measure.ItemStatusRegressions, measure.Value, "", 0},
	}
}

func format(v float64, digits int) string { return strconv.FormatFloat(v, 'f', digits, 64) }

// BenchLines renders each (scenario, repetition) as a Go benchmark line, e.g.
// "BenchmarkGang/smoke/nodes=50 1 45.2 pods/s 3.10 gang-p99-s …", so repeated runs feed benchstat.
func BenchLines(r *results.Run) []string {
	var out []string
	if r.Environment.Host.GOOS != "" {
		out = append(out, "goos: "+r.Environment.Host.GOOS, "goarch: "+r.Environment.Host.GOARCH, "pkg: github.com/gangbench/gangbench/perf")
	}
	for _, rw := range rows(r) {
		var b strings.Builder
		fmt.Fprintf(&b, "BenchmarkGang/%s/nodes=%s\t1", rw.scenario, rw.nodes)
		for _, c := range columns() {
			if c.bench == "" {
				continue
			}
			if v, ok := rw.get(c.item, c.bucket); ok {
				fmt.Fprintf(&b, "\t%s %s", strconv.FormatFloat(v, 'g', 6, 64), c.bench)
			}
		}
		// Not a column of the table, where it would be empty for every device-plugin scenario.
		if v, ok := rw.get(measure.ItemClaimAllocationRate, "Average"); ok {
			fmt.Fprintf(&b, "\t%s %s", strconv.FormatFloat(v, 'g', 6, 64), measure.UnitClaimsPerSecond)
		}
		out = append(out, b.String())
	}
	return out
}

func writeText(w io.Writer, r *results.Run) error {
	v := VerdictOf(r)
	var b strings.Builder
	fmt.Fprintf(&b, "gangbench %s %s: %s\n", r.Command, r.ID, v.Headline)
	fmt.Fprintln(&b, runLine(r))
	fmt.Fprintln(&b, envLine(r))
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	heads := []string{"scenario", "nodes", "rep"}
	for _, c := range columns() {
		heads = append(heads, c.head)
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t")+"\t")
	for _, rw := range rows(r) {
		fmt.Fprintln(tw, strings.Join(rw.cells("-"), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("(bind/s: watch timeline average from the measured phase's first creation to its last bind; p50..max: 1-second samples, a percentile left out (-) when too few; apiserver/s: binding POSTs 201 over the same window; gang: PodGroup created → last member bound, seconds; spread: first → last member bound)\n")
	writeResourcesText(&b, r)
	if lines := TrafficLines(r); len(lines) > 0 {
		b.WriteString("\n" + trafficCaption + "\n")
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	if lines := PlacementLines(r); len(lines) > 0 {
		b.WriteString("\n" + placementCaption + "\n")
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	if lines := DRALines(r); len(lines) > 0 {
		b.WriteString("\n" + draCaption + "\n")
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	if lines := GoRuntimeLines(r); len(lines) > 0 {
		b.WriteString("\n" + goRuntimeCaption + "\n")
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	if lines := ReferenceSection(r); len(lines) > 0 {
		b.WriteString("\nreference (upstream scheduler_perf, same version, in-process on this machine)\n")
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	if lines := FaultLines(r); len(lines) > 0 {
		b.WriteString("\nfaults\n")
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	if len(r.Cases) > 0 {
		b.WriteString("\nSLOs\n")
		writeObjectives(&b, r.Cases)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nnotes\n")
		for _, n := range r.Notes {
			b.WriteString("  " + n + "\n")
		}
	}
	b.WriteString("\n" + strings.Join(BenchLines(r), "\n") + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeObjectives prints one line per objective with its verdict counts, then a line for each
// case that did not pass: eight scenarios times a handful of objectives would otherwise bury the
// one violation in passes.
func writeObjectives(b *strings.Builder, cases []results.Case) {
	type obj struct {
		id, expr string
		counts   map[results.Verdict]int
		bad      []results.Case
	}
	var objs []*obj
	byKey := map[string]*obj{}
	for _, c := range cases {
		expr, _, _ := strings.Cut(c.Name, " [")
		k := c.ID + "\x00" + expr
		o := byKey[k]
		if o == nil {
			o = &obj{id: c.ID, expr: expr, counts: map[results.Verdict]int{}}
			byKey[k] = o
			objs = append(objs, o)
		}
		o.counts[c.Verdict]++
		if c.Verdict != results.Pass {
			o.bad = append(o.bad, c)
		}
	}
	idW, exprW := 0, 0
	for _, o := range objs {
		idW, exprW = max(idW, len(o.id)), max(exprW, len(o.expr))
	}
	for _, o := range objs {
		var parts []string
		for _, v := range []results.Verdict{results.Pass, results.SLOViolation, results.Error, results.Fail, results.Skip} {
			if n := o.counts[v]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", v, n))
			}
		}
		fmt.Fprintf(b, "  %-*s  %-*s  %s\n", idW, o.id, exprW, o.expr, strings.Join(parts, ", "))
		for _, c := range o.bad {
			where := ""
			if _, w, ok := strings.Cut(c.Name, " ["); ok {
				where = "[" + w + " "
			}
			fmt.Fprintf(b, "  %-*s    %s %s%s\n", idW, "", c.Verdict, where, firstLine(c.Message))
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func runLine(r *results.Run) string {
	s := "started " + r.Started.UTC().Format(time.RFC3339)
	if !r.Finished.IsZero() {
		s += ", took " + r.Finished.Sub(r.Started).Round(100*time.Millisecond).String()
	}
	for _, it := range r.DataItems {
		if it.Name == ItemHarness {
			s += fmt.Sprintf(", harness peak RSS %.0f MiB, CPU %.1f s (%.0f%% of one core)", it.Data["PeakRSSMiB"], it.Data["CPUSeconds"], 100*it.Data["CPUShare"])
		}
	}
	return s
}

func envLine(r *results.Run) string {
	e := r.Environment
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("provider", e.Provider)
	add("profile", e.Profile)
	add("apiserver", e.KubernetesVersion)
	add("scheduler", e.SchedulerVersion)
	add("scheduler binary", e.SchedulerBinary)
	if e.Nodes > 0 {
		parts = append(parts, fmt.Sprintf("%d nodes × %d GPUs", e.Nodes, e.GPUsPerNode))
	}
	qps := map[string]bool{}
	for k, v := range e.Extra {
		if strings.HasSuffix(k, ".schedulerKubeAPIQPS") {
			qps[v+"/"+e.Extra[strings.TrimSuffix(k, "QPS")+"Burst"]] = true
		}
	}
	if len(qps) > 0 {
		parts = append(parts, "scheduler kube-api-qps/burst "+strings.Join(slices.Sorted(maps.Keys(qps)), ", "))
	}
	parts = append(parts, fmt.Sprintf("%d CPUs", e.Host.Cores), e.Extra["goVersion"])
	return strings.Join(parts, ", ")
}

func writeMarkdown(w io.Writer, r *results.Run) error {
	v := VerdictOf(r)
	var md markdown.Writer
	md.Heading(1, "gangbench "+r.Command+": "+v.Headline)
	// Two trailing spaces: a hard line break between the run and its environment.
	md.Paragraph(markdown.Inline(runLine(r)) + "  \n" + markdown.Inline(envLine(r)))
	cols := []markdown.Column{markdown.Num("scenario"), markdown.Num("nodes"), markdown.Num("rep")}
	for _, c := range columns() {
		cols = append(cols, markdown.Num(c.head))
	}
	md.Table(cols...)
	for _, rw := range rows(r) {
		md.Row(rw.cells("–")...)
	}
	writeResourcesMarkdown(&md, r)
	if lines := TrafficLines(r); len(lines) > 0 {
		md.Heading(2, "apiserver traffic")
		md.Paragraph(strings.ToUpper(trafficCaption[:1]) + trafficCaption[1:] + ".")
		md.List(lines...)
	}
	if lines := PlacementLines(r); len(lines) > 0 {
		md.Heading(2, "Topology and Jobs")
		md.Paragraph(strings.ToUpper(placementCaption[:1]) + placementCaption[1:] + ".")
		md.List(lines...)
	}
	if lines := DRALines(r); len(lines) > 0 {
		md.Heading(2, "DRA")
		md.Paragraph(draCaption + ".")
		md.List(lines...)
	}
	if lines := GoRuntimeLines(r); len(lines) > 0 {
		md.Heading(2, "Go runtime")
		md.Paragraph(goRuntimeCaption + ".")
		md.List(lines...)
	}
	if lines := ReferenceSection(r); len(lines) > 0 {
		md.Heading(2, "Reference")
		md.Paragraph("Upstream scheduler_perf, same version, in-process on this machine.")
		md.List(lines...)
	}
	if lines := FaultLines(r); len(lines) > 0 {
		md.Heading(2, "Faults")
		md.List(lines...)
	}
	if len(r.Cases) > 0 {
		md.Heading(2, "SLOs")
		md.Table(markdown.Col("verdict"), markdown.Col("id"), markdown.Col("objective"), markdown.Num("measured"), markdown.Col("source"))
		for _, c := range r.Cases {
			m := ""
			if v, ok := c.Measurements["value"]; ok {
				m = strconv.FormatFloat(v, 'g', 4, 64)
			}
			md.Row(string(c.Verdict), c.ID, c.Name, m, c.Ref)
		}
	}
	if len(r.Notes) > 0 {
		md.Heading(2, "Notes")
		md.List(r.Notes...)
	}
	_, err := io.WriteString(w, md.String())
	return err
}

// FaultLines describes each injected fault in one line: when it hit, how long the cluster took
// to bind again, and whether anything was lost or left partial. The figures table has one cell
// per item and repetition, and a repetition may carry several faults, so they get lines of their own.
func FaultLines(r *results.Run) []string {
	type key struct{ scenario, rep, fault string }
	byKey := map[key]map[string]results.DataItem{}
	var order []key
	for _, it := range r.DataItems {
		if it.Labels["fault"] == "" {
			continue
		}
		k := key{it.Labels["scenario"], it.Labels["repetition"], it.Labels["fault"]}
		if byKey[k] == nil {
			byKey[k] = map[string]results.DataItem{}
			order = append(order, k)
		}
		byKey[k][it.Name] = it
	}
	var out []string
	for _, k := range order {
		its := byKey[k]
		rec, objs, part := its[ItemFaultRecovery].Data, its[ItemFaultLostObjects].Data, its[ItemFaultPartialGangs].Data
		recovery := "no bind seen after the restart"
		if v, ok := rec[measure.Value]; ok {
			recovery = fmt.Sprintf("first bind %.2f s after the fault", v)
		}
		down := fmt.Sprintf("component down %.2f s", rec["DowntimeSeconds"])
		partial := "partial gangs after recovery"
		if its[ItemFaultRecovery].Labels["action"] == string(FaultUnhealthy) {
			// A GPU fault stops nothing: it is judged from the fault on, not from the recovery.
			down = fmt.Sprintf("%.0f GPUs unhealthy on %.0f nodes for %.2f s (allocatable lowered after %.2f s, back %.2f s after the heal)",
				rec["UnhealthyGPUs"], rec["Nodes"], rec["DowntimeSeconds"], rec["LoweredSeconds"], rec["RestoredSeconds"])
			partial = "partial gangs from the fault on"
		}
		line := fmt.Sprintf("%s#%s %s at %.0f measured pods created: %s, %s; pods %.0f before → %.0f after (%.0f created, %.0f lost), PodGroups %.0f → %.0f (%.0f lost); %s %.0f",
			k.scenario, k.rep, k.fault, rec["AtPodsCreated"], down, recovery,
			objs["PodsBefore"], objs["PodsAfter"], objs["PodsCreated"], objs["PodsLost"],
			objs["GroupsBefore"], objs["GroupsAfter"], objs["GroupsLost"], partial, part[measure.Value])
		if dp, ok := its[ItemFaultDevicePlugin]; ok {
			if dp.Data["Registered"] == 1 {
				line += fmt.Sprintf("; device plugin registered again on %.0f nodes, GPUs back %.2f s after the kubelets (lowest allocatable seen %.0f)", dp.Data["Nodes"], dp.Data[measure.Value], dp.Data["MinAllocatable"])
			} else {
				line += fmt.Sprintf("; device plugin NOT back on all %.0f nodes", dp.Data["Nodes"])
			}
		}
		out = append(out, line)
	}
	return out
}
