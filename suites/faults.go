package suites

import (
	"context"
	"fmt"
	"github.com/gangbench/gangbench/suites/framework"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/monitor"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/scenarios"
)

// The faults suite breaks the control plane while gangs are being placed (issue 7): SIGKILL of the
// kube-scheduler in the middle of a burst, a restart of the kube-apiserver, a restart of the kwok
// controller that plays every kubelet. After each, a correct cluster binds again, places no gang
// partially, keeps every PodGroup's status monotonic and loses no object. The node faults (fake GPUs
// marked unhealthy; on kind, a kubelet restart that the device plugin must survive) are in
// faults_gpu.go. Every feature is serial (a restart stalls every other test); the restarts need a
// provider that can restart components, the kubelet ones real kubelets.

const fltRef = "issue 7 (faults under load); gang-semantics §3.4, §4"

// fltPartialGrace is how long a gang may sit between 0 and minCount bound members, in the pod
// watch's timeline, before it counts as partially placed. A scheduler binds a gang's members one
// API call after another, milliseconds apart; seconds without progress is a stuck gang. Not scaled
// by -timeout-scale (a threshold, not a wait).
const fltPartialGrace = 5 * time.Second

// fltWatch records what a fault feature needs across its steps: the lane's binds (a pod watch into
// an observe/timeline timeline, so the perf run and the suite judge partial placement with the same
// code) and every PodGroup condition transition. Both are informers, which re-list and re-watch
// by themselves after an apiserver restart.
type fltWatch struct {
	tl   *timeline.Timeline
	rec  *timeline.Recorder
	mon  *monitor.Monitor
	once sync.Once

	// Set by the fault step, read by the later ones.
	faultAt, readyAt time.Time
	// startAt is when the component was started again: a restarted scheduler can bind before its
	// healthz answers (it did on a fast machine), so recovery is the first bind after startAt.
	startAt      time.Time
	recovered    time.Time
	podsBefore   []string
	groupsBefore []string
}

func fltStart(ctx context.Context, t *testing.T, l *framework.Lane) *fltWatch {
	t.Helper()
	w := &fltWatch{tl: timeline.NewTimeline(nil)}
	sctx, cancel := context.WithTimeout(ctx, l.Env.Scaled(30*time.Second))
	defer cancel()
	w.rec = timeline.NewRecorder(l.Client, l.Name, w.tl)
	if err := w.rec.Start(sctx); err != nil {
		t.Fatalf("pod watch: %v", err)
	}
	w.mon = monitor.New(l.Client, monitor.Options{Gang: l.Gang})
	if err := w.mon.Start(sctx); err != nil {
		w.rec.Stop()
		t.Fatalf("PodGroup status monitor: %v", err)
	}
	return w
}

// stop ends both watches; safe to call from any step, more than once.
func (w *fltWatch) stop() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		w.rec.Stop()
		w.mon.Stop()
	})
}

// require skips a step whose fault step did not get as far as the fault.
func (w *fltWatch) require(t *testing.T) {
	t.Helper()
	if w == nil || w.readyAt.IsZero() {
		t.Skip("needs the fault the first step injects, which did not happen")
	}
}

// createGangs creates gangs of n members × gpus with minCount n, each PodGroup before its pods, and
// records the groups in the timeline so the partial-placement check knows their quorum.
func (w *fltWatch) createGangs(ctx context.Context, t *testing.T, l *framework.Lane, n int, gpus int64, groups ...string) {
	t.Helper()
	// The members arrive interleaved (a-0, b-0, c-0, a-1, …), as from several job controllers at
	// once: a scheduler that places pods one by one in arrival order then splits the gangs that do
	// not all fit, instead of placing whole gangs by the accident of gang-by-gang creation (which a
	// CI run against GenericWorkload=false once did on FLT-02).
	members := make([][]scenarios.Member, len(groups))
	for i, g := range groups {
		l.CreatePodGroup(ctx, t, scenarios.Group{Name: g, MinCount: int32(n)})
		w.tl.Add(timeline.Event{Time: time.Now(), Kind: timeline.PodGroupCreated, Group: g, MinCount: n, Policy: "gang", DisruptionMode: "single"})
		members[i] = framework.Members(g, n, gpus)
	}
	var interleaved []scenarios.Member
	for k := range n {
		for i := range groups {
			interleaved = append(interleaved, members[i][k])
		}
	}
	l.CreatePods(ctx, t, interleaved...)
}

