package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/local"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/poll"
	"github.com/gangbench/gangbench/scenarios"
)

// newProvider gives each test its own state dir, so tests never see each other's clusters or a user's.
func newProvider(t testing.TB) (*local.Provider, string) {
	t.Helper()
	dir := t.TempDir()
	p, err := local.New(local.WithStateDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real control plane; skipped with -short")
	}
}

// createCluster creates a cluster and registers its deletion; it returns the handle and a check that
// nothing of the cluster remains, which the test calls after Close.
func createCluster(t *testing.T, p *local.Provider, stateDir string, spec clusters.Spec) (*clusters.Cluster, kubernetes.Interface, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cl, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create cluster: %v", err)
	}
	t.Logf("cluster %s ready in %s (scheduler %s)", cl.Name, time.Since(start).Round(time.Millisecond), cl.Versions[clusters.Scheduler])
	pids := componentPIDs(t, stateDir, cl.Name)
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	cs, err := kubernetes.NewForConfig(cl.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	assertGone := func() {
		t.Helper()
		if err := cl.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		for c, pid := range pids {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), string(c)) || strings.Contains(string(b), "kwok") {
					t.Errorf("%s (pid %d) still running after delete", c, pid)
				}
			}
		}
		if _, err := os.Stat(filepath.Join(stateDir, cl.Name)); !os.IsNotExist(err) {
			t.Errorf("cluster state dir still exists after delete (stat: %v)", err)
		}
	}
	return cl, cs, assertGone
}

// componentPIDs reads the state file the way another process would.
func componentPIDs(t *testing.T, stateDir, name string) map[clusters.Component]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, name, "state.json"))
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	out := map[clusters.Component]int{}
	for _, c := range clusters.AllComponents() {
		// A tiny targeted parse keeps the test independent of the state struct.
		key := `"` + string(c) + `": {`
		i := strings.Index(string(b), key)
		if i < 0 {
			t.Fatalf("state file has no pid for %s:\n%s", c, b)
		}
		var pid int
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b[i+len(key):])), `"pid": %d`, &pid); err != nil {
			t.Fatalf("parse pid of %s: %v", c, err)
		}
		out[c] = pid
	}
	return out
}

// outcome is what experiment 1 looks at once the scheduler has settled.
type outcome struct {
	bound   map[string]int // team -> bound pods
	pending map[string]int // team -> pods the scheduler marked unschedulable
	gpus    int64
}

func (o outcome) String() string {
	return fmt.Sprintf("bound %v, unschedulable %v, GPUs allocated %d", o.bound, o.pending, o.gpus)
}

// runExperiment1 creates two teams of 3 pods × 2 GPUs, interleaved, and waits until every pod is
// either bound or marked unschedulable by the scheduler: that proves the scheduler looked at each pod,
// so a count of pending pods is a real verdict and not an idle scheduler.
func runExperiment1(t *testing.T, cs kubernetes.Interface, ns string, minCount int32) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"team-a", "team-b"} {
		if _, err := cs.SchedulingV1beta1().PodGroups(ns).Create(ctx, scenarios.PodGroup(ns, scenarios.Group{Name: team, MinCount: minCount}), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create PodGroup %s: %v", team, err)
		}
	}
	// Interleaved as in the lab (a-0, b-0, a-1, …). A basic pod is scheduled on its own, so each one
	// is created only after the scheduler decided on the previous: otherwise a fast client hands the
	// scheduler a whole team in one group cycle and the split depends on timing, not semantics.
	for i := range 3 {
		for _, team := range []string{"team-a", "team-b"} {
			p := scenarios.Pod(ns, scenarios.Member{Name: fmt.Sprintf("%s-%d", team, i), Group: team, GPUs: 2, Labels: map[string]string{"team": team}})
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create pod %s: %v", p.Name, err)
			}
			if minCount == 0 {
				waitDecided(ctx, t, cs, ns, p.Name)
			}
		}
	}
	var last outcome
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			o := outcome{bound: map[string]int{}, pending: map[string]int{}}
			decided := 0
			for _, p := range pods.Items {
				team := p.Labels["team"]
				if p.Spec.NodeName != "" {
					o.bound[team]++
					o.gpus += p.Spec.Containers[0].Resources.Limits.Name(scenarios.GPUResource, "").Value()
					decided++
					continue
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
						o.pending[team]++
						decided++
					}
				}
			}
			last = o
			if decided == 6 {
				return o
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("scheduler did not decide on all 6 pods within 2m; last seen: %s", last)
		case <-tick.C:
		}
	}
}

func waitDecided(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if p.Spec.NodeName != "" {
				return
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("scheduler did not decide on pod %s/%s (last error %v)", ns, name, err)
		case <-tick.C:
		}
	}
}

