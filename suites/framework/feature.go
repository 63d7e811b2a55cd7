package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"
)

// Feature is one scenario: a lane of its own, then assertions checked in order against it.
type Feature struct {
	Suite string
	Name  string
	Lane  LaneSpec
	// Serial features run alone: they read cluster-wide metric deltas or restart components.
	Serial bool
	// NeedsControl features restart components; they skip when the provider cannot.
	NeedsControl bool
	// NeedsGPUs features mark GPUs unhealthy; they skip when the provider cannot.
	NeedsGPUs bool
	// NeedsKubelets features need real kubelets: their lane must be Lane.Nodes nodes that run the
	// fake GPU plugin publishing through Lane.GPUAPI (kind workers). They skip where nodes are
	// simulated (local) or publish their GPUs the other way.
	NeedsKubelets bool
	// NeedsGates are feature gates the feature's behaviour needs on the apiserver and the
	// scheduler (read from their kubernetes_feature_enabled metrics); it skips naming the first
	// one off, or that it could not tell.
	NeedsGates []string
	Steps      []Step
}

// Step checks one assertion. Steps share the lane and run in order, so a later step may build on
// the state an earlier one left.
type Step struct {
	A  Assertion
	Fn func(ctx context.Context, t *testing.T, l *Lane)
}

// Build turns the feature into an e2e-framework feature bound to env.
func (f Feature) Build(env *Env) types.Feature {
	var lane *Lane
	// A feature the cluster cannot host is not dropped: every one of its assertions is reported as
	// skipped with the reason, so each run lists every assertion (a skip in the setup alone would
	// skip the feature before any of its steps ran, and they would appear nowhere).
	var skip string
	b := features.New(f.Name).WithLabel("suite", f.Suite)
	if f.Serial {
		b = b.WithLabel("serial", "true")
	}
	b = b.WithSetup("lane", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		t.Helper()
		switch {
		case f.NeedsControl && (env.Cluster == nil || env.Cluster.Control == nil):
			skip = fmt.Sprintf("needs to restart components, which the %s provider cannot", providerName(env))
		case f.NeedsGPUs && (env.Cluster == nil || env.Cluster.GPUs == nil):
			skip = fmt.Sprintf("needs to mark GPUs unhealthy, which the %s provider cannot", providerName(env))
		case f.NeedsKubelets:
			skip = env.noKubelets(ctx, f.Lane.Nodes, f.Lane.GPUAPI)
		}
		if skip == "" && len(f.NeedsGates) > 0 {
			skip = env.gatesOff(ctx, f.NeedsGates)
		}
		if skip != "" {
			t.Logf("feature %q not run: %s", f.Name, skip)
			return ctx
		}
		var err error
		lane, err = env.NewLane(ctx, f.Suite, f.Lane)
		if err != nil {
			if lane != nil {
				_ = lane.Delete(context.WithoutCancel(ctx))
			}
			t.Fatalf("set up lane for %q: %v", f.Name, err)
		}
		t.Logf("lane %s: %d node(s) × %d GPUs", lane.Name, len(lane.Nodes), lane.GPUs)
		return ctx
	})
	for _, s := range f.Steps {
		b = b.AssessWithDescription(s.A.Name(), s.A.Ref, func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			t.Helper()
			if skip != "" {
				t.Skip(skip)
			}
			if lane == nil {
				t.Skip("lane was not set up")
			}
			s.Fn(ctx, t, lane)
			return ctx
		})
	}
	b = b.WithTeardown("delete lane", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		if lane != nil {
			if t.Failed() && env.OnFailure != nil {
				env.OnFailure(ctx, lane)
			}
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := lane.Delete(dctx); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
		return ctx
	})
	return b.Feature()
}

func providerName(env *Env) string {
	if env == nil || env.Cluster == nil {
		return "current"
	}
	return env.Cluster.Provider
}

// Catalogue lists every assertion of the given features in order.
func Catalogue(fs []Feature) []Assertion {
	var out []Assertion
	for _, f := range fs {
		for _, s := range f.Steps {
			a := s.A
			a.Suite = f.Suite
			a.Feature = f.Name
			out = append(out, a)
		}
	}
	return out
}