// fltNames lists the lane's pods (canaries excluded: they come and go on purpose) and PodGroups.
func fltNames(ctx context.Context, l *framework.Lane) (pods, groups []string, err error) {
	ps, err := l.Pods(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range ps {
		if !strings.HasPrefix(p.Name, "canary-") {
			pods = append(pods, p.Name)
		}
	}
	gs, err := l.Gang.PodGroups(l.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, g := range gs.Items {
		groups = append(groups, g.Name)
	}
	slices.Sort(pods)
	slices.Sort(groups)
	return pods, groups, nil
}

// snapshotBefore records the lane's objects just before a fault.
func (w *fltWatch) snapshotBefore(ctx context.Context, t *testing.T, l *framework.Lane) {
	t.Helper()
	var err error
	if w.podsBefore, w.groupsBefore, err = fltNames(ctx, l); err != nil {
		t.Fatalf("list the lane before the fault: %v", err)
	}
}

// inject breaks the component (kill: SIGKILL; otherwise SIGTERM), runs down (may be nil) while it
// is down, and starts it again, recording when.
func (w *fltWatch) inject(ctx context.Context, t *testing.T, l *framework.Lane, c clusters.Component, kill bool, down func()) {
	t.Helper()
	ctl := l.Env.Cluster.Control
	rctx, cancel := context.WithTimeout(ctx, l.Env.Scaled(2*time.Minute))
	defer cancel()
	w.faultAt = time.Now()
	// One of the two, never both: a Stop before the Kill made every "kill" a graceful stop (the
	// local provider's Kill of a stopped process succeeds silently; kind's refuses, which is how
	// this was found).
	var op string
	var err error
	if kill {
		op, err = "SIGKILL", ctl.Kill(rctx, c)
	} else {
		op, err = "SIGTERM", ctl.Stop(rctx, c)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", op, c, err)
	}
	if down != nil {
		down()
	}
	w.startAt = time.Now()
	if err := ctl.Start(rctx, c); err != nil {
		t.Fatalf("start %s again after %s: %v", c, op, err)
	}
	w.readyAt = time.Now()
	t.Logf("%s after %s: back (healthy) %s after the fault", c, op, w.readyAt.Sub(w.faultAt).Round(time.Millisecond))
}

// waitRecovered waits for the first bind the pod watch sees after the component was started again
// and logs the time from the fault to it: the recovery time issue 7 asks for.
func (w *fltWatch) waitRecovered(ctx context.Context, t *testing.T, l *framework.Lane, what string) {
	t.Helper()
	after := w.startAt
	if after.IsZero() {
		after = w.readyAt
	}
	framework.Eventually(ctx, t, l.Env.Scaled(90*time.Second), "a pod bound after "+what, func(context.Context) (bool, string, error) {
		first, ok := timeline.FirstBindAfter(w.tl.Events(), after)
		if !ok {
			return false, fmt.Sprintf("%d pods bound in the lane, none after %s", len(w.binds()), after.Format("15:04:05.000")), nil
		}
		w.recovered = first.Time
		return true, "", nil
	})
	t.Logf("first bind after the fault: %s", w.recovered.Sub(w.faultAt).Round(time.Millisecond))
	t.Logf("measurement recoverySeconds=%.3f", w.recovered.Sub(w.faultAt).Seconds())
}

func (w *fltWatch) binds() []timeline.Event {
	var out []timeline.Event
	for _, e := range w.tl.Events() {
		if e.Kind == timeline.PodBound {
			out = append(out, e)
		}
	}
	return out
}

// waitGangs waits until exactly `whole` of the groups have all n members bound and the others
// none, with every gang's condition True/Scheduled for the bound ones. It returns the bound groups.
func fltWaitGangs(ctx context.Context, t *testing.T, l *framework.Lane, n, whole int, groups []string) []string {
	t.Helper()
	var bound []string
	var hopeless string
	var certain framework.Certainty
	framework.Eventually(ctx, t, l.Env.Scaled(90*time.Second), fmt.Sprintf("%d of gangs %v bound whole (%d members each), the rest not at all", whole, groups, n), func(ctx context.Context) (bool, string, error) {
		o, err := l.Observe(ctx)
		if err != nil {
			return false, "", err
		}
		bound = bound[:0]
		var split []string
		for _, g := range groups {
			switch o.Bound(g) {
			case n:
				bound = append(bound, g)
			case 0:
			default:
				split = append(split, g)
			}
		}
		if len(split) == 0 {
			certain.Held("")
			return len(bound) == whole, o.String(), nil
		}
		// A split gang whose missing members can no longer bind stays split: stop once that is
		// certain, as WaitBound does, instead of running to the timeout.
		pods, err := l.Pods(ctx)
		if err != nil {
			return false, o.String(), err
		}
		var unbound []string
		for _, p := range pods {
			if p.Spec.NodeName == "" && slices.ContainsFunc(split, func(g string) bool { return strings.HasPrefix(p.Name, g+"-") }) {
				unbound = append(unbound, p.Name)
			}
		}
		if why := l.CannotBind(pods, unbound); certain.Held(why) {
			hopeless = fmt.Sprintf("gangs %v are split and %s; last seen: %s", split, why, o)
			return true, "", nil
		}
		return false, o.String(), nil
	})
	if hopeless != "" {
		t.Fatalf("the gangs cannot become whole any more, so the wait stopped early: %s", hopeless)
	}
	return bound
}

// checkNoPartial is the partial-placement invariant on the lane: no gang below minCount for longer
// than the grace at any moment after recovered (the pod watch's timeline), and no gang with
// 0 < bound < minCount now and for a short window, followed by a canary proving the scheduler was
// alive to place anything.
func (w *fltWatch) checkNoPartial(ctx context.Context, t *testing.T, l *framework.Lane, n int, groups []string) {
	t.Helper()
	framework.Consistently(ctx, t, l.Env.Scaled(3*time.Second), "no gang partially bound", func(ctx context.Context) (bool, string, error) {
		o, err := l.Observe(ctx)
		if err != nil {
			return false, "", err
		}
		for _, g := range groups {
			if b := o.Bound(g); b > 0 && b < n {
				return false, fmt.Sprintf("gang %s has %d of minCount %d bound: %s", g, b, n, o), nil
			}
		}
		return true, "", nil
	})
	l.Canary(ctx, t)
	for _, p := range timeline.PartialAfter(w.tl.Events(), fltPartialGrace, w.recovered) {
		t.Errorf("partial placement after recovery (pod watch timeline): %s", p)
	}
}

// checkMonotonic checks the lane's PodGroups never left True, as the status monitor saw them
// across the fault, and that the monitor was watching (a blind monitor proves nothing).
func (w *fltWatch) checkMonotonic(ctx context.Context, t *testing.T, l *framework.Lane, trueGroups []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, tr := range w.mon.Transitions() {
		if tr.Namespace == l.Name {
			seen[tr.Name] = true
		}
	}
	for _, g := range trueGroups {
		if !seen[g] {
			t.Errorf("the status monitor never saw PodGroup %s: its watch did not survive the fault", g)
		}
		l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), g, metav1.ConditionTrue, "Scheduled")
	}
	for _, v := range w.mon.Violations() {
		if v.Namespace == l.Name {
			t.Errorf("PodGroup status regression across the fault: %v", v)
		}
	}
	st := w.mon.Stats()
	t.Logf("status monitor: %d PodGroups, %d transitions, %d watch errors (re-listed)", st.PodGroups, st.Transitions, st.WatchErrors)
}

