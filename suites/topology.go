package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// Topology-aware placement (TopologyAwareWorkloadScheduling, alpha, off by default): a PodGroup
// whose spec.schedulingConstraints.topology names a node label key lands whole in one domain of
// that key (workload-features-v1.37 §1). Each feature's lane brings its own racks
// (LaneSpec.Racks: rack label values of the lane's own), so lanes never share a domain. The suite
// runs only where the apiserver keeps the field and the scheduler places by it: both gates on
// (`gangbench e2e --features tas`); elsewhere every assertion is skipped with the reason.

const (
	tasRef = "workload-features §1.3 (placements: one per value of the key, schedule_one_podgroup.go:971-1066, topology_placement.go:60-100)"
	// tasRack is the key the lanes' racks carry.
	tasRack = clusters.DefaultRackKey
	// tasNoKey is a label key no node carries.
	tasNoKey = "topology.gangbench.dev/no-such-level"
)

var tasGates = []string{"TopologyAwareWorkloadScheduling"}

func topologyFeatures() []framework.Feature {
	twoRacks := framework.LaneSpec{Nodes: 4, GPUsPerNode: 8, Racks: 2}
	return []framework.Feature{
		{
			Suite: "topology", Name: "topology: a gang lands in one rack", Lane: twoRacks, NeedsGates: tasGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "TAS-01", Statement: "on 2 racks of 2 nodes × 8 GPUs, a gang of 4 × 4 GPUs (minCount 4) constrained to the rack key binds whole within 60s, every member in the same rack (without the constraint the default scoring spreads them over the 4 nodes)", Ref: tasRef},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						ms := tasGang(ctx, t, l, "one", 4, 4, 4, tasRack)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), ms...)
						tasOneRack(ctx, t, l, ms)
					}},
			},
		},
		{
			Suite: "topology", Name: "topology: the rack where the whole gang fits", Lane: twoRacks, NeedsGates: tasGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "TAS-02", Statement: "one rack holds an 8-GPU pod (8 of its 16 GPUs free), the other is empty: a gang of 3 × 4 GPUs constrained to the rack key binds whole in the empty rack, the only one where all 3 fit", Ref: tasRef + "; §1.3 step 3 (a placement is feasible when the gang fits it)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						full, empty := tasRacks(t, l)
						tasFiller(ctx, t, l, "filler", l.Racks[full][0], 8)
						ms := tasGang(ctx, t, l, "fits", 3, 3, 4, tasRack)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), ms...)
						if r := tasOneRack(ctx, t, l, ms); r != empty {
							t.Errorf("the gang bound in rack %s, where only 8 of its 12 GPUs were free; want rack %s", r, empty)
						}
					}},
			},
		},
		tasNoRackFitsFeature(twoRacks),
		tasPinnedFeature(twoRacks),
		tasBasicFeature(),
		tasPreemptionFeature(),
		tasEqualPriorityFeature(),
		tasMetricsFeature(),
		{
			Suite: "topology", Name: "topology: the API", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}, NeedsGates: tasGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "TAS-09", Statement: "a PodGroup with 2 topology constraints is refused (\"must have at most 1 item\"), and one whose key is not a label key (\"not a key!\") is refused as Invalid", Ref: "workload-features §1.1 (maxItems=1; key of format k8s-label-key)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						two := scenarios.PodGroup(l.Name, scenarios.Group{Name: "two", MinCount: 1, TopologyKey: tasRack})
						two.Spec.SchedulingConstraints.Topology = append(two.Spec.SchedulingConstraints.Topology, schedv1beta1.TopologyConstraint{Key: clusters.DefaultBlockKey})
						_, err := l.Gang.PodGroups(l.Name).Create(ctx, two, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
						if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must have at most 1 item") {
							t.Errorf("PodGroup with 2 topology constraints: %v, want Invalid \"must have at most 1 item\"", err)
						}
						bad := scenarios.PodGroup(l.Name, scenarios.Group{Name: "bad", MinCount: 1, TopologyKey: "not a key!"})
						if _, err := l.Gang.PodGroups(l.Name).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.schedulingConstraints.topology[0].key") {
							t.Errorf("PodGroup with topology key %q: %v, want Invalid naming spec.schedulingConstraints.topology[0].key", "not a key!", err)
						}
					}},
				{A: framework.Assertion{ID: "TAS-10", Statement: "a PodGroup's topology key cannot be changed once created (\"field is immutable\")", Ref: "workload-features §1.1 (immutable with the gate on)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: "fixed", MinCount: 1, TopologyKey: tasRack})
						patch := []byte(`{"spec":{"schedulingConstraints":{"topology":[{"key":"` + clusters.DefaultBlockKey + `"}]}}}`)
						_, err := l.Gang.PodGroups(l.Name).Patch(ctx, "fixed", types.MergePatchType, patch, metav1.PatchOptions{})
						if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
							t.Errorf("changing PodGroup fixed's topology key: %v, want Invalid \"field is immutable\"", err)
						}
					}},
			},
		},
		{
			Suite: "topology", Name: "topology: a key no node carries", Lane: twoRacks, NeedsGates: tasGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "TAS-05", Statement: fmt.Sprintf("a gang of 2 × 1 GPU constrained to a label key no node carries (%s): every member gets FailedScheduling \"no feasible placements found\" and none binds for 10s", tasNoKey), Ref: "workload-features §1.4 (zero placements: Unschedulable \"no feasible placements found\", framework.go:2229-2231)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						ms := tasGang(ctx, t, l, "nokey", 2, 2, 1, tasNoKey)
						for _, m := range ms {
							l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), m, "FailedScheduling", "no feasible placements found")
						}
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: ms})
						l.Canary(ctx, t)
					}},
			},
		},
		{
			Suite: "topology", Name: "topology: nodes without the key are never used", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8, Racks: 1, Unlabelled: 2}, NeedsGates: tasGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "TAS-06", Statement: "one rack of one 8-GPU node beside 2 empty 8-GPU nodes without the rack key: a gang of 2 × 8 GPUs constrained to the rack key does not bind for 10s, although the unlabelled nodes have room for it", Ref: "workload-features §1.3 step 1 (nodes without the label are excluded from every placement, topology_placement.go:81-87)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						ms := tasGang(ctx, t, l, "unlabelled", 2, 2, 8, tasRack)
						l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), ms[0], "FailedScheduling")
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: ms})
						l.Canary(ctx, t)
					}},
			},
		},
	}
}

