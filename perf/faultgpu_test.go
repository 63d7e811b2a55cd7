package perf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/clusters/local"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/perf/slo"
	"github.com/gangbench/gangbench/results"
)

func mustFault(t *testing.T, spec string) Fault {
	t.Helper()
	f, err := ParseFault(spec)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCheckFaults(t *testing.T) {
	scs := []*scenario.Scenario{{Name: "smoke", Cluster: scenario.Cluster{Nodes: 20, GPUsPerNode: 8}}, {Name: "tiny", Cluster: scenario.Cluster{Nodes: 2, GPUsPerNode: 4}}}
	for _, tc := range []struct {
		provider, fault string
		want            []string // empty: accepted
	}{
		{"local", "scheduler-kill@50%", nil},
		{"local", "kwok-restart@50%", nil},
		{"local", "gpu-unhealthy:4x2@50%", nil},
		{"local", "gpu-unhealthy:allx2@50%", nil},
		{"local", "kubelet-restart@50%", []string{`kubelet-restart@50%`, "local provider has no kubelets", "--provider kind"}},
		{"local", "kubelet/w1-kill@1s", []string{`kubelet/w1-kill@1s`, "local provider"}},
		{"kind", "kubelet-restart@50%", nil},
		{"kind", "kubelet/gangbench-worker-kill@50%", nil},
		{"kind", "scheduler-kill@50%", nil},
		{"kind", "controller-manager-restart@2s", nil},
		{"kind", "gpu-unhealthy@50%", nil},
		{"kind", "apiserver-restart@30%", []string{"apiserver-restart@30%", "kind provider cannot stop and start kube-apiserver", "kubelet/NODE"}},
		{"kind", "kwok-restart@30%", []string{"kwok-restart@30%", "kind provider", "kwok-controller"}},
		{"kind", "etcd-kill@30%", []string{"etcd-kill@30%", "kind provider"}},
		{"existing", "scheduler-kill@50%", []string{"scheduler-kill@50%", "existing provider", "did not create"}},
		{"existing", "gpu-unhealthy@50%", []string{"gpu-unhealthy@50%", "existing provider"}},
		// The tiny scenario has 2 nodes × 4 GPUs.
		{"local", "gpu-unhealthy:5@50%", []string{"gpu-unhealthy:5@50%", "5 unhealthy GPUs per node", "scenario tiny has 4"}},
		{"kind", "gpu-unhealthy:1x3@50%", []string{"gpu-unhealthy:1x3@50%", "GPUs on 3 nodes", "scenario tiny has 2 nodes"}},
	} {
		err := CheckFaults([]Fault{mustFault(t, tc.fault)}, capsOf(tc.provider), scs)
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s on %s refused: %v", tc.fault, tc.provider, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s on %s accepted", tc.fault, tc.provider)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s on %s: error %q lacks %q", tc.fault, tc.provider, err, w)
			}
		}
	}
	err := CheckFaults([]Fault{mustFault(t, "kubelet-restart@1s"), mustFault(t, "scheduler-kill@1s"), mustFault(t, "apiserver-restart@1s")}, capsOf("kind"), nil)
	if err == nil || strings.Contains(err.Error(), "kubelet-restart") || !strings.Contains(err.Error(), "apiserver-restart@1s") {
		t.Errorf("mixed faults on kind: %v", err)
	}
}

// capsOf is the capabilities of the named provider, as the real providers report them.
func capsOf(provider string) clusters.Capabilities {
	switch provider {
	case "local":
		return (&local.Provider{}).Capabilities()
	case "kind":
		return (&kind.Provider{}).Capabilities()
	}
	return (&ExistingSource{}).Capabilities()
}

// refusingSource is a local source that must never be asked for a cluster.
type refusingSource struct{ t *testing.T }