// checkNothingLost compares the lane's objects with those before the fault plus those created
// since (expected), by name.
func (w *fltWatch) checkNothingLost(ctx context.Context, t *testing.T, l *framework.Lane, createdPods, createdGroups []string) {
	t.Helper()
	pods, groups, err := fltNames(ctx, l)
	if err != nil {
		t.Fatalf("list the lane after recovery: %v", err)
	}
	wantPods := fltUnion(w.podsBefore, createdPods)
	wantGroups := fltUnion(w.groupsBefore, createdGroups)
	t.Logf("pods: %d before the fault, %d created after, %d now; PodGroups: %d before, %d created after, %d now",
		len(w.podsBefore), len(createdPods), len(pods), len(w.groupsBefore), len(createdGroups), len(groups))
	if missing := fltMissing(wantPods, pods); len(missing) > 0 {
		t.Errorf("pods lost across the fault: %v", missing)
	}
	if missing := fltMissing(wantGroups, groups); len(missing) > 0 {
		t.Errorf("PodGroups lost across the fault: %v", missing)
	}
	if len(pods) != len(wantPods) || len(groups) != len(wantGroups) {
		t.Errorf("counts: %d pods and %d PodGroups, want %d and %d", len(pods), len(groups), len(wantPods), len(wantGroups))
	}
}

