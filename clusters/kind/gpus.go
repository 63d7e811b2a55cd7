package kind

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/gangbench/gangbench/clusters"
	kwokcfg "github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/fakegpu/deploy"
	"github.com/gangbench/gangbench/fakegpu/plugin"
)

// pluginGPUs is clusters.GPUControl for a kind cluster. The worker nodes run real kubelets and the
// fake GPU device plugin (the fakegpu/deploy DaemonSet): their devices are marked unhealthy through
// the plugin's HTTP health API, and the kubelet, told by the plugin's ListAndWatch stream, lowers
// the node's allocatable itself. Workers whose GPUs go through DRA serve the same API (their
// DaemonSet runs the DRA plugin, alone or with the device plugin, on one device health): an
// unhealthy device is withdrawn from the node's ResourceSlice, so the scheduler no longer
// allocates it. The API is called with curl from inside the node container, which
// reaches the pod IP the way the kubelet's readiness probe does: no host port is published and no
// apiserver proxy permission is needed. kwok nodes (--kwok-nodes) have neither kubelet nor plugin
// and are changed in their node status, as on the local provider.
type pluginGPUs struct {
	api    kindAPI
	name   string
	cs     kubernetes.Interface
	status *kwokcfg.StatusGPUs
}

var _ clusters.GPUControl = (*pluginGPUs)(nil)

func newPluginGPUs(api kindAPI, name string, cs kubernetes.Interface) *pluginGPUs {
	return &pluginGPUs{api: api, name: name, cs: cs, status: kwokcfg.NewStatusGPUs(cs)}
}

// deviceIDRE is what fakegpu.Inventory.DeviceIDs produces (GPU-<hash>-<index>). IDs come from the
// plugin's JSON and go into a shell script, so anything else is refused rather than quoted.
var deviceIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// worker returns the kind worker node of that name that runs the device plugin, or ok=false for
// any other node (the control plane, a plain worker, a kwok node).
func (g *pluginGPUs) worker(ctx context.Context, node string) (nodes.Node, bool, error) {
	ws, err := g.pluginWorkers(ctx)
	if err != nil {
		return nil, false, err
	}
	for _, w := range ws {
		if w.String() == node {
			return w, true, nil
		}
	}
	return nil, false, nil
}

// pluginWorkers are the kind workers whose Node carries LabelWorker: the DaemonSet's nodes.
func (g *pluginGPUs) pluginWorkers(ctx context.Context) ([]nodes.Node, error) {
	cn, err := listClusterNodes(g.api, g.name)
	if err != nil {
		return nil, err
	}
	list, err := g.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelWorker + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list the device plugin's nodes: %w", err)
	}
	labelled := map[string]bool{}
	for _, n := range list.Items {
		labelled[n.Name] = n.Labels[LabelWorker] == "true"
	}
	var out []nodes.Node
	for _, w := range cn.Workers {
		if labelled[w.String()] {
			out = append(out, w)
		}
	}
	return out, nil
}

// PluginNodes implements clusters.GPUControl: the kind workers where the DaemonSet runs.
func (g *pluginGPUs) PluginNodes(ctx context.Context) ([]string, error) {
	ws, err := g.pluginWorkers(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range ws {
		out = append(out, w.String())
	}
	slices.Sort(out)
	return out, nil
}

// pluginURL is the base URL of the health API of the plugin pod on node.
func (g *pluginGPUs) pluginURL(ctx context.Context, node string) (string, error) {
	sel := "app.kubernetes.io/name=" + deploy.Name
	list, err := g.cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return "", fmt.Errorf("node %s: list device plugin pods: %w", node, err)
	}
	var seen []string
	for _, p := range list.Items {
		// The field selector is filtered again: not every client (the fake one) applies it.
		if p.Spec.NodeName != node {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s %s ip=%q", p.Name, p.Status.Phase, p.Status.PodIP))
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(deploy.HealthPort)), nil
		}
	}
	return "", fmt.Errorf("node %s: no running fake GPU device plugin pod (DaemonSet %s/%s, pods on the node: %v)", node, deploy.Namespace, deploy.Name, seen)
}

