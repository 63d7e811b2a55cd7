package timeline

import (
	"time"
)

// Fault-recovery checks over a timeline. They are pure, like CheckPartial, so that a recorded
// events.jsonl can be re-judged for any fault time and so that their ability to fail is tested.

// FirstBindAfter returns the earliest PodBound event observed at or after t. After a component
// restart it is the moment the cluster was seen working again: the scheduler placed a pod and the
// apiserver accepted and announced the binding.
func FirstBindAfter(events []Event, t time.Time) (Event, bool) {
	var first Event
	found := false
	for _, e := range events {
		if e.Kind != PodBound || e.Time.Before(t) {
			continue
		}
		if !found || e.Time.Before(first.Time) {
			first, found = e, true
		}
	}
	return first, found
}

// PartialAfter returns the partial placements (CheckPartial with grace) that held at some moment
// after t: a stall that ended after t, or a gang still partial when the timeline ended. A stall
// that ended before t is the fault's business, not the recovered cluster's; one that began before
// the fault but outlasted the recovery is counted, because the gang was still partially placed
// once the cluster was working again. Gangs left partial by preemption under disruptionMode single
// are allowed by the API and never counted.
func PartialAfter(events []Event, grace time.Duration, t time.Time) []PartialGang {
	var out []PartialGang
	for _, p := range CheckPartial(events, grace).Partial {
		if p.AtEnd() || p.Until.After(t) {
			out = append(out, p)
		}
	}
	return out
}
