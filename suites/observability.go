package suites

import (
	"context"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/scenarios"
)

// The observability suite checks what an operator sees of gang scheduling: events (gang-semantics §7)
// and the scheduler's and apiserver's metrics (§6). Every feature is Serial: the counters are
// cluster-wide, and an exact delta ("one binding per bound member") holds only when nothing else
// schedules meanwhile.

// obsSum is Sum of name{match}, 0 when the family is absent.
func obsSum(s *metrics.Snapshot, name string, match map[string]string) float64 {
	v, _ := s.Sum(name, match)
	return v
}

// obsScrape is a metrics source: the scheduler's or the apiserver's.
type obsScrape struct {
	what string
	get  func(context.Context) (*metrics.Snapshot, error)
}

func obsScheduler(l *framework.Lane) obsScrape { return obsScrape{"scheduler", l.Env.SchedulerMetrics} }
func obsAPIServer(l *framework.Lane) obsScrape { return obsScrape{"apiserver", l.Env.APIServerMetrics} }

// obsBaseline is a scrape taken before a scenario, or why none could be taken.
type obsBaseline struct {
	src  obsScrape
	snap *metrics.Snapshot
	err  error
}

func obsTake(ctx context.Context, src obsScrape) obsBaseline {
	s, err := src.get(ctx)
	return obsBaseline{src: src, snap: s, err: err}
}

// require skips the check when the component's metrics are not reachable: the provider cannot show
// them, which says nothing about the scheduler.
func (b obsBaseline) require(t *testing.T) {
	t.Helper()
	if b.err != nil {
		t.Skipf("%s metrics unavailable: %v", b.src.what, b.err)
	}
	if b.snap == nil {
		t.Skip("no baseline scrape: the scenario step did not run")
	}
}

// delta scrapes again and returns name{match}'s increase since the baseline.
func (b obsBaseline) delta(ctx context.Context, name string, match map[string]string) (float64, error) {
	after, err := b.src.get(ctx)
	if err != nil {
		return 0, err
	}
	return metrics.Delta(b.snap, after, name, match)
}

// waitDelta polls until name{match} rose by at least atLeast since the baseline and returns the
// increase last seen. Counters are bumped just after the API write a test observes, so a single
// scrape could read them a moment early. A shortfall is an Error, not a Fatal: the feature's other
// metric checks are independent and still run.
func (b obsBaseline) waitDelta(ctx context.Context, t *testing.T, timeout time.Duration, name string, match map[string]string, atLeast float64) float64 {
	t.Helper()
	b.require(t)
	var d float64
	err := framework.Poll(ctx, timeout, fmt.Sprintf("%s to rise by ≥%g", obsSelector(name, match), atLeast), func(ctx context.Context) (bool, string, error) {
		after, err := b.src.get(ctx)
		if err != nil {
			return false, "", err
		}
		// A metric the scheduler does not expose is a finding, not a scrape error: say so.
		if d, err = metrics.Delta(b.snap, after, name, match); err != nil {
			return false, err.Error(), nil
		}
		return d >= atLeast, fmt.Sprintf("delta %g", d), nil
	})
	if err != nil {
		t.Error(err)
		return d
	}
	t.Logf("%s: +%g", obsSelector(name, match), d)
	return d
}

// obsGauge polls a scheduler gauge until it is at least atLeast (an Error if it never is).
func obsGauge(ctx context.Context, t *testing.T, l *framework.Lane, name string, match map[string]string, atLeast float64) {
	t.Helper()
	if _, err := l.Env.SchedulerMetrics(ctx); err != nil {
		t.Skipf("scheduler metrics unavailable: %v", err)
	}
	var v float64
	err := l.PollSettled(ctx, l.Env.Scaled(30*time.Second), fmt.Sprintf("%s ≥ %g", obsSelector(name, match), atLeast), func(ctx context.Context) (bool, string, error) {
		s, err := l.Env.SchedulerMetrics(ctx)
		if err != nil {
			return false, "", err
		}
		var ok bool
		if v, ok = s.Sum(name, match); !ok {
			return false, "metric not exposed", nil
		}
		return v >= atLeast, fmt.Sprintf("%g", v), nil
	})
	if err != nil {
		t.Error(err)
		return
	}
	t.Logf("%s = %g", obsSelector(name, match), v)
}

