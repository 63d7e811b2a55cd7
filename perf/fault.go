package perf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/perf/slo"
	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// FaultAction is what a fault does to a component.
type FaultAction string

const (
	// FaultKill is SIGKILL and then a start: a crash, with no graceful shutdown.
	FaultKill FaultAction = "kill"
	// FaultRestart is SIGTERM, a wait for the exit, and a start: a graceful restart.
	FaultRestart FaultAction = "restart"
	// FaultUnhealthy marks fake GPUs unhealthy, holds them so, and marks them healthy again.
	FaultUnhealthy FaultAction = "unhealthy"
)

// FaultGPU is the Component of gpu-unhealthy faults: no process, the nodes' fake GPUs.
const FaultGPU clusters.Component = "gpu"

// AllGPUs as Fault.GPUs marks every GPU of the node unhealthy (gpu-unhealthy:all).
const AllGPUs = -1

// DefaultGPUHold is how long gpu-unhealthy keeps the GPUs unhealthy when the spec does not say:
// long enough for the scheduler to retry the gangs that no longer fit several times, short enough
// for a smoke-sized repetition.
const DefaultGPUHold = 10 * time.Second

// Fault is one fault injected into every repetition's measured window (`perf run --fault`).
type Fault struct {
	// Spec is the text it was parsed from, e.g. "scheduler-kill@50%"; results are labelled with it.
	Spec      string
	Component clusters.Component
	Action    FaultAction
	// AtFraction, in (0, 1], fires the fault once that fraction of the measured pods has been
	// created. Zero means After is used instead.
	AtFraction float64
	// After fires the fault this long after the measured phases began.
	After time.Duration
	// GPUs, Nodes and Hold are for gpu-unhealthy only: GPUs of each of Nodes nodes (AllGPUs for
	// every one) are unhealthy for Hold, counted from when the nodes' allocatable shows it.
	GPUs  int
	Nodes int
	Hold  time.Duration
}

// IsKubelet reports whether the fault restarts kubelets ("kubelet" or "kubelet/<node>").
func (f Fault) IsKubelet() bool {
	return f.Component == clusters.Kubelet || strings.HasPrefix(string(f.Component), string(clusters.Kubelet)+"/")
}

func (f Fault) String() string { return f.Spec }

// ErrFaultsNeedControl is returned when faults are asked of a cluster whose components this
// process cannot stop and start (an existing cluster, or a local one held by another process).
var ErrFaultsNeedControl = errors.New("fault injection needs a provider that can restart components (local or kind)")

// FaultForms describes the accepted --fault values, for errors and help.
const FaultForms = "COMPONENT-ACTION@WHEN: COMPONENT is scheduler, apiserver, controller-manager, kwok or etcd (local provider), " +
	"scheduler, controller-manager, kubelet (every node's) or kubelet/NODE (kind provider); " +
	"ACTION is kill (SIGKILL, then start it again) or restart (SIGTERM, then start it again); " +
	"or gpu-unhealthy[:GPUS[xNODES][:HOLD]]@WHEN (both providers): GPUS of each of NODES GPU nodes (default 1x1; GPUS may be all) are marked unhealthy, " +
	"so the nodes' allocatable nvidia.com/gpu drops, for HOLD (default 10s) and then healthy again; " +
	"WHEN is N% (once N% of the measured pods are created, 0 < N <= 100) or a duration since the measured phases began (2s, 1m30s); " +
	"e.g. scheduler-kill@50%, apiserver-restart@30%, kwok-restart@50%, scheduler-restart@2s, kubelet-restart@50%, gpu-unhealthy:4x2:20s@30%"

// faultComponents maps the short names of a fault spec to components; the binary names
// (kube-scheduler, kwok-controller, …) are accepted as well.
func faultComponents() map[string]clusters.Component {
	return map[string]clusters.Component{
		"scheduler": clusters.Scheduler, "apiserver": clusters.APIServer, "controller-manager": clusters.ControllerManager,
		"kwok": clusters.Kwok, "etcd": clusters.Etcd,
	}
}

