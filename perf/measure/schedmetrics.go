package measure

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/results"
)

// SchedulerHistogram is a scheduler latency histogram turned into a DataItem: the observations
// between the two scrapes (after minus before), with histogram_quantile percentiles.
type SchedulerHistogram struct {
	Item, Metric string
}

// SchedulerCounter is a scheduler counter split by one label into DataItem buckets.
type SchedulerCounter struct {
	Item, Metric, By string
}

// SchedulerHistograms and SchedulerCounters are what schedulerMetrics reports
// (gang-semantics §6.1). They are functions, not variables, so nothing can change them.
func SchedulerHistograms() []SchedulerHistogram {
	return []SchedulerHistogram{
		{"podGroupAttemptDuration", "scheduler_podgroup_scheduling_attempt_duration_seconds"},
		{"podGroupAlgorithmDuration", "scheduler_podgroup_scheduling_algorithm_duration_seconds"},
		{"podSchedulingSLIDuration", "scheduler_pod_scheduling_sli_duration_seconds"},
		{"workloadPreemptionVictims", "scheduler_workload_preemption_victims"},
	}
}

// SchedulerCounters: see SchedulerHistograms.
func SchedulerCounters() []SchedulerCounter {
	return []SchedulerCounter{
		{"podGroupScheduleAttempts", "scheduler_podgroup_schedule_attempts_total", "result"},
		{"podScheduleAttempts", "scheduler_schedule_attempts_total", "result"},
		{"workloadPreemptionAttempts", "scheduler_workload_preemption_attempts_total", "result"},
		// Registered only with TopologyAwareWorkloadScheduling on (workload-features §1.7): a
		// constrained group's cycle generates one placement per domain; an unconstrained one, 1.
		{"generatedPlacements", "scheduler_generated_placements_total", "profile"},
		{"placementEvaluations", "scheduler_placement_evaluations_total", "result"},
	}
}

// ItemPlacementsPerCycle is placements generated and evaluated per PodGroup scheduling cycle
// (Generated, Evaluated, Feasible), from the placement counters over
// scheduler_podgroup_schedule_attempts_total: what one gang cycle costs the topology algorithm.
const ItemPlacementsPerCycle = "placementsPerGangCycle"

// placementsPerCycle derives ItemPlacementsPerCycle from the counter items; false without the
// placement counters (gate off) or without a cycle.
func placementsPerCycle(items []results.DataItem) (results.DataItem, bool) {
	by := map[string]map[string]float64{}
	for _, it := range items {
		by[it.Name] = it.Data
	}
	cycles := by["podGroupScheduleAttempts"]["Total"]
	gen, ok := by["generatedPlacements"]
	if !ok || cycles <= 0 {
		return results.DataItem{}, false
	}
	eval := by["placementEvaluations"]
	return results.DataItem{Name: ItemPlacementsPerCycle, Unit: "placements", Data: map[string]float64{
		"Generated": gen["Total"] / cycles, "Evaluated": eval["Total"] / cycles, "Feasible": eval["feasible"] / cycles, "Cycles": cycles,
	}}, true
}

func schedulerFamilies() []string {
	var out []string
	for _, h := range SchedulerHistograms() {
		out = append(out, h.Metric)
	}
	for _, c := range SchedulerCounters() {
		out = append(out, c.Metric)
	}
	return out
}

type schedulerMetrics struct {
	env    *Env
	before *metrics.Snapshot
	skip   bool
}

func newSchedulerMetrics(env *Env) Measurement { return &schedulerMetrics{env: env} }

func (m *schedulerMetrics) Start(ctx context.Context) error {
	if m.env.Cluster.SchedulerMetrics.URL == "" {
		m.skip = true
		m.env.note("schedulerMetrics: the scheduler's /metrics is not reachable from the harness; no scheduler histograms")
		return nil
	}
	s, err := scrape(ctx, m.env.Cluster.SchedulerMetrics, schedulerFamilies()...)
	if err != nil {
		return fmt.Errorf("schedulerMetrics: before the run: %w", err)
	}
	m.before = s
	return nil
}

