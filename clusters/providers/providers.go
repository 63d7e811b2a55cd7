// Package providers is the program's edge of the clusters packages: the one place that knows every
// concrete provider. Its New is the request.Factory that cmd/gangbench's main and the suites test
// binary's TestMain pass down, so perf, suites and lab build clusters without importing a provider
// and decide on clusters.Capabilities, never on a provider's name. What else the command line
// needs of the providers by name is here too, so that it imports none of them either: choosing
// one (Detect, Choices), where their clusters' state lives (StateDirs), and reaching a cluster
// through its kubeconfig (CheckSafe, Attach, DeleteManagedObjects).
package providers

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/existing"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/local"
	"github.com/gangbench/gangbench/clusters/request"
)

// Names are the providers a request may name.
func Names() []string { return append(Creators(), existing.ProviderName) }

// Creators are the providers that create clusters and keep them on this machine (the existing
// provider attaches to a kubeconfig's cluster instead). TestCreatorsCreate holds it to
// Capabilities.Creates.
func Creators() []string { return []string{local.ProviderName, kind.ProviderName} }

// Auto is the provider name that asks Detect to choose one.
const Auto = "auto"

// Default is the provider that works on every machine, as it needs no container engine: what
// Detect falls back to, and what a command that does not detect uses when not told.
const Default = local.ProviderName

// Choices are what a user may ask a cluster to be created on: a provider that creates clusters, or
// Auto.
func Choices() []string { return append(Creators(), Auto) }

// StateDir is the default directory where provider keeps its clusters' state (their kubeconfigs
// among it), as its constructor uses it when request.Env.StateDir is "".
func StateDir(provider string) (string, error) {
	switch provider {
	case local.ProviderName:
		return local.DefaultStateDir()
	case kind.ProviderName:
		return kind.DefaultStateDir()
	}
	return "", fmt.Errorf("provider %q keeps no clusters on this machine (those that do: %s)", provider, strings.Join(Creators(), ", "))
}

// StateDirs are the default state directories of every provider that keeps clusters here, those
// that can be found: a provider whose directory cannot be (no home directory) has written no
// kubeconfig, so leaving it out only makes CheckSafe stricter.
func StateDirs() []string {
	var out []string
	for _, name := range Creators() {
		if d, err := StateDir(name); err == nil {
			out = append(out, d)
		}
	}
	return out
}

var _ request.Factory = New

// New builds the provider of a request: the request's own checks (version, held), the mechanics
// that belong to one provider (an engine to kind, a kubeconfig to existing) and the provider's
// construction, which touches nothing on the machine. The spec is not validated here: callers run
// Provider.Validate once up front, and Create checks it again.
func New(r request.Request, env request.Env) (clusters.Provider, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if r.Kubeconfig != "" && r.Provider != existing.ProviderName {
		return nil, fmt.Errorf("cluster request: kubeconfig %s given with provider %s: only the existing provider attaches to a kubeconfig", r.Kubeconfig, r.Provider)
	}
	bins := r.Binaries(env.Progress)
	switch r.Provider {
	case local.ProviderName:
		if r.Engine != "" {
			return nil, fmt.Errorf("cluster request: engine %q given with provider local: the local provider runs no containers", r.Engine)
		}
		opts := []local.Option{local.WithBinaries(bins), local.WithLogger(log)}
		if env.Holder {
			opts = append(opts, local.WithDetachedOwner())
		}
		if env.StateDir != "" {
			opts = append(opts, local.WithStateDir(env.StateDir))
		}
		return local.New(opts...)
	case kind.ProviderName:
		if r.Held {
			return nil, errors.New("cluster request: held: only local clusters have a holder process (kind clusters outlive every process by themselves)")
		}
		if r.Engine != "" && !isEngine(r.Engine) {
			return nil, fmt.Errorf("cluster request: kind engine %q: accepted %s", r.Engine, strings.Join(kind.Engines(), ", "))
		}
		opts := []kind.Option{kind.WithEngine(r.Engine), kind.WithKeep(r.Keep), kind.WithBinaries(bins), kind.WithLogger(log)}
		if env.StateDir != "" {
			opts = append(opts, kind.WithStateDir(env.StateDir))
		}
		return kind.New(opts...)
	case existing.ProviderName:
		if r.Held || r.Keep || r.Engine != "" {
			return nil, fmt.Errorf("cluster request: held %v, keep %v, engine %q given with provider existing: it attaches to a cluster it neither creates nor deletes", r.Held, r.Keep, r.Engine)
		}
		return existing.NewProvider(r.Kubeconfig, "", log)
	}
	return nil, fmt.Errorf("cluster request: provider %q: accepted %s", r.Provider, strings.Join(Names(), ", "))
}

func isEngine(e string) bool {
	for _, x := range kind.Engines() {
		if x == e {
			return true
		}
	}
	return false
}
