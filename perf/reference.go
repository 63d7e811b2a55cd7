package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

// A reference run answers "how fast is this scheduler code when nothing else competes": upstream's
// scheduler_perf runs the same workload with the scheduler, an apiserver and etcd in one process
// and no nodes to simulate (nodes are API objects nobody renews), on this machine. gangbench's own
// figure divided by it says how much of the scheduler's speed the harness keeps.

// Reference metrics as scheduler_perf names them (labels.Metric of its data items).
const (
	RefThroughput = "SchedulingThroughput"
	RefAttempt    = "scheduler_podgroup_scheduling_attempt_duration_seconds"
	RefAlgorithm  = "scheduler_podgroup_scheduling_algorithm_duration_seconds"
)

// ItemReference is the DataItem name of a reference figure in run.json (label metric: the
// scheduler_perf metric, workload: its benchmark name).
const ItemReference = "reference"

// ReferenceOptions says how to run one reference workload.
type ReferenceOptions struct {
	// Dir holds the scheduler_perf test binary and its package's configs (k8sbin.EnsureSchedulerPerf).
	Dir string
	// Etcd is the etcd binary scheduler_perf starts for its apiserver.
	Etcd      string
	Reference scenario.Reference
	// Log receives the benchmark's output (nil discards it).
	Log     io.Writer
	Timeout time.Duration
	// CPUProfile, when set (an absolute path), receives the benchmark's Go CPU profile
	// (-test.cpuprofile): its whole process, the node creation of its setup included.
	CPUProfile string
}

// ReferenceResult is one reference run.
type ReferenceResult struct {
	Benchmark string
	// Items are scheduler_perf's data items as it wrote them, keyed by labels.Metric.
	Items map[string]results.DataItem
	// Started and Wall are when the benchmark process started and how long it ran.
	Started time.Time
	Wall    time.Duration
}

// Figure returns a bucket ("Average", "Perc50") of a reference metric.
func (r *ReferenceResult) Figure(metric, bucket string) (float64, bool) {
	it, ok := r.Items[metric]
	if !ok {
		return 0, false
	}
	v, ok := it.Data[bucket]
	return v, ok
}

