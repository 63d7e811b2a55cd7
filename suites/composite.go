package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// Composite pod groups (CompositePodGroup, alpha, off by default; served only in
// scheduling.k8s.io/v1alpha3: workload-features-v1.37 §2). PodGroups point at a parent
// CompositePodGroup, and the scheduler treats the whole tree as one entity: one queue entry, one
// cycle, a quorum of children (minGroupCount) on top of each child's own minCount, and a child
// binds only if every ancestor succeeds. Nothing creates the tree from a Workload: the harness
// makes every object. The suite runs where the apiserver and the scheduler report the gate on
// (`--features composite`, which also serves v1alpha3 and switches on the TAS gate it depends on).

const cpgRef = "workload-features §2"

var cpgGates = []string{"CompositePodGroup"}

func compositeFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	var created time.Time
	return append([]framework.Feature{
		{
			Suite: "composite", Name: "composite: the API", Lane: one, NeedsGates: cpgGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "CPG-06", Statement: "scheduling.k8s.io/v1alpha3 serves compositepodgroups and compositepodgroups/status", Ref: cpgRef + ".1 (served in v1alpha3 only, storage_scheduling.go:151-160)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						res, err := l.Client.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1alpha3")
						if err != nil {
							t.Fatalf("discover scheduling.k8s.io/v1alpha3: %v", err)
						}
						have := map[string]bool{}
						for _, r := range res.APIResources {
							have[r.Name] = true
						}
						for _, want := range []string{"compositepodgroups", "compositepodgroups/status"} {
							if !have[want] {
								t.Errorf("scheduling.k8s.io/v1alpha3 does not serve %s (it serves %v)", want, have)
							}
						}
					}},
				{A: framework.Assertion{ID: "CPG-07", Statement: "a CompositePodGroup without workloadRef is refused (\"spec.workloadRef: Required value\"), one with gang minGroupCount 0 too (\"spec.schedulingPolicy.gang.minGroupCount\")", Ref: cpgRef + ".2"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						api := l.Client.SchedulingV1alpha3().CompositePodGroups(l.Name)
						dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
						noRef := cpgBuild(l, "noref", 1)
						noRef.Spec.WorkloadRef = nil
						if _, err := api.Create(ctx, noRef, dry); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.workloadRef: Required value") {
							t.Errorf("CompositePodGroup without workloadRef: %v, want Invalid \"spec.workloadRef: Required value\"", err)
						}
						if _, err := api.Create(ctx, cpgBuild(l, "zero", 0), dry); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.schedulingPolicy.gang.minGroupCount") {
							t.Errorf("CompositePodGroup with minGroupCount 0: %v, want Invalid naming spec.schedulingPolicy.gang.minGroupCount", err)
						}
					}},
			},
		},
		{
			Suite: "composite", Name: "composite: children wait for their parent to exist", Lane: one, NeedsGates: cpgGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "CPG-01", Statement: "2 gang PodGroups (minCount 2, 2 × 2 GPUs each) whose parent CompositePodGroup does not exist yet: their 4 pods stay Pending for 10s with no event and no PodScheduled condition (the queue cannot find the tree's root)", Ref: cpgRef + ".3 (an unobserved ancestor keeps the pods in incompletePodGroupPods, scheduling_queue.go:900-908)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						pods := cpgChildren(ctx, t, l, "root", []cpgChild{{"a", 2, 2, 2}, {"b", 2, 2, 2}})
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: pods})
						l.Canary(ctx, t)
						created = time.Now()
					}},
				{A: framework.Assertion{ID: "CPG-02", Statement: fmt.Sprintf("creating the parent (gang, minGroupCount 2) binds all 4 within %s, and the CompositePodGroup's status.conditions stay empty (only leaf PodGroups carry conditions)", bhWakeBound), Ref: cpgRef + ".3 (a CompositePodGroup add in the same hierarchy requeues, gangscheduling.go:75-177); §2.1 (no v1.37.2 code writes a CompositePodGroup condition)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						if created.IsZero() {
							t.Fatal("the children did not wait (CPG-01 failed early)")
						}
						at := time.Now()
						cpgCreate(ctx, t, l, "root", 2)
						bhWaitBoundWithin(ctx, t, l, at, "the parent's creation", "boundAfterParentCreated", "a-0", "a-1", "b-0", "b-1")
						l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "a", metav1.ConditionTrue, "Scheduled")
						cpgNoConditions(ctx, t, l, "root")
					}},
			},
		},
		{
			Suite: "composite", Name: "composite: a quorum across levels", Lane: one, NeedsGates: cpgGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "CPG-03", Statement: fmt.Sprintf("a parent (gang, minGroupCount 2) of 2 gang PodGroups (minCount 2, 2 GPUs a pod): with 2 pods of one and 1 of the other nothing is touched for 10s; the 4th pod binds all 4 within %s of its creation", bhWakeBound), Ref: cpgRef + ".4 (preEnqueueWithHierarchies: a tree is ready when minGroupCount children each meet their minCount, gangscheduling.go:217-333)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						cpgCreate(ctx, t, l, "root", 2)
						pods := cpgChildren(ctx, t, l, "root", []cpgChild{{"a", 2, 2, 2}, {"b", 2, 1, 2}})
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Untouched: pods})
						at := time.Now()
						l.CreatePods(ctx, t, bmMember("b-1", "b", 2))
						bhWaitBoundWithin(ctx, t, l, at, "the 4th pod's creation", "boundAfterTreeQuorum", append(pods, "b-1")...)
					}},
			},
		},
		{
			Suite: "composite", Name: "composite: minGroupCount of 3 children", Lane: one, NeedsGates: cpgGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "CPG-04", Statement: "a parent (gang, minGroupCount 2) of 3 gang PodGroups, two of 2 × 2 GPUs and one of a 16-GPU pod that fits no node: the two bind whole within 60s, the third's pod gets FailedScheduling and its PodGroup becomes False/Unschedulable; the parent has no condition", Ref: cpgRef + ".5 (compositePodGroupSchedulingDefaultAlgorithm: the parent succeeds with minGroupCount children, schedule_one_podgroup.go:1294-1379)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						cpgCreate(ctx, t, l, "root", 2)
						cpgChildren(ctx, t, l, "root", []cpgChild{{"a", 2, 2, 2}, {"b", 2, 2, 2}, {"c", 1, 1, 16}})
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "a-0", "a-1", "b-0", "b-1")
						l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), "c-0", "FailedScheduling")
						l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "c", metav1.ConditionFalse, "Unschedulable")
						cpgNoConditions(ctx, t, l, "root")
					}},
			},
		},
		{
			Suite: "composite", Name: "composite: a failing parent fails its fitting child", Lane: one, NeedsGates: cpgGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "CPG-05", Statement: "a parent (gang, minGroupCount 2) of a gang PodGroup that fits (2 × 2 GPUs) and one that does not (a 16-GPU pod): nothing binds for 10s, and the fitting PodGroup too becomes False/Unschedulable", Ref: cpgRef + ".5 (completeCompositePodGroupAlgorithmResultMap: a parent's failure replaces its children's success, schedule_one_podgroup.go:747-767)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						cpgCreate(ctx, t, l, "root", 2)
						pods := cpgChildren(ctx, t, l, "root", []cpgChild{{"a", 2, 2, 2}, {"c", 1, 1, 16}})
						l.WaitCondition(ctx, t, l.Env.Scaled(60*time.Second), "a", metav1.ConditionFalse, "Unschedulable")
						bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: pods})
						l.Canary(ctx, t)
					}},
			},
		},
		cpgAttemptsFeature(one),
	}, cpgDisruptionFeatures()...)
}