func (s refusingSource) Capabilities() clusters.Capabilities { return capsOf("local") }
func (s refusingSource) Persistent() bool                    { return false }
func (s refusingSource) Create(context.Context, Shape, func(int)) (*clusters.Cluster, ClusterInfo, error) {
	s.t.Error("a cluster was asked for although the fault cannot run on this provider")
	return nil, ClusterInfo{}, errors.New("no")
}

// TestRunRefusesFaultBeforeCluster: perf.Run, the library the CLI calls, refuses a kubelet fault on
// the local provider before it creates anything, and records why.
func TestRunRefusesFaultBeforeCluster(t *testing.T) {
	scs := []*scenario.Scenario{{Name: "smoke", Cluster: scenario.Cluster{Nodes: 4, GPUsPerNode: 8}, Repetitions: 1}}
	run, err := Run(context.Background(), Options{Scenarios: scs, Source: refusingSource{t}, RunDir: t.TempDir(), Faults: []Fault{mustFault(t, "kubelet-restart@50%")}})
	if err == nil || !strings.Contains(err.Error(), "kubelet-restart@50%") || !strings.Contains(err.Error(), "local provider has no kubelets") {
		t.Fatalf("run: %v", err)
	}
	if i := slices.IndexFunc(run.Cases, func(c results.Case) bool { return c.ID == "HARNESS" }); i < 0 || !strings.Contains(run.Cases[i].Message, "kubelet-restart@50%") {
		t.Errorf("cases: %+v", run.Cases)
	}
}

// recordingGPUs is a GPUControl that records what it was asked and delegates to inner.
type recordingGPUs struct {
	inner clusters.GPUControl
	mu    sync.Mutex
	calls []string
	// marked is closed after the first SetUnhealthyGPUs with n > 0.
	marked     chan struct{}
	markedOnce sync.Once
}

func (r *recordingGPUs) SetUnhealthyGPUs(ctx context.Context, node string, n int) error {
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf("%s=%d", node, n))
	r.mu.Unlock()
	err := r.inner.SetUnhealthyGPUs(ctx, node, n)
	if n > 0 && r.marked != nil {
		r.markedOnce.Do(func() { close(r.marked) })
	}
	return err
}
func (r *recordingGPUs) PluginNodes(ctx context.Context) ([]string, error) {
	return r.inner.PluginNodes(ctx)
}
func (r *recordingGPUs) PluginRegistrations(ctx context.Context, node string) (int, error) {
	return r.inner.PluginRegistrations(ctx, node)
}
func (r *recordingGPUs) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.calls)
	return out
}

func gpuNodes(t *testing.T, cs *fake.Clientset) map[string]string {
	t.Helper()
	list, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range list.Items {
		a, c := n.Status.Allocatable[fakegpu.DefaultResourceName], n.Status.Capacity[fakegpu.DefaultResourceName]
		out[n.Name] = a.String() + "/" + c.String()
	}
	return out
}

func simulatedCluster(names ...string) *fake.Clientset {
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, fakegpu.SimulatedNode(n, fakegpu.Inventory{Count: 8}.WithDefaults(), fakegpu.NodeOptions{}))
	}
	// A node that is no GPU node of gangbench's (a control plane): never picked.
	objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "aaa-control-plane"}})
	return fake.NewClientset(objs...)
}

