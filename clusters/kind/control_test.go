package kind

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/internal/proc"
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
	// etcd has no healthz a restart could wait on; kwok needs the cluster's state (none here).
	for _, c := range []clusters.Component{clusters.Etcd, clusters.Kwok} {
		for name, f := range map[string]func(context.Context, clusters.Component) error{"Stop": k.Stop, "Kill": k.Kill, "Start": k.Start, "Restart": k.Restart} {
			if err := f(context.Background(), c); err == nil || !strings.Contains(err.Error(), "not supported on kind") {
				t.Errorf("%s %s: %v", name, c, err)
			}
		}
	}
}

// TestControlKwok stops the kwok controller the state records (a stand-in process here) and
// refuses to stop it twice; a start whose controller exits at once reports the log.
func TestControlKwok(t *testing.T) {
	root := t.TempDir()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(done) }()
	t.Cleanup(func() { _ = sleeper.Process.Kill(); <-done })
	ref := proc.RefOf(sleeper.Process.Pid)
	logPath := filepath.Join(root, "kwok.log")
	st := &state{Name: "c", Kwok: &ref, KwokLaunch: &kwokLaunch{Binary: "false", LogPath: logPath, Port: 1}}
	if err := writeState(root, st); err != nil {
		t.Fatal(err)
	}
	k := &control{name: "c", timeout: 5 * time.Second, stateDir: root}
	ctx := context.Background()
	if err := k.Start(ctx, clusters.Kwok); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("Start of a running kwok: %v", err)
	}
	if err := k.Kill(ctx, clusters.Kwok); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the kwok stand-in still runs after Kill")
	}
	if err := k.Stop(ctx, clusters.Kwok); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Stop of a stopped kwok: %v", err)
	}
	if err := k.Start(ctx, clusters.Kwok); err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Errorf("Start of a kwok that exits at once: %v", err)
	}
}
