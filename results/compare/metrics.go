package compare

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"
)

// MetricVerdict is the outcome for one metric. "faster" and "slower" mean better and worse in the
// metric's direction (Options.HigherIsBetter): a higher binding rate is "faster", and so is a lower
// gang latency or fewer partial gangs.
type MetricVerdict string

const (
	Faster   MetricVerdict = "faster"
	Slower   MetricVerdict = "slower"
	NoChange MetricVerdict = "no significant change" // p >= Alpha, or |ratio-1| < MinEffect
	// NotComparable: the metric is missing from every run of a side, has fewer than 2 samples on a
	// side (a U test of 1 against n can never be significant, so no verdict is better than a
	// misleading one), or has different units on the two sides. MetricResult.Reason says which.
	NotComparable MetricVerdict = "not comparable"
)

// Summary describes one side's samples of a metric.
type Summary struct {
	Center float64 // median; NaN without samples
	// Lo and Hi bound the confidence interval of the median at level 1-Alpha (distribution-free,
	// from order statistics). They are -Inf and +Inf when there are too few samples for one
	// (6 at the default 95%); JSON writes non-finite values as null.
	Lo, Hi  float64
	N       int
	Samples []float64 // one per run that has the metric, in run order
}

// MetricResult compares one metric: a data key of a DataItem with given labels.
type MetricResult struct {
	Metric         string            // DataItem.Name + "." + data key, e.g. "bindingRate.Average"
	Unit           string            // the new side's unit when the sides differ
	Labels         map[string]string // the DataItem's labels, part of the metric's identity
	HigherIsBetter bool
	Old, New       Summary
	// Ratio is New.Center / Old.Center: 1 when both are 0, ±Inf when only the old median is 0, NaN
	// when a side has no samples.
	Ratio float64
	// RatioLo and RatioHi bound a distribution-free confidence interval of the ratio at level 1-Alpha,
	// or are 0 when there is none. benchmath has no ratio interval, so this is the Moses (Hodges–
	// Lehmann) interval of the shift of log values, inverted from the same Mann–Whitney U distribution
	// as the test; it needs positive samples and enough of them (4 per side at 95%). The ratio of
	// medians may lie outside it when the samples are skewed.
	RatioLo, RatioHi float64
	// PValue is the two-sided Mann–Whitney U test p value from benchmath.AssumeNothing; NaN when the
	// metric is not comparable.
	PValue float64
	// PAdjusted is PValue after Holm's correction across the gate metrics that can be tested (see
	// holm); the verdict of a gate metric rests on it, so the regression flag's false-alarm rate is
	// Alpha for the whole gate, not for each of its metrics. NaN for metrics outside that family.
	PAdjusted  float64
	Verdict    MetricVerdict
	Regression bool // Verdict is Slower
	// Gated: the metric is one of Options.GateMetrics, so a Regression sets Report.Regressed.
	Gated    bool
	Reason   string   // set only for NotComparable: why
	Warnings []string // benchmath's warnings, e.g. too few samples for a confidence interval
}

// LabelString is the metric's labels as "k=v,k=v".
func (m MetricResult) LabelString() string { return labelString(m.Labels) }

// DisplayName is the metric with its labels, e.g. "phaseGangLatency.Perc50 {phase=measure}".
func (m MetricResult) DisplayName() string {
	if len(m.Labels) == 0 {
		return m.Metric
	}
	return m.Metric + " {" + m.LabelString() + "}"
}

type metricID struct{ item, labels, key string }

// RepetitionLabel is the DataItem label that numbers repetitions; it is not part of a metric's key.
const RepetitionLabel = "repetition"

type metricSamples struct {
	labels map[string]string
	units  []string
	values []float64
}

