package kind

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/fakegpu"
)

// TestSystemDaemonSetsStayOffKwokNodes: after the change, kube-proxy (no affinity), a DaemonSet with
// an affinity of its own and one that tolerated only its own taint all match a real node and never
// a kwok node, all tolerate every taint (a node group's taints included), and a second pass changes
// nothing.
func TestSystemDaemonSetsStayOffKwokNodes(t *testing.T) {
	ds := func(name string, aff *corev1.Affinity) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
				Affinity:     aff,
				Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			}}},
		}
	}
	own := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}},
		},
	}}}
	// A DaemonSet a node image brings that tolerates nothing: it must come to tolerate the taints
	// of node groups, as kube-proxy does.
	untolerant := ds("other", nil)
	untolerant.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "only-this", Operator: corev1.TolerationOpExists}}
	cs := fake.NewClientset(ds("kube-proxy", nil), ds("kindnet", own), untolerant)
	ctx := context.Background()
	for range 2 {
		if err := placeSystemDaemonSets(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	kwokNode := fakegpu.SimulatedNode("gpu-node-0", fakegpu.Default(), fakegpu.NodeOptions{})
	realNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c-worker", Labels: map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}}}
	for _, name := range []string{"kube-proxy", "kindnet", "other"} {
		got, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		all := 0
		for _, tol := range got.Spec.Template.Spec.Tolerations {
			if tol == tolerateAll {
				all++
			}
		}
		if all != 1 {
			t.Errorf("%s after two passes: tolerations %+v, want exactly one that tolerates every taint", name, got.Spec.Template.Spec.Tolerations)
		}
		sel := got.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		for _, n := range []struct {
			node *corev1.Node
			want bool
		}{{realNode, true}, {kwokNode, false}} {
			if ok := matchesRequired(sel, n.node.Labels); ok != n.want {
				t.Errorf("%s on %s (labels %v): matches %v, want %v", name, n.node.Name, labels.Set(n.node.Labels), ok, n.want)
			}
		}
		for i, term := range got.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if n := len(term.MatchExpressions); n > 2 {
				t.Errorf("%s term %d has %d expressions after two passes: %v", name, i, n, term.MatchExpressions)
			}
		}
	}
}

// matchesRequired evaluates a required node selector the way the scheduler does for the In and
// NotIn operators used here: terms are ORed, a term's expressions ANDed.
func matchesRequired(sel *corev1.NodeSelector, l map[string]string) bool {
	for _, term := range sel.NodeSelectorTerms {
		ok := true
		for _, r := range term.MatchExpressions {
			v, has := l[r.Key]
			in := has && slices.Contains(r.Values, v)
			switch r.Operator {
			case corev1.NodeSelectorOpIn:
				ok = ok && in
			case corev1.NodeSelectorOpNotIn:
				ok = ok && !in
			default:
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}