// tasNoRackFitsFeature: each rack has 8 GPUs free, 16 in all, and the gang needs 16 in one rack.
func tasNoRackFitsFeature(lane framework.LaneSpec) framework.Feature {
	ref := "workload-features §1.4 (no single domain fits although the cluster does: \"0/<P> placements are available, first placement status: …\", schedule_one_podgroup.go:1038-1043)"
	var (
		ms   []string
		free string
	)
	return framework.Feature{
		Suite: "topology", Name: "topology: no rack fits although the cluster does", Lane: lane, NeedsGates: tasGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "TAS-03", Statement: "each of 2 racks holds an 8-GPU pod (16 GPUs free in all, 8 per rack): a gang of 4 × 4 GPUs constrained to the rack key does not bind for 10s, and its PodGroup is False/Unschedulable saying \"placements are available\"", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					a, b := tasRacks(t, l)
					tasFiller(ctx, t, l, "filler-a", l.Racks[a][0], 8)
					tasFiller(ctx, t, l, "filler-b", l.Racks[b][0], 8)
					ms = tasGang(ctx, t, l, "wide", 4, 4, 4, tasRack)
					c := l.WaitCondition(ctx, t, l.Env.Scaled(60*time.Second), "wide", metav1.ConditionFalse, "Unschedulable")
					if !strings.Contains(c.Message, "placements are available") {
						t.Errorf("PodGroup wide: condition message %q does not say that no placement fits", c.Message)
					}
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: ms})
					l.Canary(ctx, t)
					free = b
				}},
			{A: framework.Assertion{ID: "TAS-04", Statement: fmt.Sprintf("the 8-GPU pod of one rack is deleted: the gang binds whole in that rack within %s", bhWakeBound), Ref: ref + "; an assigned pod's deletion requeues the gang"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if free == "" {
						t.Fatal("the gang did not wait (TAS-03 failed early)")
					}
					at := time.Now()
					bmRemovePod(ctx, t, l, "filler-b")
					bhWaitBoundWithin(ctx, t, l, at, "the filler's deletion", "boundAfterRackFreed", ms...)
					if r := tasOneRack(ctx, t, l, ms); r != free {
						t.Errorf("the gang bound in rack %s, want %s, the rack whose pod was deleted", r, free)
					}
				}},
		},
	}
}