// ParseFault parses one fault spec; see FaultForms.
func ParseFault(s string) (Fault, error) {
	bad := func(format string, args ...any) (Fault, error) {
		return Fault{}, fmt.Errorf("fault %q: %s; want %s", s, fmt.Sprintf(format, args...), FaultForms)
	}
	what, when, ok := strings.Cut(strings.TrimSpace(s), "@")
	if !ok {
		return bad("no @WHEN")
	}
	// Arguments follow the first ':' (node names, which kubelet/NODE carries, have none).
	what, args, hasArgs := strings.Cut(what, ":")
	i := strings.LastIndexByte(what, '-')
	if i <= 0 {
		return bad("no -ACTION after the component")
	}
	name, action := what[:i], FaultAction(what[i+1:])
	f := Fault{Spec: strings.TrimSpace(s), Action: action}
	if name == string(FaultGPU) {
		if action != FaultUnhealthy {
			return bad("unknown action %q for gpu (accepted: unhealthy)", action)
		}
		f.Component, f.GPUs, f.Nodes, f.Hold = FaultGPU, 1, 1, DefaultGPUHold
		if hasArgs {
			if err := parseGPUArgs(args, &f); err != nil {
				return bad("%v", err)
			}
		}
	} else {
		if c, ok := faultComponents()[name]; ok {
			f.Component = c
		} else if c, err := clusters.ParseComponent(name); err == nil {
			f.Component = c
		} else if node, ok := strings.CutPrefix(name, string(clusters.Kubelet)+"/"); name == string(clusters.Kubelet) || ok && node != "" {
			f.Component = clusters.Component(name)
		} else {
			return bad("unknown component %q (accepted: scheduler, apiserver, controller-manager, kwok, etcd, kubelet, kubelet/NODE, gpu)", name)
		}
		if action != FaultKill && action != FaultRestart {
			return bad("unknown action %q (accepted: kill, restart)", action)
		}
		if hasArgs {
			return bad("%q: only gpu-unhealthy takes arguments after ':'", args)
		}
	}
	if pct, ok := strings.CutSuffix(when, "%"); ok {
		v, err := strconv.ParseFloat(pct, 64)
		if err != nil || math.IsNaN(v) || v <= 0 || v > 100 {
			return bad("%q is not a percentage in (0, 100]", when)
		}
		f.AtFraction = v / 100
		return f, nil
	}
	d, err := time.ParseDuration(when)
	if err != nil {
		return bad("%q is neither N%% nor a duration with a unit", when)
	}
	if d < 0 {
		return bad("%q is negative", when)
	}
	f.After = d
	return f, nil
}

// parseGPUArgs reads GPUS[xNODES][:HOLD] of gpu-unhealthy into f.
func parseGPUArgs(args string, f *Fault) error {
	count, hold, hasHold := strings.Cut(args, ":")
	gpus, nodes, hasNodes := strings.Cut(count, "x")
	if gpus == "all" {
		f.GPUs = AllGPUs
	} else if n, err := strconv.Atoi(gpus); err != nil || n < 1 {
		return fmt.Errorf("GPUS %q is neither a positive count nor all", gpus)
	} else {
		f.GPUs = n
	}
	if hasNodes {
		n, err := strconv.Atoi(nodes)
		if err != nil || n < 1 {
			return fmt.Errorf("NODES %q is not a positive count", nodes)
		}
		f.Nodes = n
	}
	if hasHold {
		d, err := time.ParseDuration(hold)
		if err != nil || d <= 0 {
			return fmt.Errorf("HOLD %q is not a positive duration with a unit (10s, 1m)", hold)
		}
		f.Hold = d
	}
	return nil
}

// ParseFaults parses every spec and reports every bad one.
func ParseFaults(specs []string) ([]Fault, error) {
	var out []Fault
	var errs []error
	for _, s := range specs {
		f, err := ParseFault(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, f)
	}
	return out, errors.Join(errs...)
}

