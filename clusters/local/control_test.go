package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/local/pki"
	"github.com/gangbench/gangbench/internal/proc"
)

// recordingControl records the operations it is asked for; Kill of the scheduler fails.
type recordingControl struct {
	mu    sync.Mutex
	calls []string
}

func (r *recordingControl) record(op string, c clusters.Component) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, op+" "+string(c))
	if op == "kill" && c == clusters.Scheduler {
		return errors.New("kube-scheduler is not running")
	}
	return nil
}

func (r *recordingControl) Stop(_ context.Context, c clusters.Component) error {
	return r.record("stop", c)
}
func (r *recordingControl) Kill(_ context.Context, c clusters.Component) error {
	return r.record("kill", c)
}
func (r *recordingControl) Start(_ context.Context, c clusters.Component) error {
	return r.record("start", c)
}
func (r *recordingControl) Restart(_ context.Context, c clusters.Component) error {
	return r.record("restart", c)
}

func TestControlSocketReachesTheHolder(t *testing.T) {
	ctl := &recordingControl{}
	srv, err := serveControl(controlSocket(t.TempDir()), ctl)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	rc := remoteControl{path: srv.ln.Addr().String()}
	ctx := context.Background()
	if err := rc.Restart(ctx, clusters.Scheduler); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := rc.Stop(ctx, clusters.Kwok); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := rc.Start(ctx, clusters.Kwok); err != nil {
		t.Fatalf("start: %v", err)
	}
	// The holder's error comes back as it was.
	if err := rc.Kill(ctx, clusters.Scheduler); err == nil || err.Error() != "kube-scheduler is not running" {
		t.Errorf("kill: err = %v, want the holder's", err)
	}
	// A component the holder does not know is refused there, without touching anything.
	if err := rc.Stop(ctx, "kubelet"); err == nil || !strings.Contains(err.Error(), `unknown component "kubelet"`) {
		t.Errorf("stop kubelet: err = %v", err)
	}
	want := []string{"restart kube-scheduler", "stop kwok-controller", "start kwok-controller", "kill kube-scheduler"}
	if !slices.Equal(ctl.calls, want) {
		t.Errorf("holder saw %q, want %q", ctl.calls, want)
	}
	srv.close()
	if err := rc.Restart(ctx, clusters.Scheduler); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("after close: err = %v, want the holder not answering", err)
	}
}

// TestGetHandsOutHolderControl: a handle from Get can restart components only when a detached
// holder serves them; other clusters' handles have no Control.
func TestGetHandsOutHolderControl(t *testing.T) {
	for _, detached := range []bool{true, false} {
		stateDir := t.TempDir()
		dir := filepath.Join(stateDir, "kept")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		bundle, err := pki.Generate(filepath.Join(dir, "pki"), pki.Options{ServingHosts: []string{"127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		kc := filepath.Join(dir, "admin.kubeconfig")
		if err := writeKubeconfig(kc, "https://127.0.0.1:1", "gangbench-kept", bundle.CA.CertFile, "admin", "t"); err != nil {
			t.Fatal(err)
		}
		// The holder is another live process (our parent), the apiserver "runs" (this process).
		st := &state{Name: "kept", Owner: proc.RefOf(os.Getppid()), Detached: detached, Kubeconfig: kc,
			Procs: map[string]proc.Ref{string(clusters.APIServer): proc.RefOf(os.Getpid())}}
		if err := writeState(dir, st); err != nil {
			t.Fatal(err)
		}
		srv, err := serveControl(controlSocket(dir), &recordingControl{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(WithStateDir(stateDir))
		if err != nil {
			t.Fatal(err)
		}
		cl, err := p.Get(context.Background(), "kept")
		srv.close()
		if err != nil {
			t.Fatal(err)
		}
		if got := cl.Control != nil; got != detached {
			t.Errorf("detached=%v: handle has Control = %v", detached, cl.Control)
		}
	}
}

// TestIntegrationHolderControl: a cluster created by a detached owner takes restarts and kills from
// another process through its control socket, as the faults suite of `gangbench e2e
// --keep-cluster` sends them; the state file then names the new processes.
func TestIntegrationHolderControl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stateDir := t.TempDir()
	p, err := New(WithStateDir(stateDir), WithDetachedOwner())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := p.Create(ctx, clusters.Spec{Name: "held", Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	dir := filepath.Join(stateDir, "held")
	rc := remoteControl{path: controlSocket(dir)}
	before, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Restart(ctx, clusters.Scheduler); err != nil {
		t.Fatalf("restart the scheduler through the holder: %v", err)
	}
	if err := rc.Kill(ctx, clusters.Kwok); err != nil {
		t.Fatalf("kill kwok through the holder: %v", err)
	}
	if err := rc.Kill(ctx, clusters.Kwok); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("killing a stopped kwok: err = %v, want the holder's refusal", err)
	}
	if err := rc.Start(ctx, clusters.Kwok); err != nil {
		t.Fatalf("start kwok through the holder: %v", err)
	}
	after, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []clusters.Component{clusters.Scheduler, clusters.Kwok} {
		b, a := before.Procs[string(c)], after.Procs[string(c)]
		if a.PID == b.PID || !a.Alive() {
			t.Errorf("%s: pid %d before, %d after (alive %v): want a new, running process", c, b.PID, a.PID, a.Alive())
		}
	}
	if err := cl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rc.Restart(ctx, clusters.Scheduler); err == nil {
		t.Error("a deleted cluster's holder still answers")
	}
}