// TestFaultRunGPUUnhealthy drives a gpu-unhealthy fault on simulated nodes through the real
// node-status GPUControl: the first two GPU nodes lose 3 GPUs each for the hold, then get them back.
func TestFaultRunGPUUnhealthy(t *testing.T) {
	cs := simulatedCluster("gpu-node-2", "gpu-node-0", "gpu-node-1")
	gpus := &recordingGPUs{inner: kwok.NewStatusGPUs(cs)}
	f := mustFault(t, "gpu-unhealthy:3x2:300ms@0s")
	sc := &scenario.Scenario{Phases: []scenario.Phase{{Name: "p"}}}
	fr := newFaultRun(&fakeControl{}, cs, "ns", []Fault{f}, sc, 10, slog.New(slog.DiscardHandler))
	fr.gpus, fr.gpuInv = gpus, fakegpu.Inventory{Count: 8}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tl := timeline.NewTimeline(nil)
	fr.start(ctx, time.Now(), tl, []string{"p"})
	if err := fr.wait(ctx); err != nil {
		t.Fatal(err)
	}
	calls := gpus.log()
	slices.Sort(calls[:2])
	slices.Sort(calls[2:])
	if got := strings.Join(calls, " "); got != "gpu-node-0=3 gpu-node-1=3 gpu-node-0=0 gpu-node-1=0" {
		t.Errorf("GPU calls: %s; want the first two GPU nodes by name marked, then healed", got)
	}
	for node, g := range gpuNodes(t, cs) {
		if node != "aaa-control-plane" && g != "8/8" {
			t.Errorf("after the fault %s has %s GPUs (allocatable/capacity), want 8/8", node, g)
		}
	}
	fs := fr.faults[0]
	g := fs.gpu
	if g == nil {
		t.Fatal("no GPU fault state")
	}
	// The hold runs from the moment the nodes showed the loss.
	if !fs.injected || g.lowered.Before(fs.at) || g.healedAt.Sub(g.lowered) < 300*time.Millisecond || fs.ready.Before(g.healedAt) {
		t.Fatalf("fault state: injected %v, at %s, lowered %s, healed %s, ready %s", fs.injected, fs.at, g.lowered, g.healedAt, fs.ready)
	}
	if r := fr.restarted(); len(r) != 0 {
		t.Errorf("restarted: %v; a GPU fault restarts no component", r)
	}

	// Gang g1 (minCount 2) stalls with one member bound while the GPUs are unhealthy and completes
	// just before the heal: no component was down, so that stall counts, unlike after a restart.
	events := []timeline.Event{
		{Time: fs.at.Add(-time.Second), Kind: timeline.PodGroupCreated, Group: "g1", Phase: "p", Policy: "gang", MinCount: 2},
		{Time: fs.at.Add(-time.Second), Kind: timeline.PodCreated, Group: "g1", Pod: "g1-0", Phase: "p"},
		{Time: fs.at.Add(-time.Second), Kind: timeline.PodCreated, Group: "g1", Pod: "g1-1", Phase: "p"},
		{Time: fs.at.Add(time.Millisecond), Kind: timeline.PodBound, Group: "g1", Pod: "g1-0", Phase: "p"},
		{Time: fs.ready.Add(-time.Millisecond), Kind: timeline.PodBound, Group: "g1", Pod: "g1-1", Phase: "p"},
	}
	var notes []string
	items, err := fr.items(ctx, events, 50*time.Millisecond, nil, func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) })
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]results.DataItem{}
	for _, it := range items {
		byName[it.Name] = it
	}
	rec := byName[ItemFaultRecovery]
	if rec.Labels["component"] != "gpu" || rec.Labels["action"] != "unhealthy" {
		t.Errorf("labels %v", rec.Labels)
	}
	d := rec.Data
	if d["UnhealthyGPUs"] != 6 || d["Nodes"] != 2 || d["HoldSeconds"] != 0.3 || d["LoweredSeconds"] < 0 || d["RestoredSeconds"] < 0 || d["DowntimeSeconds"] < 0.3 {
		t.Errorf("recovery data %v", d)
	}
	if _, ok := byName[ItemFaultDevicePlugin]; ok {
		t.Error("a GPU fault has a device plugin item")
	}
	if p := byName[ItemFaultPartialGangs].Data[measure.Value]; p != 1 {
		t.Errorf("partial gangs from the fault on: %v, want the stall during the unhealthy window; notes %q", p, notes)
	}
	lines := FaultLines(&results.Run{DataItems: items})
	if len(lines) != 1 || !strings.Contains(lines[0], "6 GPUs unhealthy on 2 nodes") {
		t.Errorf("report line: %q", lines)
	}
}

