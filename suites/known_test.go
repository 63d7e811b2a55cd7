package suites

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/observe/monitor"
)

func regression(gap time.Duration, reason, msg string) monitor.Violation {
	t0 := time.Date(2026, 11, 29, 16, 17, 10, 0, time.UTC)
	return monitor.Violation{
		Namespace: "ns", Name: "pg", Kind: monitor.KindRegression,
		Before: monitor.Transition{Time: t0, To: &metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: "Scheduled"}},
		After:  monitor.Transition{Time: t0.Add(gap), To: &metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, Reason: reason, Message: msg}},
	}
}

func TestClassifyKnownIssue(t *testing.T) {
	bug := regression(19*time.Millisecond, "Unschedulable", "pod group is unschedulable, pod group preemption: No preemption victims found for incoming preemptor")
	tests := []struct {
		name    string
		v       monitor.Violation
		version string
		known   bool
	}{
		{"the v1.37.2 race", bug, "v1.37.2", true},
		{"same pattern on a version without the known bug fails", bug, "v1.38.0", false},
		{"a fork built as v0.0.0-master fails", bug, "v0.0.0-master", false},
		{"a late regression is not the race", regression(5*time.Second, "Unschedulable", "pod group is unschedulable"), "v1.37.2", false},
		{"a SchedulerError regression is not the race", regression(10*time.Millisecond, "SchedulerError", "pod group is unschedulable"), "v1.37.2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unexpected, known := Classify([]monitor.Violation{tt.v}, tt.version)
			if (len(known) == 1) != tt.known || len(unexpected)+len(known) != 1 {
				t.Errorf("unexpected=%v known=%v, want known=%v", unexpected, known, tt.known)
			}
		})
	}
}
