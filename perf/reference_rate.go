package perf

import (
	"github.com/gangbench/gangbench/results"
)

// scheduler_perf's SchedulingThroughput takes no sample before its first scheduled pod, while
// gangbench's binding rate counts from the first creation. For gangs of 1000 pods the two windows
// differ by the creation of the first gang and its whole cycle, so neither tool's figure is the
// other's. scheduler_perf has a figure with gangbench's window too: SchedulingDuration runs from
// the start of its measured createPods op (before the first pod is created) until the 1-second
// poll that sees every pod scheduled. Its pods over that duration are its rate from the first
// creation; the poll makes the duration up to a second long, so the rate is that much low.

const (
	// RefDuration is scheduler_perf's SchedulingDuration (bucket "Duration", seconds).
	RefDuration = "SchedulingDuration"
	// RefRateFromCreation is the reference item gangbench derives from it: Average, the pods
	// scheduled over the duration (pods/s); Pods and DurationSeconds, its parts.
	RefRateFromCreation = "rateFromCreation"
)

// referenceRateFromCreation is scheduler_perf's rate from the first creation, from its
// SchedulingDuration item and the pods of the groups its log reported scheduled; false when
// either is missing.
func referenceRateFromCreation(duration results.DataItem, groups []scheduledGroup) (results.DataItem, bool) {
	d := duration.Data["Duration"]
	pods := 0
	for _, g := range groups {
		pods += g.pods
	}
	if d <= 0 || pods == 0 {
		return results.DataItem{}, false
	}
	return results.DataItem{Unit: "pods/s", Labels: map[string]string{"Metric": RefRateFromCreation}, Data: map[string]float64{
		"Average":         float64(pods) / d,
		"Pods":            float64(pods),
		"DurationSeconds": d,
	}}, true
}
