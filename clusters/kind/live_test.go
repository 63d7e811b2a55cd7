package kind

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind/nodeimage"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/deploy"
	"github.com/gangbench/gangbench/scenarios"
)

// liveEngine skips the test, saying why, unless a container engine answers and the test is not
// -short; the engine check comes first so that a machine without one reports that.
func liveEngine(t *testing.T) string {
	t.Helper()
	engine, err := DetectEngine(context.Background(), "")
	if err != nil {
		t.Skip(err.Error())
	}
	if testing.Short() {
		t.Skipf("creating a kind cluster on %s takes minutes; skipped in -short mode", engine)
	}
	return engine
}

// liveCluster creates a kind cluster with gangbench's node image (built or reused), for a test,
// and registers its deletion plus the check that nothing of it is left in the engine.
func liveCluster(t *testing.T, ctx context.Context, engine, name string, spec clusters.Spec, opts ...Option) (*clusters.Cluster, kubernetes.Interface) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := New(append([]Option{WithStateDir(t.TempDir()), WithEngine(engine), WithLogger(log)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	spec.Name = name
	if spec.ReadyTimeout == 0 {
		spec.ReadyTimeout = 5 * time.Minute
	}
	cl, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// What delete must remove: the node containers, their anonymous /var volumes and the network.
	containers := engineLines(t, ctx, engine, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+name)
	var volumes []string
	for _, c := range containers {
		volumes = append(volumes, engineLines(t, ctx, engine, "inspect", "--format", "{{range .Mounts}}{{if .Name}}{{.Name}}\n{{end}}{{end}}", c)...)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		if err := cl.Close(ctx); err != nil {
			t.Errorf("delete: %v", err)
		}
		if left := engineLines(t, ctx, engine, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+name); len(left) > 0 {
			t.Errorf("containers of %s left after delete: %v", name, left)
		}
		for _, v := range volumes {
			if ExecRunner(ctx, &bytes.Buffer{}, engine, "volume", "inspect", v) == nil {
				t.Errorf("volume %s of %s left after delete", v, name)
			}
		}
		if n := clusterNetwork(engine, name); n != "" && ExecRunner(ctx, &bytes.Buffer{}, engine, "network", "inspect", n) == nil {
			t.Errorf("network %s left after delete", n)
		}
	})
	pl, err := resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	if want := pl.Workers + pl.PlainWorkers + 1; len(containers) != want || len(volumes) < len(containers) {
		t.Fatalf("cluster %s: containers %v, volumes %v; want %d node containers, each with a /var volume", name, containers, volumes, want)
	}
	cs, err := kubernetes.NewForConfig(cl.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return cl, cs
}

func engineLines(t *testing.T, ctx context.Context, engine string, args ...string) []string {
	t.Helper()
	var out bytes.Buffer
	if err := ExecRunner(ctx, &out, engine, args...); err != nil {
		t.Fatalf("%s %s: %v", engine, strings.Join(args, " "), err)
	}
	return strings.Fields(out.String())
}

// TestIntegrationKindGPUCluster creates a kind cluster of two GPU workers from gangbench's offline
// node image, in two node groups with labels of their own (a rack each), the second one tainted, and
// checks it as a user would: each worker carries its own group's labels and taints only, real
// kubelets (not kwok) advertise the device plugin's 8 GPUs (on the tainted worker too), pods on
// every node get an address and reach the apiserver's service IP, the seed's experiment 1 runs with
// its pods really running in containerd and the plugin's Allocate called for each, the scheduler's
// metrics are readable, a killed kubelet (the tainted worker's) comes back with its GPUs after the
// plugin re-registers, and delete leaves no container, volume or network behind.
func TestIntegrationKindGPUCluster(t *testing.T) {
	engine := liveEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	gpus := &clusters.GroupGPUs{Inventory: fakegpu.Inventory{Count: 8}}
	reserved := corev1.Taint{Key: "gangbench.dev/reserved", Value: "gang", Effect: corev1.TaintEffectNoSchedule}
	cl, cs := liveCluster(t, ctx, engine, "gangbench-it", clusters.Spec{NodeGroups: []clusters.NodeGroup{
		{Count: 1, GPUs: gpus, Labels: map[string]string{"gangbench.dev/rack": "r1"}},
		{Count: 1, GPUs: gpus, Labels: map[string]string{"gangbench.dev/rack": "r2"}, Taints: []corev1.Taint{reserved}},
	}})
	t.Logf("versions: %v", cl.Versions)
	for c, v := range cl.Versions {
		if c != clusters.Etcd && v != clusters.DefaultKubernetesVersion {
			t.Errorf("%s reports %s, want %s", c, v, clusters.DefaultKubernetesVersion)
		}
	}

	workers := checkRealGPUWorkers(t, ctx, cs, 2, 8)
	// kind names workers in config order: the first group's is <name>-worker, the second's -worker2.
	checkGroupNode(t, ctx, cs, workers[0], "r1", nil)
	checkGroupNode(t, ctx, cs, workers[1], "r2", []corev1.Taint{reserved})
	checkPodNetwork(t, ctx, cs, clusters.DefaultKubernetesVersion)

	before := map[string]int{}
	for _, w := range workers {
		a, err := deploy.ReadAllocations(ctx, cs, w)
		if err != nil {
			t.Fatal(err)
		}
		before[w] = len(a)
	}
	basic := runExperiment1(t, ctx, cs, "it-basic", workers[0], 0)
	if !slices.Equal(basic, []int{2, 2}) {
		t.Errorf("basic: bound per team %v, want [2 2] (8/8 GPUs, no team complete)", basic)
	}
	gang := runExperiment1(t, ctx, cs, "it-gang", workers[0], 3)
	if !slices.Equal(gang, []int{0, 3}) {
		t.Errorf("gang: bound per team %v, want one team 3 and the other 0", gang)
	}
	allocs, err := deploy.ReadAllocations(ctx, cs, workers[0])
	if err != nil {
		t.Fatal(err)
	}
	// Every GPU container that started went through Allocate with its 2 devices: 4 basic + 3 gang.
	got := allocs[before[workers[0]]:]
	if len(got) != 7 {
		t.Errorf("device plugin on %s recorded %d Allocate container requests since the experiments began, want 7: %+v", workers[0], len(got), got)
	}
	for _, a := range got {
		if len(a.DeviceIDs) != 2 || a.Node != workers[0] {
			t.Errorf("allocation %+v: want 2 devices on %s", a, workers[0])
		}
	}

	for name, e := range map[string]clusters.Endpoint{"apiserver": cl.APIServerMetrics, "scheduler": cl.SchedulerMetrics} {
		body, err := e.Get(ctx)
		if err != nil {
			t.Errorf("%s metrics: %v", name, err)
		} else if !strings.Contains(string(body), "# HELP") {
			t.Errorf("%s metrics: no metrics in %d bytes", name, len(body))
		}
	}
	// The fault suites stop, kill and start the scheduler through its static pod manifest.
	for _, step := range []struct {
		name string
		fn   func(context.Context, clusters.Component) error
	}{{"kill", cl.Control.Kill}, {"start", cl.Control.Start}, {"restart", cl.Control.Restart}} {
		if err := step.fn(ctx, clusters.Scheduler); err != nil {
			t.Errorf("%s the scheduler: %v", step.name, err)
		}
	}
	if _, err := cl.SchedulerMetrics.Get(ctx); err != nil {
		t.Errorf("scheduler metrics after its restart: %v", err)
	}
	// Failure artifacts read the control plane's logs from the node: the scheduler's holds the
	// containers the kubelet kept (the restarted one at least), each from its start.
	if log, err := cl.ComponentLog(ctx, clusters.Scheduler, 200); err != nil {
		t.Errorf("scheduler log: %v", err)
	} else if !strings.Contains(string(log), "==> container ") || !strings.Contains(string(log), "leaderelection") && !strings.Contains(string(log), "Starting") {
		t.Errorf("scheduler log after its restart shows no start:\n%.2000s", log)
	}
	if log, err := cl.ComponentLog(ctx, clusters.APIServer, 50); err != nil || !strings.Contains(string(log), "==> container ") || len(log) < 200 {
		t.Errorf("apiserver log (%v): %.500s", err, log)
	}
	checkKubeletRestart(t, ctx, cl, cs, workers[1], 8)
}

// TestIntegrationKindWrongScheduler runs the gang half of experiment 1 against a scheduler given as
// a binary (wrapped into an image and swapped into the control plane) whose gang scheduling is off:
// the teams split, which a correct scheduler never does, so the kind path can see a wrong scheduler.
func TestIntegrationKindWrongScheduler(t *testing.T) {
	engine := liveEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	set, err := k8sbin.Ensure(ctx, clusters.DefaultKubernetesVersion, k8sbin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := clusters.Spec{
		Nodes: 1, GPU: fakegpu.Inventory{Count: 8}, SchedulerBinary: set.Scheduler,
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Scheduler: {"GenericWorkload": false}},
	}
	cl, cs := liveCluster(t, ctx, engine, "gangbench-it-wrong", spec)
	if v := cl.Versions[clusters.Scheduler]; v != clusters.DefaultKubernetesVersion {
		t.Errorf("scheduler under test reports %q, want %s", v, clusters.DefaultKubernetesVersion)
	}
	workers := checkRealGPUWorkers(t, ctx, cs, 1, 8)
	gang := runExperiment1(t, ctx, cs, "it-wrong", workers[0], 3)
	if gang[0] != 0 && gang[0] != 3 || gang[1] != 0 && gang[1] != 3 {
		t.Logf("gang run against the wrong scheduler split the teams %v, as it must", gang)
	} else {
		t.Errorf("gang run against a scheduler without gang scheduling: bound per team %v, want a split (a team partly bound)", gang)
	}
}

// checkRealGPUWorkers asserts n GPU workers whose real kubelet (containerd runtime, no kwok
// annotation) advertises gpus, and a control plane without GPUs; it returns the workers' names.
func checkRealGPUWorkers(t *testing.T, ctx context.Context, cs kubernetes.Interface, n int, gpus int64) []string {
	t.Helper()
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var workers []string
	for _, node := range list.Items {
		q := node.Status.Allocatable[scenarios.GPUResource]
		info := node.Status.NodeInfo
		if node.Labels[LabelWorker] != "true" {
			if !q.IsZero() {
				t.Errorf("control-plane node %s advertises %s GPUs", node.Name, q.String())
			}
			continue
		}
		workers = append(workers, node.Name)
		if q.Value() != gpus {
			t.Errorf("worker %s allocatable nvidia.com/gpu = %s, want %d", node.Name, q.String(), gpus)
		}
		if _, kwok := node.Annotations["kwok.x-k8s.io/node"]; kwok || !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") || info.KubeletVersion != clusters.DefaultKubernetesVersion {
			t.Errorf("worker %s is not a real kubelet of %s on containerd: kubelet %q, runtime %q, annotations %v", node.Name, clusters.DefaultKubernetesVersion, info.KubeletVersion, info.ContainerRuntimeVersion, node.Annotations)
		}
	}
	slices.Sort(workers)
	if len(workers) != n {
		t.Fatalf("workers %v, want %d", workers, n)
	}
	return workers
}

// checkGroupNode asserts that node carries its group's rack label and exactly its group's taints
// (taints gangbench did not ask for, such as node.kubernetes.io/not-ready, do not count).
func checkGroupNode(t *testing.T, ctx context.Context, cs kubernetes.Interface, node, rack string, taints []corev1.Taint) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Labels["gangbench.dev/rack"]; got != rack {
		t.Errorf("node %s: rack label %q, want %q (labels %v)", node, got, rack, n.Labels)
	}
	var ours []corev1.Taint
	for _, tn := range n.Spec.Taints {
		if !strings.HasPrefix(tn.Key, "node.kubernetes.io/") {
			tn.TimeAdded = nil
			ours = append(ours, tn)
		}
	}
	if !slices.Equal(ours, taints) {
		t.Errorf("node %s: taints %v, want %v", node, n.Spec.Taints, taints)
	}
}

