package existing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeAPIServer answers just the discovery and list calls Open makes.
func fakeAPIServer(t *testing.T, serveGang, schedulerPod bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	})
	mux.HandleFunc("/apis/scheduling.k8s.io/v1beta1", func(w http.ResponseWriter, _ *http.Request) {
		if !serveGang {
			http.NotFound(w, nil)
			return
		}
		w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"scheduling.k8s.io/v1beta1","resources":[{"name":"podgroups","namespaced":true,"kind":"PodGroup","verbs":["get"]},{"name":"workloads","namespaced":true,"kind":"Workload","verbs":["get"]}]}`))
	})
	mux.HandleFunc("/api/v1/namespaces/kube-system/pods", func(w http.ResponseWriter, _ *http.Request) {
		items := ""
		if schedulerPod {
			items = `{"metadata":{"name":"kube-scheduler-cp","namespace":"kube-system"}}`
		}
		w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","items":[` + items + `]}`))
	})
	mux.HandleFunc("/api/v1/namespaces/kube-system/pods/https:kube-scheduler-cp:10259/proxy/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("scheduler_schedule_attempts_total{result=\"scheduled\"} 1\n"))
	})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: prod-like\n  context: {cluster: c, user: u}\ncurrent-context: prod-like\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenDiscovers(t *testing.T) {
	s := fakeAPIServer(t, true, true)
	cl, info, err := Open(context.Background(), kubeconfig(t, s.URL), "")
	if err != nil {
		t.Fatal(err)
	}
	if info.ServerVersion != "v1.37.2" || !info.GangAPIServed {
		t.Errorf("info = %+v", info)
	}
	if cl.Name != "prod-like" || cl.Provider != ProviderName {
		t.Errorf("cluster = %s/%s", cl.Name, cl.Provider)
	}
	b, err := cl.SchedulerMetrics.Get(context.Background())
	if err != nil || !strings.Contains(string(b), "scheduler_schedule_attempts_total") {
		t.Errorf("scheduler metrics: %q, %v (%s)", b, err, info.SchedulerMetrics)
	}
}

func TestOpenReportsMissingGangAPIAndMetrics(t *testing.T) {
	s := fakeAPIServer(t, false, false)
	cl, info, err := Open(context.Background(), kubeconfig(t, s.URL), "")
	if err != nil {
		t.Fatal(err)
	}
	if info.GangAPIServed || !strings.Contains(info.Missing, "--runtime-config=scheduling.k8s.io/v1beta1=true") {
		t.Errorf("missing API not explained: %+v", info)
	}
	if cl.SchedulerMetrics.URL != "" || !strings.Contains(info.SchedulerMetrics, "no kube-scheduler pod") {
		t.Errorf("scheduler metrics should be unavailable with a reason: %+v", info)
	}
}

func TestOpenBadKubeconfig(t *testing.T) {
	_, _, err := Open(context.Background(), filepath.Join(t.TempDir(), "nope"), "")
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v, want it to name the file", err)
	}
}
