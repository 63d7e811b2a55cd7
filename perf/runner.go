// Package perf is gangbench's throughput benchmark: it runs scenarios (perf/scenario) on clusters
// shaped for them, generates the load (perf/loadgen), takes the measurements (perf/measure), judges
// them against SLOs (perf/slo) and writes run.json and events.jsonl. Reports are computed from those
// files alone.
package perf

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/observe/speedprobe"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/loadgen"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/perf/slo"
	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// Files a run writes into its directory besides run.json.
const (
	EventsFile = "events.jsonl"
	// ItemHarness describes this process: peak RSS and CPU, so a run shows the harness was not the
	// bottleneck.
	ItemHarness = "harness"
	// ItemMachineSpeed is the CPU time the speed probe's fixed work unit took in the window
	// (observe/speedprobe), median of its Samples: larger is a slower machine.
	ItemMachineSpeed = "machineSpeed"
	// LabelRound is the round (Options.Rounds) an item was measured in, "1" on; in a reference
	// ratio it may also be RoundMedian.
	LabelRound = "round"
)

// Options configure a run.
type Options struct {
	Scenarios []*scenario.Scenario
	// Objectives are the SLO file's; BuiltinObjectives are always added.
	Objectives []slo.Objective
	Source     ClusterSource
	RunDir     string
	// ID and Started identify the run; zero values get defaults.
	ID      string
	Started time.Time
	Command string
	// SchedulerBinary is recorded in the environment when a custom scheduler runs.
	SchedulerBinary string
	// LoadQPS, LoadBurst and Workers set the load generator; zero means its defaults.
	LoadQPS   float32
	LoadBurst int
	Workers   int
	// PartialGrace: see timeline.DefaultPartialGrace.
	PartialGrace time.Duration
	// Faults are injected into every repetition's measured window (the cluster must have Control).
	Faults []Fault
	// Profile is the load profile the clusters were made with (ApplyProfile), for the record.
	Profile string
	// QuietWait bounds the wait for a quiet control plane before each measured window (see
	// QuietRate): 0 means QuietTimeout, a negative value skips the wait.
	QuietWait time.Duration
	// CPUProfile, when positive, fetches CPU profiles of the apiserver and the scheduler over the
	// first CPUProfile of every measured window into RunDir (EnableCPUProfiling must have switched
	// their handlers on).
	CPUProfile time.Duration
	// Rounds runs the whole scenario set this many times (0 means once), each round on clusters of
	// its own: one round's clusters are deleted before the next round creates any. Repetitions are
	// numbered on across rounds, and with more than one round every item carries its round (label
	// round), so a figure can be set beside what ran right before and after its round.
	Rounds int
	// BetweenRounds, when set, runs after round n's clusters are deleted and before round n+1
	// starts (n from 1), with the machine to itself: perf run --reference runs scheduler_perf there,
	// so that every round is bracketed by reference runs.
	BetweenRounds func(ctx context.Context, n int) error
	// SpeedProbe, when set, runs for the whole run: every measured window then gets the machine's
	// speed in it (ItemMachineSpeed), to set beside other runs' windows.
	SpeedProbe *speedprobe.Probe
	// Skipped are scenarios of the selected set that do not fit the cluster; each is recorded as a
	// skipped case with its reason, so the run says what it did not measure.
	Skipped  []Skipped
	Progress *Progress
	Log      *slog.Logger
}

// Run runs every scenario and returns the run record, which it has also written to RunDir (with
// events.jsonl) whatever happened. A non-nil error is a harness or cluster failure (or an
// interrupt); SLO violations are verdicts in the record, not errors.
func Run(ctx context.Context, o Options) (*results.Run, error) {
	if o.Started.IsZero() {
		o.Started = time.Now()
	}
	if o.ID == "" {
		o.ID = results.NewRunID(o.Started)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Command == "" {
		o.Command = "perf run"
	}
	if len(o.Faults) > 0 {
		o.Scenarios = withInvariants(o.Scenarios)
	}
	r := &runner{o: o, run: &results.Run{ID: o.ID, Command: o.Command, Started: o.Started}, apis: map[string]clusters.GPUAPI{}}
	r.run.Environment = results.Environment{Host: results.CurrentHost(), SchedulerBinary: o.SchedulerBinary, Profile: o.Profile, Extra: map[string]string{
		"goVersion": runtime.Version(), "cpus": strconv.Itoa(runtime.NumCPU()),
	}}
	if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
		return r.run, err
	}
	ev, err := os.Create(filepath.Join(o.RunDir, EventsFile))
	if err != nil {
		return r.run, err
	}
	r.events = ev
	runErr := r.all(ctx)
	if cerr := ev.Close(); runErr == nil {
		runErr = cerr
	}
	// Interrupted: the caller's context ended (a signal, or the run's deadline), not a wait inside.
	r.finish(runErr, ctx.Err() != nil)
	if err := results.Write(o.RunDir, r.run); err != nil {
		return r.run, errors.Join(runErr, err)
	}
	return r.run, runErr
}

