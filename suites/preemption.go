package suites

import (
	"context"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/scenarios"
)

// The preemption suite: workload-aware preemption (KEP-5710), gang-semantics §5 and §11.C.16-22.
//
// Preemption by a PodGroup considers every lower-priority pod of the cluster as a potential victim,
// removes them all in a simulation and then reprieves every victim whose return keeps the gang's
// proposed placement feasible. Pods of other lanes sit on nodes this lane's pods cannot use, so they
// are always reprieved: lanes keep isolating tests. PriorityClasses are cluster-scoped, so each
// class is named after its lane and deleted when the step that made it ends (pods and PodGroups keep
// the priority admission resolved at creation).

const (
	preRef = "gang-semantics §11.C."

	// Substrings of what the scheduler writes (gang-semantics §5.1, §5.3).
	msgGroupPreemption = "pod group preemption:"
	msgVictimCondition = "preempting to accommodate a higher priority podgroup"
	msgFoundPlacement  = "pod group preemption: found a placement for podgroup, preempting "
	msgNoVictims       = "No preemption victims found"
	msgNeverEligible   = "pod group preemption: not eligible due to preemptionPolicy=Never."
	msgPodPolicyDenied = "must not be provided in pod spec"

	metricWAPAttempts = "scheduler_workload_preemption_attempts_total"

	// Class values (gang-semantics §11.C.16): victims 100, preemptors 1000, blockers above both.
	lowestValue  = 50
	lowValue     = 100
	highValue    = 1000
	blockerValue = 2000
)

// withClass sets the PriorityClass of members.
func withClass(class string, ms ...scenarios.Member) []scenarios.Member {
	out := slices.Clone(ms)
	for i := range out {
		out[i].PriorityClassName = class
	}
	return out
}

// standalone returns n standalone members <prefix>-0 … of the class.
func standalone(prefix string, n int, gpus int64, class string) []scenarios.Member {
	out := make([]scenarios.Member, n)
	for i := range out {
		out[i] = scenarios.Member{Name: fmt.Sprintf("%s-%d", prefix, i), GPUs: gpus, PriorityClassName: class}
	}
	return out
}

// createGang creates a PodGroup of the class and its members.
func createGang(ctx context.Context, t *testing.T, l *framework.Lane, g scenarios.Group, n int, gpus int64) []string {
	t.Helper()
	l.CreatePodGroup(ctx, t, g)
	ms := withClass(g.PriorityClassName, framework.Members(g.Name, n, gpus)...)
	l.CreatePods(ctx, t, ms...)
	return names(ms)
}

// podRecord is what a watch saw of one pod over its life.
type podRecord struct {
	disruption *corev1.PodCondition // first DisruptionTarget condition seen
	nominated  string               // first non-empty status.nominatedNodeName seen
	nomUnbound bool                 // nominated was seen while the pod was not yet bound
	node       string               // spec.nodeName once bound
	deleted    bool
}

// recorder watches a lane's pods and PodGroups from a point in time, so that short-lived states
// (a victim's DisruptionTarget condition just before its deletion, a preemptor's nominatedNodeName
// that the apiserver clears on binding) are observed deterministically rather than by luck of a poll.
type recorder struct {
	mu        sync.Mutex
	pods      map[string]*podRecord
	pgDisrupt map[string][]metav1.Condition // DisruptionTarget conditions seen on PodGroups
	pgConds   map[string][]string           // every distinct PodGroupInitiallyScheduled status/reason/message seen
	errs      []string
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// startRecorder starts watching. It stops on stop(), after a bounded lifetime, or, unless keep is
// set, when t ends; a kept recorder serves later steps of the feature, and the last one stops it.
func startRecorder(ctx context.Context, t *testing.T, l *framework.Lane, keep bool) *recorder {
	t.Helper()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.Env.Scaled(5*time.Minute))
	r := &recorder{pods: map[string]*podRecord{}, pgDisrupt: map[string][]metav1.Condition{}, pgConds: map[string][]string{}, cancel: cancel}
	if !keep {
		t.Cleanup(r.stop)
	}
	pods := l.Client.CoreV1().Pods(l.Name)
	pl, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("list pods to start a watch: %v", err)
	}
	for i := range pl.Items {
		r.pod(&pl.Items[i], false)
	}
	pgs := l.Gang.PodGroups(l.Name)
	gl, err := pgs.List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("list PodGroups to start a watch: %v", err)
	}
	for i := range gl.Items {
		r.podGroup(&gl.Items[i])
	}
	r.run(wctx, t, pl.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) }, func(obj runtime.Object, typ watch.EventType) {
		if p, ok := obj.(*corev1.Pod); ok {
			r.pod(p, typ == watch.Deleted)
		}
	})
	r.run(wctx, t, gl.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pgs.Watch(ctx, o) }, func(obj runtime.Object, _ watch.EventType) {
		if pg, ok := obj.(*schedv1beta1.PodGroup); ok {
			r.podGroup(pg)
		}
	})
	return r
}

