package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/proc"
)

const testCluster = "gangbench-test"

// harness is a Provider wired to fakes: a kind whose clusters are fake nodes, a fake clientset, an
// engine CLI that answers, and recording device plugin hooks.
type harness struct {
	shape    testShape
	t        *testing.T
	p        *Provider
	root     string
	kind     *fakeKind
	cs       *fake.Clientset
	runner   *fakeRunner
	behave   *kindNodeBehaviour
	cp       *fakeNode
	workers  []*fakeNode
	mu       sync.Mutex
	deployed []PluginDeployment
	waited   []string
	// published are the selectors WaitPublished (DRA workers) was called with.
	published []string
	kwok      []kwokLaunch
}

// testShape is the cluster shape a harness's fake kind creates: the spec's node groups and scheduler
// image, which harness.spec puts into every spec it creates.
type testShape struct {
	Workers, KwokNodes int
	SchedulerImage     string
	// Groups, when set, are the spec's node groups instead of Workers and KwokNodes.
	Groups []clusters.NodeGroup
}

// realWorkers is how many kind workers the shape has.
func (s testShape) realWorkers() int {
	if s.Groups == nil {
		return s.Workers
	}
	n := 0
	for _, g := range s.Groups {
		if g.Kubelet != clusters.SimulatedNodes {
			n += g.Count
		}
	}
	return n
}

// spec is spec with the harness's shape: Workers real GPU workers and KwokNodes simulated ones.
func (h *harness) spec(spec clusters.Spec) clusters.Spec {
	s := h.shape
	spec.Images.Scheduler = s.SchedulerImage
	if s.Groups != nil {
		spec.Nodes, spec.GPU, spec.NodeGroups = 0, fakegpu.Inventory{}, s.Groups
		return spec
	}
	if s.Workers == 0 && s.KwokNodes == 0 {
		return spec
	}
	gpus := &clusters.GroupGPUs{Inventory: spec.GPU}
	spec.Nodes, spec.GPU = 0, fakegpu.Inventory{}
	spec.NodeGroups = []clusters.NodeGroup{{Count: s.Workers, Kubelet: clusters.RealKubelets, GPUs: gpus}}
	if s.KwokNodes > 0 {
		spec.NodeGroups = append(spec.NodeGroups, clusters.NodeGroup{Count: s.KwokNodes, Kubelet: clusters.SimulatedNodes, GPUs: gpus})
	}
	return spec
}