// collect gathers one sample per run and metric. Interrupted runs are left out: their figures cover
// part of the load. A run holding the same item and labels twice contributes both values and a note.
func collect(s Side) (map[metricID]*metricSamples, []string) {
	out := map[metricID]*metricSamples{}
	var notes []string
	for _, r := range s.Runs {
		if r.Interrupted {
			continue
		}
		seen := map[metricID]bool{}
		for _, d := range r.DataItems {
			// A repetition inside a run is one more sample of the same metric, not another metric.
			full := labelString(d.Labels)
			d.Labels = maps.Clone(d.Labels)
			delete(d.Labels, RepetitionLabel)
			ls := labelString(d.Labels)
			for _, k := range slices.Sorted(maps.Keys(d.Data)) {
				id := metricID{d.Name, ls, k}
				if seenID := (metricID{d.Name, full, k}); seen[seenID] {
					notes = append(notes, fmt.Sprintf("%s: run %s has %s more than once; every value is used as a sample", s.Label, r.ID, displayName(id)))
				} else {
					seen[seenID] = true
				}
				ms := out[id]
				if ms == nil {
					ms = &metricSamples{labels: maps.Clone(d.Labels)}
					out[id] = ms
				}
				ms.units = appendNew(ms.units, d.UnitOf(k))
				ms.values = append(ms.values, d.Data[k])
			}
		}
	}
	return out, notes
}

func displayName(id metricID) string {
	s := id.item + "." + id.key
	if id.labels != "" {
		s += " {" + id.labels + "}"
	}
	return s
}

func compareMetrics(old, new Side, opts Options) ([]MetricResult, []string) {
	o, notes := collect(old)
	n, nnotes := collect(new)
	notes = append(notes, nnotes...)
	ids := slices.Collect(maps.Keys(o))
	for id := range n {
		if _, ok := o[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b metricID) int {
		return cmp.Or(cmp.Compare(a.item+"."+a.key, b.item+"."+b.key), cmp.Compare(a.labels, b.labels))
	})
	th := &benchmath.Thresholds{CompareAlpha: opts.Alpha}
	var out []MetricResult
	for _, id := range ids {
		out = append(out, compareMetric(id, o[id], n[id], opts, th))
	}
	if note := holm(out, opts); note != "" {
		notes = append(notes, note)
	}
	return out, append(notes, warningNotes(out)...)
}

// holm applies Holm's step-down correction to the gate metrics, so that a self-comparison raises
// the regression flag with probability at most Alpha however many gate metrics there are (at 0.05
// each, five independent gate metrics would raise it one time in four). The family is the gated,
// comparable metrics whose samples are not all one value: a metric that is 0 in every run of both
// sides (partial gangs of a healthy scheduler) can never reach significance, and counting it would
// only make the others harder to flag (Tarone's refinement for discrete tests). The p values are
// adjusted in ascending order, p'(i) = max over j <= i of min(1, (m-j+1)·p(j)), and the verdict of
// each member is re-judged on its adjusted value. It returns a note when the correction changed a
// verdict.
func holm(ms []MetricResult, opts Options) string {
	var family []int
	for i, m := range ms {
		if m.Gated && m.Verdict != NotComparable && !math.IsNaN(m.PValue) && varies(m) {
			family = append(family, i)
		}
	}
	slices.SortStableFunc(family, func(a, b int) int { return cmp.Compare(ms[a].PValue, ms[b].PValue) })
	var running float64
	var withdrawn []string
	for rank, i := range family {
		running = max(running, min(1, float64(len(family)-rank)*ms[i].PValue))
		m := &ms[i]
		m.PAdjusted = running
		before := m.Verdict
		m.Verdict, m.Regression = judge(*m, m.PAdjusted, opts)
		if before != m.Verdict {
			withdrawn = append(withdrawn, fmt.Sprintf("%s (p %.4f, %.4f after correction)", m.DisplayName(), m.PValue, m.PAdjusted))
		}
	}
	if len(withdrawn) == 0 {
		return ""
	}
	return fmt.Sprintf("Holm's correction across the %d testable gate metrics took back %d verdict(s) significant on their own: %s",
		len(family), len(withdrawn), strings.Join(withdrawn, "; "))
}

