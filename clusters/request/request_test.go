package request

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/fakegpu"
)

func fullLocal() Request {
	r := New("local", clusters.Spec{
		Name: "foo", Nodes: 3, GPU: fakegpu.Inventory{Count: 4, Product: "NVIDIA-A100"}, KubernetesVersion: "v1.37.2",
		FeatureGates:          map[string]bool{"TopologyAwareWorkloadScheduling": true},
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Scheduler: {"GenericWorkload": false}, clusters.APIServer: {"Foo": true}},
		RuntimeConfig:         map[string]string{"scheduling.k8s.io/v1beta1": "false"},
		ExtraArgs:             map[clusters.Component]map[string]string{clusters.Scheduler: {"kube-api-qps": "5000"}},
		SchedulerBinary:       "/x/kube-scheduler", KubeBinDir: "/x", ReadyTimeout: 90*time.Second + 500*time.Millisecond,
		NodeLeaseSeconds: 3600, PodsStayPending: true,
	})
	r.CacheDir = "/cache"
	r.Keep = true
	r.Held = true
	return r
}

// TestRoundTrip: every field, the time.Duration and the per-component maps among them, comes back
// from the file as it went in.
func TestRoundTrip(t *testing.T) {
	kindReq := New("kind", clusters.Spec{Name: "k", Nodes: 3, KubernetesVersion: "v1.37.2", ReadyTimeout: time.Minute,
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.ControllerManager: {"X": true}}})
	kindReq.KindOptions = &KindOptions{Engine: "docker", Workers: 1, NodeImage: "img:1", KwokNodes: 2}
	for _, want := range []Request{fullLocal(), kindReq} {
		path := filepath.Join(t.TempDir(), FileName)
		if err := want.Write(path); err != nil {
			t.Fatal(err)
		}
		got, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"unknown field", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"local","spec":{"nodes":1,"featureGate":{}}}`, `unknown field "featureGate"`},
		{"no apiVersion", `{"provider":"local","spec":{"nodes":1}}`, `apiVersion ""`},
		{"provider", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"auto","spec":{"nodes":1}}`, `provider "auto": accepted local, kind`},
		{"kind option on local", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"local","spec":{"nodes":1},"kindOptions":{"engine":"docker"}}`, "are kind options"},
		{"bad engine", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"kind","spec":{},"kindOptions":{"engine":"lxc"}}`, `kind engine "lxc"`},
		{"kube bin dir on kind", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"kind","spec":{"kubeBinDir":"/x"}}`, "kube bin dir"},
		{"held kind", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"kind","spec":{"name":"x"},"held":true}`, "held"},
		{"local nodes", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"local","spec":{"nodes":0}}`, "nodes: 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestKindOptionsReachTheProvider(t *testing.T) {
	r := New("kind", clusters.Spec{Nodes: 3})
	r.KindOptions = &KindOptions{Engine: "podman", Workers: 1, NodeImage: "img:1", SchedulerImage: "s:1", KwokNodes: 2}
	r.Keep = true
	r.CacheDir = "/c"
	got := r.kindOptions()
	if got.Engine != "podman" || got.Workers != 1 || got.NodeImage != "img:1" || got.SchedulerImage != "s:1" || got.KwokNodes != 2 || !got.Keep {
		t.Errorf("kind options = %+v", got)
	}
	if b := r.Binaries(nil); b.CacheDir != "/c" {
		t.Errorf("binaries = %+v", b)
	}
	var o kind.Options
	for _, opt := range r.KindProviderOptions(r.Binaries(nil)) {
		opt(&o)
	}
	if o.Engine != "podman" || o.Workers != 1 || o.NodeImage != "img:1" || o.SchedulerImage != "s:1" || o.KwokNodes != 2 || !o.Keep || o.Bins.CacheDir != "/c" {
		t.Errorf("provider options = %+v", o)
	}
	if _, err := r.NewProvider(nil, nil); err != nil {
		t.Errorf("provider: %v", err)
	}
}