type runner struct {
	o      Options
	run    *results.Run
	events *os.File
	mu     sync.Mutex // guards run.Notes, written by measurements' Note
	// current cluster, reused by consecutive scenarios of one shape
	cl    *clusters.Cluster
	shape Shape
	info  ClusterInfo
	// api is the gang API version the current cluster serves.
	api gangapi.API
	// round is the round running (from 1).
	round int
	// apis is the GPU API each scenario's cluster had, for the twin ratios (GPUAPIRatios).
	apis map[string]clusters.GPUAPI
}

func (r *runner) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.run.Notes = append(r.run.Notes, fmt.Sprintf(format, args...))
}

func (r *runner) all(ctx context.Context) error {
	defer r.closeCluster(ctx)
	// Faults the provider cannot inject, and GPU APIs it cannot publish, fail here, before any
	// cluster starts.
	if p, ok := r.o.Source.(sourceCapabilities); ok {
		if len(r.o.Faults) > 0 {
			if err := CheckFaults(r.o.Faults, p.Capabilities(), r.o.Scenarios); err != nil {
				return err
			}
		}
		if err := CheckGPUAPIs(r.o.Scenarios, p.Capabilities(), r.o.Faults); err != nil {
			return err
		}
	}
	r.o.Scenarios = order(r.o.Scenarios, r.shapeOf)
	for r.round = 1; r.round <= max(r.o.Rounds, 1); r.round++ {
		if r.round > 1 {
			// A round starts on fresh clusters, and whatever runs between rounds has the machine.
			r.closeCluster(ctx)
			if r.o.BetweenRounds != nil {
				if err := r.o.BetweenRounds(ctx, r.round-1); err != nil {
					return fmt.Errorf("after round %d: %w", r.round-1, err)
				}
			}
		}
		if err := r.roundOnce(ctx); err != nil {
			if r.o.Rounds > 1 {
				return fmt.Errorf("round %d: %w", r.round, err)
			}
			return err
		}
	}
	return nil
}

