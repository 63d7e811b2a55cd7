package perf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/results"
)

// goRuntimeCaption heads the section in both formats.
const goRuntimeCaption = "Go runtime of the apiserver and the scheduler in each window (their runtime/metrics): heap allocated and goroutines created per measured pod, GC cycles and the CPU they took, time blocked on mutexes, the mean wait of a runnable goroutine for a thread, the size new goroutine stacks start at. More allocated per pod is more work; the same allocation with more CPU is the same work done slower"

// GoRuntimeLines are one line per measured window, the components in resource-table order.
func GoRuntimeLines(r *results.Run) []string {
	var out []string
	for _, win := range itemsByWindow(r, measure.ItemGoRuntime) {
		items := slices.Clone(win.items)
		slices.SortStableFunc(items, func(a, b results.DataItem) int {
			return resourceRank(a.Labels["component"]) - resourceRank(b.Labels["component"])
		})
		parts := make([]string, len(items))
		for i, it := range items {
			parts[i] = it.Labels["component"] + " " + goRuntimeFigures(it.Data)
		}
		out = append(out, fmt.Sprintf("%s rep %s: %s", win.scenario, win.rep, strings.Join(parts, "; ")))
	}
	return out
}

// goRuntimeFigures prints the fields a component served, each with its unit.
func goRuntimeFigures(d map[string]float64) string {
	var parts []string
	add := func(key, format string) {
		if v, ok := d[key]; ok {
			parts = append(parts, fmt.Sprintf(format, v))
		}
	}
	if v, ok := d["AllocMiBPerPod"]; ok {
		parts = append(parts, perPodFigure(v)+" MiB allocated")
	}
	if v, ok := d["GoroutinesPerPod"]; ok {
		parts = append(parts, perPodFigure(v)+" goroutines")
	}
	add("GCCycles", "%.0f GC cycles")
	add("GCCPUSeconds", "GC %.1f CPU s")
	add("MutexWaitSeconds", "mutex wait %.2f s")
	add("SchedDelayMs", "runnable wait %.2f ms")
	add("StackStartKiB", "new stacks %.0f KiB")
	return strings.Join(parts, ", ")
}