func (r *recorder) run(ctx context.Context, t *testing.T, rv string, w cache.WatchFuncWithContext, handle func(runtime.Object, watch.EventType)) {
	t.Helper()
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: w})
	if err != nil {
		r.cancel()
		t.Fatalf("start watch: %v", err)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					handle(ev.Object, ev.Type)
				case watch.Error:
					r.mu.Lock()
					r.errs = append(r.errs, fmt.Sprintf("%v", apierrors.FromObject(ev.Object)))
					r.mu.Unlock()
				}
			}
		}
	}()
}

func (r *recorder) stop() {
	r.cancel()
	r.wg.Wait()
}

func (r *recorder) pod(p *corev1.Pod, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.pods[p.Name]
	if rec == nil {
		rec = &podRecord{}
		r.pods[p.Name] = rec
	}
	for i := range p.Status.Conditions {
		if c := p.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && rec.disruption == nil {
			rec.disruption = c.DeepCopy()
		}
	}
	if n := p.Status.NominatedNodeName; n != "" && rec.nominated == "" {
		rec.nominated = n
		rec.nomUnbound = p.Spec.NodeName == ""
	}
	if p.Spec.NodeName != "" {
		rec.node = p.Spec.NodeName
	}
	rec.deleted = rec.deleted || deleted
}

func (r *recorder) podGroup(pg *schedv1beta1.PodGroup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range pg.Status.Conditions {
		switch c.Type {
		case schedv1beta1.DisruptionTarget:
			r.pgDisrupt[pg.Name] = append(r.pgDisrupt[pg.Name], c)
		case framework.ConditionType:
			s := fmt.Sprintf("%s/%s %q", c.Status, c.Reason, c.Message)
			if !slices.Contains(r.pgConds[pg.Name], s) {
				r.pgConds[pg.Name] = append(r.pgConds[pg.Name], s)
			}
		}
	}
}

// get returns a copy of the record of a pod (zero if never seen).
func (r *recorder) get(name string) podRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.pods[name]; rec != nil {
		return *rec
	}
	return podRecord{}
}

// preempted lists the watched pods that carried a DisruptionTarget condition, sorted.
func (r *recorder) preempted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n, rec := range r.pods {
		if rec.disruption != nil {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (r *recorder) groupConditions(pg string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pgConds[pg])
}

func (r *recorder) describe(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		rec := r.get(n)
		dt := "none"
		if rec.disruption != nil {
			dt = fmt.Sprintf("%s/%s %q", rec.disruption.Status, rec.disruption.Reason, rec.disruption.Message)
		}
		fmt.Fprintf(&b, "%s: node=%q nominated=%q deleted=%v disruptionTarget=%s; ", n, rec.node, rec.nominated, rec.deleted, dt)
	}
	r.mu.Lock()
	if len(r.errs) > 0 {
		fmt.Fprintf(&b, "watch errors: %v", r.errs)
	}
	r.mu.Unlock()
	return b.String()
}

// waitPreempted waits until the watch saw each named pod deleted, then checks that each carried
// DisruptionTarget=True/PreemptionByScheduler with the podgroup message before it went. Failures are
// reported with t.Error so that the feature's later assertions still run.
func waitPreempted(ctx context.Context, t *testing.T, l *framework.Lane, r *recorder, victims ...string) {
	t.Helper()
	waitVictims(ctx, t, l, r, l.Env.SchedulerName+": "+msgVictimCondition, victims...)
}

