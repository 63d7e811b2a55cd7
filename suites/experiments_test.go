package suites

import "testing"

// The gang message as v1.37.2 writes it with the default gates and with
// TopologyAwareWorkloadScheduling on (seen on kind, 2026-12-07), and messages that are not it.
func TestIsGangMessage(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"pod group is unschedulable, minCount (3) cannot be satisfied: 1 scheduled, 2 remaining", true},
		{"pod group is unschedulable, 0/1 placements are available, first placement status: minCount (3) cannot be satisfied: 1 scheduled, 1 remaining", true},
		{"pod group is unschedulable, pod group is unschedulable, 0/1 placements are available, first placement status: minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, pod group preemption: No preemption victims found for incoming preemptor", false},
		{"pod group is unschedulable, minCount (4) cannot be satisfied: 1 scheduled, 2 remaining", false},
		{"0/5 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s).", false},
		{"pod group is unschedulable, 0/1 placements are available, first placement status: pod group is unschedulable", false},
	} {
		if got := isGangMessage(tc.msg, 3); got != tc.want {
			t.Errorf("isGangMessage(%q, 3) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