// pluginStatus is GET /devices of the plugin on node n.
func pluginStatus(ctx context.Context, n nodes.Node, base string) (plugin.Status, error) {
	out, err := nodeRun(ctx, n, nil, "curl", "-fsS", "--max-time", "5", base+"/devices")
	if err != nil {
		return plugin.Status{}, fmt.Errorf("device plugin health API: %w", err)
	}
	var st plugin.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return plugin.Status{}, fmt.Errorf("device plugin health API on node %s: GET %s/devices: %w", n.String(), base, err)
	}
	return st, nil
}

// PluginRegistrations implements clusters.GPUControl.
func (g *pluginGPUs) PluginRegistrations(ctx context.Context, node string) (int, error) {
	w, ok, err := g.worker(ctx, node)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("node %s is not a kind worker: %w", node, clusters.ErrNoDevicePlugin)
	}
	base, err := g.pluginURL(ctx, node)
	if err != nil {
		return 0, err
	}
	st, err := pluginStatus(ctx, w, base)
	if err != nil {
		return 0, err
	}
	return st.Registrations, nil
}

// SetUnhealthyGPUs implements clusters.GPUControl. On a worker the n devices with the highest
// indices become unhealthy and the others healthy: the kubelet hands out low indices first, so the
// devices taken away are the ones least likely to be in use, and the scheduler's view (allocatable)
// is the same either way. Only devices whose health changes are posted; the plugin is asked again
// afterwards, because a device its health file lists stays unhealthy whatever the API says.
func (g *pluginGPUs) SetUnhealthyGPUs(ctx context.Context, node string, n int) error {
	w, ok, err := g.worker(ctx, node)
	if err != nil {
		return err
	}
	if !ok {
		return g.status.SetUnhealthyGPUs(ctx, node, n)
	}
	if n < 0 {
		return fmt.Errorf("node %s: %d unhealthy GPUs is negative", node, n)
	}
	base, err := g.pluginURL(ctx, node)
	if err != nil {
		return err
	}
	st, err := pluginStatus(ctx, w, base)
	if err != nil {
		return err
	}
	devs := slices.Clone(st.Devices)
	slices.SortFunc(devs, func(a, b plugin.DeviceStatus) int { return a.Index - b.Index })
	if n > len(devs) {
		return fmt.Errorf("node %s: %d unhealthy GPUs, but its device plugin has %d", node, n, len(devs))
	}
	want := map[string]bool{}
	var script strings.Builder
	script.WriteString("set -e\n")
	for i, d := range devs {
		if !deviceIDRE.MatchString(d.ID) {
			return fmt.Errorf("node %s: device plugin reports a device ID %q that is not [A-Za-z0-9._-]", node, d.ID)
		}
		unhealthy := i >= len(devs)-n
		want[d.ID] = unhealthy
		if unhealthy == (d.Health == pluginapi.Unhealthy) {
			continue
		}
		verb := "healthy"
		if unhealthy {
			verb = "unhealthy"
		}
		fmt.Fprintf(&script, "curl -fsS --max-time 5 -X POST '%s/devices/%s/%s' >/dev/null\n", base, d.ID, verb)
	}
	if _, err := nodeSh(ctx, w, script.String()); err != nil {
		return fmt.Errorf("node %s: set %d of %d GPUs unhealthy through the device plugin: %w", node, n, len(devs), err)
	}
	after, err := pluginStatus(ctx, w, base)
	if err != nil {
		return err
	}
	var wrong []string
	for _, d := range after.Devices {
		if unhealthy, ok := want[d.ID]; ok && unhealthy != (d.Health == pluginapi.Unhealthy) {
			wrong = append(wrong, fmt.Sprintf("%s is %s (unhealthy by %v)", d.ID, d.Health, d.UnhealthyBy))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("node %s: the device plugin did not take the change: %s", node, strings.Join(wrong, "; "))
	}
	return nil
}