func newHarness(t *testing.T, o Options, shape testShape) *harness {
	t.Helper()
	h := &harness{t: t, root: t.TempDir(), kind: &fakeKind{}, behave: newKindNodeBehaviour(t), shape: shape}
	h.runner = runnerWhere([]string{"docker"}, map[string]string{
		"docker image inspect": "[{}]",
		"docker save":          "SCHEDULER-IMAGE-TAR",
		"docker network":       "",
	})
	o.StateDir = h.root
	o.Runner = h.runner.run
	// Without a kwok binary of its own, a test with KwokNodes resolves kwok from the real binary
	// cache and builds it there when missing: on a cold machine a -short run then spent minutes in
	// `go install sigs.k8s.io/kwok` (TestCloseStopsTheRestartedKwok once hit go test's 10-minute
	// limit that way). A fake binary keeps these tests hermetic.
	if o.KwokBinary == "" {
		o.KwokBinary = fakeKwokBinary(t)
	}
	// A node image named like a user's (not gangbench's) keeps kind's own CNI, so these tests need
	// no pod network set-up from the fake nodes; cni_test.go covers that path.
	if o.EnsureNodeImage == nil {
		o.EnsureNodeImage = func(ctx context.Context, kubeVersion, engine string) (string, error) {
			return "example.test/kind-node:" + kubeVersion, nil
		}
	}
	if o.ProbePrivilege == nil {
		o.ProbePrivilege = func(ctx context.Context, engine, image string) ([]string, error) { return nil, nil }
	}
	o.BuildPluginArchive = func(ctx context.Context, w io.Writer, ref string) error {
		_, err := io.WriteString(w, "PLUGIN-IMAGE-TAR "+ref)
		return err
	}
	o.DeployDevicePlugin = func(ctx context.Context, cs kubernetes.Interface, d PluginDeployment) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.deployed = append(h.deployed, d)
		return nil
	}
	o.WaitAllocatable = func(ctx context.Context, cs kubernetes.Interface, selector string, inv fakegpu.Inventory, timeout time.Duration) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.waited = append(h.waited, selector)
		return nil
	}
	o.WaitPublished = func(ctx context.Context, cs kubernetes.Interface, selector string, inv fakegpu.Inventory, timeout time.Duration) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.published = append(h.published, selector)
		return nil
	}
	p, err := New(WithOptions(o))
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	workers := shape.realWorkers()
	if workers == 0 {
		workers = 2
	}
	h.kind.onCreate = func(name string) ([]nodes.Node, error) {
		writeTestKubeconfig(t, filepath.Join(clusterDir(h.root, name), "kubeconfig"))
		h.cp = &fakeNode{name: name + "-control-plane", role: "control-plane", handle: h.behave.handle}
		ns := []nodes.Node{h.cp}
		h.workers = nil
		for i := range workers {
			suffix := ""
			if i > 0 {
				suffix = fmt.Sprint(i + 1)
			}
			w := &fakeNode{name: name + "-worker" + suffix, role: "worker", handle: h.behave.handle}
			h.workers = append(h.workers, w)
			ns = append(ns, w)
		}
		h.cs = newFakeClusterClient(name, workers, shape.SchedulerImage)
		return ns, nil
	}
	p.newKind = func(engine string) kindAPI {
		if engine != "docker" {
			t.Errorf("kind provider for engine %q, want docker", engine)
		}
		return h.kind
	}
	p.newClient = func(*rest.Config) (kubernetes.Interface, error) { return h.cs, nil }
	ports := []int{41001, 41002, 41003}
	p.freePort = func() (int, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		port := ports[0]
		ports = ports[1:]
		return port, nil
	}
	p.startKwok = func(ctx context.Context, l kwokLaunch) (*kwokProc, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.kwok = append(h.kwok, l)
		// PID 0 is never alive, so Delete has nothing to signal.
		return &kwokProc{Ref: proc.Ref{}}, nil
	}
	return h
}

// heldLease is the node Lease a kubelet or kwok holds and has just renewed. Nothing renews it in the
// fake, so its duration is an hour rather than a kubelet's 40 s: a test slowed down on a loaded
// machine must not see it expire before the readiness wait reads it and then wait out the 5-minute
// ready timeout.
func heldLease(node string) *coordinationv1.Lease {
	holder, seconds := node, int32(3600)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
}

// newFakeClusterClient is what a fresh kind cluster's apiserver would hold once the device plugin
// runs: Ready workers with GPUs and their kubelets' leases, the etcd and scheduler mirror pods; nodes
// created later (kwok's) are made Ready and given a lease on creation, standing in for the kwok
// controller.
func newFakeClusterClient(name string, workers int, schedImage string) *fake.Clientset {
	var objs []runtime.Object
	inv := fakegpu.Default()
	for i := range workers {
		suffix := ""
		if i > 0 {
			suffix = fmt.Sprint(i + 1)
		}
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-worker" + suffix, Labels: workerLabels(inv)},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		objs = append(objs, n, heldLease(n.Name))
	}
	cp := name + "-control-plane"
	objs = append(objs, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-" + cp, Namespace: "kube-system"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "example.test/etcd:3.6.4-0"}}},
	})
	if schedImage == "" {
		schedImage = "example.test/kube-scheduler:v1.37.0"
	}
	objs = append(objs, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler-" + cp, Namespace: "kube-system"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-scheduler", Image: schedImage}}},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	})
	cs := fake.NewClientset(objs...)
	cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.0"}
	cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := a.(k8stesting.CreateAction).GetObject().(*corev1.Node)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if err := cs.Tracker().Add(heldLease(n.Name)); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	return cs
}

func fakeKwokBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kwok")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho 'kwok version v0.8.0 (go1.26)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestCreateWithoutEngineFailsFastAndCreatesNothing(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	r := runnerWhere(nil, nil)
	p, err := New(WithStateDir(root), WithOptions(Options{StateDir: root, Runner: r.run}))
	if err != nil {
		t.Fatal(err)
	}
	p.newKind = func(string) kindAPI {
		t.Error("kind provider made although no engine answers")
		return &fakeKind{}
	}
	start := time.Now()
	cl, err := p.Create(context.Background(), clusters.Spec{Nodes: 2})
	if cl != nil || !errors.Is(err, ErrNoEngine) {
		t.Fatalf("got %v, %v; want ErrNoEngine", cl, err)
	}
	for _, want := range []string{"docker: Cannot connect to the Docker daemon", "podman: not installed", "nerdctl: not installed", "use --provider local"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
	if e := dirEntries(t, root); len(e) != 0 {
		t.Errorf("state dir not empty: %v", e)
	}
	for _, c := range r.calls {
		if !strings.Contains(c, " info ") {
			t.Errorf("ran more than the engine probe: %q", c)
		}
	}
}

// TestCreateWithoutEngineHere runs Create against this machine's real engines: where none answers
// it must fail within the probe timeout and leave nothing behind.
func TestCreateWithoutEngineHere(t *testing.T) {
	if engine, err := DetectEngine(context.Background(), ""); err == nil {
		t.Skipf("engine %s answers here; covered by the integration test", engine)
	}
	root := filepath.Join(t.TempDir(), "state")
	p, err := New(WithStateDir(root))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = p.Create(context.Background(), clusters.Spec{})
	if !errors.Is(err, ErrNoEngine) {
		t.Fatalf("got %v, want ErrNoEngine", err)
	}
	if d := time.Since(start); d > engineProbeTimeout+5*time.Second {
		t.Errorf("took %s", d)
	}
	if e := dirEntries(t, root); len(e) != 0 {
		t.Errorf("state dir not empty: %v", e)
	}
	t.Logf("%v", err)
}

