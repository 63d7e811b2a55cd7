package kind

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/deploy"
)

func pluginPod(name, node, ip string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: deploy.Namespace, Labels: map[string]string{"app.kubernetes.io/name": deploy.Name}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase, PodIP: ip},
	}
}

// newGPUFixture is a kind cluster "c" with a control plane, two workers running the device plugin
// (8 GPUs each), a plain worker without GPUs and a kwok node, as the kind provider makes it with
// --kwok-nodes and PlainWorkers.
func newGPUFixture(t *testing.T) (*pluginGPUs, *control, *kindNodeBehaviour, *fake.Clientset, map[string]*fakeNode) {
	t.Helper()
	b := newKindNodeBehaviour(t)
	b.plugins = map[string]*fakePlugin{
		"c-worker":  newFakePlugin("c-worker", "10.244.1.7", 8),
		"c-worker2": newFakePlugin("c-worker2", "10.244.2.9", 8),
	}
	ns := map[string]*fakeNode{}
	for _, n := range []struct{ name, role string }{{"c-control-plane", "control-plane"}, {"c-worker2", "worker"}, {"c-worker", "worker"}, {"c-worker3", "worker"}} {
		ns[n.name] = &fakeNode{name: n.name, role: n.role, handle: b.handle}
	}
	k := &fakeKind{clusters: map[string][]nodes.Node{"c": {ns["c-control-plane"], ns["c-worker2"], ns["c-worker"], ns["c-worker3"]}}}
	kwokNode := fakegpu.SimulatedNode("gpu-node-0", fakegpu.Inventory{Count: 8}.WithDefaults(), fakegpu.NodeOptions{})
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	cs := fake.NewClientset(kwokNode,
		node("c-control-plane", nil),
		node("c-worker", workerLabels(fakegpu.Default())),
		node("c-worker2", workerLabels(fakegpu.Default())),
		node("c-worker3", map[string]string{LabelPlainWorker: "true"}),
		// A replacement pod not yet running on c-worker, next to the running one: the running one is used.
		pluginPod("fakegpu-new", "c-worker", "", corev1.PodPending),
		pluginPod("fakegpu-a", "c-worker", "10.244.1.7", corev1.PodRunning),
		pluginPod("fakegpu-b", "c-worker2", "10.244.2.9", corev1.PodRunning),
	)
	return newPluginGPUs(k, "c", cs), &control{api: k, name: "c", timeout: 5 * time.Second}, b, cs, ns
}

func unhealthyIndices(p *fakePlugin) []int {
	var out []int
	for i, id := range p.ids {
		if p.unhealthy[id] || p.file[id] {
			out = append(out, i)
		}
	}
	return out
}

func TestPluginGPUsThroughTheDevicePlugin(t *testing.T) {
	g, _, b, _, ns := newGPUFixture(t)
	ctx := context.Background()

	got, err := g.PluginNodes(ctx)
	if err != nil || strings.Join(got, ",") != "c-worker,c-worker2" {
		t.Fatalf("PluginNodes = %v, %v; want the two workers in name order", got, err)
	}

	for _, step := range []struct {
		n     int
		want  string // unhealthy indices
		posts int    // health API calls the step needs
	}{{3, "[5 6 7]", 3}, {3, "[5 6 7]", 0}, {1, "[7]", 2}, {8, "[0 1 2 3 4 5 6 7]", 7}, {0, "[]", 8}} {
		before := len(ns["c-worker"].callsMatching("-X POST"))
		if err := g.SetUnhealthyGPUs(ctx, "c-worker", step.n); err != nil {
			t.Fatalf("SetUnhealthyGPUs(c-worker, %d): %v", step.n, err)
		}
		if got := fmt.Sprint(unhealthyIndices(b.plugins["c-worker"])); got != step.want {
			t.Errorf("after %d: unhealthy devices %s, want %s", step.n, got, step.want)
		}
		scripts := ns["c-worker"].callsMatching("-X POST")
		if step.posts == 0 && len(scripts) != before {
			t.Errorf("after %d: a script posted although nothing changed: %v", step.n, scripts[before:])
		}
		if step.posts > 0 && strings.Count(scripts[len(scripts)-1], "-X POST") != step.posts {
			t.Errorf("after %d: script %q, want %d health API calls", step.n, scripts[len(scripts)-1], step.posts)
		}
	}
	if got := unhealthyIndices(b.plugins["c-worker2"]); len(got) != 0 {
		t.Errorf("the other worker's devices changed: %v", got)
	}
	if len(ns["c-control-plane"].callsMatching("curl")) != 0 {
		t.Errorf("the control plane was asked: %v", ns["c-control-plane"].calls)
	}

	if err := g.SetUnhealthyGPUs(ctx, "c-worker", 9); err == nil || !strings.Contains(err.Error(), "its device plugin has 8") {
		t.Errorf("9 of 8: %v", err)
	}
	// A device the plugin's health file lists stays unhealthy: healing through the API must say so.
	b.plugins["c-worker2"].file = map[string]bool{b.plugins["c-worker2"].ids[0]: true}
	if err := g.SetUnhealthyGPUs(ctx, "c-worker2", 0); err == nil || !strings.Contains(err.Error(), "did not take the change") || !strings.Contains(err.Error(), "file") {
		t.Errorf("heal against the health file: %v", err)
	}
}