func fltUnion(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func fltMissing(want, have []string) []string {
	var out []string
	for _, n := range want {
		if !slices.Contains(have, n) {
			out = append(out, n)
		}
	}
	return out
}

func fltPodNames(n int, groups ...string) []string {
	var out []string
	for _, g := range groups {
		for _, m := range framework.Members(g, n, 0) {
			out = append(out, m.Name)
		}
	}
	return out
}

func faultFeatures() []framework.Feature {
	return []framework.Feature{fltSchedulerKill(), fltAPIServerRestart(), fltKwokRestart(), fltGPUUnhealthy(), fltKubeletRestart()}
}

// fltSchedulerKill: 6 gangs of 4 × 2 GPUs on 32 GPUs, so 4 fit; the scheduler is killed with
// SIGKILL once the third gang's pods are created, the burst goes on while it is dead, and it is
// started again after the sixth gang's pods.
func fltSchedulerKill() framework.Feature {
	const n, gpus = 4, 2
	first, second := []string{"gang-a", "gang-b", "gang-c"}, []string{"gang-d", "gang-e", "gang-f"}
	all := slices.Concat(first, second)
	var w *fltWatch
	var bound []string
	return framework.Feature{
		Suite: "faults", Name: "scheduler kill -9 in the middle of a burst of gangs", Lane: framework.LaneSpec{Nodes: 4, GPUsPerNode: 8},
		Serial: true, NeedsControl: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "FLT-01", Statement: "after SIGKILL of the kube-scheduler halfway through a burst of gangs (the burst going on while it is down) and a restart, the scheduler binds again (time from the kill to the first bind after the restart is measured)", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w = fltStart(ctx, t, l)
					t.Cleanup(func() {
						if t.Failed() {
							w.stop() // later steps skip; nothing else would stop the watches
						}
					})
					w.createGangs(ctx, t, l, n, gpus, first...)
					w.snapshotBefore(ctx, t, l)
					// No wait: the kill lands while the first gangs are being scheduled and bound.
					w.inject(ctx, t, l, clusters.Scheduler, true, func() {
						w.createGangs(ctx, t, l, n, gpus, second...)
					})
					w.waitRecovered(ctx, t, l, "the scheduler was restarted")
				}},
			{A: framework.Assertion{ID: "FLT-02", Statement: "after the scheduler's recovery every gang that fits is bound whole: 4 of 6 gangs with all 4 members (32 of 32 GPUs), the other 2 with none", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w.require(t)
					bound = fltWaitGangs(ctx, t, l, n, 4, all)
					t.Logf("bound gangs: %v", bound)
				}},
			{A: framework.Assertion{ID: "FLT-03", Statement: "no gang is partially placed below minCount at any time after the scheduler's recovery", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w.require(t)
					w.checkNoPartial(ctx, t, l, n, all)
				}},
			{A: framework.Assertion{ID: "FLT-04", Statement: "PodGroup status stays monotonic across the kill: no PodGroupInitiallyScheduled leaves True, and the bound gangs are True/Scheduled", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w.require(t)
					w.checkMonotonic(ctx, t, l, bound)
				}},
			{A: framework.Assertion{ID: "FLT-05", Statement: "nothing is lost across the scheduler kill: the pods and PodGroups after recovery are those before it plus those created since", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer w.stop()
					w.require(t)
					w.checkNothingLost(ctx, t, l, fltPodNames(n, second...), second)
				}},
		},
	}
}

