package report

import (
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/results/compare"
)

// Page is what WriteHTML shows. Every field is optional; sections without data are left out.
type Page struct {
	Title string
	// Runs are shown in the environment and, without Compare, in the assertion and data-item tables:
	// a single run's report, or both sides of a comparison.
	Runs    []*results.Run
	Compare *compare.Report
	// Timelines maps a label (a side's label, to match Compare) to its binding-rate timeline,
	// T seconds since the start and V pods/s.
	Timelines map[string][]TimePoint
	// Latencies maps a label to its gang latency samples in seconds, drawn as CDFs.
	Latencies map[string][]float64
}

// WriteHTML writes page as one self-contained HTML file: inline CSS and SVG, no scripts, no external
// references. The markup is also well-formed XML, so tools can parse it. Text from run files is
// escaped by html/template.
func WriteHTML(w io.Writer, page Page) error {
	if slices.Contains(page.Runs, nil) {
		return fmt.Errorf("report: page %q has a nil run", page.Title)
	}
	tmpl, err := template.New("page").Funcs(template.FuncMap{"slug": slug}).Parse(pageTemplate)
	if err != nil {
		return fmt.Errorf("report: parsing the page template: %w", err) // a bug, caught by the tests
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, newPageData(page)); err != nil {
		return fmt.Errorf("report: rendering %q: %w", page.Title, err)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

type pageData struct {
	Title         string
	Headline      string
	HeadlineClass string
	Method        string
	Sides         *table
	// Suites and Failures lead a run's page: what failed, why, and where the evidence is, before
	// the environment and the full list of assertions.
	Suites        *table
	Failures      []failureView
	Environment   *table
	Assertions    *table
	AssertionNote string
	Timeline      *plot
	CDF           *plot
	Metrics       *table
	Notes         []string
	// A comparison leads with what decided its verdict (Decision, DecisionLines), the plots and the
	// metrics that moved; the metrics and assertions that did not change come last, collapsed.
	Decision            string
	DecisionLines       []string
	MetricsStill        *table
	MetricsStillCount   int
	AssertionsStill     *table
	AssertionsStillNote string
}

// failureView is one failed assertion as the page shows it.
type failureView struct {
	ID, Name, Suite, Verdict, Run string
	Message                       string
	Artifacts                     []string // paths relative to the run directory, which the page is written beside
}

type table struct {
	Headers []cell
	Rows    []row
}

type row struct {
	Class string
	Cells []cell
}

type cell struct {
	Text  string
	Class string
	Title string // tooltip, e.g. the samples behind a median
}

func (t *table) orNil() *table {
	if t == nil || len(t.Rows) == 0 {
		return nil
	}
	return t
}

func newPageData(p Page) pageData {
	d := pageData{Title: oneLine(p.Title)}
	if d.Title == "" {
		d.Title = "gangbench report"
	}
	var first []string
	if c := p.Compare; c != nil {
		d.Headline, d.HeadlineClass = headline(c), "good"
		if c.Regressed {
			d.HeadlineClass = "bad"
		}
		d.Method = method(c)
		d.Sides = sidesTable(c)
		first = []string{c.Old.Label, c.New.Label}
		changed, still := compareAssertionTables(c)
		d.Assertions, d.AssertionsStill = changed.orNil(), still.orNil()
		d.AssertionNote = fmt.Sprintf("%d of %d assertions changed.", len(c.Assertions)-unchangedCount(c), len(c.Assertions))
		d.AssertionsStillNote = fmt.Sprintf("%d assertions unchanged", unchangedCount(c))
		deciding, other, stillMs := splitMetrics(c)
		d.Decision = decisionSummary(c)
		for _, m := range deciding {
			d.DecisionLines = append(d.DecisionLines, oneLine(decisionLine(m)))
		}
		for _, a := range regressedAssertions(c) {
			d.DecisionLines = append(d.DecisionLines, oneLine(assertionLine(a)))
		}
		d.Metrics = compareMetricTable(append(deciding, other...)).orNil()
		d.MetricsStill, d.MetricsStillCount = compareMetricTable(stillMs).orNil(), len(stillMs)
		d.Notes = append(d.Notes, c.Notes...)
	} else if len(p.Runs) > 0 {
		d.Assertions = runAssertionTable(p.Runs).orNil()
		d.Metrics = runMetricTable(p.Runs).orNil()
		d.Suites = runSuiteTable(p.Runs).orNil()
		d.Failures = runFailures(p.Runs)
		d.Headline, d.HeadlineClass = "PASS", "good"
		for _, r := range p.Runs {
			if !r.Passed() {
				d.Headline, d.HeadlineClass = "FAIL", "bad"
			}
		}
		sum := p.Runs[len(p.Runs)-1].Summary()
		d.Method = fmt.Sprintf("%d assertions: passed %d, failed %d, skipped %d, errors %d", sum.Total, sum.Passed, sum.Failed, sum.Skipped, sum.Errors)
		if len(p.Runs) > 1 {
			d.Method = fmt.Sprintf("%d runs; the last: %s", len(p.Runs), d.Method)
		}
	}
	d.Environment = environmentTable(p.Runs, p.Compare).orNil()
	d.Timeline = timelinePlot(p.Timelines, first...)
	d.CDF = cdfPlot(p.Latencies, first...)
	for _, r := range p.Runs {
		for _, n := range r.Notes {
			d.Notes = append(d.Notes, "run "+r.ID+": "+oneLine(n))
		}
	}
	return d
}

// slug turns a verdict or change into a CSS class suffix: "not comparable" → "not-comparable".
func slug(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}

func sidesTable(c *compare.Report) *table {
	t := &table{Headers: []cell{{Text: "side"}, {Text: "label"}, {Text: "scheduler"}, {Text: "scheduler binary"},
		{Text: "Kubernetes"}, {Text: "runs", Class: "num"}, {Text: "run IDs"}}}
	for _, s := range []struct {
		name string
		info compare.SideInfo
	}{{"old", c.Old}, {"new", c.New}} {
		t.Rows = append(t.Rows, row{Cells: []cell{{Text: s.name}, {Text: s.info.Label}, {Text: s.info.SchedulerVersion},
			{Text: s.info.SchedulerBinary}, {Text: s.info.KubernetesVersion}, {Text: strconv.Itoa(s.info.Runs), Class: "num"},
			{Text: strings.Join(s.info.RunIDs, " ")}}})
	}
	return t
}

func environmentTable(runs []*results.Run, c *compare.Report) *table {
	t := &table{Headers: []cell{{Text: "run"}}}
	if c != nil {
		t.Headers = append(t.Headers, cell{Text: "side"})
	}
	t.Headers = append(t.Headers, cell{Text: "result"}, cell{Text: "command"}, cell{Text: "started"}, cell{Text: "took", Class: "num"},
		cell{Text: "provider"}, cell{Text: "Kubernetes"}, cell{Text: "scheduler"}, cell{Text: "scheduler binary"},
		cell{Text: "nodes × GPUs"}, cell{Text: "host"}, cell{Text: "feature gates"})
	for _, r := range runs {
		e := r.Environment
		cells := []cell{{Text: r.ID}}
		if c != nil {
			side := ""
			switch {
			case slices.Contains(c.Old.RunIDs, r.ID):
				side = c.Old.Label
			case slices.Contains(c.New.RunIDs, r.ID):
				side = c.New.Label
			}
			cells = append(cells, cell{Text: side})
		}
		result := r.Headline()
		if r.Interrupted {
			result += " (interrupted)"
		}
		var started, took, nodes string
		if !r.Started.IsZero() {
			started = r.Started.UTC().Format(time.RFC3339)
			if !r.Finished.IsZero() {
				took = fmt.Sprintf("%.1fs", r.Finished.Sub(r.Started).Seconds())
			}
		}
		if e.Nodes > 0 {
			nodes = fmt.Sprintf("%d × %d", e.Nodes, e.GPUsPerNode)
		}
		var gates []string
		for _, k := range slices.Sorted(maps.Keys(e.FeatureGates)) {
			gates = append(gates, k+"="+e.FeatureGates[k])
		}
		cells = append(cells, cell{Text: result, Class: "v-" + slug(strings.ToLower(r.Headline()))}, cell{Text: r.Command},
			cell{Text: started}, cell{Text: took, Class: "num"}, cell{Text: e.Provider}, cell{Text: e.KubernetesVersion},
			cell{Text: e.SchedulerVersion}, cell{Text: e.SchedulerBinary}, cell{Text: nodes}, cell{Text: hostText(e.Host)},
			cell{Text: strings.Join(gates, ", ")})
		t.Rows = append(t.Rows, row{Cells: oneLineCells(cells)})
	}
	return t
}

func hostText(h results.Host) string {
	var parts []string
	if h.Cores > 0 {
		parts = append(parts, fmt.Sprintf("%d cores", h.Cores))
	}
	if h.GOOS != "" || h.GOARCH != "" {
		parts = append(parts, h.GOOS+"/"+h.GOARCH)
	}
	s := strings.Join(parts, ", ")
	if h.Hostname != "" && s != "" {
		return h.Hostname + " (" + s + ")"
	}
	return h.Hostname + s
}

func oneLineCells(cells []cell) []cell {
	for i := range cells {
		cells[i].Text, cells[i].Title = oneLine(cells[i].Text), oneLine(cells[i].Title)
	}
	return cells
}

// sideVerdictCell colours a side's verdict (the worst of its repetitions); a side that both passed
// and failed gets the flaky colour.
func sideVerdictCell(v results.Verdict, all []results.Verdict) cell {
	text := verdictsCell(v, all)
	class := "v-" + slug(string(v))
	if v.Failing() && slices.Contains(all, results.Pass) {
		class = "v-flaky"
	}
	if v == "" {
		class = "v-none"
	}
	return cell{Text: text, Class: class}
}

// compareAssertionTables splits the assertions into those that changed verdict and the rest.
func compareAssertionTables(c *compare.Report) (changed, still *table) {
	head := func() *table {
		return &table{Headers: []cell{{Text: "ID"}, {Text: "suite"}, {Text: "assertion"}, {Text: "old: " + c.Old.Label},
			{Text: "new: " + c.New.Label}, {Text: "change"}}}
	}
	changed, still = head(), head()
	for _, a := range c.Assertions {
		t, class := still, ""
		if a.Changed() {
			t, class = changed, "changed"
		}
		t.Rows = append(t.Rows, row{Class: class, Cells: oneLineCells([]cell{{Text: a.ID}, {Text: a.Suite}, {Text: a.Name},
			sideVerdictCell(a.Old, a.OldVerdicts), sideVerdictCell(a.New, a.NewVerdicts),
			{Text: changeCell(a), Class: "c-" + slug(a.Change)}})})
	}
	return changed, still
}

// runSuiteTable counts verdicts per suite, a row per run and suite, failing suites first.
func runSuiteTable(runs []*results.Run) *table {
	t := &table{Headers: []cell{{Text: "suite"}, {Text: "passed", Class: "num"}, {Text: "failed", Class: "num"}, {Text: "skipped", Class: "num"}, {Text: "errors", Class: "num"}, {Text: "time", Class: "num"}}}
	if len(runs) > 1 {
		t.Headers = append([]cell{{Text: "run"}}, t.Headers...)
	}
	for _, r := range runs {
		sum := r.Summary()
		names := slices.Clone(sum.Suites)
		// Stable, so suites keep their run order within each half.
		slices.SortStableFunc(names, func(a, b string) int {
			fa, fb := sum.BySuite[a].Failed+sum.BySuite[a].Errors > 0, sum.BySuite[b].Failed+sum.BySuite[b].Errors > 0
			switch {
			case fa && !fb:
				return -1
			case fb && !fa:
				return 1
			}
			return 0
		})
		for _, n := range names {
			ss := sum.BySuite[n]
			class := "v-pass"
			if ss.Failed+ss.Errors > 0 {
				class = "v-fail"
			}
			cells := []cell{{Text: n, Class: class}, {Text: strconv.Itoa(ss.Passed), Class: "num"}, {Text: strconv.Itoa(ss.Failed), Class: "num"},
				{Text: strconv.Itoa(ss.Skipped), Class: "num"}, {Text: strconv.Itoa(ss.Errors), Class: "num"}, {Text: ss.Duration.Round(100 * time.Millisecond).String(), Class: "num"}}
			if len(runs) > 1 {
				cells = append([]cell{{Text: r.ID}}, cells...)
			}
			t.Rows = append(t.Rows, row{Cells: cells})
		}
	}
	return t
}

// runFailures lists every failing case of the runs with its whole message and artifacts.
func runFailures(runs []*results.Run) []failureView {
	var out []failureView
	for _, r := range runs {
		for _, c := range r.Cases {
			if !c.Verdict.Failing() {
				continue
			}
			f := failureView{ID: c.ID, Name: oneLine(c.Name), Suite: c.Suite, Verdict: string(c.Verdict), Message: strings.TrimSpace(results.StripANSI(c.Message)), Artifacts: c.Artifacts}
			if len(runs) > 1 {
				f.Run = r.ID
			}
			out = append(out, f)
		}
	}
	return out
}

// runAssertionTable has a verdict column per run, assertions in order of first appearance.
func runAssertionTable(runs []*results.Run) *table {
	t := &table{Headers: []cell{{Text: "ID"}, {Text: "suite"}, {Text: "assertion"}}}
	var ids []string
	byID := map[string][]cell{}
	names := map[string][2]string{}
	for i, r := range runs {
		t.Headers = append(t.Headers, cell{Text: r.ID})
		for _, c := range r.Cases {
			if _, ok := byID[c.ID]; !ok {
				ids = append(ids, c.ID)
				byID[c.ID] = make([]cell, len(runs))
			}
			names[c.ID] = [2]string{c.Suite, c.Name}
			byID[c.ID][i] = cell{Text: string(c.Verdict), Class: "v-" + slug(string(c.Verdict)), Title: c.Message}
		}
	}
	for _, id := range ids {
		cells := append([]cell{{Text: id}, {Text: names[id][0]}, {Text: names[id][1]}}, byID[id]...)
		for i := 3; i < len(cells); i++ {
			if cells[i].Text == "" {
				cells[i] = cell{Text: "-", Class: "v-none"}
			}
		}
		t.Rows = append(t.Rows, row{Cells: oneLineCells(cells)})
	}
	return t
}

func samplesTitle(s compare.Summary) string {
	if s.N == 0 {
		return ""
	}
	parts := make([]string, len(s.Samples))
	for i, v := range s.Samples {
		parts[i] = num(v)
	}
	return fmt.Sprintf("n=%d: %s; CI [%s, %s]", s.N, strings.Join(parts, " "), num(s.Lo), num(s.Hi))
}

func compareMetricTable(ms []compare.MetricResult) *table {
	t := &table{Headers: []cell{{Text: "metric"}, {Text: "unit"}, {Text: "old", Class: "num"}, {Text: "new", Class: "num"},
		{Text: "ratio [CI]", Class: "num"}, {Text: "p", Class: "num"}, {Text: "verdict"}}}
	for _, m := range ms {
		dir := "lower is better"
		if m.HigherIsBetter {
			dir = "higher is better"
		}
		t.Rows = append(t.Rows, row{Cells: oneLineCells([]cell{{Text: m.DisplayName(), Title: dir}, {Text: m.Unit},
			{Text: summaryCell(m.Old), Class: "num", Title: samplesTitle(m.Old)},
			{Text: summaryCell(m.New), Class: "num", Title: samplesTitle(m.New)},
			{Text: ratioCell(m), Class: "num"}, {Text: pCell(m), Class: "num"},
			{Text: verdictCell(m), Class: "m-" + slug(string(m.Verdict)), Title: strings.Join(m.Warnings, "; ")}})})
	}
	return t
}

// runMetricTable has a value column per run for every data key of every data item.
func runMetricTable(runs []*results.Run) *table {
	t := &table{Headers: []cell{{Text: "metric"}, {Text: "unit"}}}
	type key struct{ name, unit string }
	var keys []key
	values := map[key][]string{}
	for i, r := range runs {
		t.Headers = append(t.Headers, cell{Text: r.ID, Class: "num"})
		for _, d := range r.DataItems {
			name := d.Name
			if len(d.Labels) > 0 {
				name += " {" + compare.LabelString(d.Labels) + "}"
			}
			for _, k := range slices.Sorted(maps.Keys(d.Data)) {
				kk := key{name + "." + k, d.UnitOf(k)}
				if _, ok := values[kk]; !ok {
					keys = append(keys, kk)
					values[kk] = make([]string, len(runs))
				}
				values[kk][i] = num(d.Data[k])
			}
		}
	}
	for _, k := range keys {
		cells := []cell{{Text: k.name}, {Text: k.unit}}
		for _, v := range values[k] {
			if v == "" {
				v = "-"
			}
			cells = append(cells, cell{Text: v, Class: "num"})
		}
		t.Rows = append(t.Rows, row{Cells: oneLineCells(cells)})
	}
	return t
}

// pageTemplate is XHTML-compatible HTML5: every element closed, no named entities beyond XML's.
const pageTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.6em; margin: 0 0 0.3em; }
h2 { font-size: 1.2em; margin: 1.6em 0 0.5em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; margin: 1em 0 0.2em; }
pre { background: #f8f8f8; border: 1px solid #ddd; padding: 0.5em; white-space: pre-wrap; margin: 0.2em 0; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.headline { font-size: 1.2em; font-weight: bold; padding: 0.4em 0.8em; display: inline-block; }
.good { background: #d4edda; color: #155724; }
.bad { background: #f8d7da; color: #721c24; }
.method, .small { color: #555; }
.v-pass { background: #d4edda; }
.v-fail, .v-error { background: #f8d7da; }
.v-slo-violation, .v-flaky { background: #fff3cd; }
.v-skip, .v-none { background: #eee; color: #666; }
.c-regressed, .m-slower { background: #f8d7da; font-weight: bold; }
.c-fixed, .m-faster { background: #d4edda; }
.c-flaky { background: #fff3cd; }
.c-new, .c-removed, .c-not-comparable, .m-not-comparable { background: #e2e3e5; }
tr.changed td:first-child { border-left: 3px solid #555; }
p.decision { font-weight: bold; }
ul.decision li { font-family: ui-monospace, monospace; }
details summary { cursor: pointer; color: #333; margin: .5em 0; }
svg { font: 11px system-ui, sans-serif; }
svg .frame { fill: none; stroke: #999; }
svg .grid { stroke: #eee; }
svg .series { fill: none; stroke-width: 1.5; }
svg .s0 { stroke: #4e79a7; }
svg .s1 { stroke: #e15759; }
svg .s2 { stroke: #59a14f; }
svg .s3 { stroke: #f28e2b; }
svg .s4 { stroke: #b07aa1; }
svg .s5 { stroke: #76b7b2; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{- if .Headline}}
<p class="headline {{.HeadlineClass}}">{{.Headline}}</p>
{{- end}}
{{- if .Decision}}
<p class="decision">{{.Decision}}</p>
{{- if .DecisionLines}}
<ul class="decision">
{{- range .DecisionLines}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- end}}
{{- if .Headline}}
<p class="method">{{.Method}}</p>
{{- end}}
{{- if .Suites}}
<h2 id="suites">Suites</h2>
{{template "table" .Suites}}
{{- end}}
{{- if .Failures}}
<h2 id="failures">Failures ({{len .Failures}})</h2>
{{- range .Failures}}
<div class="failure">
<h3 id="fail-{{.ID}}">{{if .Run}}{{.Run}}: {{end}}{{.ID}} <span class="v-{{slug .Verdict}}">{{.Verdict}}</span> {{.Name}}</h3>
<p class="small">suite {{.Suite}}</p>
{{- if .Message}}
<pre>{{.Message}}</pre>
{{- end}}
{{- if .Artifacts}}
<p class="small">artifacts:{{range .Artifacts}} <a href="{{.}}">{{.}}</a>{{end}}</p>
{{- end}}
</div>
{{- end}}
{{- end}}
{{- with .Timeline}}
<h2 id="{{.ID}}">{{.Title}}</h2>
{{template "plot" .}}
{{- end}}
{{- with .CDF}}
<h2 id="{{.ID}}">{{.Title}}</h2>
{{template "plot" .}}
{{- end}}
{{- if .Sides}}
<h2 id="sides">Compared versions</h2>
{{template "table" .Sides}}
{{- end}}
{{- if or .Metrics .MetricsStill}}
<h2 id="metrics">Metrics</h2>
{{- if .Sides}}
{{- if .Metrics}}
<p class="small">Metrics that moved:</p>
{{template "table" .Metrics}}
{{- else}}
<p class="small">No metric moved significantly.</p>
{{- end}}
{{- else if .Metrics}}
{{template "table" .Metrics}}
{{- end}}
{{- if .MetricsStill}}
<details id="metrics-unchanged"><summary>{{.MetricsStillCount}} metrics with no significant change, or not comparable</summary>
{{template "table" .MetricsStill}}
</details>
{{- end}}
{{- end}}
{{- if .Environment}}
<h2 id="environment">Environment</h2>
{{template "table" .Environment}}
{{- end}}
{{- if or .Assertions .AssertionsStill}}
<h2 id="assertions">Assertions</h2>
{{- if .AssertionNote}}
<p class="small">{{.AssertionNote}}</p>
{{- end}}
{{- if .Assertions}}
{{template "table" .Assertions}}
{{- end}}
{{- if .AssertionsStill}}
<details id="assertions-unchanged"><summary>{{.AssertionsStillNote}}</summary>
{{template "table" .AssertionsStill}}
</details>
{{- end}}
{{- end}}
{{- if .Notes}}
<h2 id="notes">Notes</h2>
<ul>
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
</body>
</html>
{{define "table" -}}
<table>
<thead><tr>{{range .Headers}}<th{{if .Class}} class="{{.Class}}"{{end}}>{{.Text}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr{{if .Class}} class="{{.Class}}"{{end}}>{{range .Cells}}<td{{if .Class}} class="{{.Class}}"{{end}}{{if .Title}} title="{{.Title}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{define "plot" -}}
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}}">
{{- $p := .}}
{{- range .XTicks}}
<line class="grid" x1="{{.Pos}}" y1="{{$p.Y0}}" x2="{{.Pos}}" y2="{{$p.Y1}}"/>
<text x="{{.Pos}}" y="{{$p.Y1}}" dy="16" text-anchor="middle">{{.Label}}</text>
{{- end}}
{{- range .YTicks}}
<line class="grid" x1="{{$p.X0}}" y1="{{.Pos}}" x2="{{$p.X1}}" y2="{{.Pos}}"/>
<text x="{{$p.X0}}" y="{{.Pos}}" dx="-6" dy="4" text-anchor="end">{{.Label}}</text>
{{- end}}
<polyline class="frame" points="{{.X0}},{{.Y0}} {{.X0}},{{.Y1}} {{.X1}},{{.Y1}}"/>
<text x="{{.XMid}}" y="{{.Y1}}" dy="38" text-anchor="middle">{{.XLabel}}</text>
<text transform="translate(14 {{.YMid}}) rotate(-90)" text-anchor="middle">{{.YLabel}}</text>
{{- range .Series}}
<polyline class="series {{.Class}}" points="{{.Points}}"><title>{{.Label}}</title></polyline>
{{- end}}
{{- range .Series}}
<line class="series {{.Class}}" x1="{{$p.X0}}" y1="{{.LegendY}}" x2="{{$p.LegendLineEnd}}" y2="{{.LegendY}}" stroke-width="3"/>
<text x="{{$p.LegendLineEnd}}" y="{{.LegendY}}" dx="6" dy="4">{{.Label}} ({{.Count}} {{$p.CountUnit}})</text>
{{- end}}
</svg>
{{- end}}
`
