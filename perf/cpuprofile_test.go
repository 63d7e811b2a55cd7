package perf

import (
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
)

func TestPprofURL(t *testing.T) {
	got, err := pprofURL("https://127.0.0.1:6443/metrics", 1500*time.Millisecond)
	if err != nil || got != "https://127.0.0.1:6443/debug/pprof/profile?seconds=2" {
		t.Errorf("pprofURL = %q, %v", got, err)
	}
	// pprof takes whole seconds; less than one is still one.
	if got, _ := pprofURL("https://h:1/metrics", 100*time.Millisecond); !strings.HasSuffix(got, "seconds=1") {
		t.Errorf("sub-second profile: %q", got)
	}
	if _, err := pprofURL("/metrics", time.Second); err == nil {
		t.Error("a URL without a host was accepted")
	}
}

func TestEnableCPUProfiling(t *testing.T) {
	spec := clusters.Spec{ExtraArgs: map[clusters.Component]map[string]string{clusters.Scheduler: {"profiling": "false", "v": "2"}}}
	user := spec.ExtraArgs[clusters.Scheduler]
	EnableCPUProfiling(&spec)
	if spec.ExtraArgs[clusters.APIServer]["profiling"] != "true" {
		t.Errorf("apiserver args %v", spec.ExtraArgs[clusters.APIServer])
	}
	if a := spec.ExtraArgs[clusters.Scheduler]; a["profiling"] != "false" || a["v"] != "2" {
		t.Errorf("the user's scheduler flags were overridden: %v", a)
	}
	user["x"] = "y"
	if _, shared := spec.ExtraArgs[clusters.Scheduler]["x"]; shared {
		t.Error("the spec shares its flag map with the caller's")
	}
}

// A component that serves a profile gets a file; one that answers with an error page, or has no
// endpoint, is an error naming it, and neither stops the other.
func TestCPUProfilesFetch(t *testing.T) {
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debug/pprof/profile":
			asked = r.URL.RawQuery
			zw := gzip.NewWriter(w)
			_, _ = zw.Write([]byte("profile"))
			_ = zw.Close()
		default:
			http.Error(w, "404 page not found", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	cl := &clusters.Cluster{APIServerMetrics: clusters.Endpoint{URL: srv.URL + "/metrics"}}
	files, err := startCPUProfiles(context.Background(), cl, 3*time.Second, dir, "smoke", 1).wait()
	if asked != "seconds=3" {
		t.Errorf("profile asked with %q", asked)
	}
	want := filepath.Join(dir, "cpu-smoke-1-kube-apiserver.pprof")
	if files[clusters.APIServer] != want {
		t.Errorf("files %v, want the apiserver's at %s", files, want)
	}
	if b, rerr := os.ReadFile(want); rerr != nil || len(b) < 2 || b[0] != 0x1f {
		t.Errorf("profile file: %v %q", rerr, b)
	}
	if err == nil || !strings.Contains(err.Error(), "kube-scheduler: no endpoint") {
		t.Errorf("missing scheduler endpoint not reported: %v", err)
	}

	// 200 with something other than a profile (a proxy's page, pprof switched off behind a
	// catch-all handler) is refused, not written.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>")) }))
	defer page.Close()
	cl = &clusters.Cluster{APIServerMetrics: clusters.Endpoint{URL: page.URL + "/metrics"}, SchedulerMetrics: clusters.Endpoint{URL: srv.URL + "/nothing"}}
	files, err = startCPUProfiles(context.Background(), cl, time.Second, t.TempDir(), "smoke", 2).wait()
	if len(files) != 1 || files[clusters.Scheduler] == "" {
		t.Errorf("files %v, want the scheduler's only", files)
	}
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver: GET") || !strings.Contains(err.Error(), "not a profile") {
		t.Errorf("error page not refused: %v", err)
	}
}
