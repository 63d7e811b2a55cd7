// Command fakegpu-device-plugin advertises fake GPUs (by default nvidia.com/gpu, 8 × H100 in one
// NVLink domain) to the kubelet of the node it runs on, so that kind clusters schedule GPU pods
// without GPUs. It runs as a DaemonSet (see fakegpu/deploy) with the kubelet's device plugin
// directory mounted. SIGTERM or SIGINT stop it cleanly: it deregisters by removing its socket.
//
// --gpu-api picks how the GPUs reach the scheduler: device-plugin (the default: the extended
// resource, fakegpu/plugin), dra (a kubelet DRA plugin publishing a ResourceSlice, fakegpu/draplugin;
// it needs $NODE_NAME and an in-cluster client) or both in one process, sharing the devices' health
// (the HTTP API and the health file mark a device unhealthy for both at once).
//
// Stdout carries only allocation records, one line per container the kubelet allocated GPUs to (see
// plugin.AllocationPrefix; fakegpu/deploy.ReadAllocations reads them back from the pod's logs).
// Everything else is logged to stderr.
//
// Exit status: 0 after a signal, 1 when serving fails, 2 for invalid flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gangbench/gangbench/fakegpu/draplugin"
	"github.com/gangbench/gangbench/fakegpu/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// clientFunc makes the DRA plugin's client from a kubeconfig path ("" for in-cluster).
type clientFunc func(kubeconfig string) (kubernetes.Interface, error)

// newClient is the real clientFunc.
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("client for the DRA plugin: %w", err)
	}
	cfg.UserAgent = "fakegpu-device-plugin"
	return kubernetes.NewForConfig(cfg)
}

// run is main without the process: it parses args, serves until ctx ends and returns the exit code.
// Allocation records go to stdout, logs and usage to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return runWith(ctx, args, stdout, stderr, getenv, newClient)
}

// cliqueTimeout bounds reading the node's clique label at start.
const cliqueTimeout = time.Minute

// runWith is run with the DRA plugin's client made by mkClient.
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, mkClient clientFunc) int {
	fs := flag.NewFlagSet("fakegpu-device-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	options := plugin.BindFlags(fs, getenv)
	draFlags := draplugin.BindFlags(fs)
	level := slog.LevelInfo
	fs.TextVar(&level, "log-level", level, "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage // the flag package already printed the error and usage
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "fakegpu-device-plugin: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	opts, err := options()
	df, derr := draFlags()
	if err = errors.Join(err, derr); err != nil {
		_, _ = fmt.Fprintf(stderr, "fakegpu-device-plugin: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	opts.Logger = log
	opts.AllocationLog = stdout
	if !df.API.DRA() {
		p, err := plugin.New(opts)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "fakegpu-device-plugin: %v\n", err)
			return exitUsage
		}
		if err := p.Run(ctx); err != nil {
			log.Error("device plugin failed", "err", err)
			return exitError
		}
		return exitOK
	}
	return runDRA(ctx, opts, df, log, stderr, mkClient)
}

// runDRA runs the DRA plugin, and the device plugin too for the API both. The HTTP health API is
// served here, over whichever plugins run: the device plugin's own would know only itself.
func runDRA(ctx context.Context, opts plugin.Options, df draplugin.Flags, log *slog.Logger, stderr io.Writer, mkClient clientFunc) int {
	usage := func(err error) int {
		_, _ = fmt.Fprintf(stderr, "fakegpu-device-plugin: %v\n", err)
		return exitUsage
	}
	healthAddr := opts.HealthAddr
	opts.HealthAddr = ""
	var dp *plugin.Plugin
	dopts := draplugin.Options{
		Inventory: opts.Inventory, NodeName: opts.NodeName,
		RegistrarDir: df.RegistrarDir, PluginDataDir: df.PluginDataDir, CDIDir: df.CDIDir,
		HealthFile: opts.HealthFile, PollInterval: opts.PollInterval, Logger: log,
	}
	if df.API.ExtendedResource() {
		var err error
		if dp, err = plugin.New(opts); err != nil {
			return usage(err)
		}
		// One health for both: the device plugin watches the file.
		dopts.Health, dopts.HealthFile = dp.Health(), ""
	}
	cs, err := mkClient(df.Kubeconfig)
	if err != nil {
		log.Error("DRA plugin needs a client", "err", err)
		return exitError
	}
	dopts.Client = cs
	if dopts.Clique, err = draplugin.NodeClique(ctx, cs, opts.NodeName, df.CliqueLabel, cliqueTimeout); err != nil {
		log.Error("cannot read the node's clique", "err", err)
		return exitError
	}
	dra, err := draplugin.New(dopts)
	if err != nil {
		return usage(err)
	}
	var ctl plugin.Controller = dra
	if dp != nil {
		ctl = both{dp: dp, dra: dra}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	// Whichever fails first stops the others: a half-served node is worse than a restarted pod.
	start := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		})
	}
	if healthAddr != "" {
		ln, err := net.Listen("tcp", healthAddr)
		if err != nil {
			log.Error("health API", "err", err)
			return exitError
		}
		start("health API", func(ctx context.Context) error { return serveHTTP(ctx, ln, plugin.NewHandler(ctl)) })
	}
	start("DRA plugin", dra.Run)
	if dp != nil {
		start("device plugin", dp.Run)
	}
	log.Info("serving fake GPUs", "api", df.API, "healthAddr", healthAddr)
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		failed = append(failed, err)
	}
	if len(failed) > 0 {
		log.Error("fake GPU plugins failed", "err", errors.Join(failed...))
		return exitError
	}
	return exitOK
}

// httpStopGrace bounds the health API's graceful stop.
const httpStopGrace = 5 * time.Second

// serveHTTP serves h on ln until ctx ends.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), httpStopGrace)
	defer scancel()
	_ = srv.Shutdown(sctx)
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// both is the health API's view of a process running both plugins: ready once both are
// registered, one status (the device plugin's, naming the DRA driver too), one health.
type both struct {
	dp  *plugin.Plugin
	dra *draplugin.Plugin
}

func (b both) Status() plugin.Status {
	st := b.dp.Status()
	d := b.dra.Status()
	st.Driver = d.Driver
	st.Registered = st.Registered && d.Registered
	st.RegisterError = strings.Join(slices.DeleteFunc([]string{st.RegisterError, d.RegisterError}, func(s string) bool { return s == "" }), "; ")
	return st
}

func (b both) Registered() (bool, error) {
	ok1, err1 := b.dp.Registered()
	ok2, err2 := b.dra.Registered()
	if ok1 && ok2 {
		return true, nil
	}
	var errs []error
	if !ok1 {
		errs = append(errs, fmt.Errorf("device plugin: %w", orNotYet(err1)))
	}
	if !ok2 {
		errs = append(errs, fmt.Errorf("DRA plugin: %w", orNotYet(err2)))
	}
	return false, errors.Join(errs...)
}

func orNotYet(err error) error {
	if err == nil {
		return errors.New("not registered yet")
	}
	return err
}

// SetHealth goes to the one health both plugins follow.
func (b both) SetHealth(id string, healthy bool) error { return b.dp.SetHealth(id, healthy) }
