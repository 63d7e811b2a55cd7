package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestEveryNodeRunsKubelet: a node pods can land on without images (a simulated one) means no; a
// cordoned or NoSchedule-tainted one does not count; and only then is the spec that needs a kubelet
// left out of the Job selection.
func TestEveryNodeRunsKubelet(t *testing.T) {
	kubelet := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker"}, Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"busybox"}}}}}
	kwok := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok"}}
	cordoned := kwok
	cordoned.Name, cordoned.Spec.Unschedulable = "cordoned", true
	tainted := kwok
	tainted.Name, tainted.Spec.Taints = "control-plane", []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		want  bool
	}{
		{"kubelets only", []corev1.Node{kubelet}, true},
		{"a simulated node beside", []corev1.Node{kubelet, kwok}, false},
		{"simulated but cordoned or tainted", []corev1.Node{kubelet, cordoned, tainted}, true},
	} {
		cs := fake.NewClientset()
		for _, n := range tc.nodes {
			if _, err := cs.CoreV1().Nodes().Create(context.Background(), &n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := EveryNodeRunsKubelet(context.Background(), cs)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v (%v), want %v", tc.name, got, err, tc.want)
		}
		if skip := UpstreamJobSpecs(got).Skip; (len(skip) == 0) != got {
			t.Errorf("%s: skip %v with every node running a kubelet %v", tc.name, skip, got)
		}
	}
}