// waitVictims is waitPreempted with the DisruptionTarget message the victims must carry (exactly).
func waitVictims(ctx context.Context, t *testing.T, l *framework.Lane, r *recorder, want string, victims ...string) {
	t.Helper()
	err := l.PollSettled(ctx, l.Env.Scaled(90*time.Second), fmt.Sprintf("victims %v deleted", victims), func(context.Context) (bool, string, error) {
		for _, v := range victims {
			if !r.get(v).deleted {
				return false, r.describe(victims...), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Error(err)
	}
	for _, v := range victims {
		rec := r.get(v)
		c := rec.disruption
		switch {
		case c == nil && rec.deleted:
			t.Errorf("victim %s was deleted without a DisruptionTarget condition", v)
		case c == nil:
		case c.Status != corev1.ConditionTrue || c.Reason != corev1.PodReasonPreemptionByScheduler || c.Message != want:
			t.Errorf("victim %s: DisruptionTarget %s/%s %q, want True/%s %q", v, c.Status, c.Reason, c.Message, corev1.PodReasonPreemptionByScheduler, want)
		}
	}
}

// waitPlaced waits until each named pod is bound or nominated (the node a preemption made room on,
// recorded by r, which must have been started before the pods were created), and returns that node
// per pod. A preemptor's placement is decided in the cycle that preempts; its binding can wait for
// the queue (see topology_preemption.go).
func waitPlaced(ctx context.Context, t *testing.T, l *framework.Lane, r *recorder, timeout time.Duration, pods ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	framework.Eventually(ctx, t, timeout, fmt.Sprintf("pods %v bound or nominated", pods), func(ctx context.Context) (bool, string, error) {
		for _, p := range pods {
			rec := r.get(p)
			switch {
			case rec.node != "":
				out[p] = rec.node
			case rec.nominated != "":
				out[p] = rec.nominated
			default:
				return false, r.describe(pods...), nil
			}
		}
		return true, "", nil
	})
	return out
}

// intact reports whether a pod exists, is bound, is not being deleted and has no DisruptionTarget.
func intact(ctx context.Context, l *framework.Lane, name string) (bool, string, error) {
	p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, name + " was deleted", nil
	}
	if err != nil {
		return false, "", err
	}
	if p.DeletionTimestamp != nil {
		return false, name + " is being deleted", nil
	}
	if p.Spec.NodeName == "" {
		return false, name + " is not bound", nil
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return false, fmt.Sprintf("%s has DisruptionTarget %s/%s %q", name, c.Status, c.Reason, c.Message), nil
		}
	}
	return true, "", nil
}

// keepRunning checks that the named pods stay intact for window, that none ever got a
// DisruptionTarget condition or a Preempted event, and that the scheduler was alive throughout
// (a canary binds afterwards).
func keepRunning(ctx context.Context, t *testing.T, l *framework.Lane, r *recorder, window time.Duration, pods ...string) {
	t.Helper()
	framework.Consistently(ctx, t, window, fmt.Sprintf("pods %v intact", pods), func(ctx context.Context) (bool, string, error) {
		for _, p := range pods {
			if ok, why, err := intact(ctx, l, p); !ok || err != nil {
				return ok, why, err
			}
		}
		return true, "", nil
	})
	l.Canary(ctx, t)
	neverDisrupted(ctx, t, l, r, pods...)
}

// neverDisrupted fails for each of the pods the recorder (when given) saw disrupted or deleted, or
// that has a Preempted event: what a window's polls could miss between two reads.
func neverDisrupted(ctx context.Context, t *testing.T, l *framework.Lane, r *recorder, pods ...string) {
	t.Helper()
	for _, p := range pods {
		if r != nil {
			if rec := r.get(p); rec.disruption != nil || rec.deleted {
				t.Errorf("pod %s was disrupted during the run: %s", p, r.describe(p))
			}
		}
		evs, err := l.Events(ctx, p)
		if err != nil {
			t.Fatalf("list events of %s: %v", p, err)
		}
		for _, e := range evs {
			if e.Reason == "Preempted" {
				t.Errorf("pod %s has a Preempted event: %q", p, e.Message)
			}
		}
	}
}

// waitGroupMessage waits until the PodGroup's condition is status/reason with a message containing
// every substring. A timeout is reported with t.Error (later assertions still run) and returns nil.
func waitGroupMessage(ctx context.Context, t *testing.T, l *framework.Lane, timeout time.Duration, group string, status metav1.ConditionStatus, reason string, subs ...string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	last := "PodGroup not read yet"
	err := l.PollSettled(ctx, timeout, fmt.Sprintf("PodGroup %s %s=%s/%s with a message containing %q", group, framework.ConditionType, status, reason, subs), func(ctx context.Context) (bool, string, error) {
		pg, err := l.PodGroup(ctx, group)
		if err != nil {
			// Keep the last condition seen: the final read fails when the deadline passes.
			return false, last, err
		}
		got = framework.GroupCondition(pg)
		last = framework.DescribeCondition(got)
		return got != nil && got.Status == status && got.Reason == reason && framework.ContainsAll(got.Message, subs), last, nil
	})
	if err != nil {
		t.Error(err)
		return nil
	}
	return got
}

// olderThanASecond waits until pod name runs and its start time is at least a second in the past.
// Pod start times have second resolution; the reprieve tests create the victim that must lose first
// and then let the clock pass a second, so that a scheduler ordering victims by start time alone
// (as pod-by-pod preemption does) would pick the other victim.
func olderThanASecond(ctx context.Context, t *testing.T, l *framework.Lane, name string) {
	t.Helper()
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), name+" started more than 1s ago", func(ctx context.Context) (bool, string, error) {
		p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Status.StartTime == nil {
			return false, "no startTime yet", nil
		}
		return time.Since(p.Status.StartTime.Time) > 1100*time.Millisecond, "startTime " + p.Status.StartTime.String(), nil
	})
}

// wapSnapshot scrapes the scheduler for scheduler_workload_preemption_attempts_total; the error
// says why it could not.
func wapSnapshot(ctx context.Context, l *framework.Lane) (*metrics.Snapshot, error) {
	return l.Env.SchedulerMetrics(ctx)
}

func preemptionFeatures() []framework.Feature {
	return slices.Concat(
		fullPreemptionFeature(),
		onlyIfFitsFeature(),
		disruptionModeFeatures(),
		reprieveFeatures(),
		preemptorFeatures(),
		equalPriorityFeature(),
		preemptNeverFeature(),
		preemptionVictimFeatures(),
		preemptionOngoingFeatures(),
		preemptionSplitFeatures(),
	)
}

