package perf

import (
	"strings"
	"testing"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// TestGoRuntimeLines: one line per window, the scheduler before the apiserver as in the resource
// table, each figure with its unit, and a field the component did not serve left out.
func TestGoRuntimeLines(t *testing.T) {
	item := func(rep, component string, data map[string]float64) results.DataItem {
		return results.DataItem{Name: measure.ItemGoRuntime, Labels: map[string]string{"scenario": "s", "repetition": rep, "component": component}, Data: data}
	}
	r := &results.Run{DataItems: []results.DataItem{
		item("1", "kube-apiserver", map[string]float64{"AllocMiBPerPod": 1.234, "GoroutinesPerPod": 12.4, "GCCycles": 45, "GCCPUSeconds": 3.14,
			"MutexWaitSeconds": 0.5, "SchedDelayMs": 0.412, "StackStartKiB": 4}),
		item("1", "kube-scheduler", map[string]float64{"AllocMiBPerPod": 0.5, "GCCycles": 20}),
		{Name: measure.ItemAPIRequests, Labels: map[string]string{"scenario": "s", "repetition": "1"}, Data: map[string]float64{"PerPod": 4}},
		item("2", "kube-apiserver", map[string]float64{"GCCycles": 3}),
	}}
	got := GoRuntimeLines(r)
	want := []string{
		"s rep 1: kube-scheduler 0.50 MiB allocated, 20 GC cycles; kube-apiserver 1.23 MiB allocated, 12 goroutines, 45 GC cycles, GC 3.1 CPU s, mutex wait 0.50 s, runnable wait 0.41 ms, new stacks 4 KiB",
		"s rep 2: kube-apiserver 3 GC cycles",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