func obsSelector(name string, match map[string]string) string {
	if len(match) == 0 {
		return name
	}
	var parts []string
	for _, k := range []string{"resource", "subresource", "verb", "code", "result", "queue", "type", "preemptor", "extension_point"} {
		if v, ok := match[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%q", k, v))
		}
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// obsScheduledEvents returns the Scheduled events per pod of the lane.
func obsScheduledEvents(ctx context.Context, l *framework.Lane) (map[string][]corev1.Event, error) {
	evs, err := l.Events(ctx, "")
	if err != nil {
		return nil, err
	}
	out := map[string][]corev1.Event{}
	for _, e := range evs {
		if e.Reason == "Scheduled" && e.InvolvedObject.Kind == "Pod" {
			out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e)
		}
	}
	return out, nil
}

var (
	obsBindings           = map[string]string{"resource": "pods", "subresource": "binding", "verb": "POST", "code": "201"}
	obsGroupScheduled     = map[string]string{"result": "scheduled"}
	obsGroupUnschedulable = map[string]string{"result": "unschedulable"}
	obsGroupWaiting       = map[string]string{"result": "waiting_on_preemption"}
)

// The pod-group cycle metrics (gang-semantics §6.1): one count and one latency observation per root
// group cycle, labelled with its result, both made in one call (profile_metrics.go:77-80) at the end
// of the cycle (schedule_one_podgroup.go:923-935), and one algorithm-latency observation per cycle
// before its post-filter (:441). Each result a client can produce is checked: scheduled (OBS-03,
// OBS-17), unschedulable (OBS-16, OBS-19, and OBS-14's absence of it), waiting_on_preemption (OBS-13,
// OBS-15, OBS-18); OBS-20 ties all of them to the algorithm histogram.
//
// The fourth, error (:933-934), needs a cycle whose algorithm or post-filter fails internally: the
// group's PodGroupState missing from the snapshot (:577-580), a PlacementFeasible plugin returning
// Error (:591-594, :624-627), a member's filter or reserve ending in Error rather than a rejection
// (:612-615), or a PodGroupPostFilter Error (:793-796). None of the in-tree plugins returns Error for
// an object a client can create (their client-visible failures are rejections), so no test makes a
// correct scheduler's group cycle err, and error is unchecked. What a client can trigger that reads
// as an error (a member whose priority or schedulerName differs from the group's, §3.4 step 2) goes
// through handlePodGroupFailureBeforeScheduling (:177-196) before any cycle and is not counted at all.
const (
	obsGroupAttempts  = "scheduler_podgroup_schedule_attempts_total"
	obsGroupLatency   = "scheduler_podgroup_scheduling_attempt_duration_seconds"
	obsGroupAlgorithm = "scheduler_podgroup_scheduling_algorithm_duration_seconds"
)

// obsSameDelta checks that two series rose by the same amount since the baseline, at least atLeast,
// and returns it. Both are read from one scrape; it polls because the second may be raised a moment
// after the first within one cycle (OBS-20's algorithm histogram is observed mid-cycle), and a
// cycle in flight at the scrape would make a correct scheduler differ by one. A scheduler that
// counts differently never matches. A mismatch is an Error, not a Fatal.
func (b obsBaseline) obsSameDelta(ctx context.Context, t *testing.T, timeout time.Duration, a, c string, match map[string]string, atLeast float64) float64 {
	t.Helper()
	b.require(t)
	var da, dc float64
	err := framework.Poll(ctx, timeout, fmt.Sprintf("%s and %s to rise alike, by ≥%g", obsSelector(a, match), obsSelector(c, match), atLeast), func(ctx context.Context) (bool, string, error) {
		after, err := b.src.get(ctx)
		if err != nil {
			return false, "", err
		}
		if da, err = metrics.Delta(b.snap, after, a, match); err != nil {
			return false, err.Error(), nil
		}
		if dc, err = metrics.Delta(b.snap, after, c, match); err != nil {
			return false, err.Error(), nil
		}
		return da == dc && da >= atLeast, fmt.Sprintf("+%g and +%g", da, dc), nil
	})
	if err != nil {
		t.Error(err)
		return da
	}
	t.Logf("%s +%g, %s +%g", obsSelector(a, match), da, obsSelector(c, match), dc)
	return da
}

func observabilityFeatures() []framework.Feature {
	const suite = "observability"
	lane := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	ref := func(item, section string) string { return "gang-semantics §11.F." + item + "; " + section }

	// F.34, F.35: one gang of 4 bound in one cycle.
	const gangSize = 4
	var sched, api obsBaseline
	var bound []corev1.Pod
	binding := framework.Feature{
		Suite: suite, Name: "a bound gang's events and counters", Lane: lane, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "OBS-01", Statement: "every bound member gets exactly one Scheduled event: Successfully assigned <ns>/<pod> to <node>", Ref: ref("34", "§7")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					sched, api = obsTake(ctx, obsScheduler(l)), obsTake(ctx, obsAPIServer(l))
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "gang", MinCount: gangSize})
					ms := framework.Members("gang", gangSize, 2)
					l.CreatePods(ctx, t, ms...)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(ms)...)
					pods, err := l.Pods(ctx)
					if err != nil {
						t.Fatal(err)
					}
					bound = pods
					framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "a Scheduled event for every member", func(ctx context.Context) (bool, string, error) {
						byPod, err := obsScheduledEvents(ctx, l)
						if err != nil {
							return false, "", err
						}
						var missing []string
						for _, m := range ms {
							if len(byPod[m.Name]) == 0 {
								missing = append(missing, m.Name)
							}
						}
						return len(missing) == 0, fmt.Sprintf("no Scheduled event yet for %v", missing), nil
					})
					byPod, err := obsScheduledEvents(ctx, l)
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range pods {
						evs := byPod[p.Name]
						n := 0
						for _, e := range evs {
							n += staOccurrences(e)
						}
						want := fmt.Sprintf("Successfully assigned %s/%s to %s", l.Name, p.Name, p.Spec.NodeName)
						switch {
						case n != 1:
							t.Errorf("pod %s: %d Scheduled occurrences, want 1", p.Name, n)
						case evs[0].Message != want:
							t.Errorf("pod %s: Scheduled message %q, want %q", p.Name, evs[0].Message, want)
						}
					}
				}},
			{A: framework.Assertion{ID: "OBS-02", Statement: "the apiserver counts one pods/binding POST 201 per bound member", Ref: ref("34", "§6.2")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					d := api.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), "apiserver_request_total", obsBindings, float64(len(bound)))
					if d != float64(len(bound)) || len(bound) != gangSize {
						t.Errorf("%g binding POSTs for %d bound members, want %d", d, len(bound), gangSize)
					}
				}},
			{A: framework.Assertion{ID: "OBS-03", Statement: "scheduler_podgroup_schedule_attempts_total{result=scheduled} rises by 1 for the gang's one cycle, not per pod", Ref: ref("35", "§6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					d := sched.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), "scheduler_podgroup_schedule_attempts_total", obsGroupScheduled, 1)
					if d != 1 {
						t.Errorf("scheduled pod-group cycles +%g for one gang of %d, want +1", d, gangSize)
					}
				}},
			{A: framework.Assertion{ID: "OBS-04", Statement: "scheduler_schedule_attempts_total{result=scheduled} rises by the number of bound pods", Ref: ref("35", "§6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					d := sched.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), "scheduler_schedule_attempts_total", obsGroupScheduled, gangSize)
					if d != gangSize {
						t.Errorf("scheduled pod attempts +%g, want +%d", d, gangSize)
					}
				}},
			{A: framework.Assertion{ID: "OBS-17", Statement: "that one cycle is timed once under the same result: scheduler_podgroup_scheduling_attempt_duration_seconds_count{result=scheduled} rises by 1, as much as scheduler_podgroup_schedule_attempts_total{result=scheduled}", Ref: ref("35", "§6.1 (attempts and latency are observed together, profile_metrics.go:77-80; schedule_one_podgroup.go:925-926)")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if d := sched.obsSameDelta(ctx, t, l.Env.Scaled(15*time.Second), obsGroupAttempts, obsGroupLatency+"_count", obsGroupScheduled, 1); d != 1 {
						t.Errorf("scheduled pod-group cycles +%g for one gang that fits, want +1", d)
					}
				}},
		},
	}

	// F.36: the two pod-group waiting queues are visible as gauges.
	queues := framework.Feature{
		Suite: suite, Name: "waiting gangs in the queue gauges", Lane: lane, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "OBS-05", Statement: "while a gang waits for quorum, scheduler_pending_pods{queue=gated} ≥ its pod count", Ref: ref("36", "§3.2; §6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "quorum", MinCount: 4})
					ms := framework.Members("quorum", 3, 1)
					l.CreatePods(ctx, t, ms...)
					obsGauge(ctx, t, l, "scheduler_pending_pods", map[string]string{"queue": "gated"}, float64(len(ms)))
					obsUntouched(ctx, t, l, names(ms))
				}},
			{A: framework.Assertion{ID: "OBS-06", Statement: "while a gang waits for quorum, scheduler_queued_entities{queue=gated,type=podgroup} ≥ 1", Ref: ref("36", "§3.2; §6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					obsGauge(ctx, t, l, "scheduler_queued_entities", map[string]string{"queue": "gated", "type": "podgroup"}, 1)
					obsUntouched(ctx, t, l, names(framework.Members("quorum", 3, 1)))
				}},
			{A: framework.Assertion{ID: "OBS-07", Statement: "while a group's PodGroup is missing, scheduler_pending_pods{queue=incomplete} ≥ its pod count", Ref: ref("36", "§3.2; §6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					ms := framework.Members("ghost", 3, 1)
					l.CreatePods(ctx, t, ms...)
					obsGauge(ctx, t, l, "scheduler_pending_pods", map[string]string{"queue": "incomplete"}, float64(len(ms)))
					obsUntouched(ctx, t, l, names(ms))
				}},
		},
	}

	// F.37: group preemption shows in the workload-preemption metrics, not in the pod ones.
	var preSched obsBaseline
	preempted := false
	preemption := framework.Feature{
		Suite: suite, Name: "gang preemption metrics", Lane: lane, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "OBS-08", Statement: "a gang preempting lower-priority pods raises the scheduler_workload_preemption_victims histogram count", Ref: ref("37", "§5; §6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					low := l.PriorityClass(ctx, t, "low", 100, false)
					high := l.PriorityClass(ctx, t, "high", 1000, false)
					var victims []scenarios.Member
					for i := range 4 {
						victims = append(victims, scenarios.Member{Name: fmt.Sprintf("low-%d", i), GPUs: 2, PriorityClassName: low})
					}
					l.CreatePods(ctx, t, victims...)
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), names(victims)...)
					preSched = obsTake(ctx, obsScheduler(l))
					l.CreatePodGroup(ctx, t, scenarios.Group{Name: "high", MinCount: 2, PriorityClassName: high})
					ms := framework.Members("high", 2, 4)
					for i := range ms {
						ms[i].PriorityClassName = high
					}
					l.CreatePods(ctx, t, ms...)
					l.WaitBound(ctx, t, l.Env.Scaled(90*time.Second), names(ms)...)
					preempted = true
					preSched.require(t)
					err := l.PollSettled(ctx, l.Env.Scaled(15*time.Second), "scheduler_workload_preemption_victims count to rise", func(ctx context.Context) (bool, string, error) {
						after, err := l.Env.SchedulerMetrics(ctx)
						if err != nil {
							return false, "", err
						}
						a, ok := after.HistogramCount("scheduler_workload_preemption_victims", nil)
						if !ok {
							return false, "histogram not exposed", nil
						}
						b, _ := preSched.snap.HistogramCount("scheduler_workload_preemption_victims", nil)
						return a > b, fmt.Sprintf("count %d → %d", b, a), nil
					})
					if err != nil {
						t.Error(err)
					}
				}},
			{A: framework.Assertion{ID: "OBS-09", Statement: "the same preemption raises scheduler_preemption_evaluation_duration_seconds_count{preemptor=podgroup}", Ref: ref("37", "§6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !preempted {
						t.Skip("needs the preemption OBS-08 sets up")
					}
					preSched.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), "scheduler_preemption_evaluation_duration_seconds_count", map[string]string{"preemptor": "podgroup"}, 1)
				}},
			{A: framework.Assertion{ID: "OBS-10", Statement: "the same preemption leaves scheduler_preemption_attempts_total (pod PostFilter only) unchanged", Ref: ref("37", "§5.5; §6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !preempted {
						t.Skip("needs the preemption OBS-08 sets up")
					}
					preSched.require(t)
					d, err := preSched.delta(ctx, "scheduler_preemption_attempts_total", nil)
					if err != nil {
						t.Fatal(err)
					}
					if d != 0 {
						t.Errorf("scheduler_preemption_attempts_total +%g during a gang preemption, want +0 (pod-by-pod preemption ran)", d)
					}
				}},
			{A: framework.Assertion{ID: "OBS-13", Statement: "the gang cycle that starts the preemption counts in scheduler_podgroup_schedule_attempts_total{result=waiting_on_preemption}", Ref: ref("37", "§3.4 steps 5-6 (a successful PodGroupPostFilter sets waitingOnPreemption); §6.1; schedule_one_podgroup.go:923-935")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !preempted {
						t.Skip("needs the preemption OBS-08 sets up")
					}
					preSched.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), obsGroupAttempts, obsGroupWaiting, 1)
				}},
			{A: framework.Assertion{ID: "OBS-14", Statement: "no cycle of that gang counts as unschedulable: scheduler_podgroup_schedule_attempts_total{result=unschedulable} is unchanged from before the gang to its members bound", Ref: ref("37", "§3.4 step 6; §5.1 (while its victims go, the gang's cycles find ongoing preemption); §6.1; schedule_one_podgroup.go:927-931")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !preempted {
						t.Skip("needs the preemption OBS-08 sets up")
					}
					preSched.require(t)
					// The pods were seen bound, and a cycle counts itself before the later cycle that
					// binds them, so every cycle of the gang is in this scrape.
					d, err := preSched.delta(ctx, obsGroupAttempts, obsGroupUnschedulable)
					if err != nil {
						t.Fatal(err)
					}
					if d != 0 {
						t.Errorf("%s +%g while the gang preempted and bound, want +0 (a cycle waiting on preemption was counted unschedulable)", obsSelector(obsGroupAttempts, obsGroupUnschedulable), d)
					}
				}},
			{A: framework.Assertion{ID: "OBS-15", Statement: "that cycle is timed under the same result: scheduler_podgroup_scheduling_attempt_duration_seconds_count{result=waiting_on_preemption} rises", Ref: ref("37", "§6.1 (attempts and latency are observed together, profile_metrics.go:77-80)")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !preempted {
						t.Skip("needs the preemption OBS-08 sets up")
					}
					preSched.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), obsGroupLatency+"_count", obsGroupWaiting, 1)
				}},
			{A: framework.Assertion{ID: "OBS-18", Statement: "every cycle of that gang waiting on preemption is counted once: scheduler_podgroup_schedule_attempts_total{result=waiting_on_preemption} and scheduler_podgroup_scheduling_attempt_duration_seconds_count{result=waiting_on_preemption} rise by the same number, at least 1", Ref: ref("37", "§6.1; profile_metrics.go:77-80; schedule_one_podgroup.go:927-929")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if !preempted {
						t.Skip("needs the preemption OBS-08 sets up")
					}
					preSched.obsSameDelta(ctx, t, l.Env.Scaled(15*time.Second), obsGroupAttempts, obsGroupLatency+"_count", obsGroupWaiting, 1)
				}},
		},
	}

	// F.38: the gang extension points are timed.
	var extSched obsBaseline
	extension := framework.Feature{
		Suite: suite, Name: "gang extension points in the framework metrics", Lane: lane, Serial: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "OBS-11", Statement: "gang cycles, one of them unschedulable, raise scheduler_framework_extension_point_duration_seconds_count{extension_point=PlacementFeasible}", Ref: ref("38", "§3.4; §6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					extSched = obsTake(ctx, obsScheduler(l))
					for _, g := range []string{"first", "second"} {
						l.CreatePodGroup(ctx, t, scenarios.Group{Name: g, MinCount: 2})
						l.CreatePods(ctx, t, framework.Members(g, 2, 4)...)
					}
					// Whichever gang the scheduler takes first fills the node; the other is unschedulable.
					// Waiting for the pods, not the conditions, keeps the metric checks meaningful for
					// a scheduler that writes no condition.
					o := l.WaitDecided(ctx, t, l.Env.Scaled(60*time.Second), append(names(framework.Members("first", 2, 4)), names(framework.Members("second", 2, 4))...)...)
					t.Logf("outcome: %s", o)
					extSched.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), "scheduler_framework_extension_point_duration_seconds_count", map[string]string{"extension_point": "PlacementFeasible"}, 1)
				}},
			{A: framework.Assertion{ID: "OBS-12", Statement: "the unschedulable gang cycle raises scheduler_framework_extension_point_duration_seconds_count{extension_point=PodGroupPostFilter}", Ref: ref("38", "§3.4 step 5; §6.1")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					extSched.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), "scheduler_framework_extension_point_duration_seconds_count", map[string]string{"extension_point": "PodGroupPostFilter"}, 1)
				}},
			{A: framework.Assertion{ID: "OBS-16", Statement: "that cycle, with no room and no lower-priority victims, counts in scheduler_podgroup_schedule_attempts_total{result=unschedulable} and not in {result=waiting_on_preemption}", Ref: ref("35", "§3.4 step 5 (post-filter without victims leaves the group unschedulable); §6.1; schedule_one_podgroup.go:927-931")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					extSched.waitDelta(ctx, t, l.Env.Scaled(15*time.Second), obsGroupAttempts, obsGroupUnschedulable, 1)
					d, err := extSched.delta(ctx, obsGroupAttempts, obsGroupWaiting)
					if err != nil {
						t.Fatal(err)
					}
					if d != 0 {
						t.Errorf("%s +%g, want +0: nothing in the cluster has a lower priority than the gangs, so there is no preemption to wait on", obsSelector(obsGroupAttempts, obsGroupWaiting), d)
					}
				}},
			{A: framework.Assertion{ID: "OBS-19", Statement: "every unschedulable cycle of the losing gang (it is retried with backoff) is counted once: scheduler_podgroup_schedule_attempts_total{result=unschedulable} and scheduler_podgroup_scheduling_attempt_duration_seconds_count{result=unschedulable} rise by the same number, at least 1", Ref: ref("35", "§3.7; §6.1; profile_metrics.go:77-80; schedule_one_podgroup.go:930-931")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					extSched.obsSameDelta(ctx, t, l.Env.Scaled(15*time.Second), obsGroupAttempts, obsGroupLatency+"_count", obsGroupUnschedulable, 1)
				}},
			{A: framework.Assertion{ID: "OBS-20", Statement: "each counted pod-group cycle ran the group algorithm once: scheduler_podgroup_schedule_attempts_total summed over its results rises by as much as scheduler_podgroup_scheduling_algorithm_duration_seconds_count, at least 2 (the winner's scheduled cycle and the loser's unschedulable one)", Ref: ref("35", "§3.4; §6.1; schedule_one_podgroup.go:441 (one algorithm observation per cycle), 923-935 (one count per cycle)")},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					extSched.obsSameDelta(ctx, t, l.Env.Scaled(15*time.Second), obsGroupAttempts, obsGroupAlgorithm+"_count", nil, 2)
				}},
		},
	}
	return []framework.Feature{binding, queues, preemption, extension}
}

// obsUntouched checks that the named pods have no PodScheduled condition: they wait in a queue the
// scheduler keeps them in, not in a failed attempt.
func obsUntouched(ctx context.Context, t *testing.T, l *framework.Lane, pods []string) {
	t.Helper()
	o, err := l.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range pods {
		if s := o.Pods[n]; s != framework.Untouched {
			t.Errorf("pod %s is %s, want waiting with no PodScheduled condition (%s)", n, s, o)
		}
	}
}