func TestCreateFlow(t *testing.T) {
	h := newHarness(t, Options{}, testShape{Workers: 2, KwokNodes: 3, SchedulerImage: "example.com/kube-scheduler:gang"})
	spec := clusters.Spec{
		Name:                  testCluster,
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Scheduler: {"GenericWorkload": false}},
		ExtraArgs:             map[clusters.Component]map[string]string{clusters.Kwok: {"v": "4"}},
		ReadyTimeout:          10 * time.Second,
	}
	cl, err := h.p.Create(context.Background(), h.spec(spec))
	if err != nil {
		t.Fatal(err)
	}

	// The handle.
	if cl.Name != testCluster || cl.Provider != "kind" || cl.Nodes != 5 || cl.GPU.Count != 8 || cl.SchedulerName != "default-scheduler" {
		t.Errorf("handle %+v", cl)
	}
	kc := filepath.Join(h.root, testCluster, "kubeconfig")
	if cl.KubeconfigPath != kc || cl.RESTConfig == nil || cl.RESTConfig.Host != "https://127.0.0.1:41234" {
		t.Errorf("kubeconfig %q, rest config %+v", cl.KubeconfigPath, cl.RESTConfig)
	}
	if cl.APIServerMetrics.URL != "https://127.0.0.1:41234/metrics" || cl.APIServerMetrics.Transport == nil {
		t.Errorf("apiserver metrics %+v", cl.APIServerMetrics)
	}
	sm := cl.SchedulerMetrics
	if sm.URL != "https://127.0.0.1:41001/metrics" || !sm.InsecureSkipVerify || sm.CertFile == "" || sm.KeyFile == "" {
		t.Errorf("scheduler metrics %+v", sm)
	}
	if _, err := sm.HTTPClient(); err != nil {
		t.Errorf("scheduler metrics client (admin cert files): %v", err)
	}
	wantVersions := map[clusters.Component]string{
		clusters.APIServer: "v1.37.0", clusters.ControllerManager: "v1.37.0", clusters.Scheduler: "v1.37.0-gangbench.1",
		clusters.Etcd: "v3.6.4", clusters.Kwok: "v0.8.0", Kubelet: "v1.37.0",
	}
	for c, v := range wantVersions {
		if cl.Versions[c] != v {
			t.Errorf("version of %s: %q, want %q (all: %v)", c, cl.Versions[c], v, cl.Versions)
		}
	}
	if cl.Control == nil {
		t.Error("no Control")
	}

	// The config kind was given has the scheduler's port mapping.
	cfg, err := os.ReadFile(filepath.Join(h.root, testCluster, "kind-config.yaml"))
	if err != nil || !strings.Contains(string(cfg), "hostPort: 41001") || !strings.Contains(string(cfg), "GenericWorkload=false") {
		t.Errorf("kind config (%v):\n%s", err, cfg)
	}

	// Device plugin: image in every worker (and only there), DaemonSet on workers, GPUs waited for.
	for _, w := range h.workers {
		if len(w.imported) != 1 || !strings.HasPrefix(string(w.imported[0]), "PLUGIN-IMAGE-TAR gangbench.dev/fakegpu-device-plugin") {
			t.Errorf("worker %s imported %q", w.name, w.imported)
		}
	}
	if len(h.deployed) != 1 || h.deployed[0].NodeSelector[LabelWorker] != "true" || h.deployed[0].Inventory.Count != 8 {
		t.Errorf("deployed %+v", h.deployed)
	}
	if len(h.waited) != 1 || h.waited[0] != LabelWorker+"=true" {
		t.Errorf("waited for %v", h.waited)
	}

	// A node image gangbench did not build: every node names its pause image fakegpu.PodImage.
	for _, n := range append([]*fakeNode{h.cp}, h.workers...) {
		if len(n.callsMatching("images tag --force")) != 1 || !strings.Contains(strings.Join(n.callsMatching("images tag"), ""), fakegpu.PodImage) {
			t.Errorf("node %s: pause image not tagged %s; calls %v", n.name, fakegpu.PodImage, n.calls)
		}
	}

	// Scheduler image: saved from docker, loaded into the control plane, manifest rewritten.
	if len(h.cp.imported) != 1 || string(h.cp.imported[0]) != "SCHEDULER-IMAGE-TAR" {
		t.Errorf("control plane imported %q", h.cp.imported)
	}
	manifest := h.cp.files["/etc/kubernetes/gangbench-kube-scheduler.yaml.tmp"]
	for _, want := range []string{"image: example.com/kube-scheduler:gang", "imagePullPolicy: Never", "--feature-gates=GenericWorkload=false"} {
		if !strings.Contains(manifest, want) {
			t.Errorf("scheduler manifest lacks %q:\n%s", want, manifest)
		}
	}
	if len(h.cp.callsMatching("mv /etc/kubernetes/gangbench-kube-scheduler.yaml.tmp "+manifestDir+"/kube-scheduler.yaml")) != 1 {
		t.Errorf("manifest not installed; calls: %v", h.cp.calls)
	}

	// kwok: started with our flags, three simulated GPU nodes.
	if len(h.kwok) != 1 {
		t.Fatalf("kwok started %d times", len(h.kwok))
	}
	args := strings.Join(h.kwok[0].Args, " ")
	for _, want := range []string{"--kubeconfig=" + kc, "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--server-address=127.0.0.1:41002", "--v=4", "--config=" + filepath.Join(h.root, testCluster, "kwok.yaml")} {
		if !strings.Contains(args, want) {
			t.Errorf("kwok args %q lack %q", args, want)
		}
	}
	ns, err := h.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil || len(ns.Items) != 3 {
		t.Errorf("simulated nodes: %v, %v", ns, err)
	}

	// State: ready, found by List and Get.
	st, err := readState(h.root, testCluster)
	if err != nil || st.Phase != phaseReady || st.Engine != "docker" || st.KwokPort != 41002 {
		t.Errorf("state %+v, %v", st, err)
	}
	infos, err := h.p.List(context.Background())
	if err != nil || len(infos) != 1 || infos[0].Status != "degraded (kwok controller not running)" || infos[0].Nodes != 5 {
		// The fake kwok has no process, so the cluster shows as degraded: that is List noticing.
		t.Errorf("list %+v, %v", infos, err)
	}
	got, err := h.p.Get(context.Background(), testCluster)
	if err != nil || got.Versions[clusters.Scheduler] != "v1.37.0-gangbench.1" || got.SchedulerMetrics.URL != sm.URL {
		t.Errorf("get %+v, %v", got, err)
	}

	// Close deletes: kind cluster and state gone.
	if err := cl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The cluster's own network goes with it (kind never deletes networks).
	if n := slices.Index(h.runner.calls, "docker network rm gangbench-"+testCluster); n < 0 {
		t.Errorf("network gangbench-%s not removed on delete; engine calls %v", testCluster, h.runner.calls)
	}
	if len(h.kind.deleted) != 1 || h.kind.deleted[0] != testCluster {
		t.Errorf("kind deleted %v", h.kind.deleted)
	}
	if e := dirEntries(t, h.root); len(e) != 0 {
		t.Errorf("state left after Close: %v", e)
	}
}

