package perf

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/perf/loadgen"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

func node(name string, ready bool, taints ...corev1.Taint) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{fakegpu.LabelManaged: "true"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

var notReadyTaint = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}

// TestWaitNodesSchedulableClearsStaleTaint: a Ready node still tainted not-ready after the grace
// gets the taint removed (with a note); a node that is not Ready keeps it and the wait times out
// naming it.
func TestWaitNodesSchedulableClearsStaleTaint(t *testing.T) {
	cs := fake.NewClientset(node("a", true), node("b", true, notReadyTaint))
	var notes []string
	note := func(f string, a ...any) { notes = append(notes, f) }
	if err := kwok.WaitSchedulable(context.Background(), cs, "", 2, 10*time.Second, 0, note); err != nil {
		t.Fatal(err)
	}
	b, _ := cs.CoreV1().Nodes().Get(context.Background(), "b", metav1.GetOptions{})
	if len(b.Spec.Taints) != 0 || len(notes) != 1 {
		t.Errorf("taints %v, notes %q", b.Spec.Taints, notes)
	}

	cs = fake.NewClientset(node("a", true), node("c", false, notReadyTaint))
	err := kwok.WaitSchedulable(context.Background(), cs, "", 2, time.Second, 0, note)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 nodes schedulable after 1s (e.g. c: taint node.kubernetes.io/not-ready; last error <nil>): context deadline exceeded") {
		t.Errorf("a node that is not Ready must keep its taint and fail the wait: %v", err)
	}
}

func TestCreationItem(t *testing.T) {
	t0 := time.Now()
	created := []loadgen.Stats{
		{Phase: "a", PodGroups: 10, Pods: 30, First: t0, Last: t0.Add(time.Second)},
		{Phase: "b", PodGroups: 5, Pods: 30, First: t0.Add(500 * time.Millisecond), Last: t0.Add(2 * time.Second)},
	}
	bind := []results.DataItem{{Name: measure.ItemBindingRate, Data: map[string]float64{"Average": 10}}}
	it, ok := creationItem(created, bind)
	if !ok || it.Data["Pods"] != 60 || it.Data["PodGroups"] != 15 || it.Data["Average"] != 30 || it.Data["RatioToBindingRate"] != 3 || it.Unit != "pods/s" {
		t.Errorf("creation item: %v (reported: %v)", it.Data, ok)
	}
	// Phases one after the other: the wait between them is not creating time.
	apart := []loadgen.Stats{
		{Phase: "a", Pods: 30, First: t0, Last: t0.Add(time.Second)},
		{Phase: "b", Pods: 30, First: t0.Add(10 * time.Second), Last: t0.Add(11 * time.Second)},
	}
	if it, _ := creationItem(apart, bind); it.Data["Average"] != 30 || it.Data["DurationSeconds"] != 2 {
		t.Errorf("sequential phases: %v, want 60 pods over 2 s of creating", it.Data)
	}
	// Job-driven phases only: the job controller made the pods, so the load generator has no pod rate.
	if it, ok := creationItem([]loadgen.Stats{{Phase: "jobs", Jobs: 5, First: t0, Last: t0.Add(time.Second)}}, bind); ok {
		t.Errorf("creation item for Job-driven phases only: %v, want none", it.Data)
	}
}

func TestOrder(t *testing.T) {
	mk := func(name string, nodes, groups, pods int) *scenario.Scenario {
		return &scenario.Scenario{Name: name, Repetitions: 1, Cluster: scenario.Cluster{Nodes: nodes, GPUsPerNode: 8},
			Phases: []scenario.Phase{{Groups: groups, PodsPerGroup: pods}}}
	}
	in := []*scenario.Scenario{mk("big", 500, 1000, 3), mk("small50", 50, 10, 3), mk("huge", 500, 3, 1000), mk("small", 500, 10, 3)}
	var got []string
	for _, s := range order(in, ShapeOf) {
		got = append(got, s.Name)
	}
	// 500-node shape first (it came first), smallest to largest; 3 × 1000 has fewer PodGroups than
	// 1000 × 3 with the same pods, so it runs before.
	if strings.Join(got, " ") != "small huge big small50" {
		t.Errorf("order: %v", got)
	}
	if in[0].Name != "big" {
		t.Error("order must not reorder its input")
	}
	// A scenario that names the device plugin shares the cluster of those that name no API when the
	// source's base is the device plugin, and not when it is DRA (compare --gpu-api dra).
	dp := mk("dp", 500, 10, 3)
	dp.Cluster.GPUAPI = clusters.GPUAPIDevicePlugin
	for _, tc := range []struct {
		base clusters.GPUAPI
		want string
	}{{clusters.GPUAPIDevicePlugin, "dp small huge big small50"}, {"", "dp small huge big small50"}, {clusters.GPUAPIDRA, "small huge big small50 dp"}} {
		r := &runner{o: Options{Source: &ProviderSource{Base: clusters.Spec{GPUAPI: tc.base}}}}
		got = got[:0]
		for _, s := range order(append(slices.Clone(in[:3]), dp, in[3]), r.shapeOf) {
			got = append(got, s.Name)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("base %q: order %v, want %s", tc.base, got, tc.want)
		}
	}
}
