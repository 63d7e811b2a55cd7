package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/request"
	"github.com/gangbench/gangbench/observe/monitor"
	"github.com/gangbench/gangbench/scenarios"
)

// Options say which cluster the suites run against: the cluster of Request, built by NewProvider
// (the one constructor, clusters/providers.New, passed down from the test binary's TestMain). The
// harness creates it (ClusterRequest fills what the suites need) and deletes it at the end, unless
// Request.Keep; a Request.Held cluster, or one of a kubeconfig (Request.Kubeconfig), is only
// attached to.
type Options struct {
	Request     request.Request
	NewProvider request.Factory
	// RunDir receives monitor.json, cluster.json and failure artifacts; empty means no files.
	RunDir string
	Scale  float64
	Log    io.Writer
}

// ClusterRequest fills in what the suites need of a cluster that a request leaves open: a name
// unique to this run (so that two runs, or a user's own cluster, never collide), one shared GPU
// node where every node is simulated (suites bring their own lane nodes; it keeps the default pool
// non-empty), and on a provider with real kubelets at least one simulated node, which makes the
// provider run the kwok controller that simulates the lanes: --nodes then counts both (see
// request.FlagShape.ForSuites), and with no nodes given the default real workers (2, which the
// node fault features borrow as lanes) plus the lanes' simulated node. `gangbench e2e` calls it
// before writing the request, so the recorded request is the cluster created; the suites binary
// calls it again, which changes nothing then.
func ClusterRequest(r request.Request, caps clusters.Capabilities, pid int) (request.Request, error) {
	if r.Spec.Name == "" {
		r.Spec.Name = fmt.Sprintf("e2e-%d", pid)
	}
	if !caps.RealKubelets {
		if len(r.Spec.Groups()) == 0 {
			r.Spec.Nodes = 1
		}
		return r, nil
	}
	if len(r.Spec.NodeGroups) == 0 {
		f := request.FlagShape{Nodes: r.Spec.Nodes, GPU: r.Spec.GPU}
		return r, f.ForSuites(true).Apply(&r.Spec, true)
	}
	var gpus *clusters.GroupGPUs
	for _, g := range r.Spec.NodeGroups {
		if g.Kubelet == clusters.SimulatedNodes && g.Count > 0 {
			return r, nil
		}
		if gpus == nil && g.GPUs != nil {
			gpus = g.GPUs
		}
	}
	if gpus == nil {
		gpus = &clusters.GroupGPUs{}
	}
	r.Spec.NodeGroups = append(slices.Clone(r.Spec.NodeGroups), clusters.NodeGroup{Count: 1, Kubelet: clusters.SimulatedNodes, GPUs: gpus})
	return r, nil
}

// Harness is one conformance run: a cluster, an e2e-framework environment and the status monitor.
type Harness struct {
	Env     *Env
	TestEnv types.Environment
	opts    Options
	mon     *monitor.Monitor
	cancel  context.CancelFunc
	cluster *clusters.Cluster
	owned   bool
}