// TestFaultRunGPUHealedOnInterrupt: an interrupt during the hold still heals the GPUs.
func TestFaultRunGPUHealedOnInterrupt(t *testing.T) {
	cs := simulatedCluster("gpu-node-0")
	gpus := &recordingGPUs{inner: kwok.NewStatusGPUs(cs), marked: make(chan struct{})}
	sc := &scenario.Scenario{Phases: []scenario.Phase{{Name: "p"}}}
	fr := newFaultRun(&fakeControl{}, cs, "ns", []Fault{mustFault(t, "gpu-unhealthy:all:1h@0s")}, sc, 10, slog.New(slog.DiscardHandler))
	fr.gpus = gpus
	ctx, cancel := context.WithCancel(context.Background())
	fr.start(ctx, time.Now(), timeline.NewTimeline(nil), []string{"p"})
	select {
	case <-gpus.marked:
	case <-time.After(30 * time.Second):
		t.Fatal("the GPUs were never marked")
	}
	cancel()
	err := fr.wait(context.Background())
	if err == nil || !strings.Contains(err.Error(), "gpu-unhealthy:all:1h@0s") {
		t.Errorf("wait: %v", err)
	}
	if g := gpuNodes(t, cs)["gpu-node-0"]; g != "8/8" {
		t.Errorf("after the interrupt gpu-node-0 has %s GPUs, want them healed (8/8)", g)
	}
	if got := strings.Join(gpus.log(), " "); got != "gpu-node-0=8 gpu-node-0=0" {
		t.Errorf("GPU calls: %s", got)
	}
}

// fakePlugins is a GPUControl for nodes with device plugins and real kubelets: a restarted kubelet
// reports 0 GPUs until the plugin registers again, which it does when asked reRegisterAfter times
// after the restart (never when reRegisterAfter is 0).
type fakePlugins struct {
	cs              *fake.Clientset
	nodes           []string
	mu              sync.Mutex
	regs            map[string]int
	restarted       map[string]int // asks since the kubelet came back
	reRegisterAfter int
}

func (p *fakePlugins) SetUnhealthyGPUs(context.Context, string, int) error {
	return errors.New("unused")
}
func (p *fakePlugins) PluginNodes(context.Context) ([]string, error) { return p.nodes, nil }
func (p *fakePlugins) PluginRegistrations(ctx context.Context, node string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.restarted[node]; ok {
		p.restarted[node] = n + 1
		if p.reRegisterAfter > 0 && n+1 == p.reRegisterAfter {
			delete(p.restarted, node)
			p.regs[node]++
			if err := setAllocatable(ctx, p.cs, node, 8); err != nil {
				return 0, err
			}
		}
	}
	return p.regs[node], nil
}

// kubeletStarted is what a kubelet does when it comes back: it reports no GPUs until its device
// plugin registers.
func (p *fakePlugins) kubeletStarted(c clusters.Component) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.nodes {
		if c == clusters.Kubelet || string(c) == "kubelet/"+n {
			p.restarted[n] = 0
			_ = setAllocatable(context.Background(), p.cs, n, 0)
		}
	}
}

func setAllocatable(ctx context.Context, cs *fake.Clientset, node string, n int64) error {
	nd, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	nd.Status.Allocatable[fakegpu.DefaultResourceName] = *resource.NewQuantity(n, resource.DecimalSI)
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{})
	return err
}

func kubeletCluster(t *testing.T, reRegisterAfter int) (*fake.Clientset, *fakePlugins) {
	t.Helper()
	var objs []runtime.Object
	for _, n := range []string{"c-worker", "c-worker2"} {
		nd := fakegpu.SimulatedNode(n, fakegpu.Inventory{Count: 8}.WithDefaults(), fakegpu.NodeOptions{})
		delete(nd.Annotations, fakegpu.AnnotationKwokNode) // a real kubelet's node
		objs = append(objs, nd)
	}
	cs := fake.NewClientset(objs...)
	return cs, &fakePlugins{cs: cs, nodes: []string{"c-worker", "c-worker2"}, regs: map[string]int{"c-worker": 1, "c-worker2": 1}, restarted: map[string]int{}, reRegisterAfter: reRegisterAfter}
}

