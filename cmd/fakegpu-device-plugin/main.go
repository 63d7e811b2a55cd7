// Command fakegpu-device-plugin advertises fake GPUs (by default nvidia.com/gpu, 8 × H100 in one
// NVLink domain) to the kubelet of the node it runs on, so that kind clusters schedule GPU pods
// without GPUs. It runs as a DaemonSet (see fakegpu/deploy) with the kubelet's device plugin
// directory mounted. SIGTERM or SIGINT stop it cleanly: it deregisters by removing its socket.
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
	"os"
	"os/signal"
	"syscall"

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

// run is main without the process: it parses args, serves until ctx ends and returns the exit code.
// Allocation records go to stdout, logs and usage to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("fakegpu-device-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	options := plugin.BindFlags(fs, getenv)
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
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "fakegpu-device-plugin: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	opts.Logger = log
	opts.AllocationLog = stdout
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
