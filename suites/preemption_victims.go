package suites

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// Which victims a gang's preemption takes when only some must go (gang-semantics §5.1 steps 3-5):
// every lower-priority pod is removed in one simulation, the gang is placed, and then the victims
// are reprieved one by one, PDB-violating ones first and, within each list, the most important
// first (MoreImportantVictim: priority, then group before pod, then size, then age). Those that no
// longer fit are preempted. On one node the outcome of that greedy reprieve is fixed by the order,
// so each scenario here pins the victims to one node and checks the exact set that goes.
//
// v1.37.2 source (k8s.io/kubernetes@v1.37.2, pkg/scheduler/framework/preemption):
//   podgrouppreemption.go:376-378  isPreemptionAllowed: victim.Priority() < preemptor.priority
//   podgrouppreemption.go:242-246  victims sorted by MoreImportantVictim, then split by FilterVictimsWithPDBViolation
//   podgrouppreemption.go:311-331  reprieve: violating victims first, then the others, each most important first
//   util.go:67-84                  MoreImportantVictim; util.go:196-260 FilterVictimsWithPDBViolation

const (
	pvRef = "gang-semantics §5.1 (steps 3-5, reprieve); §11.C.19; "
	// pvWindow is how long survivors are watched after the preemption: the scheduler has already
	// acted (the gang is bound, the victims gone), so a wrong choice would show at once; the
	// window also covers a late second round of preemption. A canary binds afterwards.
	pvWindow = 10 * time.Second
)

// pvPreemptor creates the high-priority gang "preemptor" of n members × gpus (minCount n) and waits
// until all are bound; prefer, when set, is a node the members prefer (preferred node affinity,
// weight 100). It returns the members' nodes.
func pvPreemptor(ctx context.Context, t *testing.T, l *framework.Lane, class, prefer string, n int, gpus int64) map[string]string {
	t.Helper()
	l.CreatePodGroup(ctx, t, scenarios.Group{Name: "preemptor", MinCount: int32(n), PriorityClassName: class})
	ms := withClass(class, framework.Members("preemptor", n, gpus)...)
	for _, m := range ms {
		p := l.Pod(m)
		if prefer != "" {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
					Weight: 100,
					Preference: corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
						Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{prefer},
					}}},
				}},
			}}
		}
		if _, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", m.Name, err)
		}
	}
	l.WaitBound(ctx, t, l.Env.Scaled(90*time.Second), names(ms)...)
	return pvNodes(ctx, t, l, names(ms)...)
}

// pvNodes returns the node each named pod is bound to.
func pvNodes(ctx context.Context, t *testing.T, l *framework.Lane, pods ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range pods {
		p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s: %v", n, err)
		}
		out[n] = p.Spec.NodeName
	}
	return out
}

// pvExactly waits until the watch saw each victim deleted with the podgroup DisruptionTarget
// condition, and then checks that no other pod of the lane was preempted.
func pvExactly(ctx context.Context, t *testing.T, l *framework.Lane, r *recorder, victims ...string) {
	t.Helper()
	waitPreempted(ctx, t, l, r, victims...)
	want := slices.Sorted(slices.Values(victims))
	if got := r.preempted(); !slices.Equal(got, want) {
		t.Errorf("want exactly %v preempted, the watch saw %v; %s", want, got, r.describe(append(slices.Clone(victims), r.preempted()...)...))
	}
}

func preemptionVictimFeatures() []framework.Feature {
	return slices.Concat(victimsByPriorityFeature(), victimsPDBFeature(), victimPDBOnlyFeature(), victimGroupsFeature())
}