// fullPreemptionFeature is §11.C.16: a gang of 1000 preempts full nodes of standalone pods of 100.
func fullPreemptionFeature() []framework.Feature {
	const (
		gang    = "gang"
		victims = 4
	)
	var (
		rec       *recorder
		pgUID     string
		gangPods  []string
		victimSet []string
		before    *metrics.Snapshot
		beforeErr error
	)
	stopRec := func() {
		if rec != nil {
			rec.stop()
		}
	}
	return []framework.Feature{{
		Suite: "preemption", Name: "a gang preempts lower-priority standalone pods", Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 4},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-01", Statement: "victims get DisruptionTarget=True/PreemptionByScheduler '…preempting to accommodate a higher priority podgroup', then are deleted", Ref: preRef + "16; §5.3"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					low := l.PriorityClass(ctx, t, "low", lowValue, false)
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					vs := standalone("victim", victims, 2, low)
					l.CreatePods(ctx, t, vs...)
					victimSet = names(vs)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), victimSet...)
					rec = startRecorder(ctx, t, l, true)
					before, beforeErr = wapSnapshot(ctx, l)
					gangPods = createGang(ctx, t, l, scenarios.Group{Name: gang, MinCount: 2, PriorityClassName: high}, 2, 4)
					pg, err := l.PodGroup(ctx, gang)
					if err != nil {
						t.Fatalf("get PodGroup %s: %v", gang, err)
					}
					pgUID = string(pg.UID)
					waitPreempted(ctx, t, l, rec, victimSet...)
				}},
			{A: framework.Assertion{ID: "PRE-02", Statement: "each victim gets a Preempted event 'Preempted by podgroup <PodGroup UID> on node cluster' related to the PodGroup", Ref: preRef + "16; §5.3, §7"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if pgUID == "" {
						t.Fatal("the gang was not created (PRE-01 failed early)")
					}
					want := "Preempted by podgroup " + pgUID + " on node cluster"
					// One wait for all victims: the events of one preemption arrive together.
					found := map[string]corev1.Event{}
					seen := "no events listed yet"
					err := l.PollSettled(ctx, l.Env.Scaled(30*time.Second), fmt.Sprintf("a Preempted event containing %q on each of %v", want, victimSet), func(ctx context.Context) (bool, string, error) {
						evs, err := l.Events(ctx, "")
						if err != nil {
							return false, seen, err
						}
						msgs := map[string][]string{}
						for _, e := range evs {
							if e.Reason != "Preempted" || !slices.Contains(victimSet, e.InvolvedObject.Name) {
								continue
							}
							msgs[e.InvolvedObject.Name] = append(msgs[e.InvolvedObject.Name], e.Message)
							if strings.Contains(e.Message, want) {
								found[e.InvolvedObject.Name] = e
							}
						}
						seen = fmt.Sprintf("Preempted events per victim: %q", msgs)
						return len(found) == len(victimSet), seen, nil
					})
					if err != nil {
						t.Error(err)
					}
					for v, e := range found {
						if e.Related == nil || e.Related.Kind != "PodGroup" || e.Related.Name != gang {
							why := ""
							if e.Related == nil && e.EventTime.IsZero() {
								// A core/v1 event: the scheduler's events.k8s.io/v1 discovery failed when
								// it started (before its apiserver answered), and that path drops related.
								why = " (a core/v1 event, which has no related object: the scheduler fell back to core/v1 events, which it does when events.k8s.io/v1 was not served as it started)"
							}
							t.Errorf("Preempted event of %s: related %+v, want PodGroup %s%s", v, e.Related, gang, why)
						}
					}
				}},
			{A: framework.Assertion{ID: "PRE-03", Statement: "preemptor pods get status.nominatedNodeName on a lane node before they bind", Ref: preRef + "16; §5.4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if rec == nil {
						t.Fatal("no watch (PRE-01 failed early)")
					}
					err := framework.Poll(ctx, l.Env.Scaled(90*time.Second), fmt.Sprintf("the watch to see %v nominated or bound", gangPods), func(context.Context) (bool, string, error) {
						for _, p := range gangPods {
							if r := rec.get(p); r.node == "" && r.nominated == "" {
								return false, rec.describe(gangPods...), nil
							}
						}
						return true, "", nil
					})
					if err != nil {
						t.Error(err)
					}
					for _, p := range gangPods {
						r := rec.get(p)
						switch {
						case r.nominated == "" && r.node == "":
						case r.nominated == "":
							t.Errorf("%s bound to %s without ever having status.nominatedNodeName", p, r.node)
						case !r.nomUnbound:
							t.Errorf("%s got nominatedNodeName %s only after binding", p, r.nominated)
						case !slices.Contains(l.Nodes, r.nominated):
							t.Errorf("%s nominated to %s, not a node of lane %v", p, r.nominated, l.Nodes)
						default:
							t.Logf("%s nominated to %s, bound to %s", p, r.nominated, r.node)
						}
					}
				}},
			{A: framework.Assertion{ID: "PRE-04", Statement: "while victims go, the PodGroup reads False/Unschedulable 'pod group preemption: found a placement for podgroup, preempting 4 victims'", Ref: preRef + "16; §3.4, §5.1"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if rec == nil {
						t.Fatal("no watch (PRE-01 failed early)")
					}
					want := fmt.Sprintf("%s%d victims", msgFoundPlacement, victims)
					err := l.PollSettled(ctx, l.Env.Scaled(30*time.Second), "a False/Unschedulable condition containing "+want, func(context.Context) (bool, string, error) {
						seen := rec.groupConditions(gang)
						for _, s := range seen {
							if strings.HasPrefix(s, "False/Unschedulable ") && strings.Contains(s, want) {
								return true, "", nil
							}
						}
						return false, fmt.Sprintf("conditions seen: %q", seen), nil
					})
					if err != nil {
						t.Error(err)
					}
				}},
			{A: framework.Assertion{ID: "PRE-05", Statement: "the preempting gang ends fully bound and its PodGroup True/Scheduled", Ref: preRef + "16; §4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer stopRec()
					if len(gangPods) == 0 {
						t.Fatal("the gang was not created (PRE-01 failed early)")
					}
					err := l.PollSettled(ctx, l.Env.Scaled(60*time.Second), fmt.Sprintf("%v bound", gangPods), func(ctx context.Context) (bool, string, error) {
						o, err := l.Observe(ctx)
						if err != nil {
							return false, "", err
						}
						return o.Bound(gang) == len(gangPods), o.String(), nil
					})
					if err != nil {
						t.Error(err)
					}
					waitGroupMessage(ctx, t, l, l.Env.Scaled(30*time.Second), gang, metav1.ConditionTrue, "Scheduled")
				}},
			{A: framework.Assertion{ID: "PRE-06", Statement: "scheduler_workload_preemption_attempts_total{result=\"Success\"} rises", Ref: preRef + "16; §6.1"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if beforeErr != nil {
						t.Skipf("scheduler metrics: %v", beforeErr)
					}
					if before == nil {
						t.Fatal("no scrape before the preemption (PRE-01 failed early)")
					}
					match := map[string]string{"result": "Success"}
					last := "not scraped yet"
					l.EventuallySettled(ctx, t, l.Env.Scaled(30*time.Second), metricWAPAttempts+`{result="Success"} to rise`, func(ctx context.Context) (bool, string, error) {
						after, err := wapSnapshot(ctx, l)
						if err != nil {
							return false, last, err
						}
						d, err := metrics.Delta(before, after, metricWAPAttempts, match)
						if err != nil {
							last = err.Error()
							return false, last, nil
						}
						last = fmt.Sprintf("delta %v", d)
						return d > 0, last, nil
					})
				}},
		},
	}}
}