// RunReference runs the workload's benchmark once and reads the data items it wrote. Everything it
// creates (etcd's data, the data items) lives in a temporary directory removed afterwards; the
// benchmark and its etcd run in a process group of their own, killed if ctx ends first.
func RunReference(ctx context.Context, o ReferenceOptions) (*ReferenceResult, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.CPUProfile != "" && !filepath.IsAbs(o.CPUProfile) {
		// The benchmark runs in its package directory, where a relative path would land.
		return nil, fmt.Errorf("reference CPU profile %q: want an absolute path", o.CPUProfile)
	}
	bin := filepath.Join(o.Dir, k8sbin.SchedulerPerfBinary)
	if _, err := os.Stat(filepath.Join(o.Dir, o.Reference.Config)); err != nil {
		return nil, fmt.Errorf("scheduler_perf package %s has no %s: %w", o.Reference.Package, o.Reference.Config, err)
	}
	tmp, err := os.MkdirTemp("", "gangbench-reference-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	items := filepath.Join(tmp, "data-items")
	if err := os.Mkdir(items, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	bench := "^BenchmarkPerfScheduling$/^" + regexp.QuoteMeta(o.Reference.TestCase) + "$/^" + regexp.QuoteMeta(o.Reference.Workload) + "$"
	args := []string{"-test.run=^$", "-test.bench=" + bench, "-test.benchtime=1x", "-test.timeout=" + o.Timeout.String(),
		// Any label: the scenario names the workload, whatever upstream labelled it.
		"-perf-scheduling-label-filter=",
		"-data-items-dir=" + items}
	if o.CPUProfile != "" {
		args = append(args, "-test.cpuprofile="+o.CPUProfile)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Dir(o.Etcd)+string(os.PathListSeparator)+os.Getenv("PATH"),
		// scheduler_perf reuses an etcd that answers on its default URL; pointing it at a port
		// nothing serves makes it start its own on a unix socket, never someone else's etcd.
		"KUBE_INTEGRATION_ETCD_URL=http://127.0.0.1:1",
		"TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var tail tailWriter
	start := time.Now()
	groups := &groupLog{year: start.Year()}
	out := io.Writer(io.MultiWriter(&tail, groups))
	if o.Log != nil {
		out = io.MultiWriter(o.Log, &tail, groups)
	}
	cmd.Stdout, cmd.Stderr = out, out
	finishCPU := func(*ReferenceResult) {}
	if err = cmd.Start(); err == nil {
		finishCPU = measureReferenceCPU(ctx, cmd.Process.Pid, groups)
		err = cmd.Wait()
	}
	// etcd is the benchmark's child: whatever ended the benchmark, nothing of the group may stay.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	wall := time.Since(start)
	if err != nil {
		finishCPU(nil)
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("scheduler_perf %s: %w\n--- last lines ---\n%s", o.Reference.Benchmark(), err, tail.String())
	}
	res, err := readReferenceItems(items)
	finishCPU(res)
	if err != nil {
		return nil, fmt.Errorf("scheduler_perf %s: %w\n--- last lines ---\n%s", o.Reference.Benchmark(), err, tail.String())
	}
	res.Benchmark, res.Started, res.Wall = o.Reference.Benchmark(), start, wall
	if it, ok := referenceRateFromCreation(res.Items[RefDuration], groups.groups); ok {
		res.Items[RefRateFromCreation] = it
	}
	if _, ok := res.Items[RefThroughput]; !ok {
		return nil, fmt.Errorf("scheduler_perf %s wrote no %s (did the workload run?)\n--- last lines ---\n%s", o.Reference.Benchmark(), RefThroughput, tail.String())
	}
	return res, nil
}

// readReferenceItems reads every data-items file scheduler_perf wrote into dir.
func readReferenceItems(dir string) (*ReferenceResult, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no data items file written")
	}
	res := &ReferenceResult{Items: map[string]results.DataItem{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc struct {
			DataItems []results.DataItem `json:"dataItems"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, it := range doc.DataItems {
			m := it.Labels["Metric"]
			if m == "" {
				continue
			}
			// A histogram is reported per extension point or result; the unlabelled one (or the
			// first) stands for the metric.
			if _, dup := res.Items[m]; !dup || len(it.Labels) < len(res.Items[m].Labels) {
				res.Items[m] = it
			}
		}
	}
	return res, nil
}

// tailWriter keeps the last lines written, for error messages.
type tailWriter struct{ lines []string }

func (t *tailWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		t.lines = append(t.lines, l)
	}
	if n := len(t.lines); n > 30 {
		t.lines = slices.Clone(t.lines[n-30:])
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return strings.Join(t.lines, "\n") }

// ReferenceItems renders a reference run as run.json data items, labelled with the scenario and,
// when not empty, with when it ran ("before" or "after" the gangbench run: label run).
func ReferenceItems(sc, when string, r *ReferenceResult) []results.DataItem {
	var out []results.DataItem
	for _, m := range slices.Sorted(maps.Keys(r.Items)) {
		it := r.Items[m]
		l := map[string]string{"scenario": sc, "metric": m, "workload": r.Benchmark}
		if when != "" {
			l["run"] = when
		}
		out = append(out, results.DataItem{Name: ItemReference, Unit: it.Unit, Labels: l, Data: it.Data})
	}
	return out
}

// BracketReference is the reference for a gangbench run from scheduler_perf's runs right before and
// right after it: every figure the two share is their mean, so a machine that slowed down or sped
// up during the hour weighs on both sides alike. drift is how far the two runs' SchedulingThroughput
// averages lie apart, relative to their mean (0.1: 10 %). Either run may be nil; with one, it is the
// reference and drift is 0.
func BracketReference(before, after *ReferenceResult) (ref *ReferenceResult, drift float64) {
	switch {
	case before == nil:
		return after, 0
	case after == nil:
		return before, 0
	}
	ref = &ReferenceResult{Benchmark: before.Benchmark, Wall: before.Wall + after.Wall, Items: map[string]results.DataItem{}}
	for m, b := range before.Items {
		a, ok := after.Items[m]
		if !ok {
			ref.Items[m] = b
			continue
		}
		mean := results.DataItem{Unit: b.Unit, Labels: b.Labels, Data: map[string]float64{}}
		for k, v := range b.Data {
			if w, ok := a.Data[k]; ok {
				mean.Data[k] = (v + w) / 2
			}
		}
		ref.Items[m] = mean
	}
	for m, a := range after.Items {
		if _, ok := ref.Items[m]; !ok {
			ref.Items[m] = a
		}
	}
	b, okb := before.Figure(RefThroughput, "Average")
	a, oka := after.Figure(RefThroughput, "Average")
	if okb && oka && a+b > 0 {
		drift = math.Abs(a-b) / ((a + b) / 2)
	}
	return ref, drift
}
