package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/scenarios"
)

// A Job-driven phase (via: job) creates one batch/v1 Job per group, with spec.scheduling saying
// what the phase's PodGroups would (WorkloadWithJob). The job controller makes the Workload, the
// PodGroup and the pods; the load generator records the Job's create, and JobGroups records the
// PodGroup the controller made for it, so latency can be split into Job → PodGroup → all bound.

// job creates Job i of a Job-driven phase.
func (g *Generator) job(ctx context.Context, ph scenario.Phase, i int) error {
	name := GroupName(ph.Name, i)
	if g.Jobs != nil {
		g.Jobs.expect(name, ph)
	}
	j := JobFor(g.Namespace, g.SchedulerName, g.GPUAPI, ph, name)
	err := retry(ctx, func() error {
		_, err := g.Client.BatchV1().Jobs(g.Namespace).Create(ctx, j, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("create Job %s/%s: %w", g.Namespace, name, err)
	}
	g.Timeline.Add(timeline.Event{Time: time.Now(), Kind: timeline.JobCreated, Phase: ph.Name, Job: name})
	if g.OnGroup != nil {
		g.OnGroup()
	}
	return nil
}

// JobFor is the Job of one group of a Job-driven phase: parallelism = completions = the group's
// pods, each pod as the phase's pods are (GPUs as api wants them, requests, class, scheduler), never
// restarted, so a simulated pod that keeps running keeps its place as a PodGroup pod would. On DRA
// nodes the pod template carries the claim from the phase's template, so each pod the job
// controller makes gets its own claim.
func JobFor(namespace, schedulerName string, api clusters.GPUAPI, ph scenario.Phase, name string) *batchv1.Job {
	m := scenarios.Member{
		Name: name, PriorityClassName: ph.PriorityClass, SchedulerName: schedulerName,
		Labels: map[string]string{timeline.PhaseLabel: ph.Name, timeline.ControllerLabel: "job"},
	}
	gpus(&m, api, ph)
	pod := scenarios.Pod(namespace, m)
	addRequests(pod, ph)
	spec := pod.Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	n := int32(ph.PodsPerGroup)
	sched := &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedv1alpha3.WorkloadPodGroupSchedulingPolicy{}}
	if ph.Policy == scenario.Gang {
		mc := int32(ph.MinCount)
		sched.SchedulingPolicy.Gang = &schedv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: &mc}
	} else {
		sched.SchedulingPolicy.Basic = &schedv1alpha3.WorkloadPodGroupBasicSchedulingPolicy{}
	}
	if ph.TopologyKey != "" {
		sched.SchedulingConstraints = &schedv1alpha3.WorkloadPodGroupSchedulingConstraints{Topology: []schedv1alpha3.TopologyConstraint{{Key: ph.TopologyKey}}}
	}
	if ph.DisruptionAll {
		sched.DisruptionMode = &schedv1alpha3.WorkloadPodGroupDisruptionMode{All: &schedv1alpha3.WorkloadPodGroupAllDisruptionMode{}}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: pod.Labels},
		Spec: batchv1.JobSpec{
			Parallelism: &n, Completions: &n,
			Template:   corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: spec},
			Scheduling: sched,
		},
	}
}

// JobGroups watches a namespace's PodGroups and adds a PodGroupCreated for each one a Job of a
// Job-driven phase owns, when it is first seen, with the Job's name and phase: the job controller,
// not this process, created it, so the watch is the only clock that sees it.
type JobGroups struct {
	cs        kubernetes.Interface
	namespace string
	tl        *timeline.Timeline

	mu     sync.Mutex
	phases map[string]scenario.Phase // Job name → its phase, set before the Job is created
	seen   map[string]bool

	stop    chan struct{}
	factory informers.SharedInformerFactory
}

// NewJobGroups returns a watch of namespace's PodGroups into tl; Start begins it.
func NewJobGroups(cs kubernetes.Interface, namespace string, tl *timeline.Timeline) *JobGroups {
	return &JobGroups{cs: cs, namespace: namespace, tl: tl, phases: map[string]scenario.Phase{}, seen: map[string]bool{}}
}

// expect records a Job's phase before the Job exists, so its PodGroup is never seen unattributed.
func (w *JobGroups) expect(job string, ph scenario.Phase) {
	w.mu.Lock()
	w.phases[job] = ph
	w.mu.Unlock()
}

// Start begins the watch and returns once the initial list has been delivered.
func (w *JobGroups) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(w.cs, 0, informers.WithNamespace(w.namespace))
	inf := f.Scheduling().V1beta1().PodGroups().Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
	})
	if err != nil {
		return fmt.Errorf("job PodGroup watch: %w", err)
	}
	w.stop = make(chan struct{})
	w.factory = f
	f.Start(w.stop)
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		w.Stop()
		return fmt.Errorf("job PodGroup watch: the PodGroup watch of namespace %s did not sync: %w", w.namespace, context.Cause(ctx))
	}
	return nil
}

// Stop ends the watch. Safe to call more than once.
func (w *JobGroups) Stop() {
	if w.stop == nil {
		return
	}
	close(w.stop)
	w.factory.Shutdown()
	w.stop = nil
}

func (w *JobGroups) observe(obj any) {
	pg, ok := obj.(*schedv1beta1.PodGroup)
	if !ok {
		return
	}
	now := time.Now()
	job := ""
	for _, o := range pg.OwnerReferences {
		if o.Kind == "Job" && o.Controller != nil && *o.Controller {
			job = o.Name
		}
	}
	w.mu.Lock()
	ph, ours := w.phases[job]
	first := ours && !w.seen[pg.Name]
	if first {
		w.seen[pg.Name] = true
	}
	w.mu.Unlock()
	if !first {
		return
	}
	e := timeline.Event{Time: now, Kind: timeline.PodGroupCreated, Phase: ph.Name, Group: pg.Name, Job: job,
		Policy: string(scenario.Basic), DisruptionMode: "single"}
	if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil {
		e.Policy, e.MinCount = string(scenario.Gang), int(gang.MinCount)
	}
	if pg.Spec.DisruptionMode != nil && pg.Spec.DisruptionMode.All != nil {
		e.DisruptionMode = "all"
	}
	w.tl.Add(e)
}