// checkPodNetwork runs a pod on every node (control plane included) that connects to the
// apiserver's service IP, and checks each got an address from its node's pod CIDR.
func checkPodNetwork(t *testing.T, ctx context.Context, cs kubernetes.Interface, version string) {
	t.Helper()
	svc, err := cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, ctx, cs, "it-net")
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kube-proxy's image is the node's Debian root filesystem: bash can open a TCP connection.
	img := nodeimage.ImageRepository + "/kube-proxy:" + version
	// Short attempts, retried: a SYN sent before kube-proxy's first sync is never DNATed, and its
	// retransmissions follow the same conntrack entry, so one long attempt would wait out the TCP
	// timeout even once the rules are there.
	script := fmt.Sprintf("for i in $(seq 60); do timeout 2 bash -c 'exec 3<>/dev/tcp/%s/443' && exit 0; sleep 1; done; exit 1", svc.Spec.ClusterIP)
	for _, n := range nodes.Items {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "net-" + n.Name},
			Spec: corev1.PodSpec{
				NodeName: n.Name, RestartPolicy: corev1.RestartPolicyNever,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{
					Name: "net", Image: img, ImagePullPolicy: corev1.PullNever, Command: []string{"bash", "-c", script},
				}},
			},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes.Items {
		var last string
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "net-"+n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = fmt.Sprintf("phase %s, IP %q", p.Status.Phase, p.Status.PodIP)
			if p.Status.Phase == corev1.PodFailed {
				return false, fmt.Errorf("pod on %s failed to reach %s:443 (%s)", n.Name, svc.Spec.ClusterIP, last)
			}
			if p.Status.Phase != corev1.PodSucceeded {
				return false, nil
			}
			_, cidr, err := net.ParseCIDR(n.Spec.PodCIDR)
			if err != nil || !cidr.Contains(net.ParseIP(p.Status.PodIP)) {
				return false, fmt.Errorf("pod on %s has address %q outside the node's pod CIDR %q", n.Name, p.Status.PodIP, n.Spec.PodCIDR)
			}
			return true, nil
		})
		if err != nil {
			t.Errorf("pod network on %s: %v (last: %s)", n.Name, err, last)
		}
	}
}

