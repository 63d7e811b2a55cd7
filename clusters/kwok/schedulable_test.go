package kwok

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func taintedNode(name string, ready bool, taints ...corev1.Taint) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"lane": "x"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

// A lane's own taint is tolerated; the stale not-ready taint of a Ready node is removed; a node that
// is not Ready keeps its taint and the wait fails naming it.
func TestWaitSchedulableToleratedAndStale(t *testing.T) {
	lane := corev1.Taint{Key: "lane", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	cs := fake.NewClientset(taintedNode("a", true, lane), taintedNode("b", true, lane, notReady))
	if err := WaitSchedulable(context.Background(), cs, "lane=x", 2, 10*time.Second, 0, nil, "lane"); err != nil {
		t.Fatal(err)
	}
	b, _ := cs.CoreV1().Nodes().Get(context.Background(), "b", metav1.GetOptions{})
	if len(b.Spec.Taints) != 1 || b.Spec.Taints[0].Key != "lane" {
		t.Errorf("b taints = %v, want only the lane taint", b.Spec.Taints)
	}
	cs = fake.NewClientset(taintedNode("a", true, lane), taintedNode("c", false, lane, notReady))
	err := WaitSchedulable(context.Background(), cs, "lane=x", 2, time.Second, 0, nil, "lane")
	if err == nil || !strings.Contains(err.Error(), "c: taint "+corev1.TaintNodeNotReady) {
		t.Errorf("err = %v, want it to name node c and its taint", err)
	}
}