// cpgAttemptsFeature: the pod-group cycle counter counts the tree's one cycle, not its leaves. The
// counter is cluster-wide: Serial, and it waits until no pod group is queued anywhere (mbQuiet).
func cpgAttemptsFeature(lane framework.LaneSpec) framework.Feature {
	return framework.Feature{
		Suite: "composite", Name: "composite: one cycle counted per tree", Lane: lane, NeedsGates: cpgGates, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "CPG-08", Statement: fmt.Sprintf("a parent (gang, minGroupCount 2) of 2 gang PodGroups (minCount 2, 2 × 2 GPUs each) binds its 4 pods in one cycle: %s rises by exactly 1 (result scheduled), not once per child PodGroup", obsGroupAttempts), Ref: cpgRef + ".5 (one count per root cycle, from the root's result, schedule_one_podgroup.go:923-935); §7 item 25"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					mbQuiet(ctx, t, l)
					base, err := l.Env.SchedulerMetrics(ctx)
					if err != nil {
						t.Fatalf("scrape the scheduler's metrics: %v", err)
					}
					cpgCreate(ctx, t, l, "root", 2)
					pods := cpgChildren(ctx, t, l, "root", []cpgChild{{"a", 2, 2, 2}, {"b", 2, 2, 2}})
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), pods...)
					waitExactDeltas(ctx, t, l, base, []exactCounter{
						{obsGroupAttempts, nil, 1},
						{obsGroupAttempts, obsGroupScheduled, 1},
					})
				}},
		},
	}
}

