package providers

import (
	"context"
	"fmt"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind"
)

// DetectOptions are what Detect weighs besides the machine.
type DetectOptions struct {
	// Engine is the container engine asked for ("" tries each, as the kind provider does).
	Engine string
	// KubernetesVersion and CacheDir name the node image the kind provider would use, and NodeImage
	// one given instead: a given or cached image needs no build here, so the build's prerequisites
	// do not count then.
	KubernetesVersion string
	CacheDir          string
	NodeImage         string

	// run and host stand for the machine in tests; nil means this machine's.
	run  kind.Runner
	host *kind.Host
}

// Choice is the provider Detect chose and why.
type Choice struct {
	// Provider is a provider name of Creators.
	Provider string
	// Reason says what was found, for the user: one line, or several when Blocked.
	Reason string
	// Blocked says the machine lacks what the preferred provider needs (Reason lists what and how
	// to fix it), as opposed to having no container engine at all.
	Blocked bool
}

// Detect chooses the provider of a run that asked for Auto: kind when a container engine answers,
// can run kind nodes and the machine has what kind needs, else Default. It decides in seconds, up
// front, what kind would otherwise find out only after its binaries' half hour of building.
func Detect(ctx context.Context, o DetectOptions) Choice {
	run := o.run
	if run == nil {
		run = kind.ExecRunner
	}
	host := kind.ThisHost()
	if o.host != nil {
		host = *o.host
	}
	engine, err := kind.DetectEngineWith(ctx, o.Engine, run)
	if err != nil {
		return Choice{Provider: Default, Reason: "no container engine answers"}
	}
	// An engine that answers may still refuse what kind nodes need: ask it with a throwaway
	// container (seconds) rather than let kind time out.
	pr := kind.ProbeEngine(ctx, run, engine, "")
	if !pr.Usable() {
		return Choice{Provider: Default, Reason: fmt.Sprintf("%s answers but cannot run kind nodes (%v)", engine, pr.Err)}
	}
	// Nor is an engine enough on a fresh machine: without a cached node image kind builds one here,
	// and a machine that cannot (no libseccomp, no debootstrap, not root) would fail only after the
	// binaries' half hour.
	image := kind.NodeImageOptions{KubernetesVersion: o.KubernetesVersion, Engine: engine, Bins: k8sbin.Options{CacheDir: o.CacheDir}}
	if missing := kind.Blockers(ctx, host, image, o.NodeImage); len(missing) > 0 {
		err := &kind.PrerequisiteError{What: engine + " answers, but kind cannot work here", Missing: missing}
		return Choice{Provider: Default, Reason: err.Error(), Blocked: true}
	}
	c := Choice{Provider: kind.ProviderName}
	switch {
	case pr.Privileged:
		c.Reason = engine + " answers and runs privileged containers"
	case pr.Err == nil:
		c.Reason = engine + " answers and runs kind nodes with every capability it grants (it refuses --privileged)"
	default:
		c.Reason = fmt.Sprintf("%s answers (privileges unchecked: %v)", engine, pr.Err)
	}
	return c
}
