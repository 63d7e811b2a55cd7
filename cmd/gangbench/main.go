// Command gangbench creates clusters with fake GPUs, runs gang-scheduling conformance suites and
// throughput benchmarks against the scheduler under test, and compares scheduler versions.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gangbench/gangbench/clusters/providers"
	"github.com/gangbench/gangbench/clusters/request"
)

// Exit codes: 2 is usage (as Go's flag package), 3 an SLO violation or regression, 1 anything else.
const (
	exitError = 1
	exitUsage = 2
)

// usageError marks errors that are the user's invocation, so main can exit 2.
type usageError struct{ error }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, so the CLI can be tested.
func run(args []string, stdout, stderr io.Writer) int {
	// A second Ctrl-C forces: the first one cancels ctx and teardown begins; if teardown hangs the user
	// must not be stuck. Children die with us through Pdeathsig. One channel, registered before
	// anything runs and buffered for both signals, sees them in order: registering a second channel
	// only after the first signal lost a second Ctrl-C that came before the registration.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-sigs:
			cancel(fmt.Errorf("interrupted by %v", sig))
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "gangbench: second interrupt, exiting without cleanup")
			os.Exit(130)
		case <-done:
		}
	}()

	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "error:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var ce codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}

// codedError carries a specific exit code (e.g. 3 for SLO violations).
type codedError struct {
	error
	code int
}

type globalOpts struct {
	verbose bool
	// newProvider is the one constructor of cluster providers (clusters/providers.New, wired in
	// newRootCmd): the commands build every provider of a request through it.
	newProvider request.Factory
	// providerNames are the providers newProvider builds, for the commands that look at every
	// provider's clusters (list, delete, kubeconfig).
	providerNames []string
}

func (g *globalOpts) logger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if g.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globalOpts{newProvider: providers.New, providerNames: providers.Names()}
	root := &cobra.Command{
		Use:   "gangbench",
		Short: "Conformance suites and benchmarks for Kubernetes gang scheduling",
		Long: `gangbench creates a cluster whose nodes advertise fake nvidia.com/gpu, runs the scheduler under test
in it, checks its gang semantics, and measures how fast it places gangs.

Quick start (no container engine needed):
  gangbench cluster create --nodes 4 --gpus-per-node 8
  export KUBECONFIG=$(gangbench cluster kubeconfig)
  gangbench cluster delete

The first create builds kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok from
source (about 20 minutes on 2 cores) and caches them; later creates take seconds.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log more detail")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newClusterCmd(g, stdout, stderr), newE2ECmd(g, stdout, stderr), newK8sCmd(g, stdout, stderr), newDoctorCmd(g, stdout), newReportCmd(stdout), newPerfCmd(g, stdout, stderr), newCompareCmd(g, stdout, stderr), newKindCmd(g, stdout, stderr), newLabCmd(g, stdout, stderr))
	return root
}
