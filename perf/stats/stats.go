// Package stats is the arithmetic of the perf figures: nearest-rank percentiles (as scheduler_perf's
// SchedulingThroughput and clusterloader2 compute them), summaries and per-interval rate samples.
// It imports only the standard library, so every formula is tested on hand-computed cases.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank p-th percentile of sorted values: sorted[ceil(n·p/100)-1], the
// formula scheduler_perf uses for its throughput samples. It returns NaN for no values; p is clamped
// to [0, 100] (p=0 gives the minimum).
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	p = min(max(p, 0), 100)
	i := int(math.Ceil(float64(n)*p/100)) - 1
	return sorted[min(max(i, 0), n-1)]
}

// Summary is what a perf-dash DataItem shows of a distribution.
type Summary struct {
	Count                  int
	Min, Max, Average      float64
	Perc50, Perc90, Perc99 float64
}

// Summarize computes a Summary; values are not modified. All fields are NaN except Count for none.
func Summarize(values []float64) Summary {
	if len(values) == 0 {
		nan := math.NaN()
		return Summary{Min: nan, Max: nan, Average: nan, Perc50: nan, Perc90: nan, Perc99: nan}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Summary{
		Count: len(s), Min: s[0], Max: s[len(s)-1], Average: sum / float64(len(s)),
		Perc50: Percentile(s, 50), Perc90: Percentile(s, 90), Perc99: Percentile(s, 99),
	}
}

// Data renders a Summary as DataItem buckets (perf-dash names), dropping NaNs, which JSON cannot hold.
func (s Summary) Data() map[string]float64 {
	out := map[string]float64{"Count": float64(s.Count)}
	for k, v := range map[string]float64{"Min": s.Min, "Max": s.Max, "Average": s.Average, "Perc50": s.Perc50, "Perc90": s.Perc90, "Perc99": s.Perc99} {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out[k] = v
		}
	}
	return out
}

// Rate is n events over d, per second; 0 for a non-positive duration.
func Rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Samples counts events per interval, as a rate per second, the way scheduler_perf's throughput
// collector samples the scheduled-pod count once a second:
//   - interval i covers [start+i·interval, start+(i+1)·interval); events before start are ignored;
//   - samples before the interval of the first event are dropped: they measure the time until the
//     first pods existed, not the scheduler;
//   - the last, partial interval (from the last whole interval to the last event) is dropped: a
//     fraction of a second would be counted as a whole one and read as a slow second;
//   - if no whole interval lies between the first interval and the last event, the single sample is
//     the events over the time from start to the last event, so short runs still get a figure.
//
// times need not be sorted.
func Samples(start time.Time, times []time.Time, interval time.Duration) []float64 {
	if len(times) == 0 || interval <= 0 {
		return nil
	}
	var first, last time.Time
	n := 0
	for _, t := range times {
		if t.Before(start) {
			continue
		}
		if n == 0 || t.Before(first) {
			first = t
		}
		if n == 0 || t.After(last) {
			last = t
		}
		n++
	}
	if n == 0 {
		return nil
	}
	firstIdx := int(first.Sub(start) / interval)
	whole := int(last.Sub(start) / interval) // intervals that end at or before last
	if whole <= firstIdx {
		d := last.Sub(start)
		if d <= 0 {
			return nil
		}
		return []float64{float64(n) / d.Seconds()}
	}
	counts := make([]int, whole-firstIdx)
	for _, t := range times {
		if t.Before(start) {
			continue
		}
		if i := int(t.Sub(start)/interval) - firstIdx; i >= 0 && i < len(counts) {
			counts[i]++
		}
	}
	out := make([]float64, len(counts))
	for i, c := range counts {
		out[i] = float64(c) / interval.Seconds()
	}
	return out
}