// onlyIfFitsFeature is §11.C.17: nothing is preempted when the gang would not fit anyway.
func onlyIfFitsFeature() []framework.Feature {
	const gang = "gang"
	var rec *recorder
	var gangPods []string
	return []framework.Feature{{
		Suite: "preemption", Name: "no preemption unless the gang then fits", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 4},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-07", Statement: "a gang that cannot reach minCount even with every lower-priority pod gone is False/Unschedulable with 'pod group preemption:' and no placement found", Ref: preRef + "17; §5.1"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					low := l.PriorityClass(ctx, t, "low", lowValue, false)
					high := l.PriorityClass(ctx, t, "high", highValue, false)
					top := l.PriorityClass(ctx, t, "top", blockerValue, false)
					// 4 GPUs: 2 held by a pod above the gang, 2 by a victim below it; the gang needs 4.
					l.CreatePods(ctx, t, scenarios.Member{Name: "blocker", GPUs: 2, PriorityClassName: top}, scenarios.Member{Name: "victim", GPUs: 2, PriorityClassName: low})
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "blocker", "victim")
					rec = startRecorder(ctx, t, l, true)
					gangPods = createGang(ctx, t, l, scenarios.Group{Name: gang, MinCount: 2, PriorityClassName: high}, 2, 2)
					c := waitGroupMessage(ctx, t, l, l.Env.Scaled(60*time.Second), gang, metav1.ConditionFalse, "Unschedulable", msgGroupPreemption)
					if c != nil && strings.Contains(c.Message, "found a placement") {
						t.Errorf("message %q says a placement was found", c.Message)
					}
				}},
			{A: framework.Assertion{ID: "PRE-08", Statement: "then no pod is preempted: the victim and the blocker keep running through the window", Ref: preRef + "17; §5.1"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if rec == nil {
						t.Fatal("no watch (PRE-07 failed early)")
					}
					defer rec.stop()
					l.WaitDecided(ctx, t, l.Env.Scaled(60*time.Second), gangPods...)
					keepRunning(ctx, t, l, rec, l.Env.Scaled(6*time.Second), "victim", "blocker")
					if o, err := l.Observe(ctx); err == nil && o.Bound(gang) != 0 {
						t.Errorf("gang pods bound: %s", o)
					}
				}},
		},
	}}
}

