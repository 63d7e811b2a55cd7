// Package lab reproduces the seed's native gang-scheduling lab (reference/seed-experiments.md, the
// Traditional Chinese hands-on lab in seeds/) on a live cluster: it applies the lab's three
// manifests in the lab's order, shows what the lab's kubectl commands show there next to what the
// lab reports, and gives a verdict per experiment. The verdicts come from the objects, never from
// the printed text, so a wrong scheduler gets a "differs" with the reason.
//
// The cluster is the caller's (cmd/gangbench lab makes one shaped like the lab's: a tainted
// control-plane node, gpu-lab-worker with 8 nvidia.com/gpu and a second worker without GPUs, so the
// scheduler's messages count three nodes as the lab's do). With Options.GPUAPI dra the worker's 8
// GPUs are DRA devices instead and the pods claim them (dra.go).
package lab

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// Options configure a run.
type Options struct {
	// Worker is the node with the GPUs, the lab's gpu-lab-worker (its `describe node` line).
	Worker string
	// Image is the pause image the pods run (one every node holds).
	Image string
	// Out receives the report as the run goes; nil discards it.
	Out io.Writer
	// Timeout bounds each wait (a decision, a condition, a deletion); 0 means 2 minutes.
	Timeout time.Duration
	// Here names the cluster in the report's "here" column, e.g. "kind, v1.37.2".
	Here string
	// Keep leaves the last experiment's namespace in place for a look with kubectl.
	Keep bool
	// GPUAPI is how the worker publishes its GPUs. With fakegpu.APIDRA (a ResourceSlice of the
	// fake driver, no nvidia.com/gpu) the manifests are applied with DRA GPUs: each container's
	// nvidia.com/gpu becomes a claim of as many GPUs, and the GPUs in use are the devices allocated
	// from the worker's pool. Otherwise ("", device-plugin, both) the manifests are applied
	// literally: their nvidia.com/gpu is the node's extended resource, which "both" publishes too.
	GPUAPI fakegpu.API
}

// Verdict is the outcome of one experiment.
type Verdict struct {
	Experiment int
	Title      string
	Reproduced bool
	// Findings say what matched or, when not reproduced, what differs.
	Findings []string
}

// Result is every experiment's verdict, in the lab's order.
type Result struct {
	Verdicts []Verdict
}

// Reproduced says whether every experiment came out as the lab reports.
func (r Result) Reproduced() bool {
	for _, v := range r.Verdicts {
		if !v.Reproduced {
			return false
		}
	}
	return len(r.Verdicts) > 0
}

// Run runs the four experiments in the lab's order: the basic control and the gang run of
// experiment 1 (which experiments 2 and 3 read), then experiment 4. It returns an error only when
// the run itself could not go on (the API refused, a namespace would not go away); an experiment
// that came out otherwise is a Verdict.
func Run(ctx context.Context, cs kubernetes.Interface, gang *gangapi.Client, o Options) (Result, error) {
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Here == "" {
		o.Here = "this cluster"
	}
	r := &runner{cs: cs, gang: gang, o: o, dra: o.GPUAPI == fakegpu.APIDRA}
	return r.run(ctx)
}

func (r *runner) run(ctx context.Context) (Result, error) {
	var res Result
	if err := r.describeCluster(ctx); err != nil {
		return res, err
	}
	r.say("$ kubectl delete ns native-gang native-basic native-elastic --ignore-not-found --wait=true")
	if err := r.deleteNamespaces(ctx, nsGang, nsBasic, nsElastic); err != nil {
		return res, err
	}

	basic, err := r.experiment1Control(ctx)
	if err != nil {
		return res, err
	}
	gangRun, err := r.experiment1Gang(ctx)
	if err != nil {
		return res, err
	}
	res.Verdicts = append(res.Verdicts, verdict1(basic, gangRun))
	res.Verdicts = append(res.Verdicts, r.experiment2(basic, gangRun))
	v3, err := r.experiment3(ctx, gangRun)
	if err != nil {
		return res, err
	}
	res.Verdicts = append(res.Verdicts, v3)
	v4, err := r.experiment4(ctx)
	if err != nil {
		return res, err
	}
	res.Verdicts = append(res.Verdicts, v4)
	if !r.o.Keep {
		if err := r.deleteNamespaces(ctx, nsElastic); err != nil {
			return res, err
		}
	}
	r.summary(res)
	return res, nil
}

// say prints a line of the report.
func (r *runner) say(format string, args ...any) { fmt.Fprintf(r.o.Out, format+"\n", args...) }
