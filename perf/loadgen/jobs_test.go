package loadgen

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
)

// TestJobPhase: a Job-driven phase creates one Job per group with the phase's scheduling, and the
// PodGroup and pods the job controller makes for it reach the timeline with the Job's name and
// phase, through the PodGroup watch and the pod recorder.
func TestJobPhase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := fake.NewClientset()
	tl := timeline.NewTimeline(nil)
	jobs := NewJobGroups(cs, "ns", tl)
	if err := jobs.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer jobs.Stop()
	rec := timeline.NewRecorder(cs, "ns", tl)
	if err := rec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	g := &Generator{Client: cs, Namespace: "ns", SchedulerName: "s", Timeline: tl, Jobs: jobs}
	ph := scenario.Phase{Name: "jobs", Groups: 2, PodsPerGroup: 4, GPUsPerPod: 8, Policy: scenario.Gang, MinCount: 3,
		TopologyKey: "topology.gangbench.dev/rack", ViaJob: true, DisruptionAll: true, CPU: resource.MustParse("100m")}
	st, err := g.Run(ctx, ph)
	if err != nil || st.Jobs != 2 || st.Pods != 0 || st.PodGroups != 0 {
		t.Fatalf("stats %+v, %v: want 2 Jobs and nothing else created", st, err)
	}
	j, err := cs.BatchV1().Jobs("ns").Get(ctx, "jobs-00001", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sched, tmpl := j.Spec.Scheduling, j.Spec.Template
	if *j.Spec.Parallelism != 4 || *j.Spec.Completions != 4 || sched == nil || sched.SchedulingPolicy.Gang == nil || *sched.SchedulingPolicy.Gang.MinCount != 3 ||
		sched.SchedulingConstraints.Topology[0].Key != ph.TopologyKey || sched.DisruptionMode.All == nil ||
		tmpl.Spec.SchedulingGroup != nil || tmpl.Spec.RestartPolicy != corev1.RestartPolicyNever || tmpl.Spec.SchedulerName != "s" ||
		tmpl.Labels[timeline.ControllerLabel] != "job" || tmpl.Labels[timeline.PhaseLabel] != "jobs" ||
		tmpl.Spec.Containers[0].Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("Job %+v", j.Spec)
	}
	// What the job controller would make for jobs-00001 (and a PodGroup no Job of ours owns).
	yes := true
	for _, pg := range []*schedv1beta1.PodGroup{
		{ObjectMeta: metav1.ObjectMeta{Name: "jobs-00001-pg", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "jobs-00001", Controller: &yes}}},
			Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 3}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns"}},
	} {
		if _, err := cs.SchedulingV1beta1().PodGroups("ns").Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pg := "jobs-00001-pg"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "jobs-00001-abcde", Namespace: "ns", Labels: tmpl.Labels},
		Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: &pg}}}
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last []timeline.Event
	for {
		last = tl.Events()
		var group, created bool
		for _, e := range last {
			group = group || (e.Kind == timeline.PodGroupCreated && e.Group == pg && e.Job == "jobs-00001" && e.Phase == "jobs" && e.MinCount == 3 && e.Policy == "gang")
			created = created || (e.Kind == timeline.PodCreated && e.Pod == pod.Name && e.Group == pg && e.Phase == "jobs")
			if e.Kind == timeline.PodGroupCreated && e.Group == "other" {
				t.Fatalf("a PodGroup no Job of the phase owns was recorded: %+v", e)
			}
		}
		if group && created {
			break
		}
		select {
		case <-tl.Changed():
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("the Job's PodGroup and pod never reached the timeline; last seen %+v", last)
		}
	}
}