// disruptionModeFeatures is §11.C.18 and C.22: a victim group in mode all goes whole, across nodes;
// in mode single only what the preemptor needs goes. Victim PodGroups get no condition.
func disruptionModeFeatures() []framework.Feature {
	lane := framework.LaneSpec{Nodes: 2, GPUsPerNode: 2}
	// victimsAndPreemptor fills both nodes with a low-priority gang of two full-node members, then
	// adds a one-pod high-priority gang that needs one node, and waits until that pod binds.
	// The recorder is stored in *rp as soon as it runs; it is kept past t when keep is set.
	victimsAndPreemptor := func(ctx context.Context, t *testing.T, l *framework.Lane, all, keep bool, rp **recorder) string {
		t.Helper()
		low := l.PriorityClass(ctx, t, "low", lowValue, false)
		high := l.PriorityClass(ctx, t, "high", highValue, false)
		createGang(ctx, t, l, scenarios.Group{Name: "victims", MinCount: 2, DisruptionAll: all, PriorityClassName: low}, 2, 2)
		l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "victims-0", "victims-1")
		*rp = startRecorder(ctx, t, l, keep)
		createGang(ctx, t, l, scenarios.Group{Name: "preemptor", MinCount: 1, PriorityClassName: high}, 1, 2)
		l.WaitBound(ctx, t, l.Env.Scaled(90*time.Second), "preemptor-0")
		p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, "preemptor-0", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get preemptor-0: %v", err)
		}
		return p.Spec.NodeName
	}
	var allRec *recorder
	return []framework.Feature{
		{
			Suite: "preemption", Name: "victim group with disruptionMode all", Lane: lane,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-09", Statement: "a victim gang in disruptionMode all is preempted whole, its member on the other node too, though the preemptor needs one node", Ref: preRef + "18; §5.2"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						node := victimsAndPreemptor(ctx, t, l, true, true, &allRec)
						waitPreempted(ctx, t, l, allRec, "victims-0", "victims-1")
						t.Logf("preemptor bound to %s; %s", node, allRec.describe("victims-0", "victims-1"))
						other := 0
						for _, v := range []string{"victims-0", "victims-1"} {
							if n := allRec.get(v).node; n != "" && n != node {
								other++
							}
						}
						if other != 1 {
							t.Errorf("want one victim on the node the preemptor did not take; victims: %s", allRec.describe("victims-0", "victims-1"))
						}
					}},
				{A: framework.Assertion{ID: "PRE-10", Statement: "victim PodGroups never get a DisruptionTarget condition", Ref: preRef + "22; §4, §5.3"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						if allRec == nil {
							t.Fatal("no watch (PRE-09 failed early)")
						}
						// The victims are gone by now: whatever the scheduler wrote for the preemption
						// it has written. The PodGroup itself stays (only its pods are deleted).
						pg, err := l.PodGroup(ctx, "victims")
						if err != nil {
							t.Fatalf("get PodGroup victims: %v", err)
						}
						allRec.stop()
						for _, c := range pg.Status.Conditions {
							if c.Type == schedv1beta1.DisruptionTarget {
								t.Errorf("PodGroup victims has condition %s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message)
							}
						}
						allRec.mu.Lock()
						defer allRec.mu.Unlock()
						for name, cs := range allRec.pgDisrupt {
							t.Errorf("the watch saw PodGroup %s with DisruptionTarget conditions %+v", name, cs)
						}
					}},
			},
		},
		{
			Suite: "preemption", Name: "victim group with disruptionMode single", Lane: lane,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-11", Statement: "from a victim gang in disruptionMode single exactly the one member the preemptor needs is preempted; the other keeps running", Ref: preRef + "18; §5.2"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						var r *recorder
						node := victimsAndPreemptor(ctx, t, l, false, false, &r)
						var gone, kept string
						for _, v := range []string{"victims-0", "victims-1"} {
							if r.get(v).node == node {
								gone = v
							} else {
								kept = v
							}
						}
						if gone == "" || kept == "" {
							t.Fatalf("preemptor on %s; cannot tell the victims apart: %s", node, r.describe("victims-0", "victims-1"))
						}
						waitPreempted(ctx, t, l, r, gone)
						keepRunning(ctx, t, l, r, l.Env.Scaled(6*time.Second), kept)
						if p := r.preempted(); len(p) != 1 {
							t.Errorf("want exactly 1 preempted pod, the watch saw %v", p)
						}
					}},
			},
		},
	}
}