func (m *schedulerMetrics) Gather(ctx context.Context) ([]results.DataItem, error) {
	if m.skip {
		return nil, nil
	}
	if m.env.Restarted[clusters.Scheduler] {
		// Its histograms and counters restarted from zero with the process: the difference of
		// two scrapes of two processes measures nothing.
		m.env.note("schedulerMetrics: the scheduler was restarted by a fault during the window; its histograms and counters restarted from zero, so none are reported")
		return nil, nil
	}
	after, err := scrape(ctx, m.env.Cluster.SchedulerMetrics, schedulerFamilies()...)
	if err != nil {
		return nil, fmt.Errorf("schedulerMetrics: after the run: %w", err)
	}
	return SchedulerItems(m.before, after)
}

// SchedulerItems computes the scheduler DataItems from two scrapes. A metric absent from the later
// scrape is left out: the scheduler registers vector metrics only when first observed, and the
// preemption ones only appear in runs that preempt.
func SchedulerItems(before, after *metrics.Snapshot) ([]results.DataItem, error) {
	var items []results.DataItem
	for _, h := range SchedulerHistograms() {
		if _, ok := after.Families[h.Metric]; !ok {
			continue
		}
		d, err := metrics.DeltaHistogram(before, after, h.Metric, nil)
		if err != nil {
			return nil, err
		}
		count := float64(d.GetSampleCount())
		if d.SampleCountFloat != nil {
			count = d.GetSampleCountFloat()
		}
		data := map[string]float64{"Count": count}
		if count > 0 {
			data["Average"] = d.GetSampleSum() / count
			for k, q := range map[string]float64{"Perc50": 0.5, "Perc90": 0.9, "Perc99": 0.99} {
				if v := metrics.HistogramQuantile(d, q); !math.IsNaN(v) && !math.IsInf(v, 0) {
					data[k] = v
				}
			}
		}
		unit := "s"
		if h.Item == "workloadPreemptionVictims" {
			unit = "pods"
			data["Sum"] = d.GetSampleSum()
		}
		items = append(items, results.DataItem{Name: h.Item, Unit: unit, Data: data})
	}
	for _, c := range SchedulerCounters() {
		mf, ok := after.Families[c.Metric]
		if !ok {
			continue
		}
		var values []string
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == c.By && !slices.Contains(values, lp.GetValue()) {
					values = append(values, lp.GetValue())
				}
			}
		}
		slices.Sort(values)
		data := map[string]float64{}
		total := 0.0
		for _, v := range values {
			d, err := metrics.Delta(before, after, c.Metric, map[string]string{c.By: v})
			if err != nil {
				return nil, err
			}
			data[v] = d
			total += d
		}
		data["Total"] = total
		items = append(items, results.DataItem{Name: c.Item, Unit: "count", Data: data})
	}
	if it, ok := placementsPerCycle(items); ok {
		items = append(items, it)
	}
	return items, nil
}

// MetricDifferences names the DataItems whose scheduler metric means something else in one of the two
// Kubernetes minor versions compared, with why, so a comparison across them reports "not comparable"
// rather than a change that is only a moved measurement boundary. Empty for the same minor.
func MetricDifferences(oldMinor, newMinor int) map[string]string {
	out := map[string]string{}
	if oldMinor == newMinor || (oldMinor != 36 && newMinor != 36) {
		return out
	}
	out["podGroupAttemptDuration"] = "v1.37 observes scheduler_podgroup_scheduling_attempt_duration_seconds after the PodGroup status PATCH of the cycle (schedule_one_podgroup.go:920-926, updatePodGroupCondition, then the metric) and from before the snapshot update; v1.36 before the PATCH (schedule_one_podgroup.go:587, 612): the v1.37 figure includes an API round trip"
	out["workloadPreemptionVictims"] = "scheduler_workload_preemption_victims is new in v1.37"
	out["workloadPreemptionAttempts"] = "scheduler_workload_preemption_attempts_total is new in v1.37"
	return out
}
