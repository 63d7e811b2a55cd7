// Package slo reads SLO files (apiVersion gangbench.dev/v1alpha1, kind SLO) and judges a run's
// DataItems against them. Every objective must say where its number came from: an absolute
// threshold without a source (machine, date, runs) cannot be trusted or revised.
package slo

import (
	_ "embed" // the default SLO file
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gangbench/gangbench/perf/internal/strictyaml"
	"github.com/gangbench/gangbench/results"
)

// APIVersion and Kind head every SLO file.
const (
	APIVersion = "gangbench.dev/v1alpha1"
	Kind       = "SLO"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultFile is the name the embedded default SLO file reports in errors and results.
const DefaultFile = "perf/slo/default.yaml"

// Default returns the embedded default SLO file's bytes (a copy).
func Default() []byte { return slices.Clone(defaultYAML) }

// Objective is one threshold on one statistic of one DataItem.
type Objective struct {
	// Expr is the objective as written, e.g. "bindingRate.avg >= 50/s".
	Expr string
	// Item is the DataItem name; Labels must all match the item's labels.
	Item   string
	Labels map[string]string
	// Bucket is the DataItem data key (Average, Perc99, Value, …).
	Bucket string
	Op     string
	// Value is in the item's unit: seconds for durations, pods/s for rates.
	Value float64
	// Unit is "s", "pods/s", "claims/s" or "" (a plain number, checked against nothing).
	Unit string
	// Source says where the number came from; required.
	Source string
	// Scenarios limits the objective to these scenario names; empty means every scenario.
	Scenarios []string
	// File and Line are where it was written.
	File string
	Line int
}

// Options tells Load what it can check without data.
type Options struct {
	// Items are the DataItem names that exist; an objective naming another is an error (a typo
	// would otherwise be silently skipped for ever).
	Items []string
	// Scenarios are the scenario names an objective's scenarios list may name; empty accepts any.
	// A misspelt name would otherwise make the objective skip in every run, unnoticed.
	Scenarios []string
}

// LoadFile reads an SLO file.
func LoadFile(path string, opts Options) ([]Objective, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(path, data, opts)
}

// Load decodes an SLO file strictly, reporting every problem as FILE:LINE: FIELD: message.
func Load(file string, data []byte, opts Options) ([]Objective, error) {
	root, err := strictyaml.Parse(file, data)
	if err != nil {
		return nil, err
	}
	if err := strictyaml.Header(file, root, APIVersion, Kind); err != nil {
		return nil, err
	}
	d := strictyaml.NewDecoder(file)
	var out []Objective
	sawObjectives := false
	d.Map(root, "", []string{"apiVersion", "kind", "metadata", "objectives"}, func(key string, _, v *yaml.Node) {
		switch key {
		case "metadata":
			d.Map(v, "metadata", []string{"name", "description"}, func(key string, _, v *yaml.Node) {
				_, _ = d.String(v, "metadata."+key)
			})
		case "objectives":
			sawObjectives = true
			if v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
				// An SLO file that judges nothing would make every run pass its SLOs.
				d.Errorf(v, "objectives", "empty; list at least one objective, e.g. - {expr: bindingRate.avg >= 50/s, source: ...}")
				return
			}
			d.Seq(v, "objectives", func(_ int, item *yaml.Node, f string) {
				if o, ok := decodeObjective(d, item, f, opts); ok {
					out = append(out, o)
				}
			})
		}
	})
	if !sawObjectives {
		d.Errorf(root, "objectives", "missing; an SLO file lists objectives")
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func decodeObjective(d *strictyaml.Decoder, n *yaml.Node, f string, opts Options) (Objective, bool) {
	o := Objective{File: d.File(), Line: n.Line}
	ok := true
	var exprNode, sourceNode *yaml.Node
	d.Map(n, f, []string{"expr", "source", "scenarios"}, func(key string, _, v *yaml.Node) {
		switch key {
		case "expr":
			exprNode = v
			s, good := d.String(v, f+".expr")
			if !good {
				ok = false
				return
			}
			if err := parseExpr(s, &o); err != nil {
				d.Errorf(v, f+".expr", "%v", err)
				ok = false
				return
			}
			if len(opts.Items) > 0 && !slices.Contains(opts.Items, o.Item) {
				d.Errorf(v, f+".expr", "unknown data item %q (known: %s)", o.Item, strings.Join(opts.Items, ", "))
				ok = false
			}
		case "source":
			sourceNode = v
			s, good := d.String(v, f+".source")
			if good && strings.TrimSpace(s) == "" {
				d.Errorf(v, f+".source", "empty; say where the number came from (machine, date, runs)")
				good = false
			}
			o.Source, ok = s, ok && good
		case "scenarios":
			o.Scenarios = d.Strings(v, f+".scenarios")
			if len(opts.Scenarios) == 0 || v.Kind != yaml.SequenceNode {
				return
			}
			for i, item := range v.Content {
				if item.Kind == yaml.ScalarNode && item.Tag != "!!null" && !slices.Contains(opts.Scenarios, item.Value) {
					d.Errorf(item, fmt.Sprintf("%s.scenarios[%d]", f, i), "unknown scenario %q (known: %s)", item.Value, strings.Join(opts.Scenarios, ", "))
					ok = false
				}
			}
		}
	})
	if n.Kind == yaml.MappingNode {
		if exprNode == nil {
			d.Errorf(n, f+".expr", "missing; e.g. expr: bindingRate.avg >= 50/s")
			ok = false
		}
		if sourceNode == nil {
			d.Errorf(n, f+".source", "missing; every threshold must say where its number came from (machine, date, runs)")
			ok = false
		}
	}
	return o, ok
}

var exprRE = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9]*)(\{[^}]*\})?(?:\.([A-Za-z0-9_]+))?\s*(>=|<=|==|!=|>|<)\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*$`)

// bucketAliases are the short statistic names an expression may use.
func bucketAliases() map[string]string {
	return map[string]string{
		"avg": "Average", "average": "Average", "mean": "Average",
		"p50": "Perc50", "p90": "Perc90", "p99": "Perc99", "max": "Max", "min": "Min",
		"count": "Count", "value": "Value",
	}
}

// ParseExpr parses `item[{k=v,…}][.stat] op number[unit]`, e.g. `gangLatency.p99 <= 30s`,
// `bindingRate.avg >= 50/s`, `partialGangs == 0`.
func ParseExpr(s string) (Objective, error) {
	var o Objective
	err := parseExpr(s, &o)
	return o, err
}

func parseExpr(s string, o *Objective) error {
	m := exprRE.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("%q is not an objective; want ITEM[{label=value}][.STAT] OP NUMBER[UNIT], e.g. bindingRate.avg >= 50/s, gangLatency.p99 <= 30s, partialGangs == 0", s)
	}
	o.Expr = strings.TrimSpace(s)
	o.Item, o.Op = m[1], m[4]
	if m[2] != "" {
		o.Labels = map[string]string{}
		for _, kv := range strings.Split(strings.Trim(m[2], "{}"), ",") {
			k, v, found := strings.Cut(strings.TrimSpace(kv), "=")
			k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"`)
			if !found || k == "" {
				return fmt.Errorf("label selector %s: want {name=value,…}", m[2])
			}
			o.Labels[k] = v
		}
	}
	o.Bucket = "Value"
	if m[3] != "" {
		o.Bucket = m[3]
		if b, ok := bucketAliases()[strings.ToLower(m[3])]; ok {
			o.Bucket = b
		}
	}
	num, err := strconv.ParseFloat(m[5], 64)
	if err != nil {
		return fmt.Errorf("%q: bad number %q", s, m[5])
	}
	switch unit := m[6]; unit {
	case "":
		o.Value = num
	case "/s", "pods/s":
		o.Value, o.Unit = num, "pods/s"
	case "claims/s":
		// DRA's claim allocation rate (claimAllocationRate) is in claims, not pods: a pod may
		// have several claims, so the units must not be mixed up.
		o.Value, o.Unit = num, "claims/s"
	case "ns", "us", "ms", "s", "m", "h":
		o.Value, o.Unit = num*durationUnits()[unit], "s"
	default:
		return fmt.Errorf("%q: unknown unit %q (accepted: /s or pods/s for rates, claims/s for claimAllocationRate; ms, s, m, h for durations; none for counts)", s, unit)
	}
	return nil
}