// deleteNamespace removes a namespace and waits until its pods are gone, so the GPUs are free again
// (the lab's "confirm GPUs are back to 0 between runs").
func deleteNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pods of namespace %s not gone within 1m (last error %v)", ns, err)
		case <-tick.C:
		}
	}
}

func groupCondition(t *testing.T, cs kubernetes.Interface, ns, name string) *metav1.Condition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		pg, err := cs.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for i := range pg.Status.Conditions {
				if pg.Status.Conditions[i].Type == "PodGroupInitiallyScheduled" {
					return &pg.Status.Conditions[i]
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("PodGroup %s/%s got no PodGroupInitiallyScheduled condition within 30s (last error %v)", ns, name, err)
		case <-tick.C:
		}
	}
}

// TestIntegrationExperiment1 reproduces experiment 1 of the seed lab on a real v1.37.2 control plane:
// basic groups split 2+2 (8/8 GPUs, no team complete), gang groups place one team whole (6/8 GPUs).
func TestIntegrationExperiment1(t *testing.T) {
	skipShort(t)
	p, stateDir := newProvider(t)
	cl, cs, assertGone := createCluster(t, p, stateDir, clusters.Spec{Name: "exp1", Nodes: 1, GPU: fakegpu.Inventory{Count: 8}})
	if got := cl.Versions[clusters.Scheduler]; got != clusters.DefaultKubernetesVersion {
		t.Errorf("scheduler version = %q, want %q", got, clusters.DefaultKubernetesVersion)
	}
	if got := cl.Versions[clusters.APIServer]; got != clusters.DefaultKubernetesVersion {
		t.Errorf("apiserver version = %q, want %q", got, clusters.DefaultKubernetesVersion)
	}

	t.Run("basic", func(t *testing.T) {
		o := runExperiment1(t, cs, "native-basic", 0)
		t.Logf("basic: %s", o)
		if o.bound["team-a"] != 2 || o.bound["team-b"] != 2 || o.gpus != 8 {
			t.Errorf("basic groups: want 2+2 bound and 8/8 GPUs, got %s", o)
		}
		for _, team := range []string{"team-a", "team-b"} {
			c := groupCondition(t, cs, "native-basic", team)
			if c.Status != metav1.ConditionTrue || c.Reason != "Scheduled" {
				t.Errorf("basic %s: condition %s/%s %q, want True/Scheduled", team, c.Status, c.Reason, c.Message)
			}
		}
		deleteNamespace(t, cs, "native-basic")
	})
	t.Run("gang", func(t *testing.T) {
		o := runExperiment1(t, cs, "native-gang", 3)
		t.Logf("gang: %s", o)
		full, empty := 0, 0
		for _, team := range []string{"team-a", "team-b"} {
			switch o.bound[team] {
			case 3:
				full++
			case 0:
				empty++
			}
		}
		if full != 1 || empty != 1 || o.gpus != 6 {
			t.Errorf("gang groups: want one team 3/3 and the other 0/3 with 6/8 GPUs, got %s", o)
		}
	})
	assertGone()
}

// TestIntegrationGateOffSplits is the proof that the harness can see a wrong scheduler: with
// GenericWorkload off in the scheduler only, the gang experiment splits 2+2 like the basic one.
func TestIntegrationGateOffSplits(t *testing.T) {
	skipShort(t)
	p, stateDir := newProvider(t)
	_, cs, assertGone := createCluster(t, p, stateDir, clusters.Spec{
		Name: "gateoff", Nodes: 1, GPU: fakegpu.Inventory{Count: 8},
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Scheduler: {"GenericWorkload": false}},
	})
	o := runExperiment1(t, cs, "native-gang", 3)
	t.Logf("gang with the scheduler's GenericWorkload=false: %s", o)
	if o.bound["team-a"] != 2 || o.bound["team-b"] != 2 {
		t.Errorf("without gang scheduling the gang experiment should split 2+2, got %s", o)
	}
	assertGone()
}

