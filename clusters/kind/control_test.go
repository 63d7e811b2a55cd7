package kind

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/gangbench/gangbench/clusters"
)

func newControlFixture(t *testing.T) (*control, *kindNodeBehaviour, *fakeNode, *fakeNode) {
	t.Helper()
	b := newKindNodeBehaviour(t)
	cp := &fakeNode{name: "c-control-plane", role: "control-plane", handle: b.handle}
	w := &fakeNode{name: "c-worker", role: "worker", handle: b.handle}
	k := &fakeKind{clusters: map[string][]nodes.Node{"c": {cp, w}}}
	return &control{api: k, name: "c", timeout: 5 * time.Second}, b, cp, w
}

func TestControlScheduler(t *testing.T) {
	k, b, cp, _ := newControlFixture(t)
	ctx := context.Background()
	if err := k.Stop(ctx, clusters.Scheduler); err != nil {
		t.Fatal(err)
	}
	if b.schedulerRunning {
		t.Error("scheduler still running after Stop")
	}
	if err := k.Stop(ctx, clusters.Scheduler); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("second Stop: %v", err)
	}
	if err := k.Start(ctx, clusters.Scheduler); err != nil {
		t.Fatal(err)
	}
	if err := k.Start(ctx, clusters.Scheduler); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Start: %v", err)
	}
	if err := k.Kill(ctx, clusters.Scheduler); err != nil {
		t.Fatal(err)
	}
	kills := cp.callsMatching("crictl stop --timeout 0")
	if len(kills) != 1 {
		t.Errorf("Kill did not SIGKILL through crictl: %v", cp.calls)
	}
	if err := k.Restart(ctx, clusters.Scheduler); err == nil {
		t.Error("Restart of a killed (stopped) scheduler should fail at Stop")
	}
	if err := k.Start(ctx, clusters.Scheduler); err != nil {
		t.Fatal(err)
	}
	if err := k.Restart(ctx, clusters.Scheduler); err != nil {
		t.Fatal(err)
	}
	if !b.schedulerRunning {
		t.Error("scheduler not running after Restart")
	}
}

func TestControlKubelet(t *testing.T) {
	k, b, cp, w := newControlFixture(t)
	ctx := context.Background()
	if err := k.Kill(ctx, Kubelet+"/c-worker"); err != nil {
		t.Fatal(err)
	}
	if len(w.callsMatching("systemctl kill --signal=SIGKILL kubelet")) != 1 || len(cp.callsMatching("systemctl")) != 0 {
		t.Errorf("worker calls %v, control-plane calls %v", w.calls, cp.calls)
	}
	if err := k.Start(ctx, Kubelet); err != nil {
		t.Fatal(err)
	}
	if !b.kubeletRunning {
		t.Error("kubelet not started")
	}
	if err := k.Restart(ctx, Kubelet); err != nil {
		t.Fatal(err)
	}
	if len(cp.callsMatching("systemctl start kubelet")) != 2 || len(w.callsMatching("systemctl start kubelet")) != 2 {
		t.Errorf("kubelet starts: cp %v, worker %v", cp.calls, w.calls)
	}
	if err := k.Stop(ctx, Kubelet+"/nope"); err == nil || !strings.Contains(err.Error(), "c-worker") {
		t.Errorf("unknown node: %v", err)
	}
}

func TestControlUnsupported(t *testing.T) {
	k, _, _, _ := newControlFixture(t)
	for _, c := range []clusters.Component{clusters.APIServer, clusters.Etcd, clusters.Kwok} {
		for name, f := range map[string]func(context.Context, clusters.Component) error{"Stop": k.Stop, "Kill": k.Kill, "Start": k.Start, "Restart": k.Restart} {
			if err := f(context.Background(), c); err == nil || !strings.Contains(err.Error(), "not supported on kind") {
				t.Errorf("%s %s: %v", name, c, err)
			}
		}
	}
}