// cpgDisruptionFeatures: a CompositePodGroup's own disruptionMode decides whether its subtree is
// one victim. In v1.37.2 the mode is the CompositePodGroup's spec.disruptionMode (v1alpha3
// CompositeDisruptionMode, default single), read on the victim side by getHighestAllAncestor, which
// walks up from the victim pod's PodGroup and keeps the highest PodGroup or CompositePodGroup in
// mode all (pkg/scheduler/framework/preemption/types.go:164-205); getCrossNodesVictims then makes
// the scheduled pods of every leaf PodGroup under it one victim (types.go:254-335). Without an
// ancestor in mode all each pod is a victim of its own. As §2.6 says.
func cpgDisruptionFeatures() []framework.Feature {
	lane := framework.LaneSpec{Nodes: 2, GPUsPerNode: 2}
	ref := cpgRef + ".6 (the CompositePodGroup's spec.disruptionMode: the highest ancestor in mode all is the victim unit, preemption/types.go:164-205, 254-335); §7 item 27"
	// tree makes a CompositePodGroup of priority 100 (disruptionMode all when all, else the
	// default single) over 2 gang PodGroups of one 2-GPU pod each, which fill the lane's 2 nodes;
	// then a one-pod gang of priority 1000 that needs one node. It returns the tree's pods, the
	// preemptor's node (bound or nominated) and the recorder that watched the preemption.
	tree := func(ctx context.Context, t *testing.T, l *framework.Lane, all bool) ([]string, string, *recorder) {
		t.Helper()
		low := l.PriorityClass(ctx, t, "low", lowValue, false)
		high := l.PriorityClass(ctx, t, "high", highValue, false)
		root := cpgBuild(l, "victims", 2)
		root.Spec.PriorityClassName = low
		if all {
			root.Spec.DisruptionMode = &schedv1alpha3.CompositeDisruptionMode{All: &schedv1alpha3.AllCompositeDisruptionMode{}}
		}
		got, err := l.Client.SchedulingV1alpha3().CompositePodGroups(l.Name).Create(ctx, root, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create CompositePodGroup victims: %v", err)
		}
		if dm := got.Spec.DisruptionMode; dm == nil || (dm.All != nil) != all {
			t.Fatalf("CompositePodGroup victims reads back disruptionMode %+v, want all=%v", dm, all)
		}
		var victims []string
		for _, c := range []string{"a", "b"} {
			l.CreatePodGroup(ctx, t, scenarios.Group{Name: c, MinCount: 1, Parent: "victims", Workload: "tree", Template: c, PriorityClassName: low})
			ms := withClass(low, framework.Members(c, 1, 2)...)
			l.CreatePods(ctx, t, ms...)
			victims = append(victims, names(ms)...)
		}
		l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), victims...)
		r := startRecorder(ctx, t, l, false)
		createGang(ctx, t, l, scenarios.Group{Name: "preemptor", MinCount: 1, PriorityClassName: high}, 1, 2)
		// Bound or nominated: its binding can wait for the queue (see topology_preemption.go).
		where := waitPlaced(ctx, t, l, r, l.Env.Scaled(90*time.Second), "preemptor-0")
		return victims, where["preemptor-0"], r
	}
	return []framework.Feature{
		{
			Suite: "composite", Name: "composite: a tree in disruptionMode all is preempted whole", Lane: lane, NeedsGates: cpgGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "CPG-09", Statement: "a CompositePodGroup of priority 100 in disruptionMode all over 2 gang PodGroups (minCount 1, one 2-GPU pod each), bound on the lane's 2 nodes of 2 GPUs: a gang of priority 1000 that needs one node (1 × 2 GPUs) is bound or nominated to a node within 90s, and both pods of the tree are preempted (DisruptionTarget PreemptionByScheduler), the one on the node it did not take too", Ref: ref},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						victims, node, r := tree(ctx, t, l, true)
						waitPreempted(ctx, t, l, r, victims...)
						other := 0
						for _, v := range victims {
							if n := r.get(v).node; n != "" && n != node {
								other++
							}
						}
						if other != 1 {
							t.Errorf("want one victim on the node the preemptor (on %s) did not take; victims: %s", node, r.describe(victims...))
						}
					}},
			},
		},
		{
			Suite: "composite", Name: "composite: a tree in disruptionMode single loses only what is needed", Lane: lane, NeedsGates: cpgGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "CPG-10", Statement: "the same tree with the CompositePodGroup in disruptionMode single (the default): the gang of priority 1000 is bound or nominated within 90s, exactly the tree's pod on that node is preempted, and the other keeps running", Ref: ref},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						victims, node, r := tree(ctx, t, l, false)
						var gone, kept string
						for _, v := range victims {
							if r.get(v).node == node {
								gone = v
							} else {
								kept = v
							}
						}
						if gone == "" || kept == "" {
							t.Fatalf("preemptor on %s; cannot tell the victims apart: %s", node, r.describe(victims...))
						}
						pvExactly(ctx, t, l, r, gone)
						keepRunning(ctx, t, l, r, l.Env.Scaled(6*time.Second), kept)
					}},
			},
		},
	}
}

