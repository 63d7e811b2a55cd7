package suites

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// How v1.37.2 retries a gang that cannot be placed, and that doing so does not starve lower-priority
// work (gang-semantics §3.7). Read from pkg/scheduler of k8s.io/kubernetes@v1.37.2:
//
//   - After an unschedulable cycle the group is never parked in the unschedulable pool, as a pod
//     would be: AddAttemptedPodGroupIfNeeded raises its UnschedulableCount, stamps it with the time
//     and moves it to the backoff queue (backend/queue/scheduling_queue.go:1224-1261; §3.7 of the
//     reference says "backoffQ/unschedulable" and "wakes up on the pods' queueing hints": not so). Pod groups have
//     no queueing hints of their own (the TODO at :1317), so cluster events neither requeue it nor
//     are needed: it is retried on a timer alone, and a test needs to drive nothing.
//   - The group's own UnschedulablePlugins are never set (only its pods' are), so the backoff queue
//     files it in its error heap (backoff_queue.go:306-307). SchedulerPopFromBackoffQ (beta, on)
//     pops only the other heap early when activeQ is empty (active_queue.go:327, :345;
//     backoff_queue.go:369-374), so an idle scheduler does not retry the group before its backoff.
//   - The backoff is podInitialBackoff·2^(n-1) after the n-th unschedulable cycle, capped at
//     podMaxBackoff·√(pods in the group) (backoff_queue.go:249-262): 1, 2, 4, 8, 16, then 17.3 s for
//     a gang of 3. The defaults are 1 s and 10 s (scheduling_queue.go:78, :82); gangbench's clusters
//     give the scheduler no --config (clusters/local/flags.go, kubeadm's defaults on kind).
//   - The expiry is truncated to the whole second, and the group leaves the queue at the first
//     once-a-second flush after it (backoff_queue.go:142-147, :213-217; scheduling_queue.go:509-510,
//     :1289-1302): the next cycle starts more than the backoff and at most about 1 s more after the
//     previous one ended. The cycle counter is raised before the requeue (schedule_one_podgroup.go:931
//     then :937), so the time between two counter increments is longer than the backoff.
//   - Queued entities are ordered by priority (the PodGroup's); a group that waits in the backoff
//     queue is not in activeQ, so pods and gangs of any priority that arrive meanwhile are popped
//     before it.
//
// The cycles are counted from scheduler_podgroup_schedule_attempts_total{result="unschedulable"},
// which is cluster-wide: the features are Serial, and each first waits until no other pod group is
// queued anywhere.

const (
	// mbInitialBackoff and mbMaxBackoff are the scheduler's defaults (podInitialBackoffSeconds,
	// podMaxBackoffSeconds).
	mbInitialBackoff = 1 * time.Second
	mbMaxBackoff     = 10 * time.Second
	// mbFlushWindow is the backoff queue's ordering window and flush period: a retry comes up to
	// this much after the backoff has run out.
	mbFlushWindow = time.Second
	// mbRetrySlack is what a loaded 2-core machine may add to a retry (the flush goroutine, Pop and
	// the cycle itself wait for a CPU; make test runs packages side by side, measured late by up to
	// 0.5 s on an idle machine). A wrong backoff shows as early retries (the lower bound, which no
	// load can break) or none at all, so the upper bound can be generous. A pass threshold, not
	// scaled by -timeout-scale.
	mbRetrySlack = 4 * time.Second
	// mbWindow is how long after its first cycle a blocked gang's cycles are counted. v1.37.2 makes
	// its 6th cycle more than 1+2+4+8+16 = 31 s after the 1st, so at most 5 fall in it; a gang that
	// is never backed off has hundreds, one that waits for an event or the 5-minute flush has 1.
	mbWindow = 30 * time.Second
	// mbPromptBound is how soon lower-priority work that fits must bind while a higher-priority gang
	// is blocked. It binds at once on v1.37.2; the bound is generous for a loaded machine and well
	// below the blocked gang's later backoffs (16-17 s), so a scheduler that lets other work through
	// only when the gang's backoff runs out fails it too. A threshold, not scaled.
	mbPromptBound = 10 * time.Second
	// mbScrapeEvery is how often the trace scrapes the scheduler's metrics: well under the 1 s
	// shortest backoff, so every retry shows as a step of its own.
	mbScrapeEvery = 200 * time.Millisecond
	mbGangSize    = 3
	mbGangGPUs    = 4
)