// durationUnits are seconds per unit; durations are compared in seconds, the unit of the items.
func durationUnits() map[string]float64 {
	return map[string]float64{"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
}

// Matches reports whether the objective applies to an item.
func (o Objective) Matches(it results.DataItem) bool {
	if it.Name != o.Item {
		return false
	}
	for k, v := range o.Labels {
		if it.Labels[k] != v {
			return false
		}
	}
	return len(o.Scenarios) == 0 || slices.Contains(o.Scenarios, it.Labels["scenario"])
}

// Holds reports whether value meets the objective.
func (o Objective) Holds(v float64) bool {
	switch o.Op {
	case ">=":
		return v >= o.Value
	case "<=":
		return v <= o.Value
	case ">":
		return v > o.Value
	case "<":
		return v < o.Value
	case "==":
		return v == o.Value
	case "!=":
		return v != o.Value
	}
	return false
}

// Evaluate judges every objective against every item it matches, one Case each, in objective
// order. An objective that matches nothing is skipped (its scenario did not run). The threshold is
// also written into the item (Data[bucket+"Threshold"], as scheduler_perf does), so the result
// file carries what each figure was judged against.
func Evaluate(objectives []Objective, items []results.DataItem) []results.Case {
	var out []results.Case
	for i, o := range objectives {
		id := fmt.Sprintf("SLO-%02d", i+1)
		matched := false
		for _, it := range items {
			if !o.Matches(it) {
				continue
			}
			matched = true
			out = append(out, judge(id, o, it))
		}
		if !matched {
			scope := "any scenario"
			if len(o.Scenarios) > 0 {
				scope = strings.Join(o.Scenarios, ", ")
			}
			out = append(out, results.Case{ID: id, Suite: "slo", Name: o.Expr, Ref: o.Source, Verdict: results.Skip,
				Message: fmt.Sprintf("no data item %s from %s in this run (scenario not run, or measurement not taken)", o.Item, scope)})
		}
	}
	return out
}

func judge(id string, o Objective, it results.DataItem) results.Case {
	c := results.Case{ID: id, Suite: "slo", Name: strings.TrimSpace(o.Expr + " " + where(it)), Ref: o.Source}
	v, ok := it.Data[o.Bucket]
	if !ok {
		c.Verdict = results.Error
		c.Message = fmt.Sprintf("%s has no %q (it has: %s)", o.Item, o.Bucket, strings.Join(slices.Sorted(maps.Keys(it.Data)), ", "))
		return c
	}
	if o.Unit != "" && it.Unit != o.Unit {
		c.Verdict = results.Error
		c.Message = fmt.Sprintf("%s is in %q, the objective in %q", o.Item, it.Unit, o.Unit)
		return c
	}
	thr := o.Bucket + "Threshold"
	if _, set := it.Data[thr]; !set && it.Data != nil {
		it.Data[thr] = o.Value
	}
	c.Measurements = map[string]float64{"value": v, "threshold": o.Value}
	unit := it.Unit
	if c.Verdict = results.Pass; !o.Holds(v) || math.IsNaN(v) {
		c.Verdict = results.SLOViolation
		c.Message = fmt.Sprintf("%s.%s = %s %s, want %s %s %s (threshold source: %s)", o.Item, o.Bucket, num(v), unit, o.Op, num(o.Value), unit, o.Source)
	}
	return c
}

// where names the item's scenario and repetition for a case name.
func where(it results.DataItem) string {
	var parts []string
	for _, k := range []string{"scenario", "phase", "repetition"} {
		if v := it.Labels[k]; v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