// victimsByPriorityFeature: four standalone victims of priorities 10, 20, 30 and 40 fill node B,
// and a pod of the preemptor's own priority fills node A, which the preemptor's members prefer.
// The gang needs 4 GPUs: the two lowest-priority victims go, the 30 and the 40 are reprieved, and
// the equal-priority pod is no candidate at all. A scheduler that counted equal priority as
// preemptable would remove it too in the simulation, place the gang on A (preferred) and then be
// unable to reprieve it (it is the most important candidate and tried first, but A is taken).
func victimsByPriorityFeature() []framework.Feature {
	var (
		rec      *recorder
		nodeA    string
		nodeB    string
		gangNode map[string]string
	)
	low := []string{"prio-10", "prio-20"}
	kept := []string{"prio-30", "prio-40"}
	stop := func() {
		if rec != nil {
			rec.stop()
		}
	}
	return []framework.Feature{{
		Suite: "preemption", Name: "victims chosen by priority; an equal-priority pod is never one", Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 8},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-24", Statement: "with standalone pods of priority 10, 20, 30 and 40 (2 GPUs each) filling one 8-GPU node, a gang of priority 1000 needing 4 GPUs preempts exactly the 10 and the 20 and binds both members on that node", Ref: pvRef + "podgrouppreemption.go:242-246, 311-331; util.go:67-70"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					done := false
					// A fatal failure ends the feature here, and the watch with it.
					defer func() {
						if !done {
							stop()
						}
					}()
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					classes := map[string]string{}
					for _, v := range []int32{10, 20, 30, 40} {
						classes[fmt.Sprintf("prio-%d", v)] = l.PriorityClass(ctx, t, fmt.Sprintf("p%d", v), v, false)
					}
					// The equal-priority pod first: it takes a whole node, so the four victims
					// must share the other one.
					l.CreatePods(ctx, t, scenarios.Member{Name: "equal", GPUs: 8, PriorityClassName: high})
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "equal")
					nodeA = pvNodes(ctx, t, l, "equal")["equal"]
					// The lowest two first and older by a second: a scheduler that reprieved the
					// older victims first would keep them and preempt the 30 and the 40.
					l.CreatePods(ctx, t, scenarios.Member{Name: "prio-10", GPUs: 2, PriorityClassName: classes["prio-10"]}, scenarios.Member{Name: "prio-20", GPUs: 2, PriorityClassName: classes["prio-20"]})
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), low...)
					olderThanASecond(ctx, t, l, "prio-20")
					l.CreatePods(ctx, t, scenarios.Member{Name: "prio-30", GPUs: 2, PriorityClassName: classes["prio-30"]}, scenarios.Member{Name: "prio-40", GPUs: 2, PriorityClassName: classes["prio-40"]})
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), kept...)
					victimNodes := pvNodes(ctx, t, l, append(slices.Clone(low), kept...)...)
					for p, n := range victimNodes {
						if n == nodeA || n == "" {
							t.Fatalf("%s on %q, want the node equal (on %s) does not fill: %v", p, n, nodeA, victimNodes)
						}
						nodeB = n
					}
					rec = startRecorder(ctx, t, l, true)
					gangNode = pvPreemptor(ctx, t, l, high, nodeA, 2, 2)
					pvExactly(ctx, t, l, rec, low...)
					for p, n := range gangNode {
						if n != nodeB {
							t.Errorf("preemptor member %s bound to %s, want %s (the victims' node; %s holds the equal-priority pod)", p, n, nodeB, nodeA)
						}
					}
					done = true
				}},
			{A: framework.Assertion{ID: "PRE-25", Statement: "the priority 30 and 40 pods on that node keep running through 10s after the preemption, never getting a DisruptionTarget condition or a Preempted event", Ref: pvRef + "podgrouppreemption.go:311-331 (the more important are reprieved first)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					done := false
					// A fatal failure ends the feature here, and the watch with it.
					defer func() {
						if !done {
							stop()
						}
					}()
					if gangNode == nil {
						t.Fatal("the preemptor did not bind (PRE-24 failed early)")
					}
					keepRunning(ctx, t, l, rec, l.Env.Scaled(pvWindow), kept...)
					done = true
				}},
			{A: framework.Assertion{ID: "PRE-26", Statement: "the pod of priority 1000, equal to the gang's, on the node the gang's members prefer is no victim: it keeps running through 10s and the gang binds on the other node", Ref: pvRef + "§11.C.20; podgrouppreemption.go:376-378 (victim priority < preemptor priority)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer stop()
					if gangNode == nil {
						t.Fatal("the preemptor did not bind (PRE-24 failed early)")
					}
					keepRunning(ctx, t, l, rec, l.Env.Scaled(pvWindow), "equal")
					for p, n := range gangNode {
						if n == nodeA {
							t.Errorf("preemptor member %s bound to %s, the equal-priority pod's node", p, n)
						}
					}
				}},
		},
	}}
}