// cpgChild is one child PodGroup: its name, gang minCount, how many pods to create now and their GPUs.
type cpgChild struct {
	name     string
	minCount int32
	pods     int
	gpus     int64
}

// cpgChildren creates the children of parent and their pods, and returns the pods' names.
func cpgChildren(ctx context.Context, t *testing.T, l *framework.Lane, parent string, children []cpgChild) []string {
	t.Helper()
	var pods []string
	for _, c := range children {
		l.CreatePodGroup(ctx, t, scenarios.Group{Name: c.name, MinCount: c.minCount, Parent: parent, Workload: "tree", Template: c.name})
		ms := framework.Members(c.name, c.pods, c.gpus)
		l.CreatePods(ctx, t, ms...)
		pods = append(pods, names(ms)...)
	}
	return pods
}

// cpgBuild is a root CompositePodGroup with a gang policy of minGroupCount.
func cpgBuild(l *framework.Lane, name string, minGroupCount int32) *schedv1alpha3.CompositePodGroup {
	return &schedv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.Name},
		Spec: schedv1alpha3.CompositePodGroupSpec{
			WorkloadRef:      &schedv1alpha3.WorkloadReference{WorkloadName: "tree", TemplateName: name},
			SchedulingPolicy: schedv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &schedv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}},
		},
	}
}

// cpgCreate creates a root CompositePodGroup with a gang policy of minGroupCount.
func cpgCreate(ctx context.Context, t *testing.T, l *framework.Lane, name string, minGroupCount int32) {
	t.Helper()
	if _, err := l.Client.SchedulingV1alpha3().CompositePodGroups(l.Name).Create(ctx, cpgBuild(l, name, minGroupCount), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CompositePodGroup %s (served in scheduling.k8s.io/v1alpha3 only with --runtime-config): %v", name, err)
	}
}

// cpgNoConditions fails if the CompositePodGroup has any status condition.
func cpgNoConditions(ctx context.Context, t *testing.T, l *framework.Lane, name string) {
	t.Helper()
	cpg, err := l.Client.SchedulingV1alpha3().CompositePodGroups(l.Name).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get CompositePodGroup %s: %v", name, err)
	}
	if len(cpg.Status.Conditions) > 0 {
		t.Errorf("CompositePodGroup %s has conditions %+v; v1.37.2 writes none (only leaf PodGroups carry them)", name, cpg.Status.Conditions)
	}
}
