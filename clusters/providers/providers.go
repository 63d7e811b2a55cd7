// Package providers is the program's edge of the clusters packages: the one place that knows every
// concrete provider. Its New is the request.Factory that cmd/gangbench's main and the suites test
// binary's TestMain pass down, so perf, suites and lab build clusters without importing a provider
// and decide on clusters.Capabilities, never on a provider's name.
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
func Names() []string { return []string{local.ProviderName, kind.ProviderName, existing.ProviderName} }

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
