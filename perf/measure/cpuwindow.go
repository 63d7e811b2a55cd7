package measure

import (
	"slices"
	"time"
)

// CPUSample is the CPU a process or a group of processes had spent by a time.
type CPUSample struct {
	At  time.Time
	CPU time.Duration
}

// CPUAt interpolates the CPU spent by time at between the samples around it (oldest first); false
// when at lies outside them.
func CPUAt(samples []CPUSample, at time.Time) (time.Duration, bool) {
	i, _ := slices.BinarySearchFunc(samples, at, func(s CPUSample, t time.Time) int { return s.At.Compare(t) })
	switch {
	case len(samples) == 0 || i == len(samples):
		return 0, false
	case samples[i].At.Equal(at):
		return samples[i].CPU, true
	case i == 0:
		return 0, false
	}
	a, b := samples[i-1], samples[i]
	f := float64(at.Sub(a.At)) / float64(b.At.Sub(a.At))
	return a.CPU + time.Duration(f*float64(b.CPU-a.CPU)), true
}

// GroupWindow is the part of a window scheduler_perf's reference charges its CPU to (perf
// reference_cpu.go): from the first group placed to the last, over the pods of the groups after
// the first. scheduler_perf times a group by its "Successfully scheduled a pod group" line;
// gangbench, which reads no scheduler log, by the group's first bind, which follows that line by
// one binding call.
type GroupWindow struct {
	From, To time.Time
	Pods     int
}

// SchedulerPerfWindow is the GroupWindow of groups that had pods bound; false with fewer than two.
func SchedulerPerfWindow(groups []GroupTimes) (GroupWindow, bool) {
	var placed []GroupTimes
	for _, g := range groups {
		if g.Bound > 0 {
			placed = append(placed, g)
		}
	}
	if len(placed) < 2 {
		return GroupWindow{}, false
	}
	slices.SortStableFunc(placed, func(a, b GroupTimes) int { return a.FirstBound.Compare(b.FirstBound) })
	w := GroupWindow{From: placed[0].FirstBound, To: placed[len(placed)-1].FirstBound}
	for _, g := range placed[1:] {
		w.Pods += g.Bound
	}
	return w, w.To.After(w.From)
}
