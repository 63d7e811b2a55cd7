package request

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gangbench/gangbench/clusters"
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

// TestRoundTrip: every field, the time.Duration, the per-component maps and the node groups among
// them, comes back from the file as it went in.
func TestRoundTrip(t *testing.T) {
	kindReq := New("kind", clusters.Spec{Name: "k", KubernetesVersion: "v1.37.2", ReadyTimeout: time.Minute,
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.ControllerManager: {"X": true}},
		Images:                clusters.Images{Node: "img:1", Scheduler: "s:1"}})
	if err := (FlagShape{Nodes: 3, Workers: 1, KwokNodes: 2, GPU: fakegpu.Inventory{Count: 4}}).Apply(&kindReq.Spec, true); err != nil {
		t.Fatal(err)
	}
	kindReq.Spec.NodeGroups[1].Labels = map[string]string{"rack": "r1"}
	kindReq.Spec.NodeGroups[1].Taints = []corev1.Taint{{Key: "lane", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
	kindReq.Engine = "docker"
	existing := New("existing", clusters.Spec{})
	existing.Kubeconfig = "/kc"
	for _, want := range []Request{fullLocal(), kindReq, existing} {
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

// TestDecodeRefuses: what the request says about itself is checked where it is read; the
// provider's rules are the provider's (clusters/providers' tests).
func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"unknown field", `{"apiVersion":"gangbench.dev/v1alpha2","kind":"ClusterRequest","provider":"local","spec":{"nodes":1,"featureGate":{}}}`, `unknown field "featureGate"`},
		{"no apiVersion", `{"provider":"local","spec":{"nodes":1}}`, `apiVersion ""`},
		{"old apiVersion", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"kind","spec":{},"kindOptions":{"workers":2}}`, `gangbench.dev/v1alpha1 is no longer read`},
		{"old apiVersion, new fields", `{"apiVersion":"gangbench.dev/v1alpha1","kind":"ClusterRequest","provider":"local","spec":{"nodes":1}}`, `spec.nodeGroups`},
		{"kind options", `{"apiVersion":"gangbench.dev/v1alpha2","kind":"ClusterRequest","provider":"kind","spec":{},"kindOptions":{"engine":"docker"}}`, `unknown field "kindOptions"`},
		{"no provider", `{"apiVersion":"gangbench.dev/v1alpha2","kind":"ClusterRequest","spec":{"nodes":1}}`, `provider: empty`},
		{"held without name", `{"apiVersion":"gangbench.dev/v1alpha2","kind":"ClusterRequest","provider":"local","spec":{"nodes":1},"held":true}`, "held without a cluster name"},
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

// TestFlagShape: --nodes, --workers and --kwok-nodes become node groups once, with the rules the
// kind provider used to apply to them itself.
func TestFlagShape(t *testing.T) {
	count := func(spec clusters.Spec) (real, plain, sim int) {
		for _, g := range spec.NodeGroups {
			switch {
			case g.Kubelet == clusters.SimulatedNodes:
				sim += g.Count
			case g.GPUs == nil:
				plain += g.Count
			default:
				real += g.Count
			}
		}
		return real, plain, sim
	}
	tests := []struct {
		f                FlagShape
		real, plain, sim int
	}{
		{FlagShape{}, 2, 0, 0},
		{FlagShape{Nodes: 3}, 3, 0, 0},
		{FlagShape{Nodes: 10, KwokNodes: 8}, 2, 0, 8},
		{FlagShape{Nodes: 5, Workers: 1, KwokNodes: 4}, 1, 0, 4},
		{FlagShape{Workers: 1, KwokNodes: 100}, 1, 0, 100},
		{FlagShape{Nodes: 1, PlainWorkers: 1}, 1, 1, 0},
		{FlagShape{}.ForSuites(true), 2, 0, 1},
		{FlagShape{Nodes: 3, Workers: 1}.ForSuites(true), 1, 0, 2},
	}
	for _, tt := range tests {
		var spec clusters.Spec
		if err := tt.f.Apply(&spec, true); err != nil {
			t.Errorf("%+v: %v", tt.f, err)
			continue
		}
		if r, p, s := count(spec); r != tt.real || p != tt.plain || s != tt.sim {
			t.Errorf("%+v: %d real + %d plain + %d simulated, want %d + %d + %d", tt.f, r, p, s, tt.real, tt.plain, tt.sim)
		}
	}
	for _, tt := range []struct {
		f    FlagShape
		real bool
		want []string
	}{
		{FlagShape{Nodes: 5, Workers: 2, KwokNodes: 1}, true, []string{"5 requested", "2 workers + 1 kwok"}},
		{FlagShape{Nodes: 2, KwokNodes: 2}, true, []string{"no real worker"}},
		{FlagShape{Nodes: -1}, true, []string{"nodes (-1)"}},
		{FlagShape{Nodes: 2, Workers: 1}, false, []string{"workers (1)", "every node is simulated"}},
	} {
		var spec clusters.Spec
		err := tt.f.Apply(&spec, tt.real)
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v, want it to mention %q", tt.f, err, w)
			}
		}
	}
	var spec clusters.Spec
	if err := (FlagShape{Nodes: 4, GPU: fakegpu.Inventory{Count: 2}}).Apply(&spec, false); err != nil || spec.Nodes != 4 || spec.GPU.Count != 2 || spec.NodeGroups != nil {
		t.Errorf("without real kubelets: %+v, %v", spec, err)
	}
}

func TestFlagShapeTopology(t *testing.T) {
	topo := &clusters.Topology{Blocks: 2, RacksPerBlock: 2, NodesPerRack: 2}
	racks := func(spec clusters.Spec, kubelet string) (nodes int, names map[string]bool) {
		names = map[string]bool{}
		for _, g := range spec.NodeGroups {
			if g.Kubelet != kubelet {
				continue
			}
			nodes += g.Count
			names[g.Labels[clusters.DefaultRackKey]] = true
		}
		return nodes, names
	}
	// Every node simulated: the racks are all the nodes.
	var local clusters.Spec
	if err := (FlagShape{Topology: topo, GPU: fakegpu.Inventory{Count: 8}}).Apply(&local, false); err != nil {
		t.Fatal(err)
	}
	if n, names := racks(local, ""); n != 8 || len(names) != 4 || local.Nodes != 0 || local.Topology != topo || local.NodeGroups[0].GPUs.Inventory.Count != 8 {
		t.Errorf("local: %d nodes in racks %v, spec %+v", n, names, local)
	}
	// Real kubelets: the racks are the workers, simulated nodes stay apart and unlabelled.
	var kind clusters.Spec
	if err := (FlagShape{Topology: topo, KwokNodes: 3}).Apply(&kind, true); err != nil {
		t.Fatal(err)
	}
	if n, names := racks(kind, clusters.RealKubelets); n != 8 || len(names) != 4 {
		t.Errorf("kind: %d workers in racks %v", n, names)
	}
	if n, names := racks(kind, clusters.SimulatedNodes); n != 3 || !names[""] || len(names) != 1 {
		t.Errorf("kind: %d simulated nodes with racks %v, want 3 without", n, names)
	}
	for _, tt := range []struct {
		f    FlagShape
		real bool
		want string
	}{
		{FlagShape{Topology: topo, Nodes: 5}, false, "nodes: 5 requested, but topology blocks=2,racks-per-block=2,nodes-per-rack=2 makes 8"},
		{FlagShape{Topology: topo, Workers: 3}, true, "workers: 3 requested, but topology"},
		{FlagShape{Topology: topo, Nodes: 9, KwokNodes: 2}, true, "makes 8 workers, + 2 kwok nodes = 10"},
	} {
		var spec clusters.Spec
		if err := tt.f.Apply(&spec, tt.real); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.f, err, tt.want)
		}
	}
	var ok clusters.Spec
	if err := (FlagShape{Topology: topo, Nodes: 8}).Apply(&ok, false); err != nil {
		t.Errorf("--nodes equal to the topology's count: %v", err)
	}
}