func newNamespace(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// runExperiment1 is the seed's experiment 1 on one 8-GPU worker: teams a and b, 3 pods each with 2
// GPUs, created interleaved, both basic (minCount 0) or gangs. It waits until the scheduler has
// decided every pod (bound, or Pending with a FailedScheduling event: the scheduler looked), checks
// bound pods really run in containerd, returns the bound count per team sorted, then deletes the
// namespace and waits until the worker's GPUs are free again.
func runExperiment1(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, worker string, minCount int32) []int {
	t.Helper()
	newNamespace(t, ctx, cs, ns)
	for _, team := range []string{"team-a", "team-b"} {
		pg := scenarios.PodGroup(ns, scenarios.Group{Name: team, MinCount: minCount})
		if _, err := cs.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		for _, team := range []string{"team-a", "team-b"} {
			p := scenarios.Pod(ns, scenarios.Member{Name: fmt.Sprintf("%s-%d", team[len(team)-1:], i), Group: team, GPUs: 2})
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": worker}
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	bound := map[string]int{"team-a": 0, "team-b": 0}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return false, err
		}
		looked := map[string]bool{}
		for _, e := range events.Items {
			looked[e.InvolvedObject.Name] = true
		}
		bound = map[string]int{"team-a": 0, "team-b": 0}
		var waiting []string
		for _, p := range pods.Items {
			team := *p.Spec.SchedulingGroup.PodGroupName
			switch {
			case p.Spec.NodeName != "":
				if !runningInContainerd(p) {
					waiting = append(waiting, p.Name+" bound, not running yet")
				}
				bound[team]++
			case !looked[p.Name]:
				waiting = append(waiting, p.Name+" pending, no FailedScheduling yet")
			}
		}
		last = fmt.Sprintf("bound %v; %s", bound, strings.Join(waiting, ", "))
		return len(pods.Items) == 6 && len(waiting) == 0, nil
	})
	if err != nil {
		t.Errorf("experiment 1 (%s, minCount %d): %v (last: %s)", ns, minCount, err, last)
	}
	counts := []int{bound["team-a"], bound["team-b"]}
	slices.Sort(counts)
	deleteNamespaceAndWaitGPUsFree(t, ctx, cs, ns, worker)
	return counts
}