// TestCreateTwoGroupsOfEachKind: the kind config gives each real worker its group's labels and
// taints; there is a device plugin DaemonSet per worker inventory, each waited for on its own
// workers; each kwok group's nodes are created with its own inventory, labels and taints under
// names unique across groups; the counts over all groups reach the state and the handle.
func TestCreateTwoGroupsOfEachKind(t *testing.T) {
	h := newHarness(t, Options{}, testShape{Groups: twoOfEachKind().NodeGroups})
	cl, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster, ReadyTimeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	if cl.Nodes != 9 || cl.GPU != fakegpu.Default() {
		t.Errorf("handle: %d nodes, GPU %+v; want 4 GPU workers + 5 kwok nodes and the first group's inventory", cl.Nodes, cl.GPU)
	}
	if len(h.workers) != 6 {
		t.Errorf("kind made %d workers, want 6", len(h.workers))
	}
	cfg, err := os.ReadFile(filepath.Join(h.root, testCluster, "kind-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: JoinConfiguration", "key: gangbench.dev/reserved", "rack: r2", "pool: cpu"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("kind config lacks %q:\n%s", want, cfg)
		}
	}

	var instances, selectors []string
	var counts []int
	for _, d := range h.deployed {
		instances, counts = append(instances, d.Instance), append(counts, d.Inventory.Count)
	}
	selectors = append(selectors, h.waited...)
	if !slices.Equal(instances, []string{"0", "1"}) || !slices.Equal(counts, []int{8, 4}) {
		t.Errorf("deployed instances %v with %v GPUs, want 0 and 1 with 8 and 4", instances, counts)
	}
	wantSel := []string{LabelGPUInventory + "=0," + LabelWorker + "=true", LabelGPUInventory + "=1," + LabelWorker + "=true"}
	if !slices.Equal(selectors, wantSel) {
		t.Errorf("waited for %v, want %v", selectors, wantSel)
	}

	list, err := h.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		t.Fatal(err)
	}
	byRack := map[string][]corev1.Node{}
	for _, n := range list.Items {
		byRack[n.Labels["rack"]] = append(byRack[n.Labels["rack"]], n)
	}
	if len(list.Items) != 5 || len(byRack["r3"]) != 2 || len(byRack["r4"]) != 3 {
		t.Fatalf("kwok nodes by rack %v, want 2 in r3 and 3 in r4", byRack)
	}
	for _, n := range byRack["r3"] {
		if q := n.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 8 || len(n.Spec.Taints) != 0 {
			t.Errorf("%s (r3): %s GPUs, taints %v; want 8 and none", n.Name, q.String(), n.Spec.Taints)
		}
	}
	for _, n := range byRack["r4"] {
		q := n.Status.Allocatable["nvidia.com/gpu"]
		if q.Value() != 2 || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "gangbench.dev/lane" || n.Spec.Taints[0].Effect != corev1.TaintEffectNoExecute {
			t.Errorf("%s (r4): %s GPUs, taints %v; want 2 and the group's NoExecute lane taint", n.Name, q.String(), n.Spec.Taints)
		}
	}

	st, err := readState(h.root, testCluster)
	if err != nil || st.Workers != 4 || st.PlainWorkers != 2 || st.KwokNodes != 5 {
		t.Errorf("state %+v, %v; want 4 workers, 2 plain, 5 kwok", st, err)
	}
}

