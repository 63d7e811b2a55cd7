package existing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gangbench/gangbench/clusters"
)

// Provider attaches to the cluster of one kubeconfig, so that callers that take a clusters.Provider
// (through the one constructor, clusters/providers.New) reach a cluster gangbench did not create
// the same way as one it did. It creates, lists and deletes nothing.
type Provider struct {
	kubeconfig, context string
	log                 *slog.Logger
}

var _ clusters.Provider = (*Provider)(nil)

// NewProvider returns the provider of kubeconfig's context (its current context when "").
func NewProvider(kubeconfig, contextName string, log *slog.Logger) (*Provider, error) {
	if kubeconfig == "" {
		return nil, errors.New("existing provider: kubeconfig: empty (the existing provider attaches to a kubeconfig's cluster)")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{kubeconfig: kubeconfig, context: contextName, log: log}, nil
}

// Name implements clusters.Provider.
func (p *Provider) Name() string { return ProviderName }

// Capabilities implements clusters.Provider: nothing of the cluster is gangbench's to change, and
// it makes no nodes, so it publishes no GPUs either.
func (p *Provider) Capabilities() clusters.Capabilities {
	return clusters.Capabilities{Provider: ProviderName}
}

// Validate implements clusters.Provider: no spec can be created.
func (p *Provider) Validate(clusters.Spec) error { return ErrNotCreatable }

// Create implements clusters.Provider.
func (p *Provider) Create(context.Context, clusters.Spec) (*clusters.Cluster, error) {
	return nil, ErrNotCreatable
}

// Get implements clusters.Provider: the kubeconfig's cluster, whatever the name ("" or the
// context's name).
func (p *Provider) Get(ctx context.Context, name string) (*clusters.Cluster, error) {
	cl, info, err := Open(ctx, p.kubeconfig, p.context)
	if err != nil {
		return nil, err
	}
	if name != "" && name != cl.Name {
		return nil, fmt.Errorf("cluster %q: kubeconfig %s is of %q: %w", name, p.kubeconfig, cl.Name, clusters.ErrNotFound)
	}
	p.log.Info("existing cluster", "name", cl.Name, "version", info.ServerVersion, "gangAPI", info.GangAPIServed, "schedulerMetrics", info.SchedulerMetrics)
	return cl, nil
}

// Delete implements clusters.Provider: a cluster gangbench did not create is never deleted.
func (p *Provider) Delete(context.Context, string) error {
	return errors.New("the existing provider never deletes a cluster (cluster delete --kubeconfig removes gangbench's labelled objects instead)")
}

// List implements clusters.Provider: the existing provider knows no clusters of its own.
func (p *Provider) List(context.Context) ([]clusters.Info, error) { return nil, nil }