// fltAPIServerRestart: 2 gangs of 2 × 2 GPUs bound on 16 GPUs, a graceful apiserver restart, then
// 2 more gangs that fill the lane. The scheduler's watches must come back to see them.
func fltAPIServerRestart() framework.Feature {
	const n, gpus = 2, 2
	first, second := []string{"gang-a", "gang-b"}, []string{"gang-c", "gang-d"}
	all := slices.Concat(first, second)
	var w *fltWatch
	before := map[string]*metav1.Condition{}
	return framework.Feature{
		Suite: "faults", Name: "apiserver restart between two bursts of gangs", Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 8},
		Serial: true, NeedsControl: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "FLT-06", Statement: "after a kube-apiserver restart (SIGTERM, start) the scheduler binds gangs created afterwards (time from the restart to the first bind after it is measured)", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w = fltStart(ctx, t, l)
					t.Cleanup(func() {
						if t.Failed() {
							w.stop()
						}
					})
					w.createGangs(ctx, t, l, n, gpus, first...)
					fltWaitGangs(ctx, t, l, n, len(first), first)
					for _, g := range first {
						before[g] = l.WaitCondition(ctx, t, l.Env.Scaled(30*time.Second), g, metav1.ConditionTrue, "Scheduled")
					}
					w.snapshotBefore(ctx, t, l)
					w.inject(ctx, t, l, clusters.APIServer, false, nil)
					w.createGangs(ctx, t, l, n, gpus, second...)
					w.waitRecovered(ctx, t, l, "the apiserver was restarted")
				}},
			{A: framework.Assertion{ID: "FLT-07", Statement: "after the apiserver restart every gang that fits is bound whole (4 of 4 gangs) and none is partially placed at any time after recovery", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w.require(t)
					fltWaitGangs(ctx, t, l, n, len(all), all)
					w.checkNoPartial(ctx, t, l, n, all)
				}},
			{A: framework.Assertion{ID: "FLT-08", Statement: "PodGroup status stays monotonic across the apiserver restart: conditions True before it keep their lastTransitionTime, and none leaves True", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w.require(t)
					w.checkMonotonic(ctx, t, l, all)
					for g, c := range before {
						pg, err := l.PodGroup(ctx, g)
						if err != nil {
							t.Fatal(err)
						}
						if now := framework.GroupCondition(pg); now == nil || now.Status != metav1.ConditionTrue || !now.LastTransitionTime.Equal(&c.LastTransitionTime) {
							t.Errorf("PodGroup %s: condition %s after the restart, was %s", g, framework.DescribeCondition(now), framework.DescribeCondition(c))
						}
					}
				}},
			{A: framework.Assertion{ID: "FLT-09", Statement: "nothing is lost across the apiserver restart: the pods and PodGroups after it are those before it plus those created since", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer w.stop()
					w.require(t)
					w.checkNothingLost(ctx, t, l, fltPodNames(n, second...), second)
				}},
		},
	}
}

// fltPodsRunning returns the named pods' node, phase and UID, and whether all are Running.
func fltPodsRunning(ctx context.Context, l *framework.Lane, names []string) (map[string]corev1.Pod, bool, string, error) {
	ps, err := l.Pods(ctx)
	if err != nil {
		return nil, false, "", err
	}
	got := map[string]corev1.Pod{}
	for _, p := range ps {
		if slices.Contains(names, p.Name) {
			got[p.Name] = p
		}
	}
	var states []string
	all := len(got) == len(names)
	for _, n := range names {
		p, ok := got[n]
		if !ok {
			states = append(states, n+": missing")
			continue
		}
		states = append(states, fmt.Sprintf("%s: %s on %q", n, p.Status.Phase, p.Spec.NodeName))
		if p.Status.Phase != corev1.PodRunning {
			all = false
		}
	}
	return got, all, strings.Join(states, ", "), nil
}

