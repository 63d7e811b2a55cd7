package kind

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/internal/proc"
)

// writeReadyState records a cluster as a finished create would.
func writeReadyState(t *testing.T, root, name string) *state {
	t.Helper()
	st := &state{
		Name: name, Engine: "docker", Created: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC), Phase: phaseReady,
		Workers: 2, KwokNodes: 0, Kubeconfig: filepath.Join(clusterDir(root, name), "kubeconfig"), SchedulerMetricsPort: 41001,
		Versions: map[string]string{"kube-apiserver": "v1.37.0"},
	}
	writeTestKubeconfig(t, st.Kubeconfig)
	if err := writeState(root, st); err != nil {
		t.Fatal(err)
	}
	return st
}

func newStateProvider(t *testing.T, answering []string, k *fakeKind) (*Provider, string) {
	t.Helper()
	root := t.TempDir()
	r := runnerWhere(answering, nil)
	p, err := New(WithOptions(Options{StateDir: root, Runner: r.run}))
	if err != nil {
		t.Fatal(err)
	}
	p.newKind = func(string) kindAPI { return k }
	return p, root
}

func TestListOnlyOurClusters(t *testing.T) {
	// The engine has two kind clusters; gangbench made one of them, and has a stale record of a third.
	k := &fakeKind{clusters: map[string][]nodes.Node{"gangbench-a": nil, "someone-elses": nil}}
	p, root := newStateProvider(t, []string{"docker"}, k)
	writeReadyState(t, root, "gangbench-a")
	writeReadyState(t, root, "gone")
	// A create in progress by a process that died.
	if err := claimState(root, &state{Name: "halfway", Engine: "docker", Phase: phaseCreating, Owner: proc.Ref{PID: 0}}); err != nil {
		t.Fatal(err)
	}
	infos, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, i := range infos {
		got[i.Name] = i.Status
		if i.Provider != "kind" {
			t.Errorf("%s: provider %q", i.Name, i.Provider)
		}
	}
	want := map[string]string{"gangbench-a": "running", "gone": "stale", "halfway": "incomplete"}
	if len(got) != len(want) {
		t.Errorf("list %v, want %v", got, want)
	}
	for n, s := range want {
		if got[n] != s {
			t.Errorf("%s: status %q, want %q", n, got[n], s)
		}
	}
}

func TestListWithoutEngine(t *testing.T) {
	k := &fakeKind{}
	p, root := newStateProvider(t, nil, k)
	writeReadyState(t, root, "gangbench-a")
	infos, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || !strings.HasPrefix(infos[0].Status, "unknown") {
		t.Errorf("list %+v", infos)
	}
	// No state dir at all is an empty list, not an error.
	p.opts.StateDir = filepath.Join(root, "missing")
	if infos, err := p.List(context.Background()); err != nil || len(infos) != 0 {
		t.Errorf("missing state dir: %v %v", infos, err)
	}
}

func TestDelete(t *testing.T) {
	k := &fakeKind{clusters: map[string][]nodes.Node{"gangbench-a": nil, "someone-elses": nil}}
	p, root := newStateProvider(t, []string{"docker"}, k)
	writeReadyState(t, root, "gangbench-a")

	// A cluster gangbench did not make is not found, and is not touched.
	if err := p.Delete(context.Background(), "someone-elses"); !errors.Is(err, clusters.ErrNotFound) {
		t.Errorf("delete foreign cluster: %v", err)
	}
	if err := p.Delete(context.Background(), "gangbench-a"); err != nil {
		t.Fatal(err)
	}
	if len(k.deleted) != 1 || k.deleted[0] != "gangbench-a" {
		t.Errorf("kind deleted %v", k.deleted)
	}
	if e := dirEntries(t, root); len(e) != 0 {
		t.Errorf("state left: %v", e)
	}
	if err := p.Delete(context.Background(), "Bad!"); err == nil {
		t.Error("bad name accepted")
	}
}

func TestDeleteWithoutEngineKeepsState(t *testing.T) {
	k := &fakeKind{clusters: map[string][]nodes.Node{"gangbench-a": nil}}
	p, root := newStateProvider(t, nil, k)
	writeReadyState(t, root, "gangbench-a")
	err := p.Delete(context.Background(), "gangbench-a")
	if !errors.Is(err, ErrNoEngine) {
		t.Fatalf("got %v, want ErrNoEngine", err)
	}
	if _, err := os.Stat(statePath(root, "gangbench-a")); err != nil {
		t.Errorf("state removed although the cluster could not be deleted: %v", err)
	}
	if len(k.deleted) != 0 {
		t.Errorf("deleted %v", k.deleted)
	}
}

func TestGet(t *testing.T) {
	k := &fakeKind{clusters: map[string][]nodes.Node{"gangbench-a": nil}}
	p, root := newStateProvider(t, []string{"docker"}, k)
	writeReadyState(t, root, "gangbench-a")
	writeReadyState(t, root, "gone")
	cl, err := p.Get(context.Background(), "gangbench-a")
	if err != nil {
		t.Fatal(err)
	}
	if cl.Nodes != 2 || cl.Versions[clusters.APIServer] != "v1.37.0" || cl.Control == nil || cl.SchedulerMetrics.URL != "https://127.0.0.1:41001/metrics" {
		t.Errorf("handle %+v", cl)
	}
	if err := cl.Close(context.Background()); err != nil || len(k.deleted) != 0 {
		t.Errorf("Close of a Get handle: %v, deleted %v", err, k.deleted)
	}
	if _, err := p.Get(context.Background(), "gone"); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("stale: %v", err)
	}
	if _, err := p.Get(context.Background(), "never"); !errors.Is(err, clusters.ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
}

func TestClaimRefusesLiveCreate(t *testing.T) {
	k := &fakeKind{}
	p, root := newStateProvider(t, []string{"docker"}, k)
	// This test process is alive, so its claim stands.
	if err := claimState(root, &state{Name: "busy", Engine: "docker", Phase: phaseCreating, Owner: proc.RefOf(os.Getpid())}); err != nil {
		t.Fatal(err)
	}
	err := p.claim(context.Background(), &state{Name: "busy", Engine: "docker", Phase: phaseCreating})
	if err == nil || !strings.Contains(err.Error(), "being created") {
		t.Errorf("got %v", err)
	}
}

func TestDefaultStateDir(t *testing.T) {
	t.Setenv(StateDirEnv, "")
	t.Setenv("XDG_STATE_HOME", "/xdg")
	if d, _ := DefaultStateDir(); d != "/xdg/gangbench/kind" {
		t.Errorf("got %s", d)
	}
	t.Setenv(StateDirEnv, "/explicit")
	if d, _ := DefaultStateDir(); d != "/explicit" {
		t.Errorf("got %s", d)
	}
}