func runKubeletFault(t *testing.T, spec string, reRegisterAfter int, wait time.Duration) (*faultRun, *fakePlugins, []results.DataItem, []string) {
	t.Helper()
	cs, plugins := kubeletCluster(t, reRegisterAfter)
	ctl := &fakeControl{onStart: plugins.kubeletStarted}
	sc := &scenario.Scenario{Phases: []scenario.Phase{{Name: "p"}}}
	fr := newFaultRun(ctl, cs, "ns", []Fault{mustFault(t, spec)}, sc, 10, slog.New(slog.DiscardHandler))
	fr.gpus, fr.gpuInv, fr.gpuWait = plugins, fakegpu.Inventory{Count: 8}.WithDefaults(), wait
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fr.start(ctx, time.Now(), timeline.NewTimeline(nil), []string{"p"})
	if err := fr.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ctl.log(), ", "); !strings.HasPrefix(got, "stop kubelet") && !strings.HasPrefix(got, "kill kubelet") {
		t.Errorf("control calls: %s", got)
	}
	var notes []string
	items, err := fr.items(ctx, nil, time.Minute, nil, func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) })
	if err != nil {
		t.Fatal(err)
	}
	return fr, plugins, items, notes
}

func item(items []results.DataItem, name string) (results.DataItem, bool) {
	i := slices.IndexFunc(items, func(it results.DataItem) bool { return it.Name == name })
	if i < 0 {
		return results.DataItem{}, false
	}
	return items[i], true
}

// TestFaultRunKubeletReRegistration: after a kubelet restart the fault waits for each node's device
// plugin to register again and its GPUs to come back, and reports how long that took and the dip.
func TestFaultRunKubeletReRegistration(t *testing.T) {
	fr, plugins, items, notes := runKubeletFault(t, "kubelet-restart@0s", 3, 0)
	it, ok := item(items, ItemFaultDevicePlugin)
	if !ok {
		t.Fatalf("no %s item in %v", ItemFaultDevicePlugin, items)
	}
	d := it.Data
	if d["Registered"] != 1 || d["Nodes"] != 2 || d["MinAllocatable"] != 0 || d[measure.Value] <= 0 || d["FromFaultSeconds"] < d[measure.Value] {
		t.Errorf("device plugin item %v", d)
	}
	if plugins.regs["c-worker"] != 2 || plugins.regs["c-worker2"] != 2 {
		t.Errorf("registrations %v", plugins.regs)
	}
	if it.Labels["component"] != "kubelet" {
		t.Errorf("labels %v", it.Labels)
	}
	if r := fr.restarted(); !r[clusters.Kubelet] {
		t.Errorf("restarted %v", r)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "registered again on c-worker, c-worker2") {
		t.Errorf("notes %q", notes)
	}
	cases := slo.Evaluate(faultObjectives(faultsOf(fr)), items)
	if i := slices.IndexFunc(cases, func(c results.Case) bool { return strings.HasPrefix(c.Name, ItemFaultDevicePlugin) }); i < 0 || cases[i].Verdict != results.Pass {
		t.Errorf("device plugin objective: %+v", cases)
	}
	lines := FaultLines(&results.Run{DataItems: items})
	if len(lines) != 1 || !strings.Contains(lines[0], "device plugin registered again on 2 nodes") {
		t.Errorf("report line %q", lines)
	}

	// One node's kubelet: only its plugin is followed.
	_, plugins, items, _ = runKubeletFault(t, "kubelet/c-worker2-kill@0s", 2, 0)
	if it, ok := item(items, ItemFaultDevicePlugin); !ok || it.Data["Nodes"] != 1 || it.Data["Registered"] != 1 || plugins.regs["c-worker"] != 1 {
		t.Errorf("one node: %v, registrations %v", it.Data, plugins.regs)
	}
	// A kubelet without a device plugin (the control plane): nothing to follow.
	_, _, items, _ = runKubeletFault(t, "kubelet/c-control-plane-restart@0s", 1, 0)
	if _, ok := item(items, ItemFaultDevicePlugin); ok {
		t.Errorf("a device plugin item for a node without a plugin: %v", items)
	}
}