// fltNodesReady reports whether every lane node is Ready.
func fltNodesReady(ctx context.Context, l *framework.Lane) (bool, string, error) {
	var bad []string
	for _, n := range l.Nodes {
		node, err := l.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		if !ready || node.Spec.Unschedulable {
			bad = append(bad, n)
		}
	}
	return len(bad) == 0, fmt.Sprintf("not Ready: %v", bad), nil
}

// fltReadiness samples the lane's node readiness in the background, so a NotReady blip while
// kwok is down is seen even if it is over by the time a step looks.
type fltReadiness struct {
	stopCh   chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	notReady []string
	samples  int
}

func fltSampleReadiness(ctx context.Context, l *framework.Lane) *fltReadiness {
	r := &fltReadiness{stopCh: make(chan struct{})}
	r.wg.Go(func() {
		tick := time.NewTicker(framework.PollInterval)
		defer tick.Stop()
		for {
			ok, state, err := fltNodesReady(ctx, l)
			r.mu.Lock()
			if err == nil {
				r.samples++
				if !ok {
					r.notReady = append(r.notReady, time.Now().Format("15:04:05.000")+" "+state)
				}
			}
			r.mu.Unlock()
			select {
			case <-r.stopCh:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return r
}

// stop ends the sampling and returns the NotReady observations and the number of samples.
func (r *fltReadiness) stop() ([]string, int) {
	if r == nil {
		return nil, 0
	}
	select {
	case <-r.stopCh:
	default:
		close(r.stopCh)
	}
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.notReady), r.samples
}

// fltKwokLog logs the kwok controller's log lines about the lane's nodes (the last 80, with the
// lines marking each start), so that a failed FLT-10 shows kwok's side: when it took each node's
// lease back and which of the lane's pods it played. kwok logs only at info level, where the pods it
// drops as "read only" do not show; the lease lines do.
func fltKwokLog(t *testing.T, l *framework.Lane) {
	if l.Env.Cluster == nil || l.Env.Cluster.LogDir == "" {
		return
	}
	path := filepath.Join(l.Env.Cluster.LogDir, string(clusters.Kwok)+".log")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("kwok controller log: %v", err)
		return
	}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "=== ") || slices.ContainsFunc(l.Nodes, func(n string) bool { return strings.Contains(line, n) }) {
			lines = append(lines, line)
		}
	}
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	t.Logf("kwok controller log %s, lines about nodes %v:\n%s", path, l.Nodes, strings.Join(lines, "\n"))
}

