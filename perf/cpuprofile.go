package perf

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gangbench/gangbench/clusters"
)

// The resources table says how much CPU each component spent in a window; --cpu-profile says on
// what. It fetches the Go CPU profiles (net/http/pprof) of the apiserver and the scheduler over
// the first part of every measured window, through the same endpoints and credentials as their
// /metrics, and keeps them in the run directory for `go tool pprof`.

// profiledComponents are the components a CPU profile is taken of, with the cluster endpoint whose
// host and credentials reach their /debug/pprof.
func profiledComponents(cl *clusters.Cluster) map[clusters.Component]clusters.Endpoint {
	return map[clusters.Component]clusters.Endpoint{
		clusters.APIServer: cl.APIServerMetrics,
		clusters.Scheduler: cl.SchedulerMetrics,
	}
}

// EnableCPUProfiling turns on the components' /debug/pprof handlers, which the local provider
// switches off by default (kube-apiserver and kube-scheduler serve them unless told not to). A
// --profiling the user set wins.
func EnableCPUProfiling(spec *clusters.Spec) {
	args := maps.Clone(spec.ExtraArgs)
	if args == nil {
		args = map[clusters.Component]map[string]string{}
	}
	for _, c := range []clusters.Component{clusters.APIServer, clusters.Scheduler} {
		a := maps.Clone(args[c])
		if a == nil {
			a = map[string]string{}
		}
		if _, set := a["profiling"]; !set {
			a["profiling"] = "true"
		}
		args[c] = a
	}
	spec.ExtraArgs = args
}

// CPUProfileFile is where a component's profile of one repetition goes in the run directory.
func CPUProfileFile(scenarioName string, rep int, c clusters.Component) string {
	return fmt.Sprintf("cpu-%s-%d-%s.pprof", scenarioName, rep, c)
}

// pprofURL turns a component's /metrics URL into its CPU profile URL for d.
func pprofURL(metricsURL string, d time.Duration) (string, error) {
	u, err := url.Parse(metricsURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("metrics URL %q: no host to fetch a profile from", metricsURL)
	}
	secs := max(1, int(d.Round(time.Second)/time.Second))
	u.Path, u.RawQuery = "/debug/pprof/profile", "seconds="+strconv.Itoa(secs)
	return u.String(), nil
}

// cpuProfiles is one repetition's profile fetches, started with the window.
type cpuProfiles struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	files map[clusters.Component]string
	errs  []error
}

// startCPUProfiles fetches a profile of duration d from every profiled component with an endpoint,
// concurrently, into dir. It returns at once; wait collects the outcome.
func startCPUProfiles(ctx context.Context, cl *clusters.Cluster, d time.Duration, dir, scenarioName string, rep int) *cpuProfiles {
	p := &cpuProfiles{files: map[clusters.Component]string{}}
	for c, ep := range profiledComponents(cl) {
		u, err := pprofURL(ep.URL, d)
		if ep.URL == "" {
			err = errors.New("no endpoint to fetch a profile from")
		}
		if err != nil {
			p.fail(c, err)
			continue
		}
		ep.URL = u
		// The profile is streamed only at its end; allow it a minute beyond its length.
		ep.Timeout = d + time.Minute
		path := filepath.Join(dir, CPUProfileFile(scenarioName, rep, c))
		p.wg.Go(func() {
			if err := fetchProfile(ctx, ep, path); err != nil {
				p.fail(c, err)
				return
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			p.files[c] = path
		})
	}
	return p
}

// fail records why a component's profile is missing; fetches of other components may be running.
func (p *cpuProfiles) fail(c clusters.Component, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, fmt.Errorf("%s: %w", c, err))
}

func fetchProfile(ctx context.Context, ep clusters.Endpoint, path string) error {
	b, err := ep.Get(ctx)
	if err != nil {
		return err
	}
	// A pprof profile is gzip-compressed protobuf; anything else is an error page served with 200.
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		if len(b) > 200 {
			b = b[:200]
		}
		return fmt.Errorf("GET %s: not a profile: %q", ep.URL, b)
	}
	return os.WriteFile(path, b, 0o644)
}

// wait returns the files written, by component, and what failed.
func (p *cpuProfiles) wait() (map[clusters.Component]string, error) {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.files), errors.Join(p.errs...)
}