// roundOnce runs every scenario once (with its repetitions).
func (r *runner) roundOnce(ctx context.Context) error {
	for i, sc := range r.o.Scenarios {
		if err := ctx.Err(); err != nil {
			return err
		}
		shape := r.shapeOf(sc)
		if r.cl != nil && r.shape != shape {
			r.closeCluster(ctx)
		}
		if r.cl == nil {
			if err := r.openCluster(ctx, sc, shape); err != nil {
				return fmt.Errorf("scenario %s: cluster: %w", sc.Name, err)
			}
		}
		if err := faultsPossible(r.o.Faults, r.cl); err != nil {
			return fmt.Errorf("scenario %s: cluster %s (%s): %w", sc.Name, r.cl.Name, r.cl.Provider, err)
		}
		// The cluster outlives this scenario when the next one has the same shape (or it is not
		// ours): only then is cleaning up worth the time.
		keep := r.o.Source.Persistent() || (i+1 < len(r.o.Scenarios) && r.shapeOf(r.o.Scenarios[i+1]) == shape)
		if err := r.scenario(ctx, sc, keep); err != nil {
			return fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
	}
	return nil
}

// order runs scenarios of one shape back to back, so they share a cluster, and within a shape the
// smallest first (pods, then PodGroups), so the largest, whose clean-up would take longest, is the
// one whose cluster is deleted instead. Shapes keep the order of their first scenario.
func order(scs []*scenario.Scenario, shapeOf func(*scenario.Scenario) Shape) []*scenario.Scenario {
	out := slices.Clone(scs)
	first := map[Shape]int{}
	for i, sc := range out {
		if _, ok := first[shapeOf(sc)]; !ok {
			first[shapeOf(sc)] = i
		}
	}
	slices.SortStableFunc(out, func(a, b *scenario.Scenario) int {
		if d := first[shapeOf(a)] - first[shapeOf(b)]; d != 0 {
			return d
		}
		if d := a.TotalPods()*a.Repetitions - b.TotalPods()*b.Repetitions; d != 0 {
			return d
		}
		return a.TotalGroups()*a.Repetitions - b.TotalGroups()*b.Repetitions
	})
	return out
}

// shapeResolver is a source that says what a shape becomes on its clusters: a shape that names no
// GPU API gets the base spec's, so it is the same cluster as one that names that API.
type shapeResolver interface {
	Resolve(Shape) Shape
}

// shapeOf is the shape a scenario's cluster has on this run's source: scenarios of equal shapes
// share a cluster.
func (r *runner) shapeOf(sc *scenario.Scenario) Shape {
	s := ShapeOf(sc)
	if rs, ok := r.o.Source.(shapeResolver); ok {
		s = rs.Resolve(s)
	}
	return s
}

func (r *runner) openCluster(ctx context.Context, sc *scenario.Scenario, shape Shape) error {
	start := time.Now()
	nb := r.o.Progress.Nodes(sc.Name, shape.Nodes)
	r.o.Log.Info("creating cluster", "scenario", sc.Name, "nodes", shape.Nodes, "gpusPerNode", shape.GPUsPerNode, "schedulerQPS", shape.KubeAPIQPS)
	cl, info, err := r.o.Source.Create(ctx, shape, nb.Set)
	if err != nil {
		return err
	}
	r.cl, r.shape, r.info = cl, shape, info
	for _, n := range info.Notes {
		r.note("%s: %s", sc.Name, n)
	}
	r.o.Log.Info("cluster ready", "name", cl.Name, "elapsed", time.Since(start).Round(time.Millisecond))
	env := &r.run.Environment
	env.Provider = cl.Provider
	env.KubernetesVersion = cl.Versions[clusters.APIServer]
	env.SchedulerVersion = cl.Versions[clusters.Scheduler]
	cs, err := r.client(rest.CopyConfig(cl.RESTConfig))
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	api, err := scenarios.Preflight(pctx, cs, scenarios.PreflightNamespace)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	r.api = api
	env.GangAPI = api.GroupVersion()
	if r.o.Source.Persistent() {
		return nil // not our nodes: use them as they are
	}
	return kwok.WaitSchedulable(ctx, cs, fakegpu.LabelManaged+"=true", shape.Nodes, 3*time.Minute, 15*time.Second, func(format string, args ...any) {
		r.note("%s: %s", cl.Name, fmt.Sprintf(format, args...))
	})
}

func (r *runner) closeCluster(ctx context.Context) {
	if r.cl == nil {
		return
	}
	cl := r.cl
	r.cl = nil
	// Teardown must happen after an interrupt too.
	if err := cl.Close(context.WithoutCancel(ctx)); err != nil {
		r.note("deleting cluster %s: %v", cl.Name, err)
	}
}

// client returns a clientset for the harness's own reads and watches: protobuf, because listing
// every node and pod at the end of a repetition is this process's largest allocation.
func (r *runner) client(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg.QPS, cfg.Burst = 200, 400
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.WarningHandler = rest.NoWarnings{}
	return kubernetes.NewForConfig(cfg)
}

// gangClient reaches PodGroups in the version the cluster serves, with cfg's limits.
func (r *runner) gangClient(cs kubernetes.Interface, cfg *rest.Config) (*gangapi.Client, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return gangapi.NewClient(r.api, cs, dyn)
}

func (r *runner) scenario(ctx context.Context, sc *scenario.Scenario, keep bool) error {
	cfg := rest.CopyConfig(r.cl.RESTConfig)
	cs, err := r.client(cfg)
	if err != nil {
		return err
	}
	gang, err := r.gangClient(cs, cfg)
	if err != nil {
		return err
	}
	loadCfg := loadgen.Config(r.cl.RESTConfig, r.loadQPS(), r.loadBurst())
	loadCS, err := kubernetes.NewForConfig(loadCfg)
	if err != nil {
		return err
	}
	loadGang, err := r.gangClient(loadCS, loadCfg)
	if err != nil {
		return err
	}
	r.record(sc)
	created, err := r.priorityClasses(ctx, cs, sc)
	defer func() {
		if !keep {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, pc := range created {
			if err := cs.SchedulingV1().PriorityClasses().Delete(dctx, pc, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				r.note("%s: delete PriorityClass %s: %v", sc.Name, pc, err)
			}
		}
	}()
	if err != nil {
		return err
	}
	for k := 1; k <= sc.Repetitions; k++ {
		// Numbered on across rounds, so each repetition's files and items stay apart.
		rep := (r.round-1)*sc.Repetitions + k
		last := k == sc.Repetitions
		if err := r.repetition(ctx, cs, loadCS, gang, loadGang, sc, rep, keep || !last); err != nil {
			return fmt.Errorf("repetition %d: %w", rep, err)
		}
	}
	return nil
}

func (r *runner) loadQPS() float32 {
	if r.o.LoadQPS > 0 {
		return r.o.LoadQPS
	}
	return loadgen.DefaultQPS
}

func (r *runner) loadBurst() int {
	if r.o.LoadBurst > 0 {
		return r.o.LoadBurst
	}
	return loadgen.DefaultBurst
}

// record writes what identifies the scenario into the environment.
func (r *runner) record(sc *scenario.Scenario) {
	x := r.run.Environment.Extra
	p := "scenario." + sc.Name + "."
	x[p+"file"] = sc.File
	x[p+"hash"] = sc.Hash
	x[p+"nodes"] = strconv.Itoa(sc.Cluster.Nodes)
	x[p+"gpusPerNode"] = strconv.Itoa(sc.Cluster.GPUsPerNode)
	x[p+"schedulerKubeAPIQPS"] = r.info.SchedulerQPS
	x[p+"schedulerKubeAPIBurst"] = r.info.SchedulerBurst
	if f := sc.Features(); len(f) > 0 {
		x[p+"features"] = strings.Join(f, ",")
	}
	x[p+"gpuAPI"] = string(r.info.GPUAPI)
	r.apis[sc.Name] = r.info.GPUAPI
	if sc.Cluster.NodesPerRack > 0 {
		x[p+"racks"] = fmt.Sprintf("%d of %d nodes, %d to a block", sc.Cluster.Racks(), sc.Cluster.NodesPerRack, sc.Cluster.RacksPerBlock)
	}
	x["loadgen.qps"] = strconv.FormatFloat(float64(r.loadQPS()), 'f', -1, 32)
	x["loadgen.burst"] = strconv.Itoa(r.loadBurst())
	if len(sc.Params) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(sc.Params)) {
			kv = append(kv, k+"="+sc.Params[k])
		}
		x[p+"params"] = strings.Join(kv, ",")
	}
	env := &r.run.Environment
	if env.Nodes == 0 || env.Nodes == sc.Cluster.Nodes {
		env.Nodes, env.GPUsPerNode = sc.Cluster.Nodes, sc.Cluster.GPUsPerNode
	} else {
		env.Nodes, env.GPUsPerNode = -1, -1 // mixed; finish clears it, the per-scenario extras tell
	}
}