// varies reports whether the samples of a metric take more than one value over both sides.
func varies(m MetricResult) bool {
	all := append(slices.Clone(m.Old.Samples), m.New.Samples...)
	return slices.ContainsFunc(all, func(v float64) bool { return v != all[0] })
}

// judge is the verdict of a comparable metric for p value p: a change counts when it is significant
// and at least MinEffect, and its direction says faster or slower.
func judge(m MetricResult, p float64, opts Options) (MetricVerdict, bool) {
	if p < opts.Alpha && effect(m.Old.Center, m.New.Center) >= opts.MinEffect {
		if (m.New.Center > m.Old.Center) == m.HigherIsBetter {
			return Faster, false
		}
		return Slower, true
	}
	return NoChange, false
}

func compareMetric(id metricID, o, n *metricSamples, opts Options, th *benchmath.Thresholds) MetricResult {
	m := MetricResult{Metric: id.item + "." + id.key, PValue: math.NaN(), PAdjusted: math.NaN(), Ratio: math.NaN()}
	var ov, nv []float64
	var ou, nu []string
	if o != nil {
		ov, ou, m.Labels = o.values, o.units, o.labels
	}
	if n != nil {
		nv, nu, m.Labels = n.values, n.units, n.labels
	}
	m.Unit = strings.Join(ou, ", ")
	if len(nu) > 0 {
		m.Unit = strings.Join(nu, ", ")
	}
	m.HigherIsBetter = opts.HigherIsBetter(m.Metric, m.Unit)
	m.Gated = opts.gated(m.Metric)
	confidence := 1 - opts.Alpha
	var warnings []string
	m.Old, warnings = summarize(ov, confidence, th)
	m.Warnings = appendWarnings(m.Warnings, warnings)
	m.New, warnings = summarize(nv, confidence, th)
	m.Warnings = appendWarnings(m.Warnings, warnings)
	if m.Old.N > 0 && m.New.N > 0 {
		m.Ratio = ratio(m.Old.Center, m.New.Center)
	}

	switch {
	case m.Old.N == 0:
		return notComparable(m, "missing from the old runs")
	case m.New.N == 0:
		return notComparable(m, "missing from the new runs")
	case !slices.Equal(ou, nu):
		return notComparable(m, fmt.Sprintf("units differ: %q old, %q new", strings.Join(ou, ", "), strings.Join(nu, ", ")))
	case m.Old.N < 2 || m.New.N < 2:
		return notComparable(m, fmt.Sprintf("fewer than 2 samples on a side (old %d, new %d)", m.Old.N, m.New.N))
	}

	if reason, ok := opts.NotComparableMetrics[id.item]; ok {
		return notComparable(m, reason)
	}

	c := benchmath.AssumeNothing.Compare(benchmath.NewSample(slices.Clone(ov), th), benchmath.NewSample(slices.Clone(nv), th))
	m.PValue = c.P
	for _, w := range c.Warnings {
		// Identical samples on both sides are the clearest "no change", not a caveat.
		if !errors.Is(w, stats.ErrSamplesEqual) {
			m.Warnings = appendWarnings(m.Warnings, []string{w.Error()})
		}
	}
	if lo, hi, ok := ratioCI(ov, nv, confidence); ok {
		m.RatioLo, m.RatioHi = lo, hi
	}

	m.Verdict, m.Regression = judge(m, c.P, opts)
	return m
}

func notComparable(m MetricResult, reason string) MetricResult {
	m.Verdict, m.Reason = NotComparable, reason
	return m
}