// Start creates or connects to the cluster, runs the preflight and starts the status monitor.
func Start(ctx context.Context, opts Options) (*Harness, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	h := &Harness{opts: opts}
	cl, err := h.connect(ctx)
	if err != nil {
		return nil, err
	}
	h.cluster = cl
	fail := func(err error) (*Harness, error) {
		_ = h.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	fmt.Fprintf(opts.Log, "cluster %s (%s): scheduler %s\n", cl.Name, cl.Provider, cl.Versions[clusters.Scheduler])
	e, err := NewEnv(cl)
	if err != nil {
		return fail(err)
	}
	if opts.Scale > 0 {
		e.Scale = opts.Scale
	}
	h.Env = e
	if opts.RunDir != "" {
		e.OnFailure = func(ctx context.Context, l *Lane) {
			dir := filepath.Join(opts.RunDir, "artifacts", l.Name)
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := h.Collect(cctx, l, dir); err != nil {
				fmt.Fprintf(opts.Log, "collect artifacts of %s: %v\n", l.Name, err)
			}
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	api, err := scenarios.Preflight(pctx, e.Client, scenarios.PreflightNamespace)
	if err != nil {
		return fail(fmt.Errorf("preflight: %w", err))
	}
	if err := e.UseGangAPI(api); err != nil {
		return fail(err)
	}
	mctx, mcancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = mcancel
	h.mon = monitor.New(e.Client, monitor.Options{Gang: e.Gang, Members: true})
	sctx, scancel := context.WithTimeout(mctx, 30*time.Second)
	defer scancel()
	if err := h.mon.Start(sctx); err != nil {
		return fail(fmt.Errorf("start PodGroup status monitor: %w", err))
	}
	cfg := envconf.New().WithKubeconfigFile(cl.KubeconfigPath).WithParallelTestEnabled()
	h.TestEnv = env.NewWithConfig(cfg)
	if opts.RunDir != "" {
		if err := os.MkdirAll(opts.RunDir, 0o755); err != nil {
			return fail(err)
		}
		info := map[string]any{"name": cl.Name, "provider": cl.Provider, "versions": cl.Versions, "gangAPI": e.Gang.API().GroupVersion(), "kubeconfig": cl.KubeconfigPath, "nodes": cl.Nodes}
		b, _ := json.MarshalIndent(info, "", "  ")
		if err := os.WriteFile(filepath.Join(opts.RunDir, "cluster.json"), b, 0o644); err != nil {
			return fail(err)
		}
	}
	return h, nil
}

// connect creates the requested cluster, or attaches to one: a held one (its holder created it to
// outlive this process, `gangbench e2e --keep-cluster` on local, and its handle's Control asks the
// holder, so the fault features still run), or the cluster of a kubeconfig.
func (h *Harness) connect(ctx context.Context) (*clusters.Cluster, error) {
	if h.opts.NewProvider == nil {
		return nil, errors.New("suites: Options.NewProvider is nil (pass clusters/providers.New)")
	}
	req := h.opts.Request
	p, err := h.opts.NewProvider(req, request.Env{})
	if err != nil {
		return nil, err
	}
	caps := p.Capabilities()
	if !caps.Creates {
		cl, err := p.Get(ctx, "")
		if err == nil {
			fmt.Fprintf(h.opts.Log, "existing cluster %s: %s; scheduler metrics: %s\n", cl.Name, cl.Versions[clusters.APIServer], orNone(cl.SchedulerMetrics.URL))
		}
		return cl, err
	}
	if req, err = ClusterRequest(req, caps, os.Getpid()); err != nil {
		return nil, err
	}
	if req.Held {
		cl, err := p.Get(ctx, req.Spec.Name)
		if err != nil {
			return nil, fmt.Errorf("the cluster held for this run: %w", err)
		}
		return cl, nil
	}
	if req.Keep && caps.NeedsHolder {
		// Its components would die with this process (they are tied to it, so that nothing
		// outlives a run by accident); only a holder process keeps such a cluster running.
		return nil, fmt.Errorf("keep a %s cluster: its processes die with the suites binary; run `gangbench e2e --keep-cluster`, which creates it through a holder process, or `gangbench cluster create` and -kubeconfig", caps.Provider)
	}
	cl, err := p.Create(ctx, req.Spec)
	h.owned = err == nil
	return cl, err
}

func orNone(s string) string {
	if s == "" {
		return "none found"
	}
	return s
}

// Run runs the features of the named suites: parallel-safe ones concurrently, then serial ones.
func (h *Harness) Run(t *testing.T, fs []Feature) {
	t.Helper()
	var par, ser []types.Feature
	for _, f := range fs {
		if f.Serial {
			ser = append(ser, f.Build(h.Env))
		} else {
			par = append(par, f.Build(h.Env))
		}
	}
	if len(par) > 0 {
		h.TestEnv.TestInParallel(t, par...)
	}
	if len(ser) > 0 {
		h.TestEnv.Test(t, ser...)
	}
}

// MonitorReport is written to monitor.json.
type MonitorReport struct {
	PodGroups   int                  `json:"podGroups"`
	Transitions []monitor.Transition `json:"transitions"`
	Violations  []string             `json:"violations"`
	// Known are violations matching a known issue of the scheduler version under test.
	Known []string `json:"known,omitempty"`
}

// Finish stops the monitor and reports monotonicity violations across the whole run: the unexpected
// ones, and those that match a known issue of the scheduler version under test.
func (h *Harness) Finish() (unexpected, known []string, err error) {
	if h.mon == nil {
		return nil, nil, nil
	}
	h.mon.Stop()
	out, known := Classify(h.mon.Violations(), h.cluster.Versions[clusters.Scheduler], h.mon.Members())
	if h.opts.RunDir != "" {
		rep := MonitorReport{PodGroups: h.mon.Stats().PodGroups, Transitions: h.mon.Transitions(), Violations: out, Known: known}
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return out, known, err
		}
		if err := os.WriteFile(filepath.Join(h.opts.RunDir, "monitor.json"), b, 0o644); err != nil {
			return out, known, err
		}
	}
	return out, known, nil
}

// Kubeconfig is the admin kubeconfig of the cluster under test.
func (h *Harness) Kubeconfig() string {
	if h.cluster == nil {
		return ""
	}
	return h.cluster.KubeconfigPath
}

// Close deletes the cluster if the harness created it (unless asked to keep it).
func (h *Harness) Close(ctx context.Context) error {
	if h.cancel != nil {
		h.cancel()
	}
	if h.cluster == nil || !h.owned {
		return nil
	}
	if h.opts.Request.Keep {
		fmt.Fprintf(h.opts.Log, "keeping cluster %s: export KUBECONFIG=%s; delete with `gangbench cluster delete --name %s`\n", h.cluster.Name, h.cluster.KubeconfigPath, h.cluster.Name)
		return nil
	}
	return h.cluster.Close(ctx)
}

// Collect writes what a reader needs to understand a failed feature: the lane's PodGroups, pods and
// events as YAML, and the tails of the scheduler's and apiserver's logs.
func (h *Harness) Collect(ctx context.Context, lane *Lane, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	dump := func(name string, obj any, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			errs = append(errs, err)
			return
		}
		errs = append(errs, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	pgs, err := lane.Gang.PodGroups(lane.Name).List(ctx, metav1.ListOptions{})
	dump("podgroups.yaml", pgs, err)
	pods, err := lane.Client.CoreV1().Pods(lane.Name).List(ctx, metav1.ListOptions{})
	dump("pods.yaml", pods, err)
	evs, err := lane.Client.CoreV1().Events(lane.Name).List(ctx, metav1.ListOptions{})
	dump("events.yaml", evs, err)
	if h.cluster != nil && (h.cluster.LogDir != "" || h.cluster.ComponentLog != nil) {
		// The kwok controller's log (the simulated kubelets) is a file on every provider that runs
		// it; the control plane's may need asking a node.
		for _, c := range []clusters.Component{clusters.Scheduler, clusters.APIServer, clusters.Kwok} {
			var b []byte
			var err error
			if c == clusters.Kwok {
				if h.cluster.LogDir == "" {
					continue
				}
				if b, err = os.ReadFile(filepath.Join(h.cluster.LogDir, string(c)+".log")); err != nil {
					continue
				}
			} else if h.cluster.ComponentLog != nil {
				// Bounded: a node that cannot be asked must not hold up the rest of the run.
				lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				b, err = h.cluster.ComponentLog(lctx, c, 2000)
				cancel()
				if err != nil {
					errs = append(errs, err)
					continue
				}
			} else if b, err = os.ReadFile(filepath.Join(h.cluster.LogDir, string(c)+".log")); err != nil {
				continue
			}
			lines := strings.Split(string(b), "\n")
			if len(lines) > 2000 {
				lines = lines[len(lines)-2000:]
			}
			errs = append(errs, os.WriteFile(filepath.Join(dir, string(c)+".log"), []byte(strings.Join(lines, "\n")), 0o644))
		}
	}
	return errors.Join(errs...)
}

// Select returns the features of the named suites (all when names is empty); unknown names are an
// error listing the accepted ones.
func Select(all []Feature, names []string) ([]Feature, error) {
	if len(names) == 0 {
		return all, nil
	}
	// The accepted names are the suites the features belong to, so a new suite needs no list here.
	var accepted []string
	for _, f := range all {
		if !slices.Contains(accepted, f.Suite) {
			accepted = append(accepted, f.Suite)
		}
	}
	for _, n := range names {
		if !slices.Contains(accepted, n) {
			return nil, fmt.Errorf("unknown suite %q (accepted: %s)", n, strings.Join(accepted, ", "))
		}
	}
	var out []Feature
	for _, f := range all {
		if slices.Contains(names, f.Suite) {
			out = append(out, f)
		}
	}
	return out, nil
}
