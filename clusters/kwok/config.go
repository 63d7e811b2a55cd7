// Package kwok is what the cluster providers (local and kind) need to run kwok-simulated GPU nodes:
// gangbench's own kwok configuration (stages that keep gang pods Running), creating the fake GPU nodes
// from a fakegpu.Inventory, and waiting until kwok has made them Ready.
package kwok

import (
	_ "embed" // for the go:embed of config.yaml
	"fmt"
	"os"
	"strconv"
	"strings"
)

// configYAML is embedded as a string, not []byte, so no caller can change it: Config hands out copies.
//
//go:embed config.yaml
var configYAML string

// ManageNodesAnnotationSelector is the value providers pass as kwok's
// --manage-nodes-with-annotation-selector; it is also set in Config and matches the annotation
// fakegpu.SimulatedNode puts on every node.
const ManageNodesAnnotationSelector = "kwok.x-k8s.io/node=fake"

// SlowTerminationLabel on a pod keeps it Terminating on a simulated node once it is deleted (the
// pod-delete stage skips it), like a pod whose containers take their grace period to stop; only a
// delete with grace period 0 removes it. Suites use it for a preemption still under way.
const SlowTerminationLabel = "gangbench.dev/slow-termination"

// HealthzPath is served by the kwok controller (v0.8.0, pkg/kwok/server/healthz.go) with a plain
// 200 "ok" on the address given by --server-address (or options.serverAddress), together with
// /readyz and /livez. The server starts only after kwok has reached the apiserver and started its
// controllers, so a 200 there means kwok is up; without --server-address (and without --node-port)
// kwok serves nothing at all. The port speaks HTTP and HTTPS (a self-signed test certificate unless
// --tls-cert-file/--tls-private-key-file are given).
const HealthzPath = "/healthz"

// Config returns gangbench's kwok configuration for `kwok --config`: a multi-document YAML with one
// KwokConfiguration and the Stages that initialize nodes, keep their lease heartbeat, make bound pods
// Running and Ready, and delete terminating pods. It has no pod-completion stage. The slice is a fresh
// copy on every call.
func Config() []byte {
	return []byte(configYAML)
}

// Options are the parts of the configuration a cluster spec chooses.
type Options struct {
	// LeaseSeconds is nodeLeaseDurationSeconds (0 keeps the default, 40).
	LeaseSeconds int
	// PodsStayPending leaves out the pod-ready stage: a bound pod keeps the status its binding gave
	// it (PodScheduled=True, phase Pending), as in upstream scheduler_perf, which runs no kubelet.
	// That saves one status write per pod, its watch events and kwok's work on it; pods being
	// deleted still go away (pod-delete).
	PodsStayPending bool
}

// ConfigWithLease is Config with nodeLeaseDurationSeconds set to seconds (0 keeps the default, 40).
func ConfigWithLease(seconds int) []byte { return Render(Options{LeaseSeconds: seconds}) }

// podReadyStage names the stage PodsStayPending leaves out.
const podReadyStage = "pod-ready"

// Render returns Config changed by o (a fresh copy).
func Render(o Options) []byte {
	cfg := configYAML
	if o.LeaseSeconds != 0 {
		cfg = strings.Replace(cfg, "nodeLeaseDurationSeconds: 40\n", "nodeLeaseDurationSeconds: "+strconv.Itoa(o.LeaseSeconds)+"\n", 1)
	}
	if o.PodsStayPending {
		docs := strings.Split(cfg, "\n---\n")
		kept := docs[:0]
		for _, d := range docs {
			if !strings.Contains(d, "\n  name: "+podReadyStage+"\n") {
				kept = append(kept, d)
			}
		}
		cfg = strings.Join(kept, "\n---\n")
	}
	return []byte(cfg)
}

// WriteConfig writes Render(o) to path with mode 0600 (an existing file is truncated and its mode
// fixed), for kwok's --config flag.
func WriteConfig(path string, o Options) error {
	if err := os.WriteFile(path, Render(o), 0o600); err != nil {
		return fmt.Errorf("kwok: write config: %w", err)
	}
	// WriteFile keeps the mode of a file that already existed.
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("kwok: write config: %w", err)
	}
	return nil
}
