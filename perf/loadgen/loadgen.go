// Package loadgen creates a scenario phase's PodGroups and pods. It has its own client with limits
// far above what the apiserver sustains, and concurrent workers, so the figures measure the
// scheduler and not the load: it reports the rate it achieved so a run can show it was not the
// bottleneck. By default each PodGroup is created right before its pods; groups are handed to
// workers in scenario order and each group's pods are created in index order. A phase with
// arrival: schedulerPerf is created in scheduler_perf's order instead: all PodGroups ahead, then
// the pods in index order across the groups.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// Defaults for the generator's client and concurrency.
const (
	// DefaultQPS and DefaultBurst lift client-go's 5 QPS, which would make the harness the
	// bottleneck; the apiserver's own max-inflight limits are then what bounds creation.
	DefaultQPS   = 5000
	DefaultBurst = 5000
	// DefaultWorkers is the number of groups created concurrently. Measured on 2 cores (smoke, 300
	// pods): 16 workers created ~250 pods/s, barely 2x the binding rate; 64 created ~600 pods/s;
	// 128 no more than 64.
	DefaultWorkers = 64
	// podFanOut is how many pods of one large group are created at once: a gang of 1000 created one
	// pod at a time would take seconds of round trips while the other workers idle.
	podFanOut  = 8
	maxRetries = 5
)

// Config builds a client config for load: a copy of base with high limits and protobuf, which
// costs the apiserver and this process less CPU per object than JSON.
func Config(base *rest.Config, qps float32, burst int) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg
}

// Generator creates objects of scenario phases in one namespace.
type Generator struct {
	Client kubernetes.Interface
	// Gang creates PodGroups in the version the cluster serves; nil means v1beta1 through Client.
	Gang          *gangapi.Client
	Namespace     string
	SchedulerName string
	Workers       int
	// Timeline receives a PodGroupCreated and a PodCreated event per object, stamped when the
	// create call returned.
	Timeline *timeline.Timeline
	// OnGroup and OnPod, when set, are called after each create (progress bars); OnGroup after a
	// Job's, for a Job-driven phase.
	OnGroup, OnPod func()
	// Jobs, when set, learns the phase of each Job before it is created, so the PodGroup the job
	// controller makes for it is recorded with it. A Job-driven phase needs it.
	Jobs *JobGroups
	// GPUAPI is how the cluster's nodes publish their GPUs: with DRA the pods claim them through
	// ResourceClaimTemplates (claims.go) instead of counting nvidia.com/gpu. "" is the device plugin.
	GPUAPI clusters.GPUAPI

	templatesMu sync.Mutex
	templates   map[int]bool // GPU counts whose claim template exists in Namespace
}

// Stats is what one phase's creation achieved.
type Stats struct {
	Phase string
	// PodGroups and Pods count what Run created; an in-order phase's PodGroups came ahead and are
	// not among them.
	PodGroups int
	Pods      int
	// Jobs counts the Jobs of a Job-driven phase (whose PodGroups and pods the job controller makes).
	Jobs int
	// First and Last are when the first create was sent and the last one returned.
	First, Last time.Time
}

// PodRate is the achieved pod creation rate.
func (s Stats) PodRate() float64 {
	if d := s.Last.Sub(s.First); d > 0 {
		return float64(s.Pods) / d.Seconds()
	}
	return 0
}

// GroupName and PodName name a phase's objects: stable, sortable, and telling which phase made them.
func GroupName(phase string, i int) string { return fmt.Sprintf("%s-%05d", phase, i) }

// PodName names member j of a group.
func PodName(group string, j int) string { return fmt.Sprintf("%s-%d", group, j) }

