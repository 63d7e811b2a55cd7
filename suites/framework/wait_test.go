package framework

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
)

func gpuPod(name string, gpus int64, node, scheduledReason string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{scenarios.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}
	if scheduledReason != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: scheduledReason}}
	}
	return p
}

func TestCannotBind(t *testing.T) {
	l := &Lane{Nodes: []string{"n0"}, GPUs: 8}
	bound := gpuPod("held", 6, "n0", "")
	tests := []struct {
		name     string
		pods     []corev1.Pod
		unbound  []string
		hopeless bool
	}{
		{"rejected and no room", []corev1.Pod{bound, gpuPod("a", 2, "", "Unschedulable"), gpuPod("b", 2, "", "Unschedulable")}, []string{"a", "b"}, true},
		{"rejected but room for all", []corev1.Pod{bound, gpuPod("a", 1, "", "Unschedulable"), gpuPod("b", 1, "", "Unschedulable")}, []string{"a", "b"}, false},
		{"not decided yet (a quorum wait)", []corev1.Pod{bound, gpuPod("a", 4, "", ""), gpuPod("b", 4, "", "Unschedulable")}, []string{"a", "b"}, false},
		{"gated pods are not decided", []corev1.Pod{bound, gpuPod("a", 4, "", corev1.PodReasonSchedulingGated)}, []string{"a"}, false},
		{"a terminating pod may free room", func() []corev1.Pod {
			b := bound
			b.DeletionTimestamp = &metav1.Time{}
			return []corev1.Pod{b, gpuPod("a", 4, "", "Unschedulable")}
		}(), []string{"a"}, false},
		{"a nominated pod means a preemption is under way", func() []corev1.Pod {
			a := gpuPod("a", 4, "", "Unschedulable")
			a.Status.NominatedNodeName = "n0"
			return []corev1.Pod{bound, a}
		}(), []string{"a"}, false},
		{"a finished pod holds nothing", func() []corev1.Pod {
			b := bound
			b.Status.Phase = corev1.PodSucceeded
			return []corev1.Pod{b, gpuPod("a", 4, "", "Unschedulable")}
		}(), []string{"a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := l.CannotBind(tt.pods, tt.unbound)
			if (why != "") != tt.hopeless {
				t.Errorf("cannotBind = %q, want hopeless %v", why, tt.hopeless)
			}
			if tt.hopeless && !strings.Contains(why, "2 of 8 GPUs free") {
				t.Errorf("the reason should say what is free: %q", why)
			}
		})
	}
}

func TestCertaintyHeld(t *testing.T) {
	var c Certainty
	if c.Held("no room") {
		t.Fatal("a reason seen once is not yet certain")
	}
	c.since = time.Now().Add(-certainFor)
	if !c.Held("no room") {
		t.Fatal("a reason held for certainFor is certain")
	}
	if c.Held("") || !c.since.IsZero() {
		t.Fatal("a poll that can still succeed resets the clock")
	}
}