// reprieveFeatures is §11.C.19 [inference in the spec]: among equal-priority victims the more
// important ones are reprieved first, so the less important one is preempted.
func reprieveFeatures() []framework.Feature {
	lane := framework.LaneSpec{Nodes: 1, GPUsPerNode: 4}
	// preemptAndCheck adds a one-pod gang of the high class needing 2 GPUs and checks that exactly
	// lose was preempted and keep survived.
	preemptAndCheck := func(ctx context.Context, t *testing.T, l *framework.Lane, high string, lose string, keep []string) {
		t.Helper()
		r := startRecorder(ctx, t, l, false)
		createGang(ctx, t, l, scenarios.Group{Name: "preemptor", MinCount: 1, PriorityClassName: high}, 1, 2)
		l.WaitBound(ctx, t, l.Env.Scaled(90*time.Second), "preemptor-0")
		waitPreempted(ctx, t, l, r, lose)
		keepRunning(ctx, t, l, r, l.Env.Scaled(3*time.Second), keep...)
		if p := r.preempted(); !slices.Equal(p, []string{lose}) {
			t.Errorf("want only %s preempted, the watch saw %v", lose, p)
		}
	}
	return []framework.Feature{
		{
			Suite: "preemption", Name: "reprieve: a standalone pod goes before a PodGroup member", Lane: lane,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-12", Statement: "of an equal-priority standalone pod and PodGroup member, the standalone pod is preempted (even when it is older)", Ref: preRef + "19; §5.1 reprieve"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						low := l.PriorityClass(ctx, t, "low", lowValue, false)
						high := l.PriorityClass(ctx, t, "high", highValue, false)
						l.CreatePods(ctx, t, scenarios.Member{Name: "standalone", GPUs: 2, PriorityClassName: low})
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "standalone")
						olderThanASecond(ctx, t, l, "standalone")
						createGang(ctx, t, l, scenarios.Group{Name: "member", MinCount: 1, PriorityClassName: low}, 1, 2)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "member-0")
						preemptAndCheck(ctx, t, l, high, "standalone", []string{"member-0"})
					}},
			},
		},
		{
			Suite: "preemption", Name: "reprieve: a PodDisruptionBudget is respected before priority", Lane: lane,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-23", Statement: "of two standalone victims that each free enough, the one a PodDisruptionBudget protects (disruptionsAllowed 0) is reprieved even though its priority is the lower; the unprotected one is preempted", Ref: preRef + "19; §5.1 reprieve (PDB-violating victims are tried first); §5.5"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						lowest := l.PriorityClass(ctx, t, "lowest", lowestValue, false)
						low := l.PriorityClass(ctx, t, "low", lowValue, false)
						high := l.PriorityClass(ctx, t, "high", highValue, false)
						// By priority alone "plain" (100) is the more important victim and would be
						// reprieved, "guarded" (50) preempted; the budget must reverse that.
						guarded := scenarios.Member{Name: "guarded", GPUs: 2, PriorityClassName: lowest, Labels: map[string]string{"app": "guarded"}}
						plain := scenarios.Member{Name: "plain", GPUs: 2, PriorityClassName: low}
						l.CreatePods(ctx, t, guarded, plain)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), guarded.Name, plain.Name)
						prePDB(ctx, t, l, "guarded", map[string]string{"app": "guarded"})
						preemptAndCheck(ctx, t, l, high, plain.Name, []string{guarded.Name})
					}},
			},
		},
		{
			Suite: "preemption", Name: "reprieve: a smaller group goes before a larger one", Lane: lane,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "PRE-13", Statement: "of two equal-priority disruptionMode-all groups that each free enough, the one with fewer pods is preempted (even when it is older)", Ref: preRef + "19; §5.1 reprieve"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						low := l.PriorityClass(ctx, t, "low", lowValue, false)
						high := l.PriorityClass(ctx, t, "high", highValue, false)
						// small: 1 pod × 2 GPUs; big: 2 pods × 1 GPU. Either frees the 2 GPUs needed.
						createGang(ctx, t, l, scenarios.Group{Name: "small", MinCount: 1, DisruptionAll: true, PriorityClassName: low}, 1, 2)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "small-0")
						olderThanASecond(ctx, t, l, "small-0")
						createGang(ctx, t, l, scenarios.Group{Name: "big", MinCount: 2, DisruptionAll: true, PriorityClassName: low}, 2, 1)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "big-0", "big-1")
						preemptAndCheck(ctx, t, l, high, "small-0", []string{"big-0", "big-1"})
					}},
			},
		},
	}
}

// prePDB creates a PodDisruptionBudget of minAvailable 1 over the selected pods and waits until
// the disruption controller reports that none may be disrupted, so that the scheduler's view of it
// is settled before a preemptor arrives (gang-semantics §5.1 reads status.disruptionsAllowed).
func prePDB(ctx context.Context, t *testing.T, l *framework.Lane, name string, selector map[string]string) {
	t.Helper()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.Name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: selector}},
	}
	if _, err := l.Client.PolicyV1().PodDisruptionBudgets(l.Name).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodDisruptionBudget %s: %v", name, err)
	}
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "PodDisruptionBudget "+name+" observed with 1 healthy pod and 0 disruptions allowed", func(ctx context.Context) (bool, string, error) {
		got, err := l.Client.PolicyV1().PodDisruptionBudgets(l.Name).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := got.Status
		state := fmt.Sprintf("observedGeneration %d, currentHealthy %d, disruptionsAllowed %d", st.ObservedGeneration, st.CurrentHealthy, st.DisruptionsAllowed)
		return st.ObservedGeneration == got.Generation && st.CurrentHealthy == 1 && st.DisruptionsAllowed == 0, state, nil
	})
}