// Run creates the phase's groups and pods and returns once all are created, or at the first error
// (a failed create is a harness error: the workload would no longer be what the scenario says).
// An in-order phase's PodGroups must exist already (PodGroupsAhead); Run creates its pods.
func (g *Generator) Run(ctx context.Context, ph scenario.Phase) (Stats, error) {
	// Before First: the template is the namespace's setup, once per GPU count, not the phase's load.
	if err := g.ensureClaimTemplate(ctx, ph); err != nil {
		return Stats{Phase: ph.Name}, err
	}
	st := Stats{Phase: ph.Name, First: time.Now()}
	if ph.InOrder {
		var err error
		st.Pods, err = g.podsInOrder(ctx, ph)
		st.Last = time.Now()
		return st, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(g.workers(), ph.Groups) {
		wg.Go(func() {
			for i := range jobs {
				pods, err := g.group(ctx, ph, i)
				mu.Lock()
				st.Pods += pods
				switch {
				case err == nil && ph.ViaJob:
					st.Jobs++
				case err == nil:
					st.PodGroups++
				}
				mu.Unlock()
				if err != nil {
					cancel(err)
				}
			}
		})
	}
	err := g.dispatch(ctx, ph, jobs)
	close(jobs)
	wg.Wait()
	st.Last = time.Now()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return st, cause
	}
	if err != nil {
		return st, err
	}
	return st, ctx.Err()
}

func (g *Generator) workers() int {
	if g.Workers <= 0 {
		return DefaultWorkers
	}
	return g.Workers
}