// TestFaultRunKubeletPluginLost: a plugin that never registers again is reported, and the built-in
// objective fails the run.
func TestFaultRunKubeletPluginLost(t *testing.T) {
	fr, _, items, notes := runKubeletFault(t, "kubelet-restart@0s", 0, 500*time.Millisecond)
	it, ok := item(items, ItemFaultDevicePlugin)
	if !ok || it.Data["Registered"] != 0 || it.Data["MinAllocatable"] != 0 {
		t.Fatalf("device plugin item %v", it.Data)
	}
	if joined := strings.Join(notes, "\n"); !strings.Contains(joined, "did not come back") || !strings.Contains(joined, "c-worker: allocatable 0 of capacity 8") {
		t.Errorf("notes %q", notes)
	}
	cases := slo.Evaluate(faultObjectives(faultsOf(fr)), items)
	if i := slices.IndexFunc(cases, func(c results.Case) bool { return strings.HasPrefix(c.Name, ItemFaultDevicePlugin) }); i < 0 || cases[i].Verdict != results.SLOViolation {
		t.Errorf("device plugin objective: %+v", cases)
	}
	// Without a kubelet fault the objective is not there to skip.
	for _, o := range faultObjectives([]Fault{mustFault(t, "scheduler-kill@1s")}) {
		if o.Item == ItemFaultDevicePlugin {
			t.Errorf("objective %s without a kubelet fault", o.Expr)
		}
	}
}