func TestPluginGPUsKwokAndOtherNodes(t *testing.T) {
	g, _, _, cs, _ := newGPUFixture(t)
	ctx := context.Background()
	// kwok nodes have no plugin: the node status is changed, as the local provider does.
	if err := g.SetUnhealthyGPUs(ctx, "gpu-node-0", 2); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "gpu-node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, c := n.Status.Allocatable[fakegpu.DefaultResourceName], n.Status.Capacity[fakegpu.DefaultResourceName]; a.Value() != 6 || c.Value() != 8 {
		t.Errorf("kwok node: allocatable %s capacity %s, want 6 and 8", a.String(), c.String())
	}
	if _, err := g.PluginRegistrations(ctx, "gpu-node-0"); !errors.Is(err, clusters.ErrNoDevicePlugin) {
		t.Errorf("PluginRegistrations(kwok node) = %v, want ErrNoDevicePlugin", err)
	}
	// The control plane and a plain worker have neither a plugin nor kwok: refused, not patched.
	for _, n := range []string{"c-control-plane", "c-worker3"} {
		if err := g.SetUnhealthyGPUs(ctx, n, 1); err == nil {
			t.Errorf("node %s was accepted", n)
		}
		if _, err := g.PluginRegistrations(ctx, n); !errors.Is(err, clusters.ErrNoDevicePlugin) {
			t.Errorf("PluginRegistrations(%s) = %v, want ErrNoDevicePlugin", n, err)
		}
	}
	// A worker whose plugin pod is not running yet: the error names the DaemonSet and the pods seen.
	if err := cs.CoreV1().Pods(deploy.Namespace).Delete(ctx, "fakegpu-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetUnhealthyGPUs(ctx, "c-worker2", 1); err == nil || !strings.Contains(err.Error(), "no running fake GPU device plugin pod") || !strings.Contains(err.Error(), deploy.Name) {
		t.Errorf("no plugin pod: %v", err)
	}
}

// TestKubeletRestartReRegisters follows a kubelet restart on one worker as a fault does: the
// plugin's registration count goes up on that node only.
func TestKubeletRestartReRegisters(t *testing.T) {
	g, k, _, _, _ := newGPUFixture(t)
	ctx := context.Background()
	count := func(node string) int {
		t.Helper()
		n, err := g.PluginRegistrations(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count("c-worker") != 1 || count("c-worker2") != 1 {
		t.Fatalf("registrations before: %d %d", count("c-worker"), count("c-worker2"))
	}
	if err := k.Restart(ctx, clusters.Kubelet+"/c-worker"); err != nil {
		t.Fatal(err)
	}
	if count("c-worker") != 2 || count("c-worker2") != 1 {
		t.Errorf("registrations after restarting c-worker's kubelet: %d %d, want 2 1", count("c-worker"), count("c-worker2"))
	}
	if err := k.Restart(ctx, clusters.Kubelet); err != nil {
		t.Fatal(err)
	}
	if count("c-worker") != 3 || count("c-worker2") != 2 {
		t.Errorf("registrations after restarting every kubelet: %d %d, want 3 2", count("c-worker"), count("c-worker2"))
	}
}

// TestKubeletComponentIsShared: kind names its kubelets with the constant perf and suites use.
func TestKubeletComponentIsShared(t *testing.T) {
	if Kubelet != clusters.Kubelet {
		t.Errorf("kind.Kubelet %q != clusters.Kubelet %q", Kubelet, clusters.Kubelet)
	}
}
