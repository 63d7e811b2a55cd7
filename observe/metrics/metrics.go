// Package metrics reads Prometheus text exposition from kube-scheduler and kube-apiserver /metrics and
// computes what a benchmark needs from two scrapes: counter deltas and latency quantiles over the
// interval, the way PromQL's increase() and histogram_quantile() would over the same data.
package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Fetcher returns the body of a /metrics endpoint. clusters.Endpoint satisfies it; the interface
// keeps this package free of the cluster plumbing so tests can feed it text.
type Fetcher interface {
	Get(ctx context.Context) ([]byte, error)
}

// Snapshot is one parsed scrape. Families is keyed by family name; histograms and summaries appear
// under their base name (the text format's _bucket/_sum/_count lines are folded into one family).
type Snapshot struct {
	Families map[string]*dto.MetricFamily
	// Time is when Scrape received the body; zero for a Snapshot made by Parse.
	Time time.Time
}

// Parse parses Prometheus text format (0.0.4), the format both components serve to a client that
// sends no Accept header.
func Parse(b []byte) (*Snapshot, error) {
	// A zero-value TextParser has no name validation scheme and panics since prometheus/common v0.66.
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return &Snapshot{Families: fams}, nil
}

// Scrape fetches and parses one snapshot.
func Scrape(ctx context.Context, f Fetcher) (*Snapshot, error) {
	if f == nil {
		return nil, errors.New("scrape metrics: no endpoint")
	}
	b, err := f.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, err
	}
	s.Time = time.Now()
	return s, nil
}

// matches reports whether m carries every label in match. A label m lacks counts as "", so
// match{"subresource": ""} selects series without a subresource, as a PromQL matcher would.
func matches(m *dto.Metric, match map[string]string) bool {
	for k, want := range match {
		got := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				got = lp.GetValue()
				break
			}
		}
		if got != want {
			return false
		}
	}
	return true
}

// family returns the family for name. When name is absent but is a histogram's or summary's
// _count/_sum series name, as seen in the scrape text, it returns the base family and which part
// was asked for, so callers need not know the text parser folds those lines away.
func (s *Snapshot) family(name string) (mf *dto.MetricFamily, part string) {
	if s == nil {
		return nil, ""
	}
	if mf := s.Families[name]; mf != nil {
		return mf, ""
	}
	for _, suffix := range []string{"_count", "_sum"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if mf := s.Families[base]; mf != nil {
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM, dto.MetricType_SUMMARY:
				return mf, suffix
			}
		}
	}
	return nil, ""
}

// value is the scalar Sum adds up for one series.
func value(m *dto.Metric, part string) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	case m.Histogram != nil:
		if part == "_sum" {
			return m.Histogram.GetSampleSum()
		}
		return histCount(m.Histogram)
	case m.Summary != nil:
		if part == "_sum" {
			return m.Summary.GetSampleSum()
		}
		return float64(m.Summary.GetSampleCount())
	}
	return 0
}

// Sum adds up the series of family name whose labels include all of match: values of counters,
// gauges and untyped metrics, observation counts of histograms and summaries (or their sums, when
// name is the family's "_sum" series). It returns false only if the family is absent; a present
// family with no matching series sums to 0, because counters are often created on first increment.
func (s *Snapshot) Sum(name string, match map[string]string) (float64, bool) {
	mf, part := s.family(name)
	if mf == nil {
		return 0, false
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		if matches(m, match) {
			sum += value(m, part)
		}
	}
	return sum, true
}

// HistogramCount is the number of observations over the matching series of histogram name; false
// if the family is absent or not a histogram.
func (s *Snapshot) HistogramCount(name string, match map[string]string) (uint64, bool) {
	h, ok := s.histogram(name, match)
	if !ok {
		return 0, false
	}
	return uint64(math.Round(h.count)), true
}

// HistogramSum is the sum of observed values over the matching series of histogram name; false if
// the family is absent or not a histogram.
func (s *Snapshot) HistogramSum(name string, match map[string]string) (float64, bool) {
	h, ok := s.histogram(name, match)
	if !ok {
		return 0, false
	}
	return h.sum, true
}

// Quantile estimates the q-quantile of histogram name over the matching series, as
// histogram_quantile(q, sum by (le) (name_bucket{match})) would. It is false, with NaN, if the
// family is absent, not a histogram, or the quantile is undefined (no observations). Over a whole
// process lifetime this is rarely what a benchmark wants; see DeltaHistogram and HistogramQuantile.
func (s *Snapshot) Quantile(name string, match map[string]string, q float64) (float64, bool) {
	h, ok := s.histogram(name, match)
	if !ok {
		return math.NaN(), false
	}
	v := h.quantile(q)
	return v, !math.IsNaN(v)
}

// Delta is after-before of Sum(name, match): what happened between two scrapes. The series may be
// absent before (a counter created in between starts at 0) but must exist after. A counter,
// histogram or summary that decreased means the component restarted between the scrapes; that is
// an error, because the interval's true count is then unknown.
func Delta(before, after *Snapshot, name string, match map[string]string) (float64, error) {
	a, ok := after.Sum(name, match)
	if !ok {
		return 0, fmt.Errorf("metric %s not in the later scrape", selector(name, match))
	}
	var b float64
	if v, ok := before.Sum(name, match); ok {
		b = v
	}
	d := a - b
	if d < 0 {
		mf, _ := after.family(name)
		if mf.GetType() != dto.MetricType_GAUGE && mf.GetType() != dto.MetricType_UNTYPED {
			return d, fmt.Errorf("metric %s decreased from %g to %g: did the component restart between scrapes?", selector(name, match), b, a)
		}
	}
	return d, nil
}

// DeltaHistogram is the histogram of the observations made between two scrapes: the matching series
// of each are summed bucket by bucket, then before is subtracted from after. A histogram absent
// before counts as empty. Feed the result to HistogramQuantile for latency percentiles of a run.
func DeltaHistogram(before, after *Snapshot, name string, match map[string]string) (*dto.Histogram, error) {
	sel := selector(name, match)
	a, ok := after.histogram(name, match)
	if !ok {
		if mf, _ := after.family(name); mf != nil {
			return nil, fmt.Errorf("metric %s is a %s, not a histogram", sel, strings.ToLower(mf.GetType().String()))
		}
		return nil, fmt.Errorf("metric %s not in the later scrape", sel)
	}
	b, ok := before.histogram(name, match)
	if !ok {
		b = &hist{}
	}
	d, err := a.minus(b)
	if err != nil {
		return nil, fmt.Errorf("metric %s: %w", sel, err)
	}
	return d.dto(), nil
}

// HistogramQuantile estimates the q-quantile of h with Prometheus histogram_quantile semantics:
// linear interpolation within the bucket holding the rank, 0 as the lower bound of the first bucket
// when its upper bound is positive, the second-highest bound when the rank falls in the +Inf bucket,
// -Inf for q<0, +Inf for q>1, NaN for no observations or q=NaN. A histogram without a +Inf bucket
// (as client_golang builds them) gets one holding SampleCount, as its text exposition would.
func HistogramQuantile(h *dto.Histogram, q float64) float64 {
	if h == nil {
		return math.NaN()
	}
	return fromDTO(h).quantile(q)
}

// selector renders name{k="v",...} for error messages, so a failed lookup says exactly what was
// asked for.
func selector(name string, match map[string]string) string {
	if len(match) == 0 {
		return name
	}
	parts := make([]string, 0, len(match))
	for _, k := range slices.Sorted(maps.Keys(match)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, match[k]))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}
