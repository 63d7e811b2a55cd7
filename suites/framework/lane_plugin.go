package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/scenarios"
)

// Lanes on nodes with real kubelets. A kind cluster's worker nodes run the fake GPU device plugin
// and cannot be made per test, so a lane that asks for them (LaneSpec.PluginNodes) borrows them:
// it labels them with its lane label, which its pods select, and removes the label when it is
// deleted. It does not taint them, unlike its kwok nodes: other lanes' pods never land there,
// since they select their own lane label, and a taint would add one more thing to give back (the
// cluster's own DaemonSets tolerate every taint, so it would not keep them off). Features with such
// lanes are Serial, so no two lanes compete for the workers.

// pluginNodes are the cluster's nodes with a real kubelet and the fake GPU device plugin. Workers
// whose GPUs go through DRA alone (--gpu-api dra, label fakegpu.LabelGPUAPI) are left out: the
// features that borrow plugin nodes ask for nvidia.com/gpu, which such a worker does not have.
func (e *Env) pluginNodes(ctx context.Context) ([]string, error) {
	if e.Cluster == nil || e.Cluster.GPUs == nil {
		return nil, nil
	}
	all, err := e.Cluster.GPUs.PluginNodes(ctx)
	if err != nil || len(all) == 0 {
		return all, err
	}
	var out []string
	for _, name := range all {
		node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if fakegpu.API(node.Labels[fakegpu.LabelGPUAPI]).ExtendedResource() {
			out = append(out, name)
		}
	}
	return out, nil
}

// noKubelets says why a feature that restarts kubelets cannot run on this cluster, or "".
func (e *Env) noKubelets(ctx context.Context, want int) string {
	nodes, err := e.pluginNodes(ctx)
	switch {
	case err != nil:
		return fmt.Sprintf("needs nodes with a real kubelet and the fake GPU device plugin; listing them failed: %v", err)
	case len(nodes) >= want:
		return ""
	case len(nodes) == 0:
		return fmt.Sprintf("needs %d node(s) with a real kubelet and the fake GPU device plugin (kind provider); the %s provider's nodes are simulated by kwok, which has no kubelet to restart",
			want, providerName(e))
	}
	return fmt.Sprintf("needs %d node(s) with a real kubelet and the fake GPU device plugin; the cluster has %d (kind: raise -workers)", want, len(nodes))
}

// borrowPluginNodes gives the lane n device plugin nodes no other lane holds, and waits until
// they are Ready, schedulable and report all their GPUs (an earlier feature may have restarted
// their kubelet). It returns false, and does nothing, when the cluster has no such nodes.
func (e *Env) borrowPluginNodes(ctx context.Context, l *Lane, n int) (bool, error) {
	all, err := e.pluginNodes(ctx)
	if err != nil {
		return true, fmt.Errorf("lane %s: device plugin nodes: %w", l.Name, err)
	}
	if len(all) == 0 {
		return false, nil
	}
	var free, held []string
	for _, name := range all {
		node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return true, fmt.Errorf("lane %s: %w", l.Name, err)
		}
		if other := node.Labels[LaneLabel]; other != "" {
			held = append(held, name+" by "+other)
			continue
		}
		free = append(free, name)
	}
	if len(free) < n {
		return true, fmt.Errorf("lane %s: needs %d device plugin nodes, %d of %d are free (held: %v)", l.Name, n, len(free), len(all), held)
	}
	l.borrowed = true
	for _, name := range free[:n] {
		if err := labelNode(ctx, l, name, &l.Name); err != nil {
			return true, err
		}
		// Recorded as soon as it is labelled, so Delete gives back what was taken even on failure.
		l.Nodes = append(l.Nodes, name)
	}
	err = Poll(ctx, e.Scaled(2*time.Minute), fmt.Sprintf("lane nodes %v Ready, schedulable, with all their GPUs", l.Nodes), func(ctx context.Context) (bool, string, error) {
		var states []string
		ok, gpus := true, 0
		for _, name := range l.Nodes {
			node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			a, c := node.Status.Allocatable[scenarios.GPUResource], node.Status.Capacity[scenarios.GPUResource]
			states = append(states, fmt.Sprintf("%s: ready %v, unschedulable %v, GPUs %d of %d", name, kwok.ReadyNode(node), node.Spec.Unschedulable, a.Value(), c.Value()))
			if !kwok.ReadyNode(node) || node.Spec.Unschedulable || c.Value() == 0 || a.Value() != c.Value() {
				ok = false
			}
			if gpus == 0 || int(a.Value()) < gpus {
				gpus = int(a.Value())
			}
		}
		l.GPUs = gpus
		return ok, strings.Join(states, "; "), nil
	})
	if err != nil {
		return true, fmt.Errorf("lane %s: %w", l.Name, err)
	}
	return true, nil
}

// labelNode sets (value non-nil) or removes the lane label of a node.
func labelNode(ctx context.Context, l *Lane, node string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{LaneLabel: value}}})
	if err != nil {
		return err
	}
	if _, err := l.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("lane %s: label node %s: %w", l.Name, node, err)
	}
	return nil
}

// giveBack heals a borrowed node's GPUs (a failed GPU feature may have left them unhealthy) and
// removes the lane label. It returns the errors as text, for Delete.
func (l *Lane) giveBack(ctx context.Context, node string) []string {
	var errs []string
	if g := l.Env.Cluster.GPUs; g != nil {
		if err := g.SetUnhealthyGPUs(ctx, node, 0); err != nil {
			errs = append(errs, fmt.Sprintf("heal the GPUs of %s: %v", node, err))
		}
	}
	if err := labelNode(ctx, l, node, nil); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err.Error())
	}
	return errs
}

// PinnedPod is l.Pod(m) restricted to one of the lane's nodes by its hostname label: the
// scheduler still places and binds it, but can only choose that node.
func (l *Lane) PinnedPod(m scenarios.Member, node string) *corev1.Pod {
	p := l.Pod(m)
	p.Spec.NodeSelector[corev1.LabelHostname] = node
	return p
}

// nodesOf returns the node each named pod is bound to ("" when not bound or missing).
func NodesOf(pods []corev1.Pod, names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == n }); i >= 0 {
			out[n] = pods[i].Spec.NodeName
		}
	}
	return out
}