// tasPinnedFeature: members placed after the gang's first ones stay in its rack (the required
// domain of already scheduled members), even when another rack is empty.
func tasPinnedFeature(lane framework.LaneSpec) framework.Feature {
	ref := "workload-features §1.5 (members that bind later are pinned to the domain of the bound ones, topology_placement.go:66-79; never spilled to another domain)"
	var (
		rack string
		late string
	)
	return framework.Feature{
		Suite: "topology", Name: "topology: later members stay in the gang's rack", Lane: lane, NeedsGates: tasGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "TAS-07", Statement: "a gang (minCount 2) of 3 members × 6 GPUs constrained to the rack key, on 2 racks of 2 × 8-GPU nodes: 2 members bind in one rack, and the third, which that rack has no room for, does not bind for 10s although the other rack is empty", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					ms := tasGang(ctx, t, l, "pinned", 2, 3, 6, tasRack)
					var bound []string
					bound, late = tasTwoBound(ctx, t, l, ms, "2 members of the gang bound")
					rack = tasOneRack(ctx, t, l, bound)
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: []string{late}})
					l.Canary(ctx, t)
				}},
			{A: framework.Assertion{ID: "TAS-08", Statement: fmt.Sprintf("one of the 2 bound members is deleted: the third binds within %s in the gang's rack, not in the empty one", bhWakeBound), Ref: ref + "; an assigned pod's deletion requeues the member"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if late == "" {
						t.Fatal("no member waited (TAS-07 failed early)")
					}
					var gone string
					for _, m := range []string{"pinned-0", "pinned-1", "pinned-2"} {
						if m != late {
							gone = m
							break
						}
					}
					at := time.Now()
					bmRemovePod(ctx, t, l, gone)
					bhWaitBoundWithin(ctx, t, l, at, "a bound member's deletion", "boundInGangRack", late)
					if r := tasOneRack(ctx, t, l, []string{late}); r != rack {
						t.Errorf("the late member bound in rack %s, want the gang's rack %s", r, rack)
					}
				}},
		},
	}
}

// tasBasicFeature: a basic PodGroup (no minCount) with a topology constraint is placed in one rack
// as a gang is; the member the rack has no room for waits rather than binding in another rack.
func tasBasicFeature() framework.Feature {
	return framework.Feature{
		Suite: "topology", Name: "topology: a basic group does not spill to another rack", Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 8, Racks: 2}, NeedsGates: tasGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "TAS-11", Statement: "a basic PodGroup (no minCount) of 3 members × 4 GPUs constrained to the rack key, on 2 racks of one 8-GPU node each: exactly 2 members bind, both in one rack, and the third gets FailedScheduling and does not bind for 10s although the other rack is empty", Ref: "workload-features §1.5 (Basic + topology: all pods in one domain, those beyond its capacity stay Pending; upstream tas_test.go:996-1034 \"basic podgroup cannot fit on a single rack\"); §1.3 step 2 (a basic placement is feasible with 1 pod)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					ms := tasGang(ctx, t, l, "basic", 0, 3, 4, tasRack)
					bound, late := tasTwoBound(ctx, t, l, ms, "2 members of the basic group bound")
					tasOneRack(ctx, t, l, bound)
					l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), late, "FailedScheduling")
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: []string{late}})
					l.Canary(ctx, t)
				}},
		},
	}
}

