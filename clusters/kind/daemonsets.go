package kind

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gangbench/gangbench/fakegpu"
)

// offKwok is the node requirement that keeps a pod off kwok-simulated nodes, which carry the label
// type=kwok (fakegpu.SimulatedNode).
var offKwok = corev1.NodeSelectorRequirement{Key: fakegpu.LabelType, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"kwok"}}

// tolerateAll is the toleration of every taint, of every effect.
var tolerateAll = corev1.Toleration{Operator: corev1.TolerationOpExists}

// placeSystemDaemonSets makes every DaemonSet in kube-system (kube-proxy, kindnet on a foreign node
// image) run on every real node and on no kwok node.
//
// They must tolerate every taint, because a node group's taints (set on real workers at join) are
// for workloads: a tainted worker without kube-proxy has no service IPs, and Create waits for
// kube-proxy on every node. kubeadm's kube-proxy and kind's kindnet already tolerate everything;
// this makes it hold for whatever else a node image brings.
//
// They must require a node that is not a kwok node, because tolerating every taint puts them on
// kwok nodes too: each kwok node (a suite's lane, a benchmark's GPU nodes) would get a kube-proxy
// pod bound by the scheduler under test, bindings, events and metrics in a measured window that no
// workload asked for, and pods a kwok node only pretends to run.
func placeSystemDaemonSets(ctx context.Context, cs kubernetes.Interface) error {
	list, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list kube-system DaemonSets: %w", err)
	}
	for _, ds := range list.Items {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cs.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			// Both run: each reports its own change.
			off := requireOffKwok(&cur.Spec.Template.Spec)
			tol := tolerateEverything(&cur.Spec.Template.Spec)
			if !off && !tol {
				return nil
			}
			_, err = cs.AppsV1().DaemonSets(cur.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("place DaemonSet %s/%s on every real node and off kwok nodes: %w", ds.Namespace, ds.Name, err)
		}
	}
	return nil
}

// requireOffKwok adds offKwok to every required node selector term of spec (terms are ORed, so
// each needs it), creating one when there is none; it reports whether spec changed.
func requireOffKwok(spec *corev1.PodSpec) bool {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(sel.NodeSelectorTerms) == 0 {
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	changed := false
	for i := range sel.NodeSelectorTerms {
		term := &sel.NodeSelectorTerms[i]
		has := slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == offKwok.Key && r.Operator == offKwok.Operator && slices.Equal(r.Values, offKwok.Values)
		})
		if !has {
			term.MatchExpressions = append(term.MatchExpressions, offKwok)
			changed = true
		}
	}
	return changed
}

// tolerateEverything adds tolerateAll to spec unless a toleration already tolerates every taint; it
// reports whether spec changed.
func tolerateEverything(spec *corev1.PodSpec) bool {
	if slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool {
		return t.Key == "" && t.Operator == corev1.TolerationOpExists && t.Effect == ""
	}) {
		return false
	}
	spec.Tolerations = append(spec.Tolerations, tolerateAll)
	return true
}