// victimsPDBFeature: a PodDisruptionBudget outranks priority in the reprieve. Of four standalone
// victims (2 GPUs each) the priority-10 one is protected (minAvailable 1, disruptionsAllowed 0); a
// gang needing 4 GPUs reprieves it first, then the 40, and preempts the 20 and the 30. By priority
// alone the 10 and the 20 would go (as in PRE-24).
func victimsPDBFeature() []framework.Feature {
	var (
		rec   *recorder
		bound bool
	)
	stop := func() {
		if rec != nil {
			rec.stop()
		}
	}
	const pdb = "guarded"
	return []framework.Feature{
		{
			Suite: "preemption", Name: "a PodDisruptionBudget outranks priority among several victims", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8},
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-27", Statement: "of four standalone pods (2 GPUs each) on one 8-GPU node, the priority-10 one guarded by a PodDisruptionBudget with 0 disruptions allowed and the others of priority 20, 30, 40 unguarded, a gang of priority 1000 needing 4 GPUs preempts exactly the 20 and the 30", Ref: pvRef + "§5.5; podgrouppreemption.go:246, 311-331 (PDB-violating victims reprieved first); util.go:196-260"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						done := false
						// A fatal failure ends the feature here, and the watch with it.
						defer func() {
							if !done {
								stop()
							}
						}()
						high := l.PriorityClass(ctx, t, "high", highValue, false)
						ms := []scenarios.Member{{Name: "guarded-10", GPUs: 2, PriorityClassName: l.PriorityClass(ctx, t, "p10", 10, false), Labels: map[string]string{"app": pdb}}}
						for _, v := range []int32{20, 30, 40} {
							ms = append(ms, scenarios.Member{Name: fmt.Sprintf("plain-%d", v), GPUs: 2, PriorityClassName: l.PriorityClass(ctx, t, fmt.Sprintf("p%d", v), v, false)})
						}
						l.CreatePods(ctx, t, ms...)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(ms)...)
						prePDB(ctx, t, l, pdb, map[string]string{"app": pdb})
						rec = startRecorder(ctx, t, l, true)
						pvPreemptor(ctx, t, l, high, "", 2, 2)
						bound = true
						pvExactly(ctx, t, l, rec, "plain-20", "plain-30")
						done = true
					}},
				{A: framework.Assertion{ID: "PRE-28", Statement: "the guarded priority-10 pod and the priority-40 pod keep running through 10s after the preemption, never getting a DisruptionTarget condition or a Preempted event", Ref: pvRef + "§5.5; podgrouppreemption.go:311-331"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						defer stop()
						if !bound {
							t.Fatal("the preemptor did not bind (PRE-27 failed early)")
						}
						keepRunning(ctx, t, l, rec, l.Env.Scaled(pvWindow), "guarded-10", "plain-40")
					}},
			},
		},
		{
			Suite: "preemption", Name: "a PodDisruptionBudget outranks a higher-priority gang member", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8},
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-29", Statement: "with a PodDisruptionBudget-guarded standalone pod of priority 10 and a priority-500 gang of 3 members (disruptionMode single) filling one 8-GPU node with 2 GPUs each, a gang of priority 1000 needing 2 GPUs preempts exactly 1 of the 3 members, and the guarded pod and the other 2 members keep running through 10s", Ref: pvRef + "§5.2, §5.5; podgrouppreemption.go:246, 311-331 (PDB-violating victims reprieved before any other, whatever their priority)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						low := l.PriorityClass(ctx, t, "p10", 10, false)
						mid := l.PriorityClass(ctx, t, "mid", midValue, false)
						high := l.PriorityClass(ctx, t, "high", highValue, false)
						l.CreatePods(ctx, t, scenarios.Member{Name: "guarded-10", GPUs: 2, PriorityClassName: low, Labels: map[string]string{"app": pdb}})
						members := createGang(ctx, t, l, scenarios.Group{Name: "mid", MinCount: 3, PriorityClassName: mid}, 3, 2)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), append([]string{"guarded-10"}, members...)...)
						prePDB(ctx, t, l, pdb, map[string]string{"app": pdb})
						r := startRecorder(ctx, t, l, false)
						pvPreemptor(ctx, t, l, high, "", 1, 2)
						// Which member goes is age order among equals (util.go:83): any one of them.
						var gone string
						framework.Eventually(ctx, t, l.Env.Scaled(90*time.Second), "one member of mid deleted", func(context.Context) (bool, string, error) {
							for _, m := range members {
								if r.get(m).deleted {
									gone = m
									return true, "", nil
								}
							}
							return false, r.describe(append([]string{"guarded-10"}, members...)...), nil
						})
						waitPreempted(ctx, t, l, r, gone)
						keepRunning(ctx, t, l, r, l.Env.Scaled(pvWindow), slices.DeleteFunc(append([]string{"guarded-10"}, members...), func(n string) bool { return n == gone })...)
						if p := r.preempted(); !slices.Equal(p, []string{gone}) {
							t.Errorf("want only %s preempted, the watch saw %v", gone, p)
						}
					}},
			},
		},
	}
}