// summarize computes the median and its confidence interval with benchmath's AssumeNothing.
func summarize(values []float64, confidence float64, th *benchmath.Thresholds) (Summary, []string) {
	if len(values) == 0 {
		return Summary{Center: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}, nil
	}
	// NewSample sorts in place; Samples keeps run order.
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(slices.Clone(values), th), confidence)
	var warnings []string
	for _, w := range s.Warnings {
		warnings = append(warnings, w.Error())
	}
	return Summary{Center: s.Center, Lo: s.Lo, Hi: s.Hi, N: len(values), Samples: slices.Clone(values)}, warnings
}

func appendWarnings(list, add []string) []string {
	for _, w := range add {
		list = appendNew(list, w)
	}
	return list
}

func ratio(old, new float64) float64 {
	switch {
	case old != 0:
		return new / old
	case new == 0:
		return 1
	default:
		return math.Copysign(math.Inf(1), new)
	}
}

// effect is the relative change of the median, |new-old|/|old| (|ratio-1| for positive values); any
// change from 0 is infinitely large.
func effect(old, new float64) float64 {
	switch {
	case old == new:
		return 0
	case old == 0:
		return math.Inf(1)
	default:
		return math.Abs(new-old) / math.Abs(old)
	}
}

// ratioCI is the Moses confidence interval of new/old: with D the sorted n1·n2 differences
// log(new_j) - log(old_i) and c the largest rank with P(U <= c-1) <= (1-confidence)/2 under the null
// hypothesis, the interval is [exp D(c), exp D(n1·n2+1-c)]. It is the set of ratios r for which the
// U test would not reject "new/r has the old distribution", so it agrees with the test (exactly when
// there are no ties). ok is false without positive samples or when too few samples allow no interval.
func ratioCI(old, new []float64, confidence float64) (lo, hi float64, ok bool) {
	if len(old) == 0 || len(new) == 0 || slices.ContainsFunc(old, nonPositive) || slices.ContainsFunc(new, nonPositive) {
		return 0, 0, false
	}
	c := mosesRank(len(old), len(new), 1-confidence)
	if c < 1 {
		return 0, 0, false
	}
	d := make([]float64, 0, len(old)*len(new))
	for _, x := range old {
		for _, y := range new {
			d = append(d, math.Log(y)-math.Log(x))
		}
	}
	slices.Sort(d)
	return math.Exp(d[c-1]), math.Exp(d[len(d)-c]), true
}

func nonPositive(v float64) bool { return !(v > 0) }

// exactRankLimit bounds n1·n2 for the exact U distribution; beyond it the normal approximation is
// accurate and the exact one slow.
const exactRankLimit = 400

// mosesRank is the largest c with P(U <= c-1) <= alpha/2 for sample sizes n1, n2 without ties,
// or 0 when even P(U <= 0) is larger (too few samples for any interval).
func mosesRank(n1, n2 int, alpha float64) int {
	nn := n1 * n2
	if nn > exactRankLimit {
		sigma := math.Sqrt(float64(nn) * float64(n1+n2+1) / 12)
		z := stats.StdNormal.InvCDF(1 - alpha/2)
		return max(0, int(math.Floor(float64(nn)/2-z*sigma+0.5)))
	}
	dist := stats.UDist{N1: n1, N2: n2}
	c := 0
	for c < nn/2 && dist.CDF(float64(c)) <= alpha/2 {
		c++
	}
	return c
}

// warningNotes surfaces benchmath's warnings once each, with how many metrics they concern, rather
// than once per metric.
func warningNotes(ms []MetricResult) []string {
	count := map[string]int{}
	first := map[string]string{}
	var order []string
	for _, m := range ms {
		for _, w := range m.Warnings {
			if count[w] == 0 {
				order = append(order, w)
				first[w] = m.DisplayName()
			}
			count[w]++
		}
	}
	slices.Sort(order)
	var notes []string
	for _, w := range order {
		notes = append(notes, fmt.Sprintf("benchmath: %s (%d of %d metrics, e.g. %s)", w, count[w], len(ms), first[w]))
	}
	return notes
}