// DataItems of fault injection; each carries the labels fault (the spec), component and action.
const (
	// ItemFaultRecovery: Value is the seconds from the fault to the first bind seen after the
	// component was back (absent when no bind could be seen); Recovered is 1 when the cluster
	// bound again, or had nothing left that fits; DowntimeSeconds is fault → component ready.
	ItemFaultRecovery = "faultRecovery"
	// ItemFaultLostObjects: Value is pods plus PodGroups lost: present before the fault or created
	// by the harness, and gone at the end without the scenario deleting them.
	ItemFaultLostObjects = "faultLostObjects"
	// ItemFaultPartialGangs: Value is gangs partially placed (below minCount beyond the grace) at
	// any time after the recovery.
	ItemFaultPartialGangs = "faultPartialGangs"
)

// FaultItemNames are the DataItems a run with faults adds (ItemFaultDevicePlugin with kubelet
// faults only).
func FaultItemNames() []string {
	return []string{ItemFaultRecovery, ItemFaultLostObjects, ItemFaultPartialGangs, ItemFaultDevicePlugin}
}

// FaultObjectives are judged in every run with faults, like BuiltinObjectives in every run.
func FaultObjectives() []slo.Objective {
	o := func(item, bucket, expr string, value float64, source string) slo.Objective {
		return slo.Objective{Expr: expr, Item: item, Bucket: bucket, Op: "==", Value: value, Source: source, File: "built-in"}
	}
	return []slo.Objective{
		o(ItemFaultRecovery, "Recovered", ItemFaultRecovery+".Recovered == 1", 1, "fault tolerance: after a component restart the scheduler binds again (issue 7)"),
		o(ItemFaultLostObjects, measure.Value, ItemFaultLostObjects+" == 0", 0, "fault tolerance: a component restart loses no pod or PodGroup (issue 7)"),
		o(ItemFaultPartialGangs, measure.Value, ItemFaultPartialGangs+" == 0", 0, "gang semantics across a restart: no gang partially placed after recovery (gang-semantics-v1.37.md §3.4; issue 7)"),
	}
}