var (
	mbGroupUnschedulable = map[string]string{"result": "unschedulable"}
	mbGroupWaiting       = map[string]string{"result": "waiting_on_preemption"}
)

// mbBackoff is v1.37.2's backoff after the n-th unschedulable cycle of a group of size pods
// (backoff_queue.go:249-262).
func mbBackoff(n, size int) time.Duration {
	maxBackoff := mbMaxBackoff
	if size > 1 {
		maxBackoff = time.Duration(float64(maxBackoff) * math.Sqrt(float64(size)))
	}
	shift := n - 1
	if mbInitialBackoff > maxBackoff>>shift {
		return maxBackoff
	}
	return mbInitialBackoff << shift
}

// mbSample is one scrape of the scheduler's metrics: the values it read were current at some instant
// between start and end.
type mbSample struct {
	start, end time.Time
	cycles     float64 // scheduler_podgroup_schedule_attempts_total{result="unschedulable"}
	backoff    float64 // scheduler_queued_entities{queue="backoff",type="podgroup"}
	unsched    float64 // scheduler_queued_entities{queue="unschedulable",type="podgroup"}
	groups     float64 // scheduler_queued_entities{type="podgroup"}, all queues
}

// mbTrace is the history of a blocked gang's cycles, and what its members did meanwhile.
type mbTrace struct {
	base    float64    // the cycle counter before the gang existed
	samples []mbSample // samples[0] is the scrape taken before the gang was created
	bound   []string   // members seen bound at any poll
	pods    string     // the members' state at the last poll
	cond    string     // the PodGroup's condition at the last poll
}

func mbScrape(ctx context.Context, l *framework.Lane) (mbSample, error) {
	s := mbSample{start: time.Now()}
	snap, err := l.Env.SchedulerMetrics(ctx)
	s.end = time.Now()
	if err != nil {
		return s, err
	}
	// A counter vector has no series, and so no family in the scrape, until its first increment: on
	// a scheduler that has not yet run a pod-group cycle it is absent, and 0. A scheduler that never
	// exports it fails the wait for the gang's first cycle.
	s.cycles, _ = snap.Sum(obsGroupAttempts, mbGroupUnschedulable)
	s.backoff, _ = snap.Sum("scheduler_queued_entities", map[string]string{"queue": "backoff", "type": "podgroup"})
	s.unsched, _ = snap.Sum("scheduler_queued_entities", map[string]string{"queue": "unschedulable", "type": "podgroup"})
	s.groups, _ = snap.Sum("scheduler_queued_entities", map[string]string{"type": "podgroup"})
	return s, nil
}

// first returns the index of the first sample that shows the k-th cycle (k ≥ 1), or -1.
func (tr *mbTrace) first(k int) int {
	for i, s := range tr.samples {
		if s.cycles-tr.base >= float64(k) {
			return i
		}
	}
	return -1
}

// gap bounds the time between the counter increments of the k-th and (k+1)-th cycle: the k-th
// happened after samples[a-1] was read and before samples[a] was, and likewise for b.
func (tr *mbTrace) gap(k int) (lo, hi time.Duration, ok bool) {
	a, b := tr.first(k), tr.first(k+1)
	if a < 1 || b < 1 {
		return 0, 0, false
	}
	return tr.samples[b-1].start.Sub(tr.samples[a].end), tr.samples[b].end.Sub(tr.samples[a-1].start), true
}

// start is the earliest the first cycle can have been counted.
func (tr *mbTrace) start() time.Time {
	if a := tr.first(1); a >= 1 {
		return tr.samples[a-1].start
	}
	return time.Time{}
}

// within is how many cycles were counted by the last sample read entirely within d of start().
func (tr *mbTrace) within(d time.Duration) int {
	end := tr.start().Add(d)
	n := 0.0
	for _, s := range tr.samples {
		if s.end.After(end) {
			break
		}
		n = s.cycles - tr.base
	}
	return int(n)
}

func (tr *mbTrace) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d cycle(s) counted", int(tr.samples[len(tr.samples)-1].cycles-tr.base))
	t0 := tr.start()
	if t0.IsZero() {
		return b.String()
	}
	b.WriteString(" at")
	for k := 1; ; k++ {
		i := tr.first(k)
		if i < 1 || k > 12 {
			break
		}
		fmt.Fprintf(&b, " %.1f-%.1fs", tr.samples[i-1].start.Sub(t0).Seconds(), tr.samples[i].end.Sub(t0).Seconds())
	}
	fmt.Fprintf(&b, " after the first; members: %s; PodGroup: %s", tr.pods, tr.cond)
	return b.String()
}

