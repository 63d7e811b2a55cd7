package framework

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReadLaneStateOpen(t *testing.T) {
	const me = corev1.DefaultSchedulerName
	bound := gpuPod("a", 1, "n0", "")
	rejected := gpuPod("b", 1, "", "Unschedulable")
	tests := []struct {
		name string
		pods []corev1.Pod
		open string // a substring of the reason the lane is open, "" when it is decided
	}{
		{"every pod bound or rejected", []corev1.Pod{bound, rejected}, ""},
		{"no pods at all", nil, "no pods yet"},
		{"a pod not decided yet (quorum, missing PodGroup)", []corev1.Pod{bound, gpuPod("c", 1, "", "")}, "c is not decided yet"},
		{"a gated pod", []corev1.Pod{bound, gpuPod("c", 1, "", corev1.PodReasonSchedulingGated)}, "c is gated"},
		{"a terminating pod", func() []corev1.Pod {
			v := bound
			v.DeletionTimestamp = &metav1.Time{}
			return []corev1.Pod{v, rejected}
		}(), "a is terminating"},
		{"a nominated pod", func() []corev1.Pod {
			p := rejected
			p.Status.NominatedNodeName = "n0"
			return []corev1.Pod{bound, p}
		}(), "b is nominated to n0"},
		{"another scheduler's pod is nobody's to decide here", func() []corev1.Pod {
			p := gpuPod("c", 1, "", "")
			p.Spec.SchedulerName = "other"
			return []corev1.Pod{bound, p}
		}(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := readLaneState(tt.pods, nil, me)
			if tt.open == "" && st.open != "" || tt.open != "" && !strings.Contains(st.open, tt.open) {
				t.Errorf("open = %q, want %q", st.open, tt.open)
			}
		})
	}
}

func TestReadLaneStatePrintChanges(t *testing.T) {
	const me = corev1.DefaultSchedulerName
	base := readLaneState([]corev1.Pod{gpuPod("a", 1, "", "Unschedulable")}, nil, me)
	for name, other := range map[string]laneState{
		"the pod bound":        readLaneState([]corev1.Pod{gpuPod("a", 1, "n0", "")}, nil, me),
		"a new event":          readLaneState([]corev1.Pod{gpuPod("a", 1, "", "Unschedulable")}, []corev1.Event{{Count: 1}}, me),
		"another pod appeared": readLaneState([]corev1.Pod{gpuPod("a", 1, "", "Unschedulable"), gpuPod("b", 1, "", "Unschedulable")}, nil, me),
	} {
		if other.print == base.print {
			t.Errorf("%s: the lane's print did not change (%q)", name, base.print)
		}
	}
	seriesA := readLaneState(nil, []corev1.Event{{Series: &corev1.EventSeries{Count: 2}}}, me)
	seriesB := readLaneState(nil, []corev1.Event{{Series: &corev1.EventSeries{Count: 3}}}, me)
	if seriesA.print == seriesB.print {
		t.Error("a repeated event (its series count rising) must change the print: the scheduler is still retrying")
	}
}

func TestSettleObserve(t *testing.T) {
	decided := laneState{print: "a=bound"}
	open := laneState{print: "a=untouched", open: "a is not decided yet"}
	start := time.Unix(1000, 0)
	const window = 12 * time.Second
	var s settle
	if s.observe(start, decided, "no condition", window) {
		t.Fatal("a first reading is never settled")
	}
	if s.observe(start.Add(window-time.Millisecond), decided, "no condition", window) {
		t.Fatal("settled before the window passed")
	}
	if !s.observe(start.Add(window), decided, "no condition", window) {
		t.Fatal("a decided lane unchanged for the window is settled")
	}
	if s.observe(start.Add(window+time.Second), decided, "False/Unschedulable", window) {
		t.Fatal("a change of the awaited object's own state restarts the window")
	}
	if s.observe(start.Add(3*window), open, "False/Unschedulable", window) {
		t.Fatal("an open lane is never settled, however long it stays the same")
	}
	if s.observe(start.Add(3*window+time.Second), decided, "False/Unschedulable", window) {
		t.Fatal("a lane that just became decided starts its window then")
	}
	if !s.due(start.Add(4*window)) || s.due(start.Add(3*window+time.Second+finalCheckEvery/2)) {
		t.Fatal("readings are spaced by finalCheckEvery")
	}
}
