package suites

import (
	"context"
	"github.com/gangbench/gangbench/suites/framework"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
)

// Preemptors other than a gang, and the order victims go in (gang-semantics §5.1, §5.2): an
// individual pod honours a victim group's disruptionMode as a pod group does, a basic PodGroup
// preempts basic-group members, and of two lower-priority victims that each free enough the
// lower-priority one goes.

const (
	// msgVictimByPod is the DisruptionTarget message of a victim of a pod preemptor (§5.3).
	msgVictimByPod = "preempting to accommodate a higher priority pod"
	midValue       = 500
)

// waitPreemptedByPod waits for victims as waitPreempted does, and checks that each was preempted
// for a pod (its DisruptionTarget message ends in "pod", and a Preempted event names the pod).
func waitPreemptedByPod(ctx context.Context, t *testing.T, l *framework.Lane, r *recorder, preemptorUID string, victims ...string) {
	t.Helper()
	waitVictims(ctx, t, l, r, l.Env.SchedulerName+": "+msgVictimByPod, victims...)
	for _, v := range victims {
		e := l.WaitEvent(ctx, t, l.Env.Scaled(30*time.Second), v, "Preempted", "Preempted by pod "+preemptorUID)
		t.Logf("victim %s: %q", v, e.Message)
	}
}

func preemptorFeatures() []framework.Feature {
	two := framework.LaneSpec{Nodes: 2, GPUsPerNode: 2}
	// podPreempts fills both nodes with a low-priority gang of two full-node members, then creates a
	// standalone high-priority pod that needs one node and waits until it binds; it returns the
	// preemptor's node and UID.
	podPreempts := func(ctx context.Context, t *testing.T, l *framework.Lane, all bool) (string, string, *recorder) {
		t.Helper()
		low := l.PriorityClass(ctx, t, "low", lowValue, false)
		high := l.PriorityClass(ctx, t, "high", highValue, false)
		createGang(ctx, t, l, scenarios.Group{Name: "victims", MinCount: 2, DisruptionAll: all, PriorityClassName: low}, 2, 2)
		l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "victims-0", "victims-1")
		r := startRecorder(ctx, t, l, false)
		l.CreatePods(ctx, t, scenarios.Member{Name: "preemptor", GPUs: 2, PriorityClassName: high})
		l.WaitBound(ctx, t, l.Env.Scaled(90*time.Second), "preemptor")
		p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, "preemptor", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get preemptor: %v", err)
		}
		return p.Spec.NodeName, string(p.UID), r
	}
	return []framework.Feature{
		{
			Suite: "preemption", Name: "an individual pod preempts a disruptionMode all group", Lane: two,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-19", Statement: "an individual pod that needs one node preempts a victim gang in disruptionMode all whole, its member on the other node too", Ref: preRef + "18; §5.2 (single-pod preemption honours mode all)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						node, uid, r := podPreempts(ctx, t, l, true)
						waitPreemptedByPod(ctx, t, l, r, uid, "victims-0", "victims-1")
						other := 0
						for _, v := range []string{"victims-0", "victims-1"} {
							if n := r.get(v).node; n != "" && n != node {
								other++
							}
						}
						if other != 1 {
							t.Errorf("want one victim on the node the preemptor did not take (%s); victims: %s", node, r.describe("victims-0", "victims-1"))
						}
					}},
			},
		},
		{
			Suite: "preemption", Name: "an individual pod preempts from a disruptionMode single group", Lane: two,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-20", Statement: "an individual pod preempts from a victim gang in disruptionMode single exactly the member on its node; the other keeps running", Ref: preRef + "18; §5.2"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						node, uid, r := podPreempts(ctx, t, l, false)
						var gone, kept string
						for _, v := range []string{"victims-0", "victims-1"} {
							if r.get(v).node == node {
								gone = v
							} else {
								kept = v
							}
						}
						if gone == "" || kept == "" {
							t.Fatalf("preemptor on %s; cannot tell the victims apart: %s", node, r.describe("victims-0", "victims-1"))
						}
						waitPreemptedByPod(ctx, t, l, r, uid, gone)
						keepRunning(ctx, t, l, r, l.Env.Scaled(6*time.Second), kept)
						if p := r.preempted(); len(p) != 1 {
							t.Errorf("want exactly 1 preempted pod, the watch saw %v", p)
						}
					}},
			},
		},
		{
			Suite: "preemption", Name: "a basic PodGroup preempts basic-group members", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 4},
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-21", Statement: "a basic PodGroup whose one member needs the whole node preempts both members of a lower-priority basic group, binds, and is True/Scheduled", Ref: preRef + "16; §5.1 (a basic group preempts when it can place one pod)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						low := l.PriorityClass(ctx, t, "low", lowValue, false)
						high := l.PriorityClass(ctx, t, "high", highValue, false)
						createGang(ctx, t, l, scenarios.Group{Name: "victims", PriorityClassName: low}, 2, 2)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "victims-0", "victims-1")
						r := startRecorder(ctx, t, l, false)
						createGang(ctx, t, l, scenarios.Group{Name: "preemptor", PriorityClassName: high}, 1, 4)
						l.WaitBound(ctx, t, l.Env.Scaled(90*time.Second), "preemptor-0")
						waitPreempted(ctx, t, l, r, "victims-0", "victims-1")
						l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), "preemptor", metav1.ConditionTrue, "Scheduled")
						if p := r.preempted(); !slices.Equal(p, []string{"victims-0", "victims-1"}) {
							t.Errorf("want exactly the two victims preempted, the watch saw %v", p)
						}
						sawPlacement := false
						for _, c := range r.groupConditions("preemptor") {
							sawPlacement = sawPlacement || strings.Contains(c, msgFoundPlacement)
						}
						if !sawPlacement {
							t.Errorf("the preemptor's PodGroup never read %q; conditions seen: %v", msgFoundPlacement, r.groupConditions("preemptor"))
						}
					}},
			},
		},
		{
			Suite: "preemption", Name: "the lowest-priority victim goes first", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 4},
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-22", Statement: "of two lower-priority groups that each free enough for the preemptor, the one of lower priority is preempted and the other kept", Ref: preRef + "19; §5.1 reprieve (higher priority is reprieved first)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						low := l.PriorityClass(ctx, t, "low", lowValue, false)
						mid := l.PriorityClass(ctx, t, "mid", midValue, false)
						high := l.PriorityClass(ctx, t, "high", highValue, false)
						// The low one first, so age does not explain the choice (the older would be kept).
						createGang(ctx, t, l, scenarios.Group{Name: "low", MinCount: 1, PriorityClassName: low}, 1, 2)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "low-0")
						olderThanASecond(ctx, t, l, "low-0")
						createGang(ctx, t, l, scenarios.Group{Name: "mid", MinCount: 1, PriorityClassName: mid}, 1, 2)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "mid-0")
						r := startRecorder(ctx, t, l, false)
						createGang(ctx, t, l, scenarios.Group{Name: "preemptor", MinCount: 1, PriorityClassName: high}, 1, 2)
						l.WaitBound(ctx, t, l.Env.Scaled(90*time.Second), "preemptor-0")
						waitPreempted(ctx, t, l, r, "low-0")
						keepRunning(ctx, t, l, r, l.Env.Scaled(3*time.Second), "mid-0")
						if p := r.preempted(); !slices.Equal(p, []string{"low-0"}) {
							t.Errorf("want only low-0 preempted, the watch saw %v", p)
						}
					}},
			},
		},
	}
}