// mbQuiet waits until no pod group is queued anywhere in the scheduler, twice a second apart with no
// pod-group cycle in between, so the cycles counted next are the lane's own. The features are
// Serial, but a group of an earlier feature's lane is retried until the namespace controller has
// deleted its pods.
func mbQuiet(ctx context.Context, t *testing.T, l *framework.Lane) mbSample {
	t.Helper()
	if _, err := l.Env.SchedulerMetrics(ctx); errors.Is(err, framework.ErrNoSchedulerMetrics) {
		t.Skipf("not judged: %v, and the pod-group cycles are counted from its metrics", err)
	}
	var prev, cur mbSample
	framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), "no pod group queued in the scheduler for a second", func(ctx context.Context) (bool, string, error) {
		var err error
		if cur, err = mbScrape(ctx, l); err != nil {
			return false, "", err
		}
		if cur.groups != 0 {
			prev = mbSample{}
			return false, fmt.Sprintf("scheduler_queued_entities{type=\"podgroup\"} = %g", cur.groups), nil
		}
		if prev.end.IsZero() || prev.cycles != cur.cycles {
			prev = cur
			return false, "no pod group queued; checking it stays so", nil
		}
		return cur.start.Sub(prev.end) >= time.Second, "no pod group queued", nil
	})
	return cur
}