// TestProviderSource: on a provider with real kubelets a shape gets Workers real GPU workers (at most
// its nodes) and the rest as simulated nodes, in the spec the one provider creates; without real
// kubelets every node is simulated (the Nodes shorthand).
func TestProviderSource(t *testing.T) {
	var gotSpec clusters.Spec
	s := &ProviderSource{
		Provider: fakeProvider{spec: &gotSpec, caps: capsOf("kind")},
		Base:     clusters.Spec{Name: "perf-1", ExtraArgs: map[clusters.Component]map[string]string{clusters.Scheduler: {"v": "4"}}},
	}
	if s.Capabilities().Provider != kind.ProviderName || s.Persistent() {
		t.Errorf("provider %s persistent %v", s.Capabilities().Provider, s.Persistent())
	}
	cl, info, err := s.Create(context.Background(), Shape{Nodes: 20, GPUsPerNode: 4, KubeAPIQPS: 5000, KubeAPIBurst: 5000}, nil)
	if err != nil || cl == nil {
		t.Fatal(err)
	}
	real, sim := groupCounts(gotSpec)
	if real != DefaultRealWorkers || sim != 18 {
		t.Errorf("node groups %+v: real %d simulated %d; want %d, 18", gotSpec.NodeGroups, real, sim, DefaultRealWorkers)
	}
	if clusters.GPUNodes(gotSpec.Groups()) != 20 || gotSpec.NodeGroups[0].GPUs.Inventory.Count != 4 || gotSpec.ExtraArgs[clusters.Scheduler]["kube-api-qps"] != "5000" || gotSpec.ExtraArgs[clusters.Scheduler]["v"] != "4" || gotSpec.ReadyTimeout <= 0 {
		t.Errorf("spec %+v", gotSpec)
	}
	if info.SchedulerQPS != "5000" || len(info.Notes) != 1 || !strings.Contains(info.Notes[0], "18 kwok node(s)") {
		t.Errorf("info %+v", info)
	}
	s.Workers = 5
	if _, _, err := s.Create(context.Background(), Shape{Nodes: 3, GPUsPerNode: 8}, nil); err != nil {
		t.Fatal(err)
	}
	if real, sim := groupCounts(gotSpec); real != 3 || sim != 0 {
		t.Errorf("3 nodes with 5 workers asked: real %d simulated %d", real, sim)
	}
	s.Provider = fakeProvider{spec: &gotSpec, caps: capsOf("local")}
	if _, _, err := s.Create(context.Background(), Shape{Nodes: 7, GPUsPerNode: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if gotSpec.Nodes != 7 || gotSpec.GPU.Count != 2 || len(gotSpec.NodeGroups) != 0 {
		t.Errorf("without real kubelets: spec %+v", gotSpec)
	}
	// A topology and Job shape: racks as node groups, the features' gates, and the job controller
	// added to the quiet profile's controllers, all without touching the Base every shape starts from.
	s.Base.ExtraArgs[clusters.ControllerManager] = map[string]string{"controllers": "namespace-controller"}
	s.Base.FeatureGates = map[string]bool{"Mine": true}
	if _, _, err := s.Create(context.Background(), Shape{Nodes: 7, GPUsPerNode: 2, NodesPerRack: 3, RacksPerBlock: 2, Features: "jobs,tas"}, nil); err != nil {
		t.Fatal(err)
	}
	racks := map[string]int{}
	for _, g := range gotSpec.NodeGroups {
		racks[g.Labels[clusters.DefaultRackKey]] += g.Count
	}
	if len(racks) != 3 || racks["block-0-rack-0"] != 3 || racks["block-1-rack-0"] != 1 || gotSpec.Nodes != 0 {
		t.Errorf("racks %v (nodes %d), want 3 + 3 + 1 in racks of 3", racks, gotSpec.Nodes)
	}
	if !gotSpec.FeatureGates["WorkloadWithJob"] || !gotSpec.FeatureGates["TopologyAwareWorkloadScheduling"] || !gotSpec.FeatureGates["Mine"] ||
		gotSpec.ExtraArgs[clusters.ControllerManager]["controllers"] != "namespace-controller,job-controller" {
		t.Errorf("gates %v, controllers %q", gotSpec.FeatureGates, gotSpec.ExtraArgs[clusters.ControllerManager]["controllers"])
	}
	if len(s.Base.FeatureGates) != 1 || s.Base.ExtraArgs[clusters.ControllerManager]["controllers"] != "namespace-controller" || len(s.Base.Features) != 0 {
		t.Errorf("the base spec was changed: gates %v, controllers %q, features %v", s.Base.FeatureGates, s.Base.ExtraArgs[clusters.ControllerManager]["controllers"], s.Base.Features)
	}
}

func groupCounts(spec clusters.Spec) (real, simulated int) {
	for _, g := range spec.NodeGroups {
		if g.Kubelet == clusters.SimulatedNodes {
			simulated += g.Count
		} else {
			real += g.Count
		}
	}
	return real, simulated
}

type fakeProvider struct {
	spec *clusters.Spec
	caps clusters.Capabilities
}

func (p fakeProvider) Name() string                        { return p.caps.Provider }
func (p fakeProvider) Capabilities() clusters.Capabilities { return p.caps }
func (fakeProvider) Validate(clusters.Spec) error          { return nil }
func (p fakeProvider) Create(_ context.Context, spec clusters.Spec) (*clusters.Cluster, error) {
	*p.spec = spec
	return &clusters.Cluster{Name: spec.Name, Provider: p.caps.Provider}, nil
}
func (fakeProvider) Get(context.Context, string) (*clusters.Cluster, error) { return nil, nil }
func (fakeProvider) Delete(context.Context, string) error                   { return nil }
func (fakeProvider) List(context.Context) ([]clusters.Info, error)          { return nil, nil }

func faultsOf(fr *faultRun) []Fault {
	var out []Fault
	for _, fs := range fr.faults {
		out = append(out, fs.Fault)
	}
	return out
}