// tasTwoBound waits until exactly 2 of 3 members are bound, where the rack they are constrained to
// has room for 2 only, and fails at once if all 3 are (one left the rack); it returns the 2 bound
// and the one left waiting.
func tasTwoBound(ctx context.Context, t *testing.T, l *framework.Lane, ms []string, what string) (bound []string, late string) {
	t.Helper()
	framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), what, func(ctx context.Context) (bool, string, error) {
		o, err := l.Observe(ctx)
		if err != nil {
			return false, "", err
		}
		bound, late = nil, ""
		for _, m := range ms {
			if o.Pods[m] == framework.Bound {
				bound = append(bound, m)
			} else {
				late = m
			}
		}
		if len(bound) == len(ms) {
			t.Fatalf("all %d members bound, though their rack has room for 2 of them: %s", len(ms), o.String())
		}
		return len(bound) == 2, o.String(), nil
	})
	return bound, late
}

// tasGang creates a PodGroup (constrained to key when set) and its n members of gpus GPUs each,
// and returns the members' names.
func tasGang(ctx context.Context, t *testing.T, l *framework.Lane, name string, minCount int32, n int, gpus int64, key string) []string {
	t.Helper()
	pg := l.CreatePodGroup(ctx, t, scenarios.Group{Name: name, MinCount: minCount, TopologyKey: key})
	// The apiserver drops the field without the gate: the suite's gate check should have skipped.
	if key != "" && (pg.Spec.SchedulingConstraints == nil || len(pg.Spec.SchedulingConstraints.Topology) == 0) {
		t.Fatalf("the apiserver dropped PodGroup %s's spec.schedulingConstraints.topology (TopologyAwareWorkloadScheduling off on the apiserver?)", name)
	}
	ms := framework.Members(name, n, gpus)
	l.CreatePods(ctx, t, ms...)
	return names(ms)
}

// tasRacks returns the lane's two racks in a fixed order.
func tasRacks(t *testing.T, l *framework.Lane) (string, string) {
	t.Helper()
	a, b := l.Name+"-rack-0", l.Name+"-rack-1"
	if len(l.Racks[a]) == 0 || len(l.Racks[b]) == 0 {
		t.Fatalf("lane %s has racks %v, want %s and %s", l.Name, l.Racks, a, b)
	}
	return a, b
}

// tasFiller binds a standalone pod of gpus GPUs to node (created bound, so no scheduling decision
// of the scheduler under test is involved) and waits until the scheduler's view can count it.
func tasFiller(ctx context.Context, t *testing.T, l *framework.Lane, name, node string, gpus int64) {
	t.Helper()
	tasFillerOf(ctx, t, l, name, node, gpus, "")
}

// tasFillerOf is tasFiller with a PriorityClass (none when class is empty).
func tasFillerOf(ctx context.Context, t *testing.T, l *framework.Lane, name, node string, gpus int64, class string) {
	t.Helper()
	p := l.Pod(scenarios.Member{Name: name, GPUs: gpus, PriorityClassName: class})
	p.Spec.NodeName = node
	if _, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s on %s: %v", name, node, err)
	}
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "pod "+name+" running on "+node, func(ctx context.Context) (bool, string, error) {
		got, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return got.Status.Phase == corev1.PodRunning, "phase " + string(got.Status.Phase), nil
	})
}

// tasOneRack fails unless every pod is bound in one rack of the lane, and returns that rack.
func tasOneRack(ctx context.Context, t *testing.T, l *framework.Lane, pods []string) string {
	t.Helper()
	where := map[string]string{}
	racks := map[string]bool{}
	for _, n := range pods {
		p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rack := l.RackOf(p.Spec.NodeName)
		where[n] = fmt.Sprintf("%s (rack %q)", p.Spec.NodeName, rack)
		racks[rack] = true
	}
	if len(racks) != 1 || racks[""] {
		t.Fatalf("members not in one rack: %v", where)
	}
	for r := range racks {
		return r
	}
	return ""
}