// TestCreateDRAGroups: workers whose GPUs go through DRA get a DaemonSet of their own (the API is
// part of what a DaemonSet runs) with the rack key as the clique label, and are waited for in their
// ResourceSlices, device plugin workers in their allocatable as before; the DeviceClass exists; a
// simulated DRA group's nodes get their slices, in the clique of their rack label.
func TestCreateDRAGroups(t *testing.T) {
	two := fakegpu.Inventory{Count: 2}
	groups := []clusters.NodeGroup{
		{Count: 1, GPUs: &clusters.GroupGPUs{Inventory: two, API: clusters.GPUAPIDRA}, Labels: map[string]string{clusters.DefaultRackKey: "r1"}},
		{Count: 1, GPUs: &clusters.GroupGPUs{Inventory: two}, Labels: map[string]string{clusters.DefaultRackKey: "r2"}},
		{Count: 2, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{Inventory: two, API: clusters.GPUAPIBoth}, Labels: map[string]string{clusters.DefaultRackKey: "r3"}},
	}
	h := newHarness(t, Options{}, testShape{Groups: groups})
	ctx := context.Background()
	cl, err := h.p.Create(ctx, h.spec(clusters.Spec{Name: testCluster, ReadyTimeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })

	if len(h.deployed) != 2 {
		t.Fatalf("deployed %+v, want two DaemonSets (same inventory, two APIs)", h.deployed)
	}
	dra, dp := h.deployed[0], h.deployed[1]
	if dra.API != clusters.GPUAPIDRA || dra.CliqueLabel != clusters.DefaultRackKey || dra.Instance != "0" || dp.API != clusters.GPUAPIDevicePlugin || dp.Instance != "1" {
		t.Errorf("deployed %+v and %+v, want instance 0 with DRA (clique label %s) and 1 with the device plugin", dra, dp, clusters.DefaultRackKey)
	}
	if !slices.Equal(h.published, []string{dra.Selector()}) || !slices.Equal(h.waited, []string{dp.Selector()}) {
		t.Errorf("waited for slices on %v and allocatable on %v; want %s and %s", h.published, h.waited, dra.Selector(), dp.Selector())
	}
	if _, err := h.cs.ResourceV1().DeviceClasses().Get(ctx, fakegpu.DeviceClassName, metav1.GetOptions{}); err != nil {
		t.Errorf("DeviceClass: %v", err)
	}
	list, err := h.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("kwok nodes %v, %v", list, err)
	}
	for _, n := range list.Items {
		if q := n.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 2 {
			t.Errorf("%s: %s GPUs allocatable, want 2 (both APIs)", n.Name, q.String())
		}
		s, err := h.cs.ResourceV1().ResourceSlices().Get(ctx, fakegpu.SliceName(n.Name), metav1.GetOptions{})
		if err != nil || len(s.Spec.Devices) != 2 {
			t.Errorf("%s: slice %v, %v; want 2 devices", n.Name, s, err)
			continue
		}
		devs := s.Spec.Devices
		if c := devs[0].Attributes[fakegpu.AttrCliqueID].StringValue; c == nil || *c != "r3" {
			t.Errorf("%s: clique %v, want r3 (the group's rack)", n.Name, c)
		}
	}
}