// mbTraceCycles creates nothing: it scrapes the cycle counter every mbScrapeEvery from base until
// the first cycle (within firstWithin), then until mbWindow after it, or until cycle `until` has
// been seen if that is later (at most 10 s later still). Each poll also reads the members and the
// PodGroup. A failed scrape is retried (the bounds of the gaps only widen); failing for 5 s fails.
func mbTraceCycles(ctx context.Context, t *testing.T, l *framework.Lane, base mbSample, group string, members []string, firstWithin time.Duration, until int) *mbTrace {
	t.Helper()
	tr := &mbTrace{base: base.cycles, samples: []mbSample{base}}
	deadline := time.Now().Add(firstWithin)
	lastOK := time.Now()
	var lastErr error
	tick := time.NewTicker(mbScrapeEvery)
	defer tick.Stop()
	nextPods := time.Time{}
	for {
		s, err := mbScrape(ctx, l)
		if err != nil {
			lastErr = err
			if time.Since(lastOK) > 5*time.Second {
				t.Fatalf("could not scrape the scheduler's metrics for %s while tracing the gang's cycles: %v", time.Since(lastOK).Round(time.Millisecond), lastErr)
			}
		} else {
			lastOK = s.end
			tr.samples = append(tr.samples, s)
		}
		if time.Now().After(nextPods) {
			nextPods = time.Now().Add(500 * time.Millisecond)
			o, err := l.Observe(ctx)
			if err == nil {
				var st []string
				for _, m := range members {
					st = append(st, fmt.Sprintf("%s=%s", m, o.Pods[m]))
					if o.Pods[m] == framework.Bound && !slices.Contains(tr.bound, m) {
						tr.bound = append(tr.bound, m)
					}
				}
				tr.pods = strings.Join(st, ",")
			}
			if pg, err := l.PodGroup(ctx, group); err == nil {
				tr.cond = framework.DescribeCondition(framework.GroupCondition(pg))
			}
		}
		if t0 := tr.start(); !t0.IsZero() {
			end := t0.Add(mbWindow)
			if tr.first(until) < 0 {
				end = t0.Add(mbWindow + 10*time.Second)
			}
			if time.Now().After(end) {
				return tr
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("the gang's first pod-group cycle was not counted within %s of its creation: %s stayed at %g", firstWithin, obsSelector(obsGroupAttempts, mbGroupUnschedulable), tr.base)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("context ended while tracing the gang's cycles: %v (%s)", ctx.Err(), tr.describe())
		case <-tick.C:
		}
	}
}

// mbCheckGap judges the time between the k-th and (k+1)-th cycle against v1.37.2's backoff after
// the k-th: longer than it, and not more than mbFlushWindow+mbRetrySlack longer. Bounds come from
// the scrape times, so a slow scrape can only widen them, never fail a correct scheduler.
func mbCheckGap(t *testing.T, tr *mbTrace, k, size int) {
	t.Helper()
	want := mbBackoff(k, size)
	lo, hi, ok := tr.gap(k)
	if !ok {
		t.Errorf("cycle %d of the gang never came (backoff after cycle %d: %s): %s", k+1, k, want, tr.describe())
		return
	}
	t.Logf("cycle %d → %d: %.2f-%.2f s (v1.37.2 backoff %s)", k, k+1, lo.Seconds(), hi.Seconds(), want)
	a, b := tr.first(k), tr.first(k+1)
	switch {
	case hi < want:
		t.Errorf("cycle %d came at most %s after cycle %d, less than the %s backoff v1.37.2 gives a group after its %d. unschedulable cycle: %s", k+1, hi.Round(time.Millisecond), k, want, k, tr.describe())
	case lo > want+mbFlushWindow+mbRetrySlack:
		t.Errorf("cycle %d came at least %s after cycle %d, want within the %s backoff + %s flush window + %s slack: %s", k+1, lo.Round(time.Millisecond), k, want, mbFlushWindow, mbRetrySlack, tr.describe())
	}
	// Between the two cycles the group waited in the backoff queue, and never in the unschedulable
	// pool (scheduling_queue.go:1253-1261). Samples read during a cycle see it in neither.
	seen := false
	for _, s := range tr.samples[a:b] {
		seen = seen || s.backoff >= 1
	}
	if !seen {
		t.Errorf("between cycles %d and %d no scrape saw the group in the backoff queue (scheduler_queued_entities{queue=\"backoff\",type=\"podgroup\"} stayed 0): it was not backed off", k, k+1)
	}
}

func minCountBackoffFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	need := mbGangSize * mbGangGPUs
	var tr *mbTrace
	requireTrace := func(t *testing.T) {
		t.Helper()
		if tr == nil {
			t.Fatal("needs the trace of the gang's cycles MIN-21 takes")
		}
	}
	retry := framework.Feature{
		// One 8-GPU node and a gang of 3 × 4 GPUs with nothing of lower priority anywhere: 2 members
		// fit in simulation, the third does not, and nothing can be preempted for it. Nothing in the
		// lane changes after the gang is created.
		Suite: "mincount", Name: "mincount: an unschedulable gang is retried with backoff", Lane: one, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "MIN-21", Statement: fmt.Sprintf("a gang of minCount 3 × 4 GPUs on one 8-GPU node, with nothing changing in the cluster, is retried without any event: its 2nd pod-group cycle (scheduler_podgroup_schedule_attempts_total{result=\"unschedulable\"} +1) comes more than %s (the initial backoff) and at most %s after its 1st, and each cycle adds exactly 1", mbBackoff(1, mbGangSize), mbBackoff(1, mbGangSize)+mbFlushWindow+mbRetrySlack), Ref: "gang-semantics §3.7; §6.1; scheduling_queue.go:1224-1261; backoff_queue.go:213-262, 306-307; active_queue.go:327-345; schedule_one_podgroup.go:931-937"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					base := mbQuiet(ctx, t, l)
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "wide", MinCount: mbGangSize})
					ms := framework.Members("wide", mbGangSize, mbGangGPUs)
					l.CreatePods(ctx, t, ms...)
					tr = mbTraceCycles(ctx, t, l, base, "wide", names(ms), l.Env.Scaled(30*time.Second), 5)
					t.Logf("trace: %s", tr.describe())
					// A step of more than 1 between two scrapes closer together than the shortest
					// backoff is two cycles without backoff, or one cycle counted twice.
					for i := 1; i < len(tr.samples); i++ {
						p, s := tr.samples[i-1], tr.samples[i]
						if d := s.cycles - p.cycles; d > 1 && s.end.Sub(p.start) < mbInitialBackoff {
							t.Errorf("the unschedulable cycle counter rose by %g between two scrapes %s apart, less than the %s backoff: want +1 per cycle", d, s.end.Sub(p.start).Round(time.Millisecond), mbInitialBackoff)
							break
						}
					}
					mbCheckGap(t, tr, 1, mbGangSize)
				}},
			{A: framework.Assertion{ID: "MIN-22", Statement: fmt.Sprintf("its retries follow v1.37.2's doubling backoff: the 3rd, 4th and 5th cycles come more than 2, 4 and 8 s (and at most that + %s) after the one before, the group waits in the backoff queue in between (scheduler_queued_entities{queue=\"backoff\",type=\"podgroup\"} = 1), never in the unschedulable pool, and there is no 6th cycle within %s of the 1st", mbFlushWindow+mbRetrySlack, mbWindow), Ref: "gang-semantics §3.7; §6.1; backoff_queue.go:142-147, 249-262; scheduling_queue.go:509-510, 1253-1261, 1289-1302"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					requireTrace(t)
					for k := 2; k <= 4; k++ {
						mbCheckGap(t, tr, k, mbGangSize)
					}
					// 1+2+4+8+16 s of backoff come before a 6th cycle.
					if n := tr.within(mbWindow); n > 5 {
						t.Errorf("%d cycles within %s of the first, want at most 5 (v1.37.2's backoffs 1, 2, 4, 8 and 16 s put the 6th beyond 31 s): %s", n, mbWindow, tr.describe())
					}
					for _, s := range tr.samples {
						if s.unsched >= 1 {
							t.Errorf("a scrape %.1f s into the trace saw a pod group in the unschedulable pool (scheduler_queued_entities{queue=\"unschedulable\",type=\"podgroup\"} = %g): v1.37.2 moves an attempted group to the backoff queue", s.start.Sub(tr.samples[0].start).Seconds(), s.unsched)
							break
						}
					}
				}},
			{A: framework.Assertion{ID: "MIN-23", Statement: fmt.Sprintf("none of the 3 members binds in any of those cycles (2 of them fit on the node alone), all 3 end PodScheduled=False/Unschedulable, and the PodGroup stays False/Unschedulable: %d GPUs are never placed on 8 in part", need), Ref: bmSemRef + "B.9; §3.4; §3.6; schedule_one_podgroup.go:556-651, 869-871"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					requireTrace(t)
					if len(tr.bound) > 0 {
						t.Errorf("members %v of the gang were bound during its retries (%s): a gang short of minCount must bind nothing", tr.bound, tr.describe())
					}
					o, err := l.Observe(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if o.Bound("wide") != 0 || o.Count("wide", framework.Unschedulable) != mbGangSize {
						t.Errorf("want 0 bound and %d unschedulable; got %s", mbGangSize, o)
					}
					mcWaitPodReasons(ctx, t, l, names(framework.Members("wide", mbGangSize, mbGangGPUs)), corev1.PodReasonUnschedulable)
					pg, err := l.PodGroup(ctx, "wide")
					if err != nil {
						t.Fatal(err)
					}
					if c := framework.GroupCondition(pg); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Unschedulable" || !strings.Contains(c.Message, mcMsgMinCount3) {
						t.Errorf("PodGroup wide: %s, want False/Unschedulable naming %q", framework.DescribeCondition(c), mcMsgMinCount3)
					}
				}},
		},
	}

	// The same blocked gang at priority 1000, then lower-priority work that fits beside it: a
	// standalone pod and a small gang of priority 100 (4 GPUs together). Even with all of them
	// gone the big gang needs 12 GPUs of 8, so it preempts nothing.
	var classLow string
	var lowCreated time.Time
	low := []string{"solo", "small-0", "small-1"}
	starve := framework.Feature{
		Suite: "mincount", Name: "mincount: a blocked high-priority gang does not starve lower-priority work", Lane: one, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "MIN-24", Statement: fmt.Sprintf("while a gang of priority 1000 (minCount 3 × 4 GPUs, one 8-GPU node) is unschedulable and has been retried, a standalone 2-GPU pod of priority 100 binds within %s of its creation", mbPromptBound), Ref: "gang-semantics §3.2; §3.7; scheduling_queue.go:1253-1261 (the group waits in backoffQ, not activeQ); active_queue.go:322-345"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					high := l.PriorityClass(ctx, t, "high", 1000, false)
					classLow = l.PriorityClass(ctx, t, "low", 100, false)
					base := mbQuiet(ctx, t, l)
					createGang(ctx, t, l, scenarios.Group{Name: "big", MinCount: mbGangSize, PriorityClassName: high}, mbGangSize, mbGangGPUs)
					// Its first retry: the gang is in its backoff loop, not just created.
					framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "2 unschedulable cycles of the gang", func(ctx context.Context) (bool, string, error) {
						s, err := mbScrape(ctx, l)
						if err != nil {
							return false, "", err
						}
						return s.cycles-base.cycles >= 2, fmt.Sprintf("%g cycle(s)", s.cycles-base.cycles), nil
					})
					l.WaitCondition(ctx, t, l.Env.Scaled(10*time.Second), "big", metav1.ConditionFalse, "Unschedulable")
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "small", MinCount: 2, PriorityClassName: classLow})
					lowCreated = time.Now()
					l.CreatePods(ctx, t, scenarios.Member{Name: "solo", GPUs: 2, PriorityClassName: classLow})
					l.CreatePods(ctx, t, withClass(classLow, framework.Members("small", 2, 1)...)...)
					l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "solo")
					took := time.Since(lowCreated)
					t.Logf("measurement lowPodBindSeconds=%.3f", took.Seconds())
					if took > mbPromptBound {
						t.Errorf("the lower-priority pod bound %s after its creation, want within %s: the blocked gang held the queue", took.Round(time.Millisecond), mbPromptBound)
					}
				}},
			{A: framework.Assertion{ID: "MIN-25", Statement: fmt.Sprintf("meanwhile a gang of priority 100 (minCount 2 × 1 GPU) created with that pod binds whole within %s, in one cycle, and its PodGroup is True/Scheduled", mbPromptBound), Ref: "gang-semantics §3.2; §3.4; §3.7; scheduling_queue.go:1253-1261"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if lowCreated.IsZero() {
						t.Fatal("needs the lower-priority work MIN-24 creates")
					}
					spread := l.WaitBound(ctx, t, l.Env.Scaled(30*time.Second), "small-0", "small-1")
					took := time.Since(lowCreated)
					t.Logf("measurement lowGangBindSeconds=%.3f", took.Seconds())
					if took > mbPromptBound {
						t.Errorf("the lower-priority gang bound %s after its creation, want within %s: the blocked gang held the queue", took.Round(time.Millisecond), mbPromptBound)
					}
					if spread > bmMaxBindSpread {
						t.Errorf("its 2 members bound %s apart, want one cycle (at most %s)", spread, bmMaxBindSpread)
					}
					l.WaitCondition(ctx, t, l.Env.Scaled(10*time.Second), "small", metav1.ConditionTrue, "Scheduled")
				}},
			{A: framework.Assertion{ID: "MIN-26", Statement: fmt.Sprintf("after the lower-priority work bound, the high-priority gang is still retried: another cycle counted unschedulable (not waiting_on_preemption) within %s (its longest backoff, 10 s × √3, + %s), none of its members bound, and none of the lower-priority pods preempted", (mbBackoff(10, mbGangSize) + mbFlushWindow + mbRetrySlack).Round(100*time.Millisecond), mbFlushWindow+mbRetrySlack), Ref: "gang-semantics §3.7; §5.1 step 4 (preemption only if the gang fits with every lower-priority pod gone); §6.1; backoff_queue.go:249-262; schedule_one_podgroup.go:927-931"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if lowCreated.IsZero() {
						t.Fatal("needs the lower-priority work MIN-24 creates")
					}
					snap, err := l.Env.SchedulerMetrics(ctx)
					if err != nil {
						t.Fatal(err)
					}
					from := obsBaseline{src: obsScheduler(l), snap: snap}
					bound := mbBackoff(10, mbGangSize) + mbFlushWindow + mbRetrySlack
					start := time.Now()
					framework.Eventually(ctx, t, bound, "another unschedulable cycle of the high-priority gang", func(ctx context.Context) (bool, string, error) {
						d, err := from.delta(ctx, obsGroupAttempts, mbGroupUnschedulable)
						if err != nil {
							return false, "", err
						}
						return d >= 1, fmt.Sprintf("+%g", d), nil
					})
					t.Logf("measurement nextRetrySeconds=%.3f", time.Since(start).Seconds())
					if d, err := from.delta(ctx, obsGroupAttempts, mbGroupWaiting); err != nil || d != 0 {
						t.Errorf("%s +%g (%v) while the gang was retried, want +0: it cannot fit even with every lower-priority pod gone", obsSelector(obsGroupAttempts, mbGroupWaiting), d, err)
					}
					o, err := l.Observe(ctx)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("%s", o)
					if o.Bound("big") != 0 {
						t.Errorf("%d members of the high-priority gang bound, want 0: %s", o.Bound("big"), o)
					}
					for _, n := range low {
						p, err := l.Client.CoreV1().Pods(l.Name).Get(ctx, n, metav1.GetOptions{})
						switch {
						case err != nil:
							t.Errorf("lower-priority pod %s: %v (preempted?)", n, err)
						case p.DeletionTimestamp != nil || p.Spec.NodeName == "":
							t.Errorf("lower-priority pod %s: node %q, deleting %v, want bound and kept", n, p.Spec.NodeName, p.DeletionTimestamp != nil)
						}
					}
				}},
		},
	}
	return []framework.Feature{retry, starve}
}
