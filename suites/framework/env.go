package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/metrics"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// Env is the cluster under test as the suites see it.
type Env struct {
	Cluster *clusters.Cluster
	Client  kubernetes.Interface
	Config  *rest.Config
	// Gang reaches PodGroups and Workloads in the version the cluster serves (v1beta1 until
	// UseGangAPI says otherwise, which the harness does after its preflight).
	Gang    *gangapi.Client
	dynamic dynamic.Interface
	// SchedulerName is the profile pods use (the scheduler under test).
	SchedulerName string
	// Scale multiplies every timeout, for slow machines or remote clusters.
	Scale float64
	// OnFailure, when set, is called before a failed feature's lane is deleted, to save artifacts.
	OnFailure func(ctx context.Context, l *Lane)
}

// NewEnv builds an Env from a cluster handle. The client gets a high rate limit: the suites create
// objects in bursts and the default 5 QPS would make the harness, not the scheduler, the slow part.
func NewEnv(cl *clusters.Cluster) (*Env, error) {
	cfg := rest.CopyConfig(cl.RESTConfig)
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	gang, err := gangapi.NewClient(gangapi.V1beta1(), cs, dyn)
	if err != nil {
		return nil, err
	}
	name := cl.SchedulerName
	if name == "" {
		name = corev1.DefaultSchedulerName
	}
	return &Env{Cluster: cl, Client: cs, Config: cfg, Gang: gang, dynamic: dyn, SchedulerName: name, Scale: 1}, nil
}

// UseGangAPI switches the Env (and lanes made after) to the gang API version the cluster serves.
func (e *Env) UseGangAPI(api gangapi.API) error {
	gang, err := gangapi.NewClient(api, e.Client, e.dynamic)
	if err != nil {
		return err
	}
	e.Gang = gang
	return nil
}

// Scaled scales a timeout by the run's -timeout-scale (slow machines, race builds).
func (e *Env) Scaled(base time.Duration) time.Duration {
	if e == nil || e.Scale <= 0 {
		return base
	}
	return time.Duration(float64(base) * e.Scale)
}

// errNoSchedulerMetrics says the cluster gives the harness no scheduler /metrics endpoint (an
// existing cluster whose scheduler is not reachable); a scrape of an endpoint that fails is another
// error.
var ErrNoSchedulerMetrics = errors.New("the scheduler's /metrics endpoint is not reachable from the harness")

// SchedulerMetrics scrapes the scheduler's /metrics, or says why it cannot.
func (e *Env) SchedulerMetrics(ctx context.Context) (*metrics.Snapshot, error) {
	if e.Cluster == nil || e.Cluster.SchedulerMetrics.URL == "" {
		return nil, ErrNoSchedulerMetrics
	}
	return metrics.Scrape(ctx, e.Cluster.SchedulerMetrics)
}

// gatesOff says why a feature that needs gates cannot run here: the first gate the apiserver or
// the scheduler reports off (kubernetes_feature_enabled, which every component exports), or that
// their metrics could not be read; "" when every gate is on in both. Black-box on purpose: a fork
// or an existing cluster is judged by what its components say, not by the flags gangbench passed.
func (e *Env) gatesOff(ctx context.Context, gates []string) string {
	for _, c := range []struct {
		name   string
		scrape func(context.Context) (*metrics.Snapshot, error)
	}{{"apiserver", e.APIServerMetrics}, {"scheduler", e.SchedulerMetrics}} {
		snap, err := c.scrape(ctx)
		if err != nil {
			return fmt.Sprintf("needs feature gates %v, and the %s's metrics cannot tell: %v", gates, c.name, err)
		}
		for _, g := range gates {
			if v, ok := snap.Sum("kubernetes_feature_enabled", map[string]string{"name": g}); !ok || v != 1 {
				return fmt.Sprintf("needs feature gate %s, which the %s reports off (gangbench e2e --features names the features that switch it on)", g, c.name)
			}
		}
	}
	return ""
}

// APIServerGate reports whether the apiserver reports feature gate on (kubernetes_feature_enabled,
// read as gatesOff reads it), for features whose expected behaviour depends on the gate rather than
// needing it; the error says why its metrics cannot tell.
func (e *Env) APIServerGate(ctx context.Context, gate string) (bool, error) {
	snap, err := e.APIServerMetrics(ctx)
	if err != nil {
		return false, err
	}
	v, ok := snap.Sum("kubernetes_feature_enabled", map[string]string{"name": gate})
	if !ok {
		return false, fmt.Errorf("the apiserver's kubernetes_feature_enabled does not name feature gate %s", gate)
	}
	return v == 1, nil
}

// APIServerMetrics scrapes the apiserver's /metrics.
func (e *Env) APIServerMetrics(ctx context.Context) (*metrics.Snapshot, error) {
	if e.Cluster == nil || e.Cluster.APIServerMetrics.URL == "" {
		return nil, fmt.Errorf("the apiserver's /metrics endpoint is not known")
	}
	return metrics.Scrape(ctx, e.Cluster.APIServerMetrics)
}

// Assertion is one checked statement about gang scheduling.
type Assertion struct {
	// ID is stable across releases ("BAR-03"); results and docs key on it.
	ID string
	// Suite is the suite it belongs to ("barriers").
	Suite string
	// Statement is one line: what a correct scheduler does.
	Statement string
	// Ref points into gang-semantics-v1.37.md (section and item).
	Ref string
	// Feature is the scenario the assertion is checked in (set by Catalogue).
	Feature string
}

// Name is the assessment name: ID first, so `go test -run '/BAR-03'` selects it.
func (a Assertion) Name() string { return a.ID + " " + a.Statement }

// ParseName splits an assessment name (as go test prints it, with '_' for spaces) into ID and statement.
func ParseName(s string) (id, statement string) {
	s = strings.ReplaceAll(s, "_", " ")
	id, statement, _ = strings.Cut(s, " ")
	return id, statement
}