// TestIntegrationComponentControl kills the scheduler with SIGKILL and restarts it, restarts the
// apiserver, and checks that the cluster still schedules: the fault-injection seam later issues use.
func TestIntegrationComponentControl(t *testing.T) {
	skipShort(t)
	p, stateDir := newProvider(t)
	cl, cs, assertGone := createCluster(t, p, stateDir, clusters.Spec{Name: "control", Nodes: 1, GPU: fakegpu.Inventory{Count: 8}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := componentPIDs(t, stateDir, cl.Name)
	if err := cl.Control.Kill(ctx, clusters.Scheduler); err != nil {
		t.Fatal(err)
	}
	if err := cl.Control.Start(ctx, clusters.Scheduler); err != nil {
		t.Fatal(err)
	}
	if err := cl.Control.Restart(ctx, clusters.APIServer); err != nil {
		t.Fatal(err)
	}
	after := componentPIDs(t, stateDir, cl.Name)
	for _, c := range []clusters.Component{clusters.Scheduler, clusters.APIServer} {
		if before[c] == after[c] {
			t.Errorf("%s pid unchanged (%d) after restart: state file not updated", c, after[c])
		}
	}
	if err := cl.Control.Start(ctx, clusters.Scheduler); err == nil {
		t.Error("starting a running scheduler should be refused")
	}
	pod := scenarios.Pod("default", scenarios.Member{Name: "after-restart", GPUs: 1})
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDecided(ctx, t, cs, "default", "after-restart")
	got, err := cs.CoreV1().Pods("default").Get(ctx, "after-restart", metav1.GetOptions{})
	if err != nil || got.Spec.NodeName == "" {
		t.Fatalf("pod not bound after the restarts: %v %+v", err, got.Status.Conditions)
	}
	assertGone()
}

// TestIntegrationCompositeNeedsTopology: CompositePodGroup depends on TopologyAwareWorkloadScheduling
// in every component (workload-features §0, §7 item 17). Asked for without it, the cluster does not
// start, the error names the dependency (the component's own last log line), and nothing of the
// cluster is left behind.
func TestIntegrationCompositeNeedsTopology(t *testing.T) {
	skipShort(t)
	p, stateDir := newProvider(t)
	spec := clusters.Spec{Name: "cpg-no-tas", Nodes: 1, GPU: fakegpu.Inventory{Count: 8},
		FeatureGates: map[string]bool{"TopologyAwareWorkloadScheduling": false}}
	if err := clusters.ApplyFeatures(&spec, []string{"composite"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := p.Create(ctx, spec)
	if err == nil {
		_ = cl.Close(context.Background())
		t.Fatal("a cluster with CompositePodGroup on and TopologyAwareWorkloadScheduling off started")
	}
	if want := "CompositePodGroup is enabled, but depends on features that are disabled: [TopologyAwareWorkloadScheduling]"; !strings.Contains(err.Error(), want) {
		t.Errorf("error does not say %q:\n%v", want, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, spec.Name)); !os.IsNotExist(err) {
		t.Errorf("the cluster's state directory is left behind: %v", err)
	}
}

// TestIntegrationJobGateOffInControllerManager: WorkloadWithJob on in the apiserver but off in the
// controller-manager (workload-features §7 item 40, its second half): a gang Job keeps
// spec.scheduling, the job controller makes its pods, and nothing else: no Workload, no PodGroup, no
// pod in a group. With the gate on, the controller creates the Workload before any pod (job.go's
// "suspended job creates workload before pods"), so pods existing without one show it looked.
func TestIntegrationJobGateOffInControllerManager(t *testing.T) {
	skipShort(t)
	p, stateDir := newProvider(t)
	spec := clusters.Spec{Name: "job-kcm-off", Nodes: 1, GPU: fakegpu.Inventory{Count: 8},
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.ControllerManager: {"WorkloadWithJob": false}}}
	if err := clusters.ApplyFeatures(&spec, []string{"jobs"}); err != nil {
		t.Fatal(err)
	}
	_, cs, assertGone := createCluster(t, p, stateDir, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, minCount := int32(2), int32(2)
	pod := scenarios.Pod("default", scenarios.Member{Name: "gang", GPUs: 1})
	podSpec := pod.Spec
	podSpec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: "default"},
		Spec: batchv1.JobSpec{Parallelism: &n, Completions: &n, Template: corev1.PodTemplateSpec{Spec: podSpec},
			Scheduling: &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: &minCount}}}},
	}
	got, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Scheduling == nil {
		t.Fatal("the apiserver dropped spec.scheduling, though its WorkloadWithJob is on")
	}
	var pods *corev1.PodList
	err = poll.Until(ctx, "the Job's 2 pods", 200*time.Millisecond, 90*time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=gang"})
		if err != nil {
			return false, "", err
		}
		return len(pods.Items) == int(n), fmt.Sprintf("%d pods", len(pods.Items)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.SchedulingGroup != nil {
			t.Errorf("pod %s has spec.schedulingGroup %+v, though the controller-manager has WorkloadWithJob off", p.Name, *p.Spec.SchedulingGroup)
		}
	}
	wls, err := cs.SchedulingV1beta1().Workloads("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pgs, err := cs.SchedulingV1beta1().PodGroups("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(wls.Items) != 0 || len(pgs.Items) != 0 {
		t.Errorf("%d Workloads and %d PodGroups, want none with the controller-manager's WorkloadWithJob off", len(wls.Items), len(pgs.Items))
	}
	assertGone()
}
