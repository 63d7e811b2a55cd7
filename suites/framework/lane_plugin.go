package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

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

// pluginNodes are the cluster's nodes with a real kubelet and the fake GPU plugin that publish
// their GPUs through api: the device plugin's nvidia.com/gpu, or DRA (label fakegpu.LabelGPUAPI).
// A worker of --gpu-api dra has no nvidia.com/gpu for the features that ask for it, and one of the
// default API no ResourceSlice for those that claim GPUs.
func (e *Env) pluginNodes(ctx context.Context, api fakegpu.API) ([]string, error) {
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
		has := fakegpu.API(node.Labels[fakegpu.LabelGPUAPI])
		if (api.DRA() && has.DRA()) || (!api.DRA() && has.ExtendedResource()) {
			out = append(out, name)
		}
	}
	return out, nil
}

// noKubelets says why a feature that needs real kubelets (with GPUs published through api) cannot
// run on this cluster, or "".
func (e *Env) noKubelets(ctx context.Context, want int, api fakegpu.API) string {
	what := "the fake GPU device plugin"
	if api.DRA() {
		what = "the fake GPUs' DRA kubelet plugin (kind with --gpu-api dra or both)"
	}
	nodes, err := e.pluginNodes(ctx, api)
	switch {
	case err != nil:
		return fmt.Sprintf("needs nodes with a real kubelet and %s; listing them failed: %v", what, err)
	case len(nodes) >= want:
		return ""
	case len(nodes) == 0:
		return fmt.Sprintf("needs %d node(s) with a real kubelet and %s; this %s cluster has none (a kwok node has no kubelet)",
			want, what, providerName(e))
	}
	return fmt.Sprintf("needs %d node(s) with a real kubelet and %s; the cluster has %d (kind: raise -workers)", want, what, len(nodes))
}

// borrowPluginNodes gives the lane n device plugin nodes no other lane holds, and waits until
// they are Ready, schedulable and report all their GPUs (an earlier feature may have restarted
// their kubelet). It returns false, and does nothing, when the cluster has no such nodes.
func (e *Env) borrowPluginNodes(ctx context.Context, l *Lane, n int) (bool, error) {
	all, err := e.pluginNodes(ctx, l.gpuAPI)
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
			have, want := a.Value(), c.Value()
			if l.gpuAPI.DRA() {
				// DRA: the devices its plugin publishes, against the GPUs its labels say it has.
				published, err := PublishedGPUs(ctx, e.Client, name)
				if err != nil {
					return false, "", err
				}
				have = int64(published)
				want, _ = strconv.ParseInt(node.Labels[fakegpu.LabelCount], 10, 64)
			}
			states = append(states, fmt.Sprintf("%s: ready %v, unschedulable %v, GPUs %d of %d", name, kwok.ReadyNode(node), node.Spec.Unschedulable, have, want))
			if !kwok.ReadyNode(node) || node.Spec.Unschedulable || want == 0 || have != want {
				ok = false
			}
			if gpus == 0 || int(have) < gpus {
				gpus = int(have)
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

// PublishedGPUs counts the fake GPUs published through DRA for node: the devices of the fake
// driver's slices for the node at their pool's newest generation. Slices are found by driver and
// node, not by name: a kubelet plugin names its own (kind workers), gangbench those of simulated
// nodes.
func PublishedGPUs(ctx context.Context, cs kubernetes.Interface, node string) (int, error) {
	list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + fakegpu.DRADriver + ",spec.nodeName=" + node,
	})
	if err != nil {
		return 0, fmt.Errorf("ResourceSlices of %s: %w", node, err)
	}
	newest := map[string]int64{}
	for _, s := range list.Items {
		newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
	}
	n := 0
	for _, s := range list.Items {
		if s.Spec.Pool.Generation == newest[s.Spec.Pool.Name] {
			n += len(s.Spec.Devices)
		}
	}
	return n, nil
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