// priorityClasses creates the scenario's classes; it returns the ones it made.
func (r *runner) priorityClasses(ctx context.Context, cs kubernetes.Interface, sc *scenario.Scenario) ([]string, error) {
	var made []string
	done := map[string]bool{}
	for _, ph := range sc.Phases {
		if ph.PriorityClass == "" || done[ph.PriorityClass] {
			continue
		}
		done[ph.PriorityClass] = true
		_, err := cs.SchedulingV1().PriorityClasses().Create(ctx, scenarios.PriorityClass(ph.PriorityClass, ph.Priority, false), metav1.CreateOptions{})
		switch {
		case err == nil:
			made = append(made, ph.PriorityClass)
		case apierrors.IsAlreadyExists(err):
			got, gerr := cs.SchedulingV1().PriorityClasses().Get(ctx, ph.PriorityClass, metav1.GetOptions{})
			if gerr != nil {
				return made, gerr
			}
			if got.Value != ph.Priority {
				return made, fmt.Errorf("PriorityClass %s exists with value %d; the scenario needs %d", ph.PriorityClass, got.Value, ph.Priority)
			}
		default:
			return made, fmt.Errorf("create PriorityClass %s: %w", ph.PriorityClass, err)
		}
	}
	return made, nil
}

// step is phases that start together.
type step struct {
	phases []scenario.Phase
	start  scenario.Start
}

func steps(phases []scenario.Phase) []step {
	var out []step
	for _, ph := range phases {
		if ph.Start == scenario.WithPrevious && len(out) > 0 {
			out[len(out)-1].phases = append(out[len(out)-1].phases, ph)
			continue
		}
		out = append(out, step{phases: []scenario.Phase{ph}, start: ph.Start})
	}
	return out
}

func phaseNames(phases []scenario.Phase) []string {
	var out []string
	for _, p := range phases {
		out = append(out, p.Name)
	}
	return out
}

func podsOf(phases []scenario.Phase) int {
	n := 0
	for _, p := range phases {
		n += p.Pods()
	}
	return n
}

func randSuffix() string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startWatch starts a watch of the repetition's namespace, allowing its initial list a minute.
func startWatch(ctx context.Context, start func(context.Context) error) error {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return start(sctx)
}