// fltKwokRestart: kwok plays every kubelet; a restart must not make nodes NotReady, pods lose
// their Running state or be recreated, or new pods stay Pending.
func fltKwokRestart() framework.Feature {
	const n, gpus = 2, 4
	first, second := "gang-a", "gang-b"
	var w *fltWatch
	var running map[string]corev1.Pod
	var sampler *fltReadiness
	return framework.Feature{
		Suite: "faults", Name: "kwok controller restart with gangs running", Lane: framework.LaneSpec{Nodes: 2, GPUsPerNode: 8},
		Serial: true, NeedsControl: true,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "FLT-10", Statement: "after a restart of the kwok controller (the simulated kubelets) a gang created afterwards is bound whole and its pods become Running (time from the restart to those pods Running is measured)", Ref: "issue 7 (faults under load)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w = fltStart(ctx, t, l)
					t.Cleanup(func() {
						if t.Failed() {
							w.stop()
							sampler.stop()
							fltKwokLog(t, l)
						}
					})
					w.createGangs(ctx, t, l, n, gpus, first)
					names := fltPodNames(n, first)
					framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), fmt.Sprintf("pods %v Running", names), func(ctx context.Context) (bool, string, error) {
						got, ok, state, err := fltPodsRunning(ctx, l, names)
						running = got
						return ok, state, err
					})
					w.snapshotBefore(ctx, t, l)
					// Readiness is sampled while kwok is down and comes back, not only after.
					sampler = fltSampleReadiness(ctx, l)
					w.inject(ctx, t, l, clusters.Kwok, false, nil)
					w.createGangs(ctx, t, l, n, gpus, second)
					names = fltPodNames(n, second)
					// kwok v0.8.0 renews node leases under a per-process identity (hostname + a new
					// UUID), so by itself a new process could take a node only after the old lease
					// expired (40 s), dropped the events of pods bound meanwhile, and replayed them once
					// at the takeover, judged against its lease cache: when that cache lagged (a loaded
					// machine) they were dropped again for good, and pods stayed bound but Pending for
					// minutes (the likely cause, read from kwok's source, of the 90 s and 150 s failures
					// of 2026-12-07, whose kwok logs were not kept). A restarted kubelet keeps its
					// identity and its lease, so the providers' kwok Start now releases the leases the
					// stopped process held and returns once the new one holds them
					// (clusters/kwok/leases.go): new pods become Running within a second of the restart
					// (0.25-0.37 s in eight runs on 2026-12-07, 2 loaded cores). The bound stays
					// generous for loaded CI machines; it is not a measure of kwok.
					framework.Eventually(ctx, t, l.Env.Scaled(150*time.Second), fmt.Sprintf("pods %v Running", names), func(ctx context.Context) (bool, string, error) {
						_, ok, state, err := fltPodsRunning(ctx, l, names)
						return ok, state, err
					})
					w.recovered = time.Now()
					t.Logf("measurement recoverySeconds=%.3f", w.recovered.Sub(w.faultAt).Seconds())
					fltWaitGangs(ctx, t, l, n, 2, []string{first, second})
				}},
			{A: framework.Assertion{ID: "FLT-11", Statement: "the lane's nodes stay Ready and schedulable through the kwok restart and after it", Ref: "issue 7 (faults under load)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w.require(t)
					framework.Consistently(ctx, t, l.Env.Scaled(5*time.Second), "lane nodes Ready after the kwok restart", func(ctx context.Context) (bool, string, error) {
						return fltNodesReady(ctx, l)
					})
					notReady, samples := sampler.stop()
					t.Logf("%d readiness samples from before the restart to now", samples)
					if samples < 2 {
						t.Errorf("readiness was sampled %d times: the check saw nothing", samples)
					}
					for _, s := range notReady {
						t.Errorf("lane nodes not Ready around the kwok restart: %s", s)
					}
				}},
			{A: framework.Assertion{ID: "FLT-12", Statement: "pods Running before the kwok restart stay Running on the same nodes with the same UIDs", Ref: "issue 7 (faults under load)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					w.require(t)
					names := fltPodNames(n, first)
					framework.Consistently(ctx, t, l.Env.Scaled(3*time.Second), fmt.Sprintf("pods %v Running, same node and UID", names), func(ctx context.Context) (bool, string, error) {
						got, ok, state, err := fltPodsRunning(ctx, l, names)
						if err != nil || !ok {
							return ok, state, err
						}
						for name, p := range got {
							was := running[name]
							if p.UID != was.UID || p.Spec.NodeName != was.Spec.NodeName {
								return false, fmt.Sprintf("%s: uid %s on %s, was uid %s on %s", name, p.UID, p.Spec.NodeName, was.UID, was.Spec.NodeName), nil
							}
						}
						return true, state, nil
					})
				}},
			{A: framework.Assertion{ID: "FLT-13", Statement: "nothing is lost across the kwok restart: the pods and PodGroups after it are those before it plus those created since, none was deleted, no gang is partially placed and status stays monotonic", Ref: fltRef},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					defer w.stop()
					w.require(t)
					w.checkNothingLost(ctx, t, l, fltPodNames(n, second), []string{second})
					for _, e := range w.tl.Events() {
						if e.Kind == timeline.PodDeleted {
							t.Errorf("pod %s was deleted during the kwok restart", e.Pod)
						}
					}
					w.checkNoPartial(ctx, t, l, n, []string{first, second})
					w.checkMonotonic(ctx, t, l, []string{first, second})
				}},
		},
	}
}