func TestCreateFailureDeletesEverything(t *testing.T) {
	h := newHarness(t, Options{}, testShape{Workers: 1})
	h.p.opts.DeployDevicePlugin = func(context.Context, kubernetes.Interface, PluginDeployment) error {
		return errors.New("daemonset refused")
	}
	_, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster, ReadyTimeout: 5 * time.Second}))
	if err == nil || !strings.Contains(err.Error(), "daemonset refused") {
		t.Fatalf("got %v", err)
	}
	if len(h.kind.created) != 1 || len(h.kind.deleted) != 1 {
		t.Errorf("created %v deleted %v", h.kind.created, h.kind.deleted)
	}
	if e := dirEntries(t, h.root); len(e) != 0 {
		t.Errorf("state left after a failed create: %v", e)
	}
}

func TestCreateKeepLeavesClusterOnClose(t *testing.T) {
	h := newHarness(t, Options{Keep: true}, testShape{Workers: 1})
	cl, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.kind.deleted) != 0 {
		t.Errorf("kept cluster deleted: %v", h.kind.deleted)
	}
	// A second create of the same name is refused while it exists...
	if _, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster})); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second create: %v", err)
	}
	// ...and Delete removes it.
	if err := h.p.Delete(context.Background(), testCluster); err != nil {
		t.Fatal(err)
	}
	if len(h.kind.deleted) != 1 {
		t.Errorf("deleted %v", h.kind.deleted)
	}
}

// TestCloseStopsTheRestartedKwok: a fault restarts the kwok controller and records the new process
// in the state file (control.startKwok); Close must stop that one, not the one Create started.
func TestCloseStopsTheRestartedKwok(t *testing.T) {
	h := newHarness(t, Options{}, testShape{Workers: 1, KwokNodes: 1})
	cl, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster, Nodes: 2}))
	if err != nil {
		t.Fatal(err)
	}
	restarted := exec.Command("sleep", "60")
	if err := restarted.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = restarted.Wait(); close(done) }()
	t.Cleanup(func() { _ = restarted.Process.Kill(); <-done })
	st, err := readState(h.root, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	ref := proc.RefOf(restarted.Process.Pid)
	st.Kwok = &ref
	if err := writeState(h.root, st); err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the restarted kwok controller outlived Close")
	}
}

func TestCreateSchedulerImageMissingFailsEarly(t *testing.T) {
	h := newHarness(t, Options{}, testShape{Workers: 1, SchedulerImage: "example.com/nope:1"})
	inner := h.runner.answer
	h.runner.answer = func(line string) (string, error) {
		if strings.HasPrefix(line, "docker image inspect") {
			return "", &CommandError{Args: []string{"docker", "image", "inspect"}, Stderr: "Error: No such image: example.com/nope:1", Err: errors.New("exit status 1")}
		}
		return inner(line)
	}
	_, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster}))
	if err == nil || !strings.Contains(err.Error(), "No such image") {
		t.Fatalf("got %v", err)
	}
	if len(h.kind.created) != 0 {
		t.Error("kind create ran")
	}
	if e := dirEntries(t, h.root); len(e) != 0 {
		t.Errorf("state dir not empty: %v", e)
	}
}

func TestCreateRefusesForeignClusterOfSameName(t *testing.T) {
	h := newHarness(t, Options{}, testShape{Workers: 1})
	h.kind.clusters = map[string][]nodes.Node{testCluster: nil}
	_, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster}))
	if err == nil || !strings.Contains(err.Error(), "not made by gangbench") {
		t.Fatalf("got %v", err)
	}
	if len(h.kind.created) != 0 || len(h.kind.deleted) != 0 {
		t.Errorf("created %v deleted %v: the foreign cluster must not be touched", h.kind.created, h.kind.deleted)
	}
	if e := dirEntries(t, h.root); len(e) != 0 {
		t.Errorf("state dir not empty: %v", e)
	}
}
