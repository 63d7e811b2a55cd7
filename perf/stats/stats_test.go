package stats

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		values []float64
		p      float64
		want   float64
	}{
		// sorted[ceil(n·p/100) − 1], worked by hand:
		{ten, 50, 5},   // ceil(5) − 1 = 4
		{ten, 90, 9},   // ceil(9) − 1 = 8
		{ten, 99, 10},  // ceil(9.9) − 1 = 9
		{ten, 100, 10}, // ceil(10) − 1 = 9
		{ten, 0, 1},    // clamped to the first
		{ten, 10, 1},   // ceil(1) − 1 = 0
		{ten, 11, 2},   // ceil(1.1) − 1 = 1
		{[]float64{1, 2, 3}, 50, 2},
		{[]float64{7}, 99, 7},
		{[]float64{1, 2, 3, 4}, 50, 2}, // nearest rank, not interpolation (which would say 2.5)
	} {
		if got := Percentile(tc.values, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %g) = %g, want %g", tc.values, tc.p, got, tc.want)
		}
	}
	if got := Percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("no values: %g, want NaN", got)
	}
}

func TestSummarize(t *testing.T) {
	in := []float64{4, 1, 3, 2}
	s := Summarize(in)
	if s.Count != 4 || s.Min != 1 || s.Max != 4 || s.Average != 2.5 || s.Perc50 != 2 || s.Perc90 != 4 || s.Perc99 != 4 {
		t.Errorf("Summarize(%v) = %+v", in, s)
	}
	if !slices.Equal(in, []float64{4, 1, 3, 2}) {
		t.Error("Summarize sorted its input in place")
	}
	d := Summarize(nil).Data()
	if len(d) != 1 || d["Count"] != 0 {
		t.Errorf("empty summary renders as only a zero count (NaNs cannot go into JSON): %v", d)
	}
}

func TestRate(t *testing.T) {
	if got := Rate(300, 6*time.Second); got != 50 {
		t.Errorf("Rate(300, 6s) = %g", got)
	}
	if got := Rate(5, 0); got != 0 {
		t.Errorf("Rate over no time = %g, want 0", got)
	}
}

func at(start time.Time, secs ...float64) []time.Time {
	var out []time.Time
	for _, s := range secs {
		out = append(out, start.Add(time.Duration(s*float64(time.Second))))
	}
	return out
}

func TestSamples(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		times []float64
		want  []float64
	}{
		{"whole seconds; the partial last one (3.5 s) is dropped",
			[]float64{0.5, 1.2, 1.3, 1.9, 2.1, 2.2, 2.3, 3.5}, []float64{1, 3, 3}},
		{"idle seconds before the first bind are not samples",
			[]float64{2.5, 2.6, 3.1, 4.7}, []float64{2, 1}},
		{"an idle second in the middle is a zero sample",
			[]float64{0.1, 0.2, 2.1, 3.0}, []float64{2, 0, 1}},
		{"unsorted input", []float64{2.3, 0.5, 1.9, 1.3, 3.5, 2.1, 1.2, 2.2}, []float64{1, 3, 3}},
		{"shorter than a second: one sample over the whole window", []float64{0.2, 0.4}, []float64{5}},
		{"events before start are ignored", []float64{-1, 0.5, 1.5, 2.5}, []float64{1, 1}},
		{"nothing", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Samples(t0, at(t0, tc.times...), time.Second)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Samples = %v, want %v", got, tc.want)
			}
		})
	}
	// Half-second intervals report per-second rates.
	if got := Samples(t0, at(t0, 0.1, 0.2, 0.6, 1.1), 500*time.Millisecond); !slices.Equal(got, []float64{4, 2}) {
		t.Errorf("500ms samples = %v, want [4 2]", got)
	}
}
