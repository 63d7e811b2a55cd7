package measure

import (
	"context"
	"slices"
	"time"

	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/stats"
	"github.com/gangbench/gangbench/results"
)

// ItemPhaseGangLatency is gangLatency per phase (label phase), emitted when a scenario measures more
// than one phase, so the overall figure can be told apart from its parts.
const ItemPhaseGangLatency = "phaseGangLatency"

// Items of Job-driven phases (via: job), where the job controller stands between the user's create
// and the PodGroup: jobLatency is Job created → last member bound, the figure a user of Jobs waits
// for; jobToPodGroup is Job created → its PodGroup first seen, the job controller's part of it.
const (
	ItemJobLatency    = "jobLatency"
	ItemJobToPodGroup = "jobToPodGroup"
)

// GroupTimes is what the timeline says of one PodGroup.
type GroupTimes struct {
	Group, Phase string
	Policy       string
	MinCount     int
	// Created is when the group arrived: its PodGroup created, or its first pod for a PodGroup made
	// ahead of the window.
	Created    time.Time
	FirstBound time.Time
	LastBound  time.Time
	Bound      int
	// Job and JobCreated are the Job the group was made for and when its create returned (zero
	// for groups the load generator made itself).
	Job        string
	JobCreated time.Time
}

// Complete reports whether the group was placed: a gang reached its quorum, a basic group got at
// least one pod bound.
func (g GroupTimes) Complete() bool {
	if g.Policy == "gang" {
		return g.Bound >= g.MinCount && g.Bound > 0
	}
	return g.Bound > 0
}

// Latency is PodGroup created (or, for one created ahead of the window, its first pod created) →
// last member bound.
func (g GroupTimes) Latency() time.Duration { return g.LastBound.Sub(g.Created) }

// Spread is first → last member bound.
func (g GroupTimes) Spread() time.Duration { return g.LastBound.Sub(g.FirstBound) }

// Groups collects per-group times of the given phases from a timeline, in creation order.
func Groups(events []timeline.Event, phases []string) []GroupTimes {
	idx := map[string]int{}
	var out []GroupTimes
	seen, ahead := map[string]bool{}, map[string]bool{}
	// A Job's PodGroup may be seen before the Job's create call returns (the watch can beat the
	// response), so a group finds its Job's time either way round.
	jobCreated, jobGroup := map[string]time.Time{}, map[string]int{}
	for _, e := range timeline.Sorted(events) {
		if !slices.Contains(phases, e.Phase) {
			continue
		}
		switch e.Kind {
		case timeline.JobCreated:
			jobCreated[e.Job] = e.Time
			if i, ok := jobGroup[e.Job]; ok {
				out[i].JobCreated = e.Time
			}
		case timeline.PodGroupCreated:
			if _, ok := idx[e.Group]; !ok {
				idx[e.Group] = len(out)
				out = append(out, GroupTimes{Group: e.Group, Phase: e.Phase, Policy: e.Policy, MinCount: e.MinCount, Created: e.Time,
					Job: e.Job, JobCreated: jobCreated[e.Job]})
				if e.Job != "" {
					jobGroup[e.Job] = len(out) - 1
				}
				if e.Ahead {
					ahead[e.Group] = true
				}
			}
		case timeline.PodCreated:
			// A PodGroup made ahead of the window (arrival: schedulerPerf) waited there for the
			// quiet gate; its gang arrives with its first pod, and latency counts from then.
			if i, ok := idx[e.Group]; ok && ahead[e.Group] {
				out[i].Created = e.Time
				delete(ahead, e.Group)
			}
		case timeline.PodBound:
			i, ok := idx[e.Group]
			if !ok || seen[e.Pod] {
				continue
			}
			seen[e.Pod] = true
			g := &out[i]
			if g.Bound == 0 {
				g.FirstBound = e.Time
			}
			g.LastBound = e.Time
			g.Bound++
		}
	}
	return out
}

type gangLatency struct{ env *Env }

func newGangLatency(env *Env) Measurement { return &gangLatency{env: env} }

func (m *gangLatency) Start(context.Context) error { return nil }

func (m *gangLatency) Gather(context.Context) ([]results.DataItem, error) {
	groups := Groups(m.env.Timeline.Events(), m.env.Measured)
	lat, spread, incomplete := LatencyData(groups)
	items := []results.DataItem{
		{Name: ItemGangLatency, Unit: "s", Data: lat},
		{Name: ItemBindSpread, Unit: "s", Data: spread},
	}
	if incomplete > 0 {
		m.env.note("%d of %d measured PodGroups were never placed; their latency is left out of gangLatency", incomplete, len(groups))
	}
	if job, toGroup, ok := JobLatencyData(groups); ok {
		items = append(items, results.DataItem{Name: ItemJobLatency, Unit: "s", Data: job}, results.DataItem{Name: ItemJobToPodGroup, Unit: "s", Data: toGroup})
	}
	if len(m.env.Measured) > 1 {
		for _, ph := range m.env.Measured {
			var sub []GroupTimes
			for _, g := range groups {
				if g.Phase == ph {
					sub = append(sub, g)
				}
			}
			l, _, _ := LatencyData(sub)
			items = append(items, results.DataItem{Name: ItemPhaseGangLatency, Unit: "s", Labels: map[string]string{"phase": ph}, Data: l})
		}
	}
	return items, nil
}

// LatencyData summarises the latency and spread of complete groups; Incomplete counts the others
// (never placed within the run), which are left out of the percentiles rather than distorting them.
func LatencyData(groups []GroupTimes) (latency, spread map[string]float64, incomplete int) {
	var l, s []float64
	for _, g := range groups {
		if !g.Complete() {
			incomplete++
			continue
		}
		l = append(l, g.Latency().Seconds())
		s = append(s, g.Spread().Seconds())
	}
	latency, spread = stats.Summarize(l).Data(), stats.Summarize(s).Data()
	latency["Incomplete"] = float64(incomplete)
	return latency, spread, incomplete
}

// JobLatencyData summarises the groups made for Jobs: Job created → last member bound over the
// complete ones, and Job created → PodGroup seen over all; false when no group was made for a Job.
func JobLatencyData(groups []GroupTimes) (job, toGroup map[string]float64, ok bool) {
	var l, g []float64
	for _, gt := range groups {
		if gt.Job == "" || gt.JobCreated.IsZero() {
			continue
		}
		ok = true
		g = append(g, gt.Created.Sub(gt.JobCreated).Seconds())
		if gt.Complete() {
			l = append(l, gt.LastBound.Sub(gt.JobCreated).Seconds())
		}
	}
	return stats.Summarize(l).Data(), stats.Summarize(g).Data(), ok
}
