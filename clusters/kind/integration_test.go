package kind

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
)

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestIntegrationKindCluster creates a real kind cluster: one worker with fake GPUs from the device
// plugin, one kwok node, the scheduler's metrics through the port mapping, a scheduler restart, and
// deletion. It skips, giving the reason, when no container engine answers (the engine check comes
// first, so `go test -short` on a machine without one reports why rather than just "short").
func TestIntegrationKindCluster(t *testing.T) {
	engine, err := DetectEngine(context.Background(), "")
	if err != nil {
		t.Skip(err.Error())
	}
	if testing.Short() {
		t.Skipf("creating a kind cluster on %s takes minutes; skipped in -short mode", engine)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := New(WithStateDir(t.TempDir()), WithEngine(engine), WithWorkers(1), WithKwokNodes(1), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	inv := fakegpu.Inventory{Count: 4, NVLinkDomainSize: 2}
	cl, err := p.Create(ctx, clusters.Spec{Name: "gangbench-it", GPU: inv, ReadyTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cl.Close(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	t.Logf("versions: %v", cl.Versions)

	cs, err := kubernetes.NewForConfig(cl.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: fakegpu.LabelManaged + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 {
		t.Errorf("%d GPU nodes, want 2 (1 worker + 1 kwok)", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if q := n.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 4 {
			t.Errorf("node %s allocatable nvidia.com/gpu = %s, want 4", n.Name, q.String())
		}
	}
	for name, e := range map[string]clusters.Endpoint{"apiserver": cl.APIServerMetrics, "scheduler": cl.SchedulerMetrics} {
		body, err := e.Get(ctx)
		if err != nil {
			t.Errorf("%s metrics: %v", name, err)
		} else if !strings.Contains(string(body), "# HELP") {
			t.Errorf("%s metrics: no metrics in %d bytes", name, len(body))
		}
	}
	if err := cl.Control.Restart(ctx, clusters.Scheduler); err != nil {
		t.Errorf("restart scheduler: %v", err)
	}
	if _, err := cl.SchedulerMetrics.Get(ctx); err != nil {
		t.Errorf("scheduler metrics after restart: %v", err)
	}
	if err := cl.Control.Restart(ctx, Kubelet); err != nil {
		t.Errorf("restart kubelets: %v", err)
	}
	infos, err := p.List(ctx)
	if err != nil || len(infos) != 1 || infos[0].Status != "running" {
		t.Errorf("list: %+v, %v", infos, err)
	}
}