// dispatch hands out group indexes in order, at once (burst) or paced at the phase's rate. Pacing
// is by deadline (start + i/rate), so a slow create does not push every later arrival back.
func (g *Generator) dispatch(ctx context.Context, ph scenario.Phase, jobs chan<- int) error {
	start := time.Now()
	var timer *time.Timer
	for i := range ph.Groups {
		if ph.GroupsPerSecond > 0 {
			at := start.Add(time.Duration(float64(i) / ph.GroupsPerSecond * float64(time.Second)))
			if wait := time.Until(at); wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					return context.Cause(ctx)
				}
			}
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// group creates PodGroup i and its pods; it returns how many pods it created.
func (g *Generator) group(ctx context.Context, ph scenario.Phase, i int) (int, error) {
	if ph.ViaJob {
		// The job controller creates the pods; the pod watch records them (timeline.ControllerLabel).
		return 0, g.job(ctx, ph, i)
	}
	name := GroupName(ph.Name, i)
	if err := g.podGroup(ctx, ph, i, false); err != nil {
		return 0, err
	}
	if ph.PodsPerGroup <= podFanOut {
		for j := range ph.PodsPerGroup {
			if err := g.pod(ctx, ph, name, j); err != nil {
				return j, err
			}
		}
		return ph.PodsPerGroup, nil
	}
	// Large groups: pods handed out in index order to a few goroutines.
	return g.parallel(ctx, ph.PodsPerGroup, podFanOut, func(j int) error { return g.pod(ctx, ph, name, j) })
}

// podGroup creates PodGroup i of the phase; ahead marks one made before the measured window.
func (g *Generator) podGroup(ctx context.Context, ph scenario.Phase, i int, ahead bool) error {
	name := GroupName(ph.Name, i)
	minCount := int32(0)
	if ph.Policy == scenario.Gang {
		minCount = int32(ph.MinCount)
	}
	pg := scenarios.PodGroup(g.Namespace, scenarios.Group{
		Name: name, MinCount: minCount, DisruptionAll: ph.DisruptionAll, PriorityClassName: ph.PriorityClass,
		Labels: map[string]string{timeline.PhaseLabel: ph.Name}, TopologyKey: ph.TopologyKey,
	})
	err := retry(ctx, func() error {
		_, err := g.podGroups().Create(ctx, pg, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("create PodGroup %s/%s: %w", g.Namespace, name, err)
	}
	disruption := "single"
	if ph.DisruptionAll {
		disruption = "all"
	}
	g.Timeline.Add(timeline.Event{Time: time.Now(), Kind: timeline.PodGroupCreated, Phase: ph.Name, Group: name,
		MinCount: int(minCount), Policy: string(ph.Policy), DisruptionMode: disruption, Ahead: ahead})
	if g.OnGroup != nil {
		g.OnGroup()
	}
	return nil
}

// PodGroupsAhead creates every PodGroup of an in-order phase (arrival: schedulerPerf) before its
// pods, as scheduler_perf's createPodGroups op does before the measured createPods op; Run then
// creates only the pods. For other phases it does nothing: Run creates each PodGroup with its pods.
func (g *Generator) PodGroupsAhead(ctx context.Context, ph scenario.Phase) error {
	if !ph.InOrder {
		return nil
	}
	_, err := g.parallel(ctx, ph.Groups, g.workers(), func(i int) error { return g.podGroup(ctx, ph, i, true) })
	return err
}

// podsInOrder creates an in-order phase's pods: pod k is member k mod podsPerGroup of group k div
// podsPerGroup (scheduler_perf's gang-pod template), indexes handed out in order to
// InOrderParallelism workers, so each gang is whole before much of the next exists.
func (g *Generator) podsInOrder(ctx context.Context, ph scenario.Phase) (int, error) {
	return g.parallel(ctx, ph.Pods(), scenario.InOrderParallelism, func(k int) error {
		return g.pod(ctx, ph, GroupName(ph.Name, k/ph.PodsPerGroup), k%ph.PodsPerGroup)
	})
}

// parallel calls f for 0..n-1, handed out in order to the given number of goroutines; it stops
// handing out at the first error or when ctx ends. It returns how many calls succeeded and the
// first error.
func (g *Generator) parallel(ctx context.Context, n, workers int, f func(int) error) (int, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		done  int
		first error
	)
	next := make(chan int)
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				err := f(i)
				mu.Lock()
				if err == nil {
					done++
				} else if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range n {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = context.Cause(ctx)
	}
	return done, first
}

func (g *Generator) pod(ctx context.Context, ph scenario.Phase, group string, j int) error {
	name := PodName(group, j)
	p := PodFor(g.Namespace, g.SchedulerName, g.GPUAPI, ph, group, j)
	err := retry(ctx, func() error {
		_, err := g.Client.CoreV1().Pods(g.Namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", g.Namespace, name, err)
	}
	g.Timeline.Add(timeline.Event{Time: time.Now(), Kind: timeline.PodCreated, Phase: ph.Name, Group: group, Pod: name})
	if g.OnPod != nil {
		g.OnPod()
	}
	return nil
}

// addRequests adds the phase's cpu and memory requests (the builder sets only GPUs).
func addRequests(p *corev1.Pod, ph scenario.Phase) {
	c := &p.Spec.Containers[0]
	for name, q := range map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: ph.CPU, corev1.ResourceMemory: ph.Memory} {
		if q.IsZero() {
			continue
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[name] = q.DeepCopy()
	}
}

// retry retries creates the apiserver refused for load (429, timeouts, 5xx), with a bounded
// exponential backoff; an object that turns out to exist was created by an earlier attempt whose
// response was lost. A refused or dropped connection is the apiserver being down (a fault
// injection restarting it): that is waited out for up to unreachableBudget, so the burst resumes
// when the apiserver is back instead of failing the run.
func retry(ctx context.Context, create func() error) error {
	backoff := 50 * time.Millisecond
	var err error
	var downSince time.Time
	for attempt := 0; ; attempt++ {
		err = create()
		switch {
		case err == nil:
			return nil
		case attempt > 0 && apierrors.IsAlreadyExists(err):
			return nil
		case unreachable(err):
			if downSince.IsZero() {
				downSince = time.Now()
			}
			if time.Since(downSince) > unreachableBudget {
				return fmt.Errorf("the apiserver was unreachable for %s: %w", unreachableBudget, err)
			}
		case !retriable(err):
			return err
		case attempt >= maxRetries:
			return fmt.Errorf("gave up after %d attempts: %w", attempt+1, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, context.Cause(ctx))
		}
		backoff = min(2*backoff, time.Second)
	}
}

// unreachableBudget is how long creates wait for an apiserver that refuses connections. A restart
// of the local apiserver takes a few seconds; a minute is far beyond it and still fails a run
// whose apiserver died for good.
const unreachableBudget = time.Minute

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

func retriable(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

// unreachable reports errors of a connection that was refused or dropped: no API status at all.
func unreachable(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsProbableEOF(err)
}

// podGroups is where PodGroups go: the served version's client, or v1beta1 through Client.
func (g *Generator) podGroups() gangapi.PodGroups {
	if g.Gang != nil {
		return g.Gang.PodGroups(g.Namespace)
	}
	return g.Client.SchedulingV1beta1().PodGroups(g.Namespace)
}