// faultRun injects the faults of one repetition and records what they did.
type faultRun struct {
	ctl clusters.ComponentControl
	cs  kubernetes.Interface
	ns  string
	// podGroups lists the namespace's PodGroups in the served version; nil means v1beta1 via cs.
	podGroups gangapi.PodGroups
	log       *slog.Logger
	// mayDelete: the scenario preempts, so pods the watch saw deleted are not lost.
	mayDelete bool
	// gpus changes GPU health (gpu-unhealthy) and reads device plugin registrations (kubelet
	// faults); gpuInv is the nodes' inventory, whose count a restarted kubelet must report again.
	gpus   clusters.GPUControl
	gpuInv fakegpu.Inventory
	// gpuWait bounds each wait for node allocatable (and device plugins); 0 means defaultGPUWait.
	gpuWait time.Duration

	armed   atomic.Bool
	created atomic.Int64 // measured pods created since start
	// serial makes faults one at a time: two restarts of one component must not interleave.
	serial sync.Mutex
	faults []*faultState
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

type faultState struct {
	Fault
	threshold int64
	fire      chan struct{}
	fireOnce  sync.Once
	// Written by the fault's goroutine, read after faultRun.wait.
	injected  bool
	at, ready time.Time
	createdAt int64
	boundAt   int // measured pods bound when the component was back
	err       error
	gpu       *gpuFault     // gpu-unhealthy only
	plugin    *pluginResult // kubelet faults on nodes with a device plugin only
}

func newFaultRun(ctl clusters.ComponentControl, cs kubernetes.Interface, ns string, faults []Fault, sc *scenario.Scenario, measuredPods int, log *slog.Logger) *faultRun {
	fr := &faultRun{ctl: ctl, cs: cs, ns: ns, log: log}
	for _, ph := range sc.Phases {
		if ph.PriorityClass != "" {
			fr.mayDelete = true
		}
	}
	for _, f := range faults {
		fs := &faultState{Fault: f, fire: make(chan struct{})}
		if f.AtFraction > 0 {
			fs.threshold = max(1, int64(math.Ceil(f.AtFraction*float64(measuredPods)-1e-9)))
		}
		fr.faults = append(fr.faults, fs)
	}
	return fr
}

// podCreated counts a created pod; the load generator calls it after every create. It is nil-safe
// so the runner can call it whether or not faults were asked for.
func (fr *faultRun) podCreated() {
	if fr == nil || !fr.armed.Load() {
		return
	}
	n := fr.created.Add(1)
	for _, fs := range fr.faults {
		if fs.AtFraction > 0 && n >= fs.threshold {
			fs.fireOnce.Do(func() { close(fs.fire) })
		}
	}
}

// start arms the faults at the start of the measured window. Only pods created from now on count
// toward a percentage, so a prefill does not trigger anything.
func (fr *faultRun) start(ctx context.Context, windowStart time.Time, tl *timeline.Timeline, measured []string) {
	if fr == nil {
		return
	}
	ctx, fr.cancel = context.WithCancel(ctx)
	fr.armed.Store(true)
	for _, fs := range fr.faults {
		fr.wg.Go(func() {
			var timer <-chan time.Time // nil for percentages: only fire can trigger them
			if fs.AtFraction == 0 {
				t := time.NewTimer(time.Until(windowStart.Add(fs.After)))
				defer t.Stop()
				timer = t.C
			}
			select {
			case <-fs.fire:
			case <-timer:
			case <-ctx.Done():
				return
			}
			fr.inject(ctx, fs, tl, measured)
		})
	}
}

// inject breaks the component and starts it again. What existed before the fault is taken from
// the timeline afterwards (every create the apiserver acknowledged before fs.at), not listed
// here: a list of thousands of pods would delay the fault past its trigger.
func (fr *faultRun) inject(ctx context.Context, fs *faultState, tl *timeline.Timeline, measured []string) {
	fr.serial.Lock()
	defer fr.serial.Unlock()
	fs.createdAt = fr.created.Load()
	if fs.Action == FaultUnhealthy {
		fr.injectGPUs(ctx, fs, tl, measured)
		return
	}
	var plugins *pluginWatch
	if fs.IsKubelet() {
		// Registration counts are read before the fault: a rise afterwards proves the plugin
		// registered with the new kubelet, not that an old status was read.
		var err error
		if plugins, err = fr.watchPlugins(ctx, fs); err != nil {
			fs.err = fmt.Errorf("device plugins before the kubelet fault: %w", err)
			return
		}
	}
	fs.at = time.Now()
	if plugins != nil {
		pctx, pcancel := context.WithCancel(ctx)
		go plugins.run(pctx, int64(fr.gpuInv.Count))
		defer func() {
			if fs.err != nil {
				pcancel() // the kubelets may not be back: nothing to wait for
			}
			close(plugins.back)
			<-plugins.done
			pcancel()
			fs.plugin = &plugins.res
		}()
	}
	var err error
	switch fs.Action {
	case FaultKill:
		err = fr.ctl.Kill(ctx, fs.Component)
	case FaultRestart:
		err = fr.ctl.Stop(ctx, fs.Component)
	}
	if err != nil {
		fs.err = fmt.Errorf("%s %s: %w", fs.Action, fs.Component, err)
		return
	}
	fs.injected = true
	fr.log.Info("fault injected", "fault", fs.Spec, "measuredPodsCreated", fs.createdAt)
	if err := fr.ctl.Start(ctx, fs.Component); err != nil {
		fs.err = fmt.Errorf("start %s again after the fault: %w", fs.Component, err)
		return
	}
	fs.ready = time.Now()
	fs.boundAt = tl.BoundIn(measured...)
	fr.log.Info("component back", "fault", fs.Spec, "down", fs.ready.Sub(fs.at).Round(time.Millisecond))
}

// names lists the namespace's pods and PodGroups.
func (fr *faultRun) names(ctx context.Context) (pods, groups map[string]bool, err error) {
	pl, err := fr.cs.CoreV1().Pods(fr.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	gl, err := fr.podGroupClient().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	pods, groups = make(map[string]bool, len(pl.Items)), make(map[string]bool, len(gl.Items))
	for _, p := range pl.Items {
		pods[p.Name] = true
	}
	for _, g := range gl.Items {
		groups[g.Name] = true
	}
	return pods, groups, nil
}

// wait returns once every fault was injected and its component is back, or ctx ended; a fault
// not injected (its trigger never came, or the injection failed) is an error: the run would
// otherwise look like a fault run that went well.
func (fr *faultRun) wait(ctx context.Context) error {
	if fr == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { fr.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		fr.cancel()
		<-done
	}
	var errs []error
	for _, fs := range fr.faults {
		switch {
		case fs.err != nil:
			errs = append(errs, fmt.Errorf("fault %s: %w", fs.Spec, fs.err))
		case !fs.injected:
			errs = append(errs, fmt.Errorf("fault %s was not injected: the repetition ended first (%d measured pods created): %w", fs.Spec, fr.created.Load(), context.Cause(ctx)))
		}
	}
	return errors.Join(errs...)
}

// stop abandons faults not yet injected and waits for one in progress; safe to call more than once.
func (fr *faultRun) stop() {
	if fr == nil || fr.cancel == nil {
		return
	}
	fr.cancel()
	fr.wg.Wait()
}

// restarted is the set of components the faults restarted.
func (fr *faultRun) restarted() map[clusters.Component]bool {
	out := map[clusters.Component]bool{}
	for _, fs := range fr.faults {
		if fs.injected && fs.Action != FaultUnhealthy {
			out[fs.Component] = true
		}
	}
	return out
}

// items computes the fault DataItems once the repetition's pods are bound (or the wait ended).
// gathered are the measurements' items: the invariants' unbound-fitting count tells "nothing was
// bound after the restart because nothing fitting was left" from "the scheduler did not recover".
func (fr *faultRun) items(ctx context.Context, events []timeline.Event, grace time.Duration, gathered []results.DataItem, note func(string, ...any)) ([]results.DataItem, error) {
	podsAfter, groupsAfter, err := fr.names(ctx)
	if err != nil {
		return nil, fmt.Errorf("faults: list the namespace after recovery: %w", err)
	}
	created, createdGroups, deleted := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range events {
		switch e.Kind {
		case timeline.PodCreated:
			created[e.Pod] = true
		case timeline.PodGroupCreated:
			createdGroups[e.Group] = true
		case timeline.PodDeleted:
			deleted[e.Pod] = true
		}
	}
	unboundFitting := -1.0
	for _, it := range gathered {
		if it.Name == measure.ItemUnboundFitting {
			unboundFitting = it.Data[measure.Value]
		}
	}
	var out []results.DataItem
	for _, fs := range fr.faults {
		if !fs.injected || fs.ready.IsZero() {
			continue
		}
		labels := map[string]string{"fault": fs.Spec, "component": string(fs.Component), "action": string(fs.Action)}
		rec := map[string]float64{
			"DowntimeSeconds":  fs.ready.Sub(fs.at).Seconds(),
			"AtPodsCreated":    float64(fs.createdAt),
			"FaultUnixSeconds": float64(fs.at.UnixNano()) / 1e9,
			"ReadyUnixSeconds": float64(fs.ready.UnixNano()) / 1e9,
		}
		gpuItems(fs, rec)
		what := "the component was down"
		if fs.gpu != nil {
			what = "the GPUs were unhealthy"
		}
		recoveredAt := fs.ready
		if first, ok := timeline.FirstBindAfter(events, fs.ready); ok {
			rec[measure.Value] = first.Time.Sub(fs.at).Seconds()
			rec["Recovered"] = 1
			recoveredAt = first.Time
			note("fault %s: %s %s; first bind %s after the fault (pod %s)", fs.Spec, what,
				fs.ready.Sub(fs.at).Round(time.Millisecond), first.Time.Sub(fs.at).Round(time.Millisecond), first.Pod)
		} else {
			// Nothing bound after the restart: a failure only if pods that fit were left unbound.
			rec["Recovered"] = b2f(unboundFitting == 0)
			rec["Unmeasured"] = 1
			note("fault %s: no pod was bound after %s was back (%d measured pods were bound by then, %g pods that fit left unbound), so the time to recover is not measured; trigger the fault earlier to measure it",
				fs.Spec, fs.Component, fs.boundAt, unboundFitting)
		}
		out = append(out, results.DataItem{Name: ItemFaultRecovery, Unit: "s", Labels: labels, Data: rec})
		if it, ok := pluginItem(fs, labels, note); ok {
			out = append(out, it)
		}

		podsBefore, groupsBefore := createdBefore(events, fs.at)
		podsLost := lost(podsBefore, created, podsAfter, deleted, fr.mayDelete)
		groupsLost := lost(groupsBefore, createdGroups, groupsAfter, nil, false)
		for _, n := range podsLost {
			note("fault %s: pod %s existed before the fault or was created, and is gone", fs.Spec, n)
		}
		for _, n := range groupsLost {
			note("fault %s: PodGroup %s existed before the fault or was created, and is gone", fs.Spec, n)
		}
		out = append(out, results.DataItem{Name: ItemFaultLostObjects, Unit: "objects", Labels: labels, Data: map[string]float64{
			measure.Value:   float64(len(podsLost) + len(groupsLost)),
			"PodsBefore":    float64(len(podsBefore)),
			"PodsAfter":     float64(len(podsAfter)),
			"PodsCreated":   float64(len(created)),
			"PodsLost":      float64(len(podsLost)),
			"GroupsBefore":  float64(len(groupsBefore)),
			"GroupsAfter":   float64(len(groupsAfter)),
			"GroupsCreated": float64(len(createdGroups)),
			"GroupsLost":    float64(len(groupsLost)),
		}})

		// GPUs going unhealthy stop no component: the scheduler is at work all along, so a gang
		// it leaves partial while they are unhealthy counts too, not only after the heal.
		partialFrom := recoveredAt
		if fs.gpu != nil {
			partialFrom = fs.at
		}
		partial := timeline.PartialAfter(events, grace, partialFrom)
		for _, p := range partial {
			note("fault %s: partial placement after recovery: %s", fs.Spec, p)
		}
		out = append(out, results.DataItem{Name: ItemFaultPartialGangs, Unit: "gangs", Labels: labels, Data: map[string]float64{
			measure.Value: float64(len(partial)), "GraceSeconds": grace.Seconds(),
		}})
	}
	return out, nil
}

// createdBefore returns the pods and PodGroups whose create the apiserver acknowledged before t:
// what the namespace held when the fault came (the harness is the only writer there).
func createdBefore(events []timeline.Event, t time.Time) (pods, groups map[string]bool) {
	pods, groups = map[string]bool{}, map[string]bool{}
	for _, e := range events {
		if !e.Time.Before(t) {
			continue
		}
		switch e.Kind {
		case timeline.PodCreated:
			pods[e.Pod] = true
		case timeline.PodGroupCreated:
			groups[e.Group] = true
		}
	}
	return pods, groups
}

// lost lists the objects present before the fault or created by the harness that are not there
// at the end (listed from the apiserver). Objects the watch saw deleted are excused only when the scenario deletes on purpose
// (preemption): in any other scenario a deletion is itself a loss.
func lost(before, created, after, deleted map[string]bool, mayDelete bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, set := range []map[string]bool{before, created} {
		for n := range set {
			if seen[n] || after[n] || (mayDelete && deleted[n]) {
				continue
			}
			seen[n] = true
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// podGroupClient is podGroups when the runner set it (the served gang API version), else v1beta1.
func (fr *faultRun) podGroupClient() gangapi.PodGroups {
	if fr.podGroups != nil {
		return fr.podGroups
	}
	return fr.cs.SchedulingV1beta1().PodGroups(fr.ns)
}
