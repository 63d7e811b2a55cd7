package providers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/existing"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/local"
)

// apiServer answers what existing.Open and DeleteManaged ask: the version, the gang API when
// gang, kube-system's pods (none), and one namespace labelled ManagedLabel among empty lists;
// deletes are recorded.
func apiServer(t *testing.T, gang bool) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var deleted []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodDelete:
			mu.Lock()
			deleted = append(deleted, r.URL.Path)
			mu.Unlock()
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
		case r.URL.Path == "/version":
			w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
		case r.URL.Path == "/apis/scheduling.k8s.io/v1beta1" && gang:
			w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"scheduling.k8s.io/v1beta1","resources":[{"name":"podgroups","namespaced":true,"kind":"PodGroup","verbs":["get"]}]}`))
		case r.URL.Path == "/apis/scheduling.k8s.io/v1beta1", r.URL.Path == "/apis/scheduling.k8s.io/v1alpha2":
			http.NotFound(w, r)
		case r.URL.Path == "/api/v1/namespaces":
			w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","items":[{"metadata":{"name":"ours","uid":"u1","labels":{"` + ManagedLabel + `":"true"}}}]}`))
		default:
			w.Write([]byte(`{"kind":"List","apiVersion":"v1","items":[]}`))
		}
	}))
	t.Cleanup(s.Close)
	return s, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), deleted...) }
}

func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: theirs\n  context: {cluster: c, user: u}\ncurrent-context: theirs\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ownProvider knows one running cluster, whose kubeconfig is at kubeconfig.
type ownProvider struct {
	clusters.Provider
	kubeconfig string
	listErr    error
}

func (p ownProvider) List(context.Context) ([]clusters.Info, error) {
	return []clusters.Info{{Name: "stale"}, {Name: "mine"}}, p.listErr
}

func (p ownProvider) Get(_ context.Context, name string) (*clusters.Cluster, error) {
	if name == "stale" {
		return nil, errors.New("stale")
	}
	return &clusters.Cluster{Name: name, Provider: "own", KubeconfigPath: p.kubeconfig}, nil
}

// TestAttach: a kubeconfig of a cluster the harness created and left running gets its provider's
// handle; any other the existing provider's, with why the gang API is missing when it is.
func TestAttach(t *testing.T) {
	ctx := context.Background()
	s, _ := apiServer(t, true)
	kc := writeKubeconfig(t, t.TempDir(), s.URL)

	a, err := attach(ctx, kc, []clusters.Provider{ownProvider{kubeconfig: kc}})
	if err != nil || !a.Own || a.Cluster.Name != "mine" || a.Cluster.Provider != "own" {
		t.Errorf("own cluster: %+v, %v", a, err)
	}
	// Relative, as a user types it.
	wd, _ := os.Getwd()
	if rel, err := filepath.Rel(wd, kc); err == nil {
		if a, err := attach(ctx, rel, []clusters.Provider{ownProvider{kubeconfig: kc}}); err != nil || !a.Own {
			t.Errorf("own cluster by a relative path: %+v, %v", a, err)
		}
	}
	for name, own := range map[string]clusters.Provider{
		"another kubeconfig":          ownProvider{kubeconfig: "/elsewhere/kubeconfig"},
		"a provider that cannot list": ownProvider{kubeconfig: kc, listErr: errors.New("engine does not answer")},
	} {
		a, err := attach(ctx, kc, []clusters.Provider{own})
		if err != nil || a.Own || a.Cluster.Provider != existing.ProviderName || a.Cluster.Name != "theirs" || a.GangAPIMissing != "" {
			t.Errorf("%s: %+v, %v; want the existing provider's handle", name, a, err)
		}
	}

	s, _ = apiServer(t, false)
	a, err = attach(ctx, writeKubeconfig(t, t.TempDir(), s.URL), nil)
	if err != nil || !strings.Contains(a.GangAPIMissing, "scheduling.k8s.io/v1beta1 is not served") {
		t.Errorf("no gang API: %+v, %v", a, err)
	}
	if _, err := Attach(ctx, filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing kubeconfig: %v, want an error naming it", err)
	}
}

// TestCheckSafe: a kubeconfig in a provider's state dir is the harness's own; any other needs
// --allow-existing-cluster, named in the refusal.
func TestCheckSafe(t *testing.T) {
	state := t.TempDir()
	t.Setenv(local.StateDirEnv, filepath.Join(state, "local"))
	t.Setenv(kind.StateDirEnv, filepath.Join(state, "kind"))
	for _, p := range Creators() {
		kc := writeKubeconfig(t, filepath.Join(state, p, "c"), "https://127.0.0.1:6443")
		if err := CheckSafe(kc, SafetyOptions{}); err != nil {
			t.Errorf("%s's kubeconfig: %v", p, err)
		}
	}
	kc := writeKubeconfig(t, t.TempDir(), "https://127.0.0.1:6443")
	var refused *RefusedError
	if err := CheckSafe(kc, SafetyOptions{}); !errors.As(err, &refused) || refused.Flag != AllowExistingFlag {
		t.Errorf("a user's kubeconfig: %v, want a refusal naming --%s", err, AllowExistingFlag)
	}
	if err := CheckSafe(kc, SafetyOptions{AllowExisting: true}); err != nil {
		t.Errorf("allowed: %v", err)
	}
}

// TestDeleteManagedObjects: only what carries ManagedLabel is deleted, and the cluster is named.
func TestDeleteManagedObjects(t *testing.T) {
	s, deleted := apiServer(t, false)
	name, err := DeleteManagedObjects(context.Background(), writeKubeconfig(t, t.TempDir(), s.URL))
	if err != nil || name != "theirs" {
		t.Fatalf("DeleteManagedObjects = %q, %v", name, err)
	}
	if d := deleted(); len(d) != 1 || d[0] != "/api/v1/namespaces/ours" {
		t.Errorf("deleted %v, want only the labelled namespace", d)
	}
}
