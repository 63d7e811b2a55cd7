package perf

import (
	"testing"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// TestTrafficLines: one line per window, requests and watch events per pod busiest first, the
// requests refused with 429 only when there were some, and the watches open at the end.
func TestTrafficLines(t *testing.T) {
	item := func(rep, name, label, value string, data map[string]float64) results.DataItem {
		return results.DataItem{Name: name, Labels: map[string]string{"scenario": "s", "repetition": rep, label: value}, Data: data}
	}
	r := &results.Run{DataItems: []results.DataItem{
		item("1", measure.ItemAPIRequests, measure.LabelRequest, measure.All, map[string]float64{"PerPod": 4.52, "Count": 13557}),
		item("1", measure.ItemAPIRequests, measure.LabelRequest, "POST pods/binding", map[string]float64{"PerPod": 1.472, "Count": 4417}),
		item("1", measure.ItemAPIErrors, measure.LabelRequest, measure.All, map[string]float64{"PerPod": 0.472, "Count": 1417}),
		item("1", measure.ItemAPIErrors, measure.LabelRequest, "POST pods/binding 429", map[string]float64{"PerPod": 0.472, "Count": 1417}),
		item("1", measure.ItemWatchEvents, measure.LabelResource, measure.All, map[string]float64{"PerPod": 14}),
		item("1", measure.ItemWatchEvents, measure.LabelResource, "pods", map[string]float64{"PerPod": 12}),
		item("1", measure.ItemWatches, measure.LabelResource, measure.All, map[string]float64{measure.Value: 6}),
		item("1", measure.ItemWatches, measure.LabelResource, "pods", map[string]float64{measure.Value: 4}),
		item("2", measure.ItemAPIRequests, measure.LabelRequest, measure.All, map[string]float64{"PerPod": 4.01, "Count": 12026}),
		item("2", measure.ItemAPIErrors, measure.LabelRequest, measure.All, map[string]float64{"PerPod": 0, "Count": 0}),
	}}
	got := TrafficLines(r)
	want := []string{
		"s rep 1: 4.52 requests (POST pods/binding 1.47); 1417 answered with an error (POST pods/binding 429 1417); 14 watch events sent (pods 12); 6 watches open at the end (pods 4)",
		"s rep 2: 4.01 requests",
	}
	if len(got) != len(want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n%q, want\n%q", i, got[i], want[i])
		}
	}
}