func runningInContainerd(p corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	s := p.Status.ContainerStatuses[0]
	return s.State.Running != nil && strings.HasPrefix(s.ContainerID, "containerd://")
}

func deleteNamespaceAndWaitGPUsFree(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, worker string) {
	t.Helper()
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			last = fmt.Sprintf("namespace %s still there (%v)", ns, err)
			return false, nil
		}
		pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + worker})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			for _, c := range p.Spec.Containers {
				if q := c.Resources.Limits[scenarios.GPUResource]; !q.IsZero() {
					last = "pod " + p.Namespace + "/" + p.Name + " still holds GPUs"
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("GPUs of %s not free after deleting %s: %v (last: %s)", worker, ns, err, last)
	}
}

// checkKubeletRestart kills a worker's kubelet (SIGKILL), starts it again and waits until the device
// plugin has registered with the new kubelet and the worker advertises its GPUs again.
func checkKubeletRestart(t *testing.T, ctx context.Context, cl *clusters.Cluster, cs kubernetes.Interface, worker string, gpus int64) {
	t.Helper()
	registrations := func() (int, error) { return pluginLogCount(ctx, cs, worker, "registered with kubelet") }
	before, err := registrations()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kubelet := Kubelet + "/" + clusters.Component(worker)
	if err := cl.Control.Kill(ctx, kubelet); err != nil {
		t.Fatalf("kill kubelet on %s: %v", worker, err)
	}
	if err := cl.Control.Start(ctx, kubelet); err != nil {
		t.Fatalf("start kubelet on %s: %v", worker, err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, worker, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		q := n.Status.Allocatable[scenarios.GPUResource]
		// The logs come through the kubelet, which may still be starting.
		r, err := registrations()
		if err != nil {
			last = fmt.Sprintf("allocatable %s, plugin logs: %v", q.String(), err)
			return false, nil
		}
		last = fmt.Sprintf("allocatable %s, plugin registrations %d (before %d)", q.String(), r, before)
		return r > before && q.Value() == gpus, nil
	})
	if err != nil {
		t.Errorf("after killing the kubelet on %s: %v (last: %s)", worker, err, last)
		return
	}
	t.Logf("kubelet on %s killed; device plugin re-registered and %d GPUs allocatable again after %s", worker, gpus, time.Since(start).Round(time.Millisecond))
}

// pluginLogCount counts lines containing s in the logs of the device plugin pod on node.
func pluginLogCount(ctx context.Context, cs kubernetes.Interface, node, s string) (int, error) {
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	for _, p := range pods.Items {
		if !strings.Contains(p.Name, "fakegpu-device-plugin") {
			continue
		}
		b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: deploy.ContainerName}).DoRaw(ctx)
		if err != nil {
			return 0, err
		}
		return strings.Count(string(b), s), nil
	}
	return 0, fmt.Errorf("no device plugin pod on %s", node)
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