// repetition runs one repetition in its own namespace.
func (r *runner) repetition(ctx context.Context, cs, loadCS kubernetes.Interface, gang, loadGang *gangapi.Client, sc *scenario.Scenario, rep int, cleanup bool) (err error) {
	ns := fmt.Sprintf("%s-%d-%s", sc.Name, rep, randSuffix())
	log := r.o.Log.With("scenario", sc.Name, "repetition", rep)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{scenarios.ManagedLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	if cleanup {
		defer func() {
			if cerr := deleteNamespace(context.WithoutCancel(ctx), cs, gang, ns, r.info.GPUAPI.DRA()); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
	}
	var prefill, measured []scenario.Phase
	for _, ph := range sc.Phases {
		if ph.Prefill {
			prefill = append(prefill, ph)
		} else {
			measured = append(measured, ph)
		}
	}
	gb, pb, bb := r.o.Progress.Repetition(fmt.Sprintf("%s#%d", sc.Name, rep), sc.TotalGroups(), sc.TotalPods())
	defer r.o.Progress.Settle()
	var bound atomic.Int64
	tl := timeline.NewTimeline(func(string) { bb.Set(int(bound.Add(1))) })
	rec := timeline.NewRecorder(cs, ns, tl)
	if err := startWatch(ctx, rec.Start); err != nil {
		return err
	}
	defer rec.Stop()
	var jobs *loadgen.JobGroups
	if slices.ContainsFunc(sc.Phases, func(p scenario.Phase) bool { return p.ViaJob }) {
		jobs = loadgen.NewJobGroups(cs, ns, tl)
		if err := startWatch(ctx, jobs.Start); err != nil {
			return err
		}
		defer jobs.Stop()
	}
	defer func() {
		if werr := r.writeEvents(sc.Name, rep, tl.Events()); werr != nil {
			err = errors.Join(err, werr)
		}
	}()
	groupsMade, podsMade := 0, 0
	var progressMu sync.Mutex
	var faults *faultRun // nil without faults; its methods are nil-safe
	if len(r.o.Faults) > 0 {
		faults = newFaultRun(r.cl.Control, cs, ns, r.o.Faults, sc, podsOf(measured), log)
		faults.podGroups = gang.PodGroups(ns)
		faults.gpus, faults.gpuInv = r.cl.GPUs, r.cl.GPU.WithDefaults()
		// An error return must not leave an injection running against a cluster being deleted.
		defer faults.stop()
	}
	gen := &loadgen.Generator{
		Client: loadCS, Gang: loadGang, Namespace: ns, SchedulerName: r.cl.SchedulerName, Workers: r.o.Workers, Timeline: tl, Jobs: jobs, GPUAPI: r.info.GPUAPI,
		OnGroup: func() { progressMu.Lock(); groupsMade++; gb.Set(groupsMade); progressMu.Unlock() },
		OnPod: func() {
			progressMu.Lock()
			podsMade++
			pb.Set(podsMade)
			progressMu.Unlock()
			faults.podCreated()
		},
	}
	deadline := time.Now().Add(sc.Timeout)
	rctx, rcancel := context.WithDeadline(ctx, deadline)
	defer rcancel()

	// Prefill: the starting state, bound before anything is measured.
	if len(prefill) > 0 {
		log.Info("prefill", "pods", podsOf(prefill))
		if err := podGroupsAhead(rctx, gen, prefill); err != nil {
			return err
		}
		if _, err := r.runSteps(rctx, gen, tl, steps(prefill), nil, sc.Settle); err != nil {
			return err
		}
		if out := waitBound(rctx, tl, phaseNames(prefill), podsOf(prefill), sc.Settle); out != outcomeComplete {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.note("%s#%d: prefill ended %s with %d of %d pods bound; measuring anyway", sc.Name, rep, out, tl.BoundIn(phaseNames(prefill)...), podsOf(prefill))
		}
	}

	env := &measure.Env{
		Cluster: r.cl, Client: cs, Gang: gang, Namespace: ns, Scenario: sc, Timeline: tl, Measured: phaseNames(measured),
		PartialGrace: r.o.PartialGrace, GPUAPI: r.info.GPUAPI,
		Note: func(format string, args ...any) {
			r.note("%s#%d: %s", sc.Name, rep, fmt.Sprintf(format, args...))
		},
	}
	// PodGroups of in-order phases come before the quiet wait, as scheduler_perf creates them in an
	// op before the measured one: neither their creates nor the scheduler's handling of them is
	// in the window.
	if err := podGroupsAhead(rctx, gen, measured); err != nil {
		return err
	}
	quiet, err := r.settle(ctx, sc, rep)
	if err != nil {
		return err
	}
	reg := measure.Registry()
	var ms []measure.Measurement
	for _, name := range sc.Measurements {
		m := reg[name](env)
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := m.Start(mctx)
		cancel()
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	log.Info("measuring", "pods", podsOf(measured), "groups", sc.TotalGroups())
	windowStart := time.Now()
	var profiles *cpuProfiles
	if r.o.CPUProfile > 0 {
		profiles = startCPUProfiles(ctx, r.cl, r.o.CPUProfile, r.o.RunDir, sc.Name, rep)
		// Fetched after the figures are gathered, so a profile longer than the window does not
		// stretch it; an error return still waits, so no fetch outlives the repetition.
		defer func() { r.noteCPUProfiles(sc.Name, rep, profiles) }()
	}
	faults.start(rctx, windowStart, tl, phaseNames(measured))
	created, err := r.runSteps(rctx, gen, tl, steps(measured), prefill, sc.Settle)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	out := waitBound(rctx, tl, phaseNames(measured), podsOf(measured), sc.Settle)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if faults != nil {
		// A time-triggered fault may come after the last bind: it is still injected, and the
		// state after it is judged.
		if err := faults.wait(rctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		// The wait may have settled while the component was down; the restarted one gets its
		// own settle period.
		if out != outcomeComplete {
			out = waitBound(rctx, tl, phaseNames(measured), podsOf(measured), sc.Settle)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		env.Restarted = faults.restarted()
	}
	elapsed := time.Since(windowStart)
	if out != outcomeComplete {
		r.note("%s#%d: %s after %s with %d of %d measured pods bound", sc.Name, rep, out, elapsed.Round(time.Millisecond), tl.BoundIn(phaseNames(measured)...), podsOf(measured))
	}
	log.Info("gathering", "outcome", out, "elapsed", elapsed.Round(time.Millisecond))
	// The GPU API labels every item, as the node count does: thresholds measured on one API do not
	// hold on the other, so an SLO selects by it (bindingRate{gpuAPI=dra}.avg >= …).
	labels := map[string]string{"scenario": sc.Name, "repetition": strconv.Itoa(rep), "nodes": strconv.Itoa(sc.Cluster.Nodes), LabelGPUAPI: string(r.info.GPUAPI)}
	if r.o.Rounds > 1 {
		labels[LabelRound] = strconv.Itoa(r.round)
	}
	var items []results.DataItem
	gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer gcancel()
	for i, m := range ms {
		got, err := m.Gather(gctx)
		if err != nil {
			return fmt.Errorf("gather %s: %w", sc.Measurements[i], err)
		}
		items = append(items, got...)
	}
	if faults != nil {
		grace := r.o.PartialGrace
		if grace <= 0 {
			grace = timeline.DefaultPartialGrace
		}
		fitems, err := faults.items(gctx, tl.Events(), grace, items, env.Note)
		if err != nil {
			return err
		}
		items = append(items, fitems...)
	}
	if it, ok := creationItem(created, items); ok {
		items = append(items, it)
	}
	if unit, n := r.o.SpeedProbe.Between(windowStart, windowStart.Add(elapsed)); n > 0 {
		items = append(items, MachineSpeedItem(unit, n))
	}
	if quiet != nil {
		items = append(items, *quiet)
	}
	for i := range items {
		l := maps.Clone(labels)
		maps.Copy(l, items[i].Labels)
		items[i].Labels = l
	}
	r.mu.Lock()
	r.run.DataItems = append(r.run.DataItems, items...)
	r.mu.Unlock()
	r.checkLoad(sc, rep, created, items)
	return nil
}

// noteCPUProfiles waits for a repetition's profiles and names each file (or why it is missing) in
// the run's notes.
func (r *runner) noteCPUProfiles(scenarioName string, rep int, p *cpuProfiles) {
	files, err := p.wait()
	for _, c := range slices.Sorted(maps.Keys(files)) {
		r.note("%s#%d: CPU profile of %s over the window's first %s: %s (go tool pprof -top %s)", scenarioName, rep, c, r.o.CPUProfile, files[c], files[c])
	}
	if err != nil {
		r.note("%s#%d: CPU profile not taken: %v", scenarioName, rep, err)
	}
}

// settle waits for a quiet control plane before a measured window and returns the wait's record
// (nil when the wait is switched off). A timeout is a note, not an error: the run measures anyway.
func (r *runner) settle(ctx context.Context, sc *scenario.Scenario, rep int) (*results.DataItem, error) {
	timeout := r.o.QuietWait
	switch {
	case timeout < 0:
		return nil, nil
	case timeout == 0:
		timeout = QuietTimeout
	}
	waited, last, quiet, err := waitQuiet(ctx, r.cl.APIServerMetrics, wallClock{}, timeout)
	if err != nil {
		return nil, err
	}
	r.o.Log.Info("control plane quiet", "scenario", sc.Name, "repetition", rep, "waited", waited.Round(time.Millisecond), "quiet", quiet, "last", last.String())
	if !quiet {
		r.note("%s#%d: the control plane was still busy after %s (%s, quiet is under %d/s); measuring anyway", sc.Name, rep, waited.Round(time.Second), last, QuietRate)
	}
	// Value: the request rate the window opened on; WaitSeconds: what the wait cost.
	return &results.DataItem{Name: ItemQuietWait, Unit: "requests/s", Data: map[string]float64{
		"Value": last.rate, "WaitSeconds": waited.Seconds(),
	}}, nil
}

// podGroupsAhead creates the PodGroups of the phases with arrival: schedulerPerf.
func podGroupsAhead(ctx context.Context, gen *loadgen.Generator, phases []scenario.Phase) error {
	for _, ph := range phases {
		if err := gen.PodGroupsAhead(ctx, ph); err != nil {
			return err
		}
	}
	return nil
}

// runSteps creates the phases step by step; it returns the creation stats of every phase.
// Before a step that starts afterBound, it waits for every earlier phase (and the prefill).
func (r *runner) runSteps(ctx context.Context, gen *loadgen.Generator, tl *timeline.Timeline, ss []step, before []scenario.Phase, settle time.Duration) ([]loadgen.Stats, error) {
	var out []loadgen.Stats
	done := slices.Clone(before)
	for _, s := range ss {
		if s.start == scenario.AfterBound && len(done) > 0 {
			if o := waitBound(ctx, tl, phaseNames(done), podsOf(done), settle); o != outcomeComplete && ctx.Err() == nil {
				r.note("waiting for earlier phases before %s: %s", s.phases[0].Name, o)
			}
		}
		var wg sync.WaitGroup
		stats := make([]loadgen.Stats, len(s.phases))
		errs := make([]error, len(s.phases))
		for i, ph := range s.phases {
			wg.Go(func() { stats[i], errs[i] = gen.Run(ctx, ph) })
		}
		wg.Wait()
		out = append(out, stats...)
		if err := errors.Join(errs...); err != nil {
			return out, err
		}
		done = append(done, s.phases...)
	}
	return out, nil
}

// Outcomes of waiting for pods to be bound.
const (
	outcomeComplete = "complete"
	outcomeSettled  = "settled (no bind for the settle period)"
	outcomeTimeout  = "timed out"
)

// waitBound waits until want pods of the phases are bound, or no pod was bound for settle (the rest
// do not fit, or the scheduler is stuck: the invariants say which), or ctx ends. It wakes on every
// bind and once a second to check the settle period.
func waitBound(ctx context.Context, tl *timeline.Timeline, phases []string, want int, settle time.Duration) string {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastChange := -1, time.Now()
	for {
		n := tl.BoundIn(phases...)
		if n >= want {
			return outcomeComplete
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		if time.Since(lastChange) >= settle {
			return outcomeSettled
		}
		select {
		case <-tl.Changed():
		case <-tick.C:
		case <-ctx.Done():
			return outcomeTimeout
		}
	}
}

// creationItem is the load generator's achieved rate over the measured phases, with the ratio to
// the binding rate: below 2 in a burst, the generator may have been what limited binding. None when
// the load generator created no pod (every measured phase Job-driven: the job controller creates
// them, and its pace is part of what is measured).
func creationItem(created []loadgen.Stats, items []results.DataItem) (results.DataItem, bool) {
	var pods, groups int
	for _, s := range created {
		pods += s.Pods
		groups += s.PodGroups
	}
	if pods == 0 {
		return results.DataItem{}, false
	}
	d := creatingTime(created)
	data := map[string]float64{"Pods": float64(pods), "PodGroups": float64(groups), "DurationSeconds": d.Seconds()}
	if d > 0 {
		data["Average"] = float64(pods) / d.Seconds()
	}
	for _, it := range items {
		if it.Name == measure.ItemBindingRate && it.Data["Average"] > 0 && d > 0 {
			data["RatioToBindingRate"] = data["Average"] / it.Data["Average"]
		}
	}
	return results.DataItem{Name: measure.ItemCreationRate, Unit: "pods/s", Data: data}, true
}

// creatingTime is how long the load generator was creating: the union of the phases' create spans.
// A phase that starts after the previous one is bound (start: afterBound) leaves a gap in which
// nothing is created; counting that wait would make the generator look slower than it was.
func creatingTime(created []loadgen.Stats) time.Duration {
	spans := slices.Clone(created)
	slices.SortFunc(spans, func(a, b loadgen.Stats) int { return a.First.Compare(b.First) })
	var total time.Duration
	var from, to time.Time
	for _, s := range spans {
		if s.Pods == 0 {
			continue // a Job-driven phase: the job controller created its pods
		}
		switch {
		case from.IsZero():
			from, to = s.First, s.Last
		case s.First.After(to):
			total += to.Sub(from)
			from, to = s.First, s.Last
		case s.Last.After(to):
			to = s.Last
		}
	}
	return total + to.Sub(from)
}

// checkLoad notes when the load generator may have been the bottleneck.
func (r *runner) checkLoad(sc *scenario.Scenario, rep int, created []loadgen.Stats, items []results.DataItem) {
	if len(r.o.Faults) > 0 {
		return // a fault stalls creation and binding alike on purpose: the ratio says nothing
	}
	for _, ph := range sc.Phases {
		if !ph.Prefill && ph.GroupsPerSecond > 0 {
			return // paced arrival: creation is slow on purpose
		}
	}
	for _, it := range items {
		if it.Name == measure.ItemCreationRate {
			if ratio, ok := it.Data["RatioToBindingRate"]; ok && ratio < 2 {
				r.note("%s#%d: the load generator created pods at only %.1f× the binding rate; it may have limited the measurement", sc.Name, rep, ratio)
			}
		}
	}
}

// writeEvents appends a repetition's timeline to events.jsonl.
func (r *runner) writeEvents(name string, rep int, events []timeline.Event) error {
	for i := range events {
		events[i].Scenario, events[i].Rep = name, rep
	}
	return timeline.WriteJSONL(r.events, events)
}

// deleteNamespace removes a repetition's objects and waits (bounded) until its pods and PodGroups
// are gone, so the next repetition measures the scheduler, not the clean-up of this one. Pods are
// deleted with grace 0: simulated pods run nothing, and a graceful delete would wait for kwok to
// confirm each one. The namespace itself is left to the namespace controller: its deletion costs
// the scheduler nothing, and waiting for it took most of a minute after 3000 pods. With DRA (dra)
// the pods' ResourceClaims are deleted and waited for too: a claim holds its devices until the
// resourceclaim-controller has seen its pod gone, and the next repetition must find them free.
func deleteNamespace(ctx context.Context, cs kubernetes.Interface, gang *gangapi.Client, ns string, dra bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pods of %s: %w", ns, err)
	}
	if err := gang.PodGroups(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete PodGroups of %s: %w", ns, err)
	}
	if dra {
		if err := cs.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ResourceClaims of %s: %w", ns, err)
		}
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	one := metav1.ListOptions{Limit: 1}
	for {
		pods, perr := cs.CoreV1().Pods(ns).List(ctx, one)
		pgs, gerr := gang.PodGroups(ns).List(ctx, one)
		claims, cerr := 0, error(nil)
		if dra {
			var l *resourcev1.ResourceClaimList
			if l, cerr = cs.ResourceV1().ResourceClaims(ns).List(ctx, one); cerr == nil {
				claims = len(l.Items)
			}
		}
		if perr == nil && gerr == nil && cerr == nil && len(pods.Items) == 0 && len(pgs.Items) == 0 && claims == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			left := "unknown"
			if perr == nil && gerr == nil && cerr == nil {
				left = fmt.Sprintf("pods left: %d+, PodGroups left: %d+", len(pods.Items), len(pgs.Items))
				if dra {
					left += fmt.Sprintf(", ResourceClaims left: %d+", claims)
				}
			}
			return fmt.Errorf("namespace %s not emptied (%s; errors %v): %w", ns, left, errors.Join(perr, gerr, cerr), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// finish completes the record: timing, harness resource use, SLO verdicts.
func (r *runner) finish(runErr error, interrupted bool) {
	run := r.run
	run.Finished = time.Now()
	run.Interrupted = interrupted
	if run.Environment.Nodes < 0 {
		run.Environment.Nodes, run.Environment.GPUsPerNode = 0, 0
	}
	x := run.Environment.Extra
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		// Linux reports ru_maxrss in KiB.
		rss := float64(ru.Maxrss) / 1024
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		wall := run.Finished.Sub(run.Started)
		x["harness.peakRSSMiB"] = strconv.FormatFloat(rss, 'f', 1, 64)
		x["harness.cpuSeconds"] = strconv.FormatFloat(cpu.Seconds(), 'f', 1, 64)
		run.DataItems = append(run.DataItems, results.DataItem{Name: ItemHarness, Unit: "", Data: map[string]float64{
			"PeakRSSMiB": rss, "CPUSeconds": cpu.Seconds(), "WallSeconds": wall.Seconds(), "CPUShare": cpu.Seconds() / max(wall.Seconds(), 1e-9),
		}})
	}
	objs := BuiltinObjectives()
	if len(r.o.Faults) > 0 {
		objs = append(objs, faultObjectives(r.o.Faults)...)
	}
	objs = dedupe(append(objs, r.o.Objectives...))
	// Before the verdicts, so an SLO can hold the ratios to a bound too.
	run.DataItems = append(run.DataItems, GPUAPIRatios(r.o.Scenarios, r.apis, run.DataItems)...)
	run.Cases = slo.Evaluate(objs, run.DataItems)
	for _, sk := range r.o.Skipped {
		run.Cases = append(run.Cases, results.Case{ID: "SCENARIO", Suite: "scenarios", Name: "scenario fits the cluster [" + sk.Name + "]",
			Verdict: results.Skip, Message: "not run, it does not fit this cluster: " + sk.Reason})
	}
	if runErr != nil {
		run.Cases = append(run.Cases, results.Case{ID: "HARNESS", Suite: "harness", Name: "the benchmark ran to the end", Verdict: results.Error, Message: runErr.Error()})
	}
}

// MachineSpeedItem is ItemMachineSpeed for a window: the probe's median unit and its sample count.
func MachineSpeedItem(unit time.Duration, samples int) results.DataItem {
	return results.DataItem{Name: ItemMachineSpeed, Unit: "µs", Data: map[string]float64{
		measure.Value: float64(unit) / float64(time.Microsecond), "Samples": float64(samples),
	}}
}

// dedupe drops objectives that repeat an earlier one (same expression and scenarios).
func dedupe(objs []slo.Objective) []slo.Objective {
	seen := map[string]bool{}
	var out []slo.Objective
	for _, o := range objs {
		k := o.Item + "|" + o.Bucket + "|" + o.Op + "|" + strconv.FormatFloat(o.Value, 'g', -1, 64) + "|" + strings.Join(o.Scenarios, ",") + "|" + fmt.Sprint(o.Labels)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, o)
	}
	return out
}

// withInvariants returns the scenarios with the invariants measurement added where a scenario
// leaves it out: a fault run is judged by those invariants (no partial gangs, every pod that fits
// bound, status monotonic), so they are never optional there.
func withInvariants(scs []*scenario.Scenario) []*scenario.Scenario {
	out := make([]*scenario.Scenario, len(scs))
	for i, sc := range scs {
		out[i] = sc
		if !slices.Contains(sc.Measurements, measure.Invariants) {
			c := *sc
			c.Measurements = append(slices.Clone(sc.Measurements), measure.Invariants)
			out[i] = &c
		}
	}
	return out
}
