package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/suites/framework"
)

// The placement metrics of topology-aware scheduling (alpha, registered only with the TAS gate:
// workload-features-v1.37 §1.7). Every pod-group cycle of the placement algorithm adds the number
// of placements it generated to scheduler_generated_placements_total (schedule_one_podgroup.go:990)
// and one evaluation per placement, feasible or infeasible, to scheduler_placement_evaluations_total
// (:1026-1035). The counters are cluster-wide and every pod-group cycle of the cluster adds to them
// (a group without a constraint adds one placement), so the feature is Serial and first waits until
// no pod group is queued anywhere (mbQuiet), as the backoff features do.

const (
	tasGeneratedPlacements  = "scheduler_generated_placements_total"
	tasPlacementEvaluations = "scheduler_placement_evaluations_total"
	// exactDeltaSettle is how long the counters must stay at the expected deltas once reached: a
	// scheduler that counts twice, or evaluates again, shows within it. A pass threshold, not scaled.
	exactDeltaSettle = 2 * time.Second
)

// exactCounter is one series whose increase a scenario predicts.
type exactCounter struct {
	name  string
	match map[string]string
	want  float64
}

func (c exactCounter) String() string { return obsSelector(c.name, c.match) }

// exactDeltas reads every counter's increase since base from one scrape and describes them.
func exactDeltas(base, after *metrics.Snapshot, cs []exactCounter) ([]float64, string) {
	out := make([]float64, len(cs))
	var parts []string
	for i, c := range cs {
		d, err := metrics.Delta(base, after, c.name, c.match)
		if err != nil {
			parts = append(parts, err.Error())
			out[i] = -1
			continue
		}
		out[i] = d
		parts = append(parts, fmt.Sprintf("%s +%g (want +%g)", c, d, c.want))
	}
	return out, strings.Join(parts, ", ")
}

// waitExactDeltas polls until every counter rose by at least its want since base, then checks that
// each stays at exactly its want for exactDeltaSettle.
func waitExactDeltas(ctx context.Context, t *testing.T, l *framework.Lane, base *metrics.Snapshot, cs []exactCounter) {
	t.Helper()
	read := func(ctx context.Context) ([]float64, string, error) {
		after, err := l.Env.SchedulerMetrics(ctx)
		if err != nil {
			return nil, "", err
		}
		ds, desc := exactDeltas(base, after, cs)
		return ds, desc, nil
	}
	framework.Eventually(ctx, t, l.Env.Scaled(15*time.Second), "the placement counters to rise", func(ctx context.Context) (bool, string, error) {
		ds, desc, err := read(ctx)
		if err != nil {
			return false, "", err
		}
		for i, c := range cs {
			if ds[i] < c.want {
				return false, desc, nil
			}
		}
		return true, desc, nil
	})
	var last string
	framework.Consistently(ctx, t, exactDeltaSettle, "the placement counters at exactly the predicted deltas", func(ctx context.Context) (bool, string, error) {
		ds, desc, err := read(ctx)
		if err != nil {
			return false, "", err
		}
		last = desc
		for i, c := range cs {
			if ds[i] != c.want {
				return false, desc, nil
			}
		}
		return true, desc, nil
	})
	t.Logf("%s", last)
}

// tasMetricsFeature is §7 item 15: one gang cycle over 3 racks, one of them full.
func tasMetricsFeature() framework.Feature {
	const racks = 3
	return framework.Feature{
		Suite: "topology", Name: "topology: placement metrics of one gang cycle", Lane: framework.LaneSpec{Nodes: racks, GPUsPerNode: 8, Racks: racks}, NeedsGates: tasGates, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "TAS-14", Statement: "3 racks of one 8-GPU node, one of them full: the one cycle that binds a gang of 2 × 4 GPUs (minCount 2) constrained to the rack key raises scheduler_generated_placements_total by 3 and scheduler_placement_evaluations_total by 2 {result=feasible} and 1 {result=infeasible}, and by no more", Ref: "workload-features §1.7 (RecordGeneratedPlacements += len(placements), schedule_one_podgroup.go:990; one ObservePlacementEvaluation per evaluated placement, :1026-1035); §7 item 15"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					full := l.Name + "-rack-0"
					if len(l.Racks) != racks || len(l.Racks[full]) == 0 {
						t.Fatalf("lane %s has racks %v, want %d including %s", l.Name, l.Racks, racks, full)
					}
					tasFiller(ctx, t, l, "filler", l.Racks[full][0], 8)
					mbQuiet(ctx, t, l)
					base, err := l.Env.SchedulerMetrics(ctx)
					if err != nil {
						t.Fatalf("scrape the scheduler's metrics: %v", err)
					}
					ms := tasGang(ctx, t, l, "counted", 2, 2, 4, tasRack)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), ms...)
					if r := tasOneRack(ctx, t, l, ms); r == full {
						t.Errorf("the gang bound in the full rack %s", r)
					}
					waitExactDeltas(ctx, t, l, base, []exactCounter{
						{tasGeneratedPlacements, nil, racks},
						{tasPlacementEvaluations, map[string]string{"result": "feasible"}, racks - 1},
						{tasPlacementEvaluations, map[string]string{"result": "infeasible"}, 1},
					})
				}},
		},
	}
}