// victimPDBOnlyFeature: a PodDisruptionBudget is a preference, not a veto. The only pod that can
// make room is guarded (0 disruptions allowed): it cannot be reprieved, so it is preempted anyway
// and counted as a violation (podgrouppreemption.go:315-322).
func victimPDBOnlyFeature() []framework.Feature {
	const pdb = "sole"
	return []framework.Feature{{
		Suite: "preemption", Name: "a PodDisruptionBudget does not stop a preemption that needs its pod", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-32", Statement: "one standalone pod of priority 10 holding all 8 GPUs of a node and guarded by a PodDisruptionBudget with 0 disruptions allowed is preempted by a gang of priority 1000 needing the 8 GPUs (2 members × 4), which binds there", Ref: pvRef + "§5.5; podgrouppreemption.go:315-322 (a PDB-violating victim that cannot be reprieved is preempted and counted as a violation)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					l.CreatePods(ctx, t, scenarios.Member{Name: "guarded", GPUs: 8, PriorityClassName: l.PriorityClass(ctx, t, "p10", 10, false), Labels: map[string]string{"app": pdb}})
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "guarded")
					prePDB(ctx, t, l, pdb, map[string]string{"app": pdb})
					r := startRecorder(ctx, t, l, false)
					pvPreemptor(ctx, t, l, high, "", 2, 4)
					pvExactly(ctx, t, l, r, "guarded")
				}},
		},
	}}
}

// victimGroupsFeature: victims that are PodGroup members. A gang of priority 10 in disruptionMode
// all (2 members × 2 GPUs, the older and the larger victim unit) and a basic group of priority 30
// (2 members × 2 GPUs, each its own victim) fill one node. Priority decides before size and age:
// the gang goes whole, the basic group stays.
func victimGroupsFeature() []framework.Feature {
	var (
		rec   *recorder
		bound bool
	)
	stop := func() {
		if rec != nil {
			rec.stop()
		}
	}
	return []framework.Feature{{
		Suite: "preemption", Name: "victims chosen by priority among lower-priority groups", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 8},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-30", Statement: "with a gang of priority 10 in disruptionMode all (2 members × 2 GPUs, created first) and a basic group of priority 30 (2 members × 2 GPUs) filling one 8-GPU node, a gang of priority 1000 needing 4 GPUs preempts exactly the 2 members of the priority-10 gang", Ref: pvRef + "§5.2; podgrouppreemption.go:242-246, 311-331; util.go:67-84 (priority before group size and age)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					done := false
					// A fatal failure ends the feature here, and the watch with it.
					defer func() {
						if !done {
							stop()
						}
					}()
					p10 := l.PriorityClass(ctx, t, "p10", 10, false)
					p30 := l.PriorityClass(ctx, t, "p30", 30, false)
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					createGang(ctx, t, l, scenarios.Group{Name: "gang10", MinCount: 2, DisruptionAll: true, PriorityClassName: p10}, 2, 2)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "gang10-0", "gang10-1")
					// Older by a second, so neither age nor size (the gang is one 2-pod victim, each
					// basic member a 1-pod one) would pick the gang.
					olderThanASecond(ctx, t, l, "gang10-1")
					createGang(ctx, t, l, scenarios.Group{Name: "basic30", PriorityClassName: p30}, 2, 2)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "basic30-0", "basic30-1")
					rec = startRecorder(ctx, t, l, true)
					pvPreemptor(ctx, t, l, high, "", 2, 2)
					bound = true
					pvExactly(ctx, t, l, rec, "gang10-0", "gang10-1")
					done = true
				}},
			{A: framework.Assertion{ID: "PRE-31", Statement: "both members of the priority-30 basic group keep running through 10s after the preemption, never getting a DisruptionTarget condition or a Preempted event", Ref: pvRef + "podgrouppreemption.go:311-331"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer stop()
					if !bound {
						t.Fatal("the preemptor did not bind (PRE-30 failed early)")
					}
					keepRunning(ctx, t, l, rec, l.Env.Scaled(pvWindow), "basic30-0", "basic30-1")
				}},
		},
	}}
}
