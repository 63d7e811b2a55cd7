package providers

import (
	"context"
	"path/filepath"
	"slices"

	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/existing"
	"github.com/gangbench/gangbench/clusters/request"
)

// A cluster gangbench did not create is reached through the existing provider, behind its safety
// check. These names are the existing provider's own definitions, restated here so that the
// command line, which registers the flags and reports the refusals, needs no concrete provider.
type (
	// SafetyOptions are the user's answers to CheckSafe's questions.
	SafetyOptions = existing.SafetyOptions
	// RefusedError is CheckSafe's refusal, naming the flag that overrides it.
	RefusedError = existing.RefusedError
)

const (
	// AllowExistingFlag and ForceFlag are the flags CheckSafe's refusals name.
	AllowExistingFlag = existing.AllowExistingFlag
	ForceFlag         = existing.ForceFlag
	// ManagedLabel marks what gangbench creates in a cluster: DeleteManagedObjects deletes only that.
	ManagedLabel = existing.ManagedLabel
)

// CheckSafe decides whether gangbench may run against the cluster of kubeconfig's current context
// (the one a run uses): existing.CheckSafe, with every provider's state dir (StateDirs) among
// o.OwnStateDirs, since a kubeconfig the harness wrote there is of a cluster it created. It reads
// only the file.
func CheckSafe(kubeconfig string, o SafetyOptions) error {
	o.OwnStateDirs = append(slices.Clone(o.OwnStateDirs), StateDirs()...)
	return existing.CheckSafe(kubeconfig, "", o)
}

// Attached is the cluster behind a kubeconfig, as Attach found it.
type Attached struct {
	Cluster *clusters.Cluster
	// Own says the harness created the cluster and it still runs: Cluster is then its provider's
	// handle, which knows more than a kubeconfig tells (where the scheduler's /metrics is, how to
	// stop a component).
	Own bool
	// GangAPIMissing says why the cluster does not serve the gang API, "" when it does. A cluster
	// of the harness's own is not asked: it was made to serve it.
	GangAPIMissing string
}

// Attach opens the cluster of kubeconfig's current context: the handle of the cluster the harness
// created and left running, when the kubeconfig is one a provider of Creators wrote for it, else
// the existing provider's, with what discovery found of the gang API. Callers check CheckSafe
// first.
func Attach(ctx context.Context, kubeconfig string) (Attached, error) {
	var own []clusters.Provider
	for _, name := range Creators() {
		// A provider that cannot be built here (no state dir) has no cluster to find.
		if p, err := New(request.New(name, clusters.Spec{}), request.Env{}); err == nil {
			own = append(own, p)
		}
	}
	return attach(ctx, kubeconfig, own)
}

// attach is Attach with the providers whose clusters are looked through given.
func attach(ctx context.Context, kubeconfig string, own []clusters.Provider) (Attached, error) {
	if abs, err := filepath.Abs(kubeconfig); err == nil {
		for _, p := range own {
			// A provider that cannot list or get its clusters (an engine that does not answer)
			// only loses the richer handle: the existing provider still reaches the cluster.
			infos, err := p.List(ctx)
			if err != nil {
				continue
			}
			for _, i := range infos {
				if cl, err := p.Get(ctx, i.Name); err == nil && cl.KubeconfigPath == abs {
					return Attached{Cluster: cl, Own: true}, nil
				}
			}
		}
	}
	cl, info, err := existing.Open(ctx, kubeconfig, "")
	if err != nil {
		return Attached{}, err
	}
	a := Attached{Cluster: cl}
	if !info.GangAPIServed {
		a.GangAPIMissing = info.Missing
	}
	return a, nil
}

// DeleteManagedObjects deletes from the cluster of kubeconfig's current context what gangbench
// created there (existing.DeleteManaged: only objects labelled ManagedLabel) and returns the
// cluster's name. It is the only delete a cluster gangbench did not create gets; callers check
// CheckSafe first.
func DeleteManagedObjects(ctx context.Context, kubeconfig string) (string, error) {
	cl, _, err := existing.Open(ctx, kubeconfig, "")
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cl.RESTConfig)
	if err != nil {
		return cl.Name, err
	}
	return cl.Name, existing.DeleteManaged(ctx, cs)
}