// equalPriorityFeature is §11.C.20. The shared priority is 0, the lowest any pod of the cluster has,
// so "no victims" holds cluster-wide and not only on this lane (group preemption looks cluster-wide).
func equalPriorityFeature() []framework.Feature {
	const gang = "gang"
	var gangPods []string
	return []framework.Feature{{
		Suite: "preemption", Name: "equal priority never preempts", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 4},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-14", Statement: "a gang whose priority equals the running pods' is False/Unschedulable with 'pod group preemption: No preemption victims found'", Ref: preRef + "20; §5.1"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					eq := l.PriorityClass(ctx, t, "eq", 0, false)
					l.CreatePods(ctx, t, standalone("victim", 2, 2, eq)...)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "victim-0", "victim-1")
					gangPods = createGang(ctx, t, l, scenarios.Group{Name: gang, MinCount: 2, PriorityClassName: eq}, 2, 2)
					waitGroupMessage(ctx, t, l, l.Env.Scaled(60*time.Second), gang, metav1.ConditionFalse, "Unschedulable", msgGroupPreemption+" "+msgNoVictims)
				}},
			{A: framework.Assertion{ID: "PRE-15", Statement: "then the equal-priority pods keep running through the window", Ref: preRef + "20; §5.1"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if len(gangPods) == 0 {
						t.Fatal("the gang was not created (PRE-14 failed early)")
					}
					l.WaitDecided(ctx, t, l.Env.Scaled(60*time.Second), gangPods...)
					keepRunning(ctx, t, l, nil, l.Env.Scaled(6*time.Second), "victim-0", "victim-1")
				}},
		},
	}}
}

// preemptNeverFeature is §11.C.21 (PodGroupPreemptionPolicy off: the group inherits Never from its
// pods, which get it from their class).
func preemptNeverFeature() []framework.Feature {
	const gang = "gang"
	var gangPods []string
	return []framework.Feature{{
		Suite: "preemption", Name: "preemptionPolicy Never", Lane: framework.LaneSpec{Nodes: 1, GPUsPerNode: 4},
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "PRE-16", Statement: "a gang whose class has preemptionPolicy Never reads 'pod group preemption: not eligible due to preemptionPolicy=Never.'", Ref: preRef + "21; §5.1"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					low := l.PriorityClass(ctx, t, "low", lowValue, false)
					never := l.PriorityClass(ctx, t, "never", highValue, true)
					l.CreatePods(ctx, t, standalone("victim", 2, 2, low)...)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), "victim-0", "victim-1")
					// The group's own policy said explicitly: with PodGroupPreemptionPolicy on, Priority
					// admission refuses a Never class beside the defaulted PreemptLowerPriority (PPOL-02);
					// with it off the apiserver drops the field.
					gangPods = createGang(ctx, t, l, scenarios.Group{Name: gang, MinCount: 2, PriorityClassName: never, PreemptionPolicy: schedv1beta1.PreemptNever}, 2, 2)
					waitGroupMessage(ctx, t, l, l.Env.Scaled(60*time.Second), gang, metav1.ConditionFalse, "Unschedulable", msgNeverEligible)
				}},
			{A: framework.Assertion{ID: "PRE-17", Statement: "then the lower-priority pods keep running through the window", Ref: preRef + "21; §5.1"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if len(gangPods) == 0 {
						t.Fatal("the gang was not created (PRE-16 failed early)")
					}
					l.WaitDecided(ctx, t, l.Env.Scaled(60*time.Second), gangPods...)
					keepRunning(ctx, t, l, nil, l.Env.Scaled(6*time.Second), "victim-0", "victim-1")
				}},
			{A: framework.Assertion{ID: "PRE-18", Statement: "Priority admission rejects a pod that sets preemptionPolicy against its class: '… must not be provided in pod spec'", Ref: preRef + "21; §1.4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					never := l.PriorityClass(ctx, t, "never-adm", highValue, true)
					p := l.Pod(scenarios.Member{Name: "policy-mismatch", GPUs: 1, PriorityClassName: never})
					lower := corev1.PreemptLowerPriority
					p.Spec.PreemptionPolicy = &lower
					_, err := l.Client.CoreV1().Pods(l.Name).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					if err == nil {
						t.Fatalf("pod with preemptionPolicy %s and class %s (Never) was accepted", lower, never)
					}
					if !strings.Contains(err.Error(), msgPodPolicyDenied) {
						t.Errorf("rejected with %q, want it to contain %q", err, msgPodPolicyDenied)
					}
				}},
		},
	}}
}
