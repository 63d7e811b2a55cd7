package kind

import (
	"bytes"
	"flag"
	corev1 "k8s.io/api/core/v1"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/defaults"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind/nodeimage"
	"github.com/gangbench/gangbench/fakegpu"
)

// update rewrites the golden files instead of comparing: go test ./clusters/kind/ -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func TestRenderConfigGolden(t *testing.T) {
	tests := []struct {
		name   string
		spec   clusters.Spec
		opts   Options
		golden string
		// check looks at the decoded config beyond the golden comparison.
		check func(t *testing.T, c *v1alpha4.Cluster, p ClusterConfigurationPatch)
	}{
		{
			name:   "default",
			spec:   clusters.Spec{},
			opts:   Options{SchedulerMetricsPort: 41059},
			golden: "config-default.golden.yaml",
			check: func(t *testing.T, c *v1alpha4.Cluster, p ClusterConfigurationPatch) {
				if len(c.Nodes) != 3 || c.Nodes[0].Role != v1alpha4.ControlPlaneRole || c.Nodes[1].Role != v1alpha4.WorkerRole {
					t.Errorf("nodes: want 1 control-plane + 2 workers, got %+v", c.Nodes)
				}
				for i, n := range c.Nodes {
					if want := nodeimage.Repository + ":" + clusters.DefaultKubernetesVersion; n.Image != want {
						t.Errorf("node %d image %q, want gangbench's node image %q", i, n.Image, want)
					}
				}
				// gangbench's node image has no kindnetd and its images under their own repository.
				if !c.Networking.DisableDefaultCNI || p.ImageRepository != nodeimage.ImageRepository {
					t.Errorf("disableDefaultCNI %v, imageRepository %q: want true and %q", c.Networking.DisableDefaultCNI, p.ImageRepository, nodeimage.ImageRepository)
				}
				pm := c.Nodes[0].ExtraPortMappings
				if len(pm) != 1 || pm[0].ContainerPort != 10259 || pm[0].HostPort != 41059 || pm[0].ListenAddress != "127.0.0.1" {
					t.Errorf("control-plane port mappings %+v, want 10259 → 127.0.0.1:41059", pm)
				}
				if !c.FeatureGates["GenericWorkload"] || c.RuntimeConfig["scheduling.k8s.io/v1beta1"] != "true" {
					t.Errorf("gates %v runtime config %v: want GenericWorkload=true and scheduling.k8s.io/v1beta1=true", c.FeatureGates, c.RuntimeConfig)
				}
				if c.Nodes[1].Labels[LabelWorker] != "true" || c.Nodes[1].Labels[fakegpu.LabelPresent] != "true" {
					t.Errorf("worker labels %v", c.Nodes[1].Labels)
				}
				args := argMap(p.Scheduler)
				if args["bind-address"] != "0.0.0.0" || !strings.Contains(args["authorization-always-allow-paths"], "/metrics") {
					t.Errorf("scheduler args %v: want bind-address 0.0.0.0 and /metrics always allowed", args)
				}
				if _, ok := args["feature-gates"]; ok {
					t.Errorf("scheduler has its own feature-gates without component gates: %v", args)
				}
				if p.APIServer != nil || p.ControllerManager != nil || p.Etcd != nil {
					t.Errorf("patch touches more than the scheduler: %+v", p)
				}
			},
		},
		{
			name: "scheduler image, component gates and extra args",
			spec: clusters.Spec{
				Name:                  "proof",
				FeatureGates:          map[string]bool{"SchedulerQueueingHints": true},
				ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Scheduler: {"GenericWorkload": false}, clusters.APIServer: {"AllAlpha": false}},
				RuntimeConfig:         map[string]string{"scheduling.k8s.io/v1alpha1": "true"},
				ExtraArgs: map[clusters.Component]map[string]string{
					clusters.Scheduler:         {"--v": "4", "bind-address": "0.0.0.0"},
					clusters.ControllerManager: {"concurrent-gc-syncs": "40"},
					clusters.Etcd:              {"quota-backend-bytes": "8589934592"},
				},
				NodeGroups: []clusters.NodeGroup{{Count: 3, Kubelet: clusters.RealKubelets, GPUs: &clusters.GroupGPUs{
					Inventory: fakegpu.Inventory{Count: 4, Product: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960, NVLinkDomainSize: 2}}}},
				Images: clusters.Images{Node: "kindest/node:v1.37.0", Scheduler: "example.com/kube-scheduler:gang"},
			},
			opts:   Options{SchedulerMetricsPort: 42000},
			golden: "config-scheduler.golden.yaml",
			check: func(t *testing.T, c *v1alpha4.Cluster, p ClusterConfigurationPatch) {
				if len(c.Nodes) != 4 {
					t.Errorf("want 4 nodes, got %d", len(c.Nodes))
				}
				sched := argMap(p.Scheduler)
				if sched["feature-gates"] != "GenericWorkload=false,SchedulerQueueingHints=true" {
					t.Errorf("scheduler feature-gates %q", sched["feature-gates"])
				}
				if sched["v"] != "4" {
					t.Errorf("scheduler --v: %v", sched)
				}
				if got := argMap(p.APIServer)["feature-gates"]; got != "AllAlpha=false,GenericWorkload=true,SchedulerQueueingHints=true" {
					t.Errorf("apiserver feature-gates %q", got)
				}
				if got := argMap(p.ControllerManager); got["concurrent-gc-syncs"] != "40" || got["feature-gates"] != "" {
					t.Errorf("controller-manager args %v", got)
				}
				if p.Etcd == nil || p.Etcd.Local == nil || len(p.Etcd.Local.ExtraArgs) != 1 {
					t.Errorf("etcd patch %+v", p.Etcd)
				}
				if c.RuntimeConfig["scheduling.k8s.io/v1alpha1"] != "true" || c.RuntimeConfig["scheduling.k8s.io/v1beta1"] != "true" {
					t.Errorf("runtime config %v", c.RuntimeConfig)
				}
				if c.Nodes[1].Labels[fakegpu.LabelCount] != "4" {
					t.Errorf("worker labels %v", c.Nodes[1].Labels)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := RenderConfig(tt.spec, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.golden, out)
			var c v1alpha4.Cluster
			if err := yaml.UnmarshalStrict(out, &c); err != nil {
				t.Fatalf("rendered config does not decode strictly: %v", err)
			}
			if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
				t.Errorf("type meta %+v", c.TypeMeta)
			}
			// The ClusterConfiguration patch first, then the kubelet's (and with gangbench's node
			// image the InitConfiguration's).
			if len(c.KubeadmConfigPatches) < 2 || !strings.Contains(c.KubeadmConfigPatches[1], "failCgroupV1: false") {
				t.Fatalf("want the ClusterConfiguration and KubeletConfiguration patches, got %q", c.KubeadmConfigPatches)
			}
			var p ClusterConfigurationPatch
			if err := yaml.UnmarshalStrict([]byte(c.KubeadmConfigPatches[0]), &p); err != nil {
				t.Fatalf("kubeadm patch does not decode strictly: %v", err)
			}
			if p.APIVersion != "kubeadm.k8s.io/v1beta4" || p.Kind != "ClusterConfiguration" {
				t.Errorf("patch type %s %s", p.APIVersion, p.Kind)
			}
			tt.check(t, &c, p)
		})
	}
}

func argMap(c *KubeadmComponent) map[string]string {
	m := map[string]string{}
	if c == nil {
		return m
	}
	for _, a := range c.ExtraArgs {
		m[a.Name] = a.Value
	}
	return m
}

func TestRenderConfigWithoutPortLeavesMappingOut(t *testing.T) {
	out, err := RenderConfig(clusters.Spec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("extraPortMappings")) {
		t.Errorf("port mapping rendered without a port:\n%s", out)
	}
}

func TestRenderConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		spec clusters.Spec
		opts Options
		want []string
	}{
		{"old node image", clusters.Spec{Images: clusters.Images{Node: "kindest/node:v1.35.8"}}, Options{}, []string{"v1.35.8", "too old"}},
		{"old kubernetes version", clusters.Spec{KubernetesVersion: "v1.34.11"}, Options{}, []string{"v1.34.11"}},
		{"bad version", clusters.Spec{KubernetesVersion: "1.37"}, Options{}, []string{"1.37"}},
		{"no worker left", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 2, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{}}}}, Options{}, []string{"0 real GPU workers", "at least one"}},
		{"real GPU group without GPUs", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{}}, {Count: 1, GPUs: &clusters.GroupGPUs{Inventory: fakegpu.Inventory{Product: "X"}}}}}, Options{}, []string{"nodeGroups[1].gpus.inventory.count", "at least one GPU"}},
		{"simulated group without GPUs", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{}}, {Count: 2, Kubelet: clusters.SimulatedNodes}}}, Options{}, []string{"nodeGroups[1]", "without GPUs"}},
		{"bad taint key", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{}}, {Count: 1, Taints: []corev1.Taint{{Key: "a b", Effect: corev1.TaintEffectNoSchedule}}}}}, Options{}, []string{"nodeGroups[1].taints[0].key", `"a b"`}},
		{"bad taint value", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{}}, {Count: 1, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{}}, {Count: 1, Taints: []corev1.Taint{{Key: "k", Value: "x y", Effect: corev1.TaintEffectNoExecute}}}}}, Options{}, []string{"nodeGroups[2].taints[0].value", `"x y"`}},
		{"bad taint effect", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{}, Taints: []corev1.Taint{{Key: "k", Effect: "Sometimes"}}}}}, Options{}, []string{"nodeGroups[0].taints[0]", "Sometimes"}},
		{"bad label", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{}, Labels: map[string]string{"rack": "r 1"}}}}, Options{}, []string{`nodeGroups[0].labels["rack"]`, `"r 1"`}},
		{"too many workers over groups", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 30, GPUs: &clusters.GroupGPUs{}}, {Count: 21, GPUs: &clusters.GroupGPUs{Inventory: fakegpu.Inventory{Count: 4}}}}}, Options{}, []string{"workers: 51", "1 to 50"}},
		{"too many plain workers over groups", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 40, GPUs: &clusters.GroupGPUs{}}, {Count: 6}, {Count: 5}}}, Options{}, []string{"plain workers: 11", "0 to 10"}},
		{"both shapes", clusters.Spec{Nodes: 2, NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{}}}}, Options{}, []string{"nodes 2", "nodeGroups"}},
		{"etcd gates", clusters.Spec{ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Etcd: {"X": true}}}, Options{}, []string{"etcd", "not supported on kind"}},
		{"kwok args without kwok", clusters.Spec{ExtraArgs: map[clusters.Component]map[string]string{clusters.Kwok: {"v": "4"}}}, Options{}, []string{"no kwok nodes"}},
		{"scheduler image and binary", clusters.Spec{SchedulerBinary: "/opt/kube-scheduler", Images: clusters.Images{Scheduler: "example.com/kube-scheduler:gang"}}, Options{}, []string{"both", "example.com/kube-scheduler:gang", "/opt/kube-scheduler", "give one"}},
		{"bad name", clusters.Spec{Name: "Bad_Name"}, Options{}, []string{"Bad_Name"}},
		{"bad gpu", clusters.Spec{GPU: fakegpu.Inventory{Count: 65}}, Options{}, []string{"gpu", "65"}},
		{"too many plain workers", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 40, GPUs: &clusters.GroupGPUs{}}, {Count: 11}}}, Options{}, []string{"plain workers", "11", "0 to 10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderConfig(tt.spec, tt.opts)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestResolveNodes(t *testing.T) {
	real := func(n int) clusters.NodeGroup { return clusters.NodeGroup{Count: n, GPUs: &clusters.GroupGPUs{}} }
	kwok := func(n int) clusters.NodeGroup {
		return clusters.NodeGroup{Count: n, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{}}
	}
	tests := []struct {
		spec                 clusters.Spec
		workers, plain, kwok int
	}{
		{clusters.Spec{}, 2, 0, 0},
		{clusters.Spec{Nodes: 3}, 3, 0, 0},
		{clusters.Spec{NodeGroups: []clusters.NodeGroup{real(2), kwok(8)}}, 2, 0, 8},
		{clusters.Spec{NodeGroups: []clusters.NodeGroup{real(1), kwok(4)}}, 1, 0, 4},
		{clusters.Spec{NodeGroups: []clusters.NodeGroup{kwok(100), real(1)}}, 1, 0, 100},
		{clusters.Spec{NodeGroups: []clusters.NodeGroup{real(1), {Count: 1}}}, 1, 1, 0},
	}
	for _, tt := range tests {
		pl, err := resolve(tt.spec)
		if err != nil {
			t.Errorf("%+v: %v", tt.spec, err)
			continue
		}
		if pl.Workers != tt.workers || pl.PlainWorkers != tt.plain || pl.KwokNodes != tt.kwok {
			t.Errorf("%+v: got %d workers + %d plain + %d kwok, want %d + %d + %d",
				tt.spec, pl.Workers, pl.PlainWorkers, pl.KwokNodes, tt.workers, tt.plain, tt.kwok)
		}
	}
}

// TestResolveGroupLabels: a group's labels reach its nodes (kind workers through the kind config,
// kwok nodes through their creation), under the labels that identify the workers.
func TestResolveGroupLabels(t *testing.T) {
	taint := corev1.Taint{Key: "gangbench.dev/lane", Value: "a", Effect: corev1.TaintEffectNoSchedule}
	spec := clusters.Spec{NodeGroups: []clusters.NodeGroup{
		{Count: 1, GPUs: &clusters.GroupGPUs{}, Labels: map[string]string{"rack": "r1", LabelWorker: "false"}},
		{Count: 2, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{}, Labels: map[string]string{"rack": "r2"}, Taints: []corev1.Taint{taint}},
	}}
	pl, err := resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.KwokGroups) != 1 || pl.KwokGroups[0].Labels["rack"] != "r2" || len(pl.KwokGroups[0].Taints) != 1 || pl.KwokGroups[0].Taints[0] != taint {
		t.Errorf("kwok groups %+v", pl.KwokGroups)
	}
	b, err := RenderConfig(spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatal(err)
	}
	if l := c.Nodes[1].Labels; l["rack"] != "r1" || l[LabelWorker] != "true" {
		t.Errorf("worker labels %v: want rack=r1 and ours", l)
	}
}

func TestNodeImage(t *testing.T) {
	// "" is gangbench's own node image, built for the version at create time.
	tests := []struct{ version, explicit, want string }{
		{"", "", ""},
		{clusters.DefaultKubernetesVersion, "", ""},
		{"v1.36.3", "", ""},
		{"v1.38.1", "", ""},
		{"v1.37.2", "kindest/node:v1.37.0", "kindest/node:v1.37.0"},
		{"v1.34.0", "my/node:dev", "my/node:dev"},
		{"", "localhost:5000/kindest/node:v1.37.2", "localhost:5000/kindest/node:v1.37.2"},
	}
	for _, tt := range tests {
		got, err := nodeImage(tt.version, tt.explicit)
		if err != nil || got != tt.want {
			t.Errorf("nodeImage(%q, %q) = %q, %v; want %q", tt.version, tt.explicit, got, err, tt.want)
		}
	}
	if _, err := nodeImage("", "localhost:5000/kindest/node:v1.33.1"); err == nil {
		t.Error("registry host with a port and an old tag accepted")
	}
	if _, err := nodeImage("v1.35.4", ""); err == nil || !strings.Contains(err.Error(), "v1.35.4") {
		t.Errorf("nodeImage(v1.35.4) = %v, want an error naming the version", err)
	}
	if _, err := nodeImage("1.37.2", ""); err == nil {
		t.Error("a version without v accepted")
	}
}

// A node image gangbench did not build (kindest/node, pulled by a user who can) keeps kind's own CNI,
// image names and CoreDNS; only the cgroup v1 allowance applies to every image.
// TestRenderConfigPlainWorkers: the seed lab's shape, a GPU worker named <name>-worker and a plain
// one after it that carries neither the device plugin's label nor GPU labels.
func TestRenderConfigPlainWorkers(t *testing.T) {
	b, err := RenderConfig(clusters.Spec{Name: "gpu-lab", NodeGroups: []clusters.NodeGroup{{Count: 1, GPUs: &clusters.GroupGPUs{}}, {Count: 1}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 3 {
		t.Fatalf("want control plane + 2 workers, got %d nodes", len(c.Nodes))
	}
	if gpu := c.Nodes[1].Labels; gpu[LabelWorker] != "true" || gpu[fakegpu.LabelPresent] != "true" {
		t.Errorf("first worker labels %v: want the GPU worker's", gpu)
	}
	plain := c.Nodes[2].Labels
	if plain[LabelPlainWorker] != "true" || plain[LabelWorker] != "" || plain[fakegpu.LabelPresent] != "" {
		t.Errorf("second worker labels %v: want the plain worker's only", plain)
	}
}

func TestRenderConfigForeignImage(t *testing.T) {
	out, err := RenderConfig(clusters.Spec{Images: clusters.Images{Node: defaults.Image}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(out, &c); err != nil {
		t.Fatal(err)
	}
	if c.Networking.DisableDefaultCNI {
		t.Error("default CNI disabled for kind's own node image")
	}
	all := strings.Join(c.KubeadmConfigPatches, "---\n")
	for _, bad := range []string{"imageRepository", "addon/coredns"} {
		if strings.Contains(all, bad) {
			t.Errorf("patches for a kindest image contain %q:\n%s", bad, all)
		}
	}
	if !strings.Contains(all, "failCgroupV1: false") {
		t.Errorf("patches lack failCgroupV1: false:\n%s", all)
	}
}

// TestNodeLeaseGracePeriodKind: on kind the controller-manager's grace period follows the simulated
// nodes' lease the same way, through kubeadm's extra args.
func TestNodeLeaseGracePeriodKind(t *testing.T) {
	if f := componentFlags(clusters.Spec{NodeLeaseSeconds: 3600}, clusters.ControllerManager); f["node-monitor-grace-period"] != "3610s" {
		t.Errorf("lease 3600 s: %v", f)
	}
	if f := componentFlags(clusters.Spec{}, clusters.ControllerManager); f != nil {
		t.Errorf("default lease: %v, want no flags", f)
	}
	if f := componentFlags(clusters.Spec{NodeLeaseSeconds: 3600}, clusters.APIServer); f["node-monitor-grace-period"] != "" {
		t.Errorf("only the controller-manager gets it: %v", f)
	}
}

// twoOfEachKind is a spec with two node groups of each kind the kind provider has, each with its
// own labels; the second GPU worker group and the second plain group are tainted, and the groups
// have three inventories (two among the real GPU workers).
func twoOfEachKind() clusters.Spec {
	four := fakegpu.Inventory{Count: 4, Product: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960}
	return clusters.Spec{Name: "racks", NodeGroups: []clusters.NodeGroup{
		{Count: 2, GPUs: &clusters.GroupGPUs{}, Labels: map[string]string{"rack": "r1", "block": "b1"}},
		{Count: 2, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{}, Labels: map[string]string{"rack": "r3"}},
		{Count: 1, Kubelet: clusters.RealKubelets},
		{Count: 1, GPUs: &clusters.GroupGPUs{Inventory: four}, Labels: map[string]string{"rack": "r2", "block": "b1"},
			Taints: []corev1.Taint{{Key: "gangbench.dev/reserved", Value: "gang", Effect: corev1.TaintEffectNoSchedule}}},
		{Count: 3, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{Inventory: fakegpu.Inventory{Count: 2}}, Labels: map[string]string{"rack": "r4"},
			Taints: []corev1.Taint{{Key: "gangbench.dev/lane", Value: "b", Effect: corev1.TaintEffectNoExecute}}},
		{Count: 1, Labels: map[string]string{"pool": "cpu"}, Taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectPreferNoSchedule}}},
		// A GPU worker group with the first group's inventory shares its device plugin DaemonSet.
		{Count: 1, GPUs: &clusters.GroupGPUs{Inventory: fakegpu.Default()}, Labels: map[string]string{"rack": "r5"}},
	}}
}

// TestRenderConfigTwoGroupsOfEachKind: every real worker carries its own group's labels (under
// ours) and taints (in its JoinConfiguration patch) and no other group's; GPU workers come first,
// group by group in spec order, then the plain ones.
func TestRenderConfigTwoGroupsOfEachKind(t *testing.T) {
	out, err := RenderConfig(twoOfEachKind(), Options{SchedulerMetricsPort: 41059})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config-groups.golden.yaml", out)
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(out, &c); err != nil {
		t.Fatal(err)
	}
	type want struct {
		labels map[string]string // these labels, and absent where the value is ""
		taints []corev1.Taint
	}
	reserved := []corev1.Taint{{Key: "gangbench.dev/reserved", Value: "gang", Effect: corev1.TaintEffectNoSchedule}}
	wants := []want{
		{map[string]string{"rack": "r1", "block": "b1", LabelWorker: "true", LabelGPUInventory: "0", fakegpu.LabelCount: "8", LabelPlainWorker: "", "pool": ""}, nil},
		{map[string]string{"rack": "r1", "block": "b1", LabelWorker: "true", LabelGPUInventory: "0", fakegpu.LabelCount: "8"}, nil},
		{map[string]string{"rack": "r2", "block": "b1", LabelWorker: "true", LabelGPUInventory: "1", fakegpu.LabelCount: "4", fakegpu.LabelProduct: "NVIDIA-A100-SXM4-40GB"}, reserved},
		{map[string]string{"rack": "r5", "block": "", LabelWorker: "true", LabelGPUInventory: "0", fakegpu.LabelCount: "8"}, nil},
		{map[string]string{LabelPlainWorker: "true", LabelWorker: "", LabelGPUInventory: "", fakegpu.LabelPresent: "", "rack": "", "pool": ""}, nil},
		{map[string]string{LabelPlainWorker: "true", "pool": "cpu", LabelWorker: "", "rack": ""}, []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectPreferNoSchedule}}},
	}
	if len(c.Nodes) != 1+len(wants) {
		t.Fatalf("%d nodes, want the control plane and %d workers (kwok nodes are not kind nodes)", len(c.Nodes), len(wants))
	}
	if len(c.Nodes[0].KubeadmConfigPatches) != 0 {
		t.Errorf("control plane has node patches %q", c.Nodes[0].KubeadmConfigPatches)
	}
	for i, w := range wants {
		n := c.Nodes[i+1]
		for k, v := range w.labels {
			if got, ok := n.Labels[k]; v == "" && ok || v != "" && got != v {
				t.Errorf("worker %d: label %s = %q (set %v), want %q", i, k, got, ok, v)
			}
		}
		var got []corev1.Taint
		switch len(n.KubeadmConfigPatches) {
		case 0:
		case 1:
			var p JoinConfigurationPatch
			if err := yaml.UnmarshalStrict([]byte(n.KubeadmConfigPatches[0]), &p); err != nil {
				t.Fatalf("worker %d: join patch: %v", i, err)
			}
			if p.APIVersion != kubeadmAPIVersion || p.Kind != "JoinConfiguration" {
				t.Errorf("worker %d: patch type %s %s", i, p.APIVersion, p.Kind)
			}
			got = p.NodeRegistration.Taints
		default:
			t.Errorf("worker %d: %d node patches, want at most one", i, len(n.KubeadmConfigPatches))
		}
		if !slices.Equal(got, w.taints) {
			t.Errorf("worker %d: taints %v, want %v", i, got, w.taints)
		}
	}
}

// TestPlanTwoGroupsOfEachKind: counts over groups, the device plugin DaemonSets (one per distinct
// real GPU inventory, each selecting its workers) and the kwok nodes' names, unique across groups.
func TestPlanTwoGroupsOfEachKind(t *testing.T) {
	pl, err := resolve(twoOfEachKind())
	if err != nil {
		t.Fatal(err)
	}
	if pl.Workers != 4 || pl.PlainWorkers != 2 || pl.KwokNodes != 5 || pl.Nodes() != 9 {
		t.Errorf("workers %d plain %d kwok %d nodes %d, want 4, 2, 5, 9", pl.Workers, pl.PlainWorkers, pl.KwokNodes, pl.Nodes())
	}
	if pl.GPU != fakegpu.Default() {
		t.Errorf("plan GPU %+v, want the first GPU group's (the default)", pl.GPU)
	}
	plugins := pl.plugins("img")
	if len(plugins) != 2 {
		t.Fatalf("plugins %+v, want two (two distinct worker inventories)", plugins)
	}
	for i, want := range []struct {
		instance, selector string
		count              int
	}{
		{"0", LabelGPUInventory + "=0," + LabelWorker + "=true", 8},
		{"1", LabelGPUInventory + "=1," + LabelWorker + "=true", 4},
	} {
		d := plugins[i]
		if d.Instance != want.instance || d.Selector() != want.selector || d.Inventory.Count != want.count || d.Image != "img" {
			t.Errorf("plugin %d: %+v selector %q; want instance %q, selector %q, %d GPUs", i, d, d.Selector(), want.instance, want.selector, want.count)
		}
	}
	names := pl.kwokNodeNames()
	if len(names) != 2 || len(names[0]) != 2 || len(names[1]) != 3 {
		t.Fatalf("kwok names %v, want 2 and 3", names)
	}
	seen := map[string]bool{}
	for _, group := range names {
		for _, n := range group {
			if seen[n] {
				t.Errorf("kwok node name %s twice in %v", n, names)
			}
			seen[n] = true
		}
	}
	if names[0][0] != "gpu-node-0" || names[1][2] != "gpu-node-4" {
		t.Errorf("kwok names %v, want one numbering gpu-node-0 … gpu-node-4", names)
	}
	g := pl.KwokGroups[1]
	if g.GPU.Count != 2 || g.Labels["rack"] != "r4" || len(g.Taints) != 1 || g.Field != "nodeGroups[4]" {
		t.Errorf("second kwok group %+v", g)
	}
}

// TestPlanGPUAPIs: the kind provider takes every GPU API; workers of one inventory but two APIs get
// a DaemonSet each, carrying the API and the clique label (the topology's rack key, or the default
// one); the shorthand's API reaches its one DaemonSet.
func TestPlanGPUAPIs(t *testing.T) {
	for _, api := range clusters.GPUAPIs() {
		if err := (&Provider{}).Validate(clusters.Spec{Nodes: 1, GPUAPI: api}); err != nil {
			t.Errorf("GPU API %s: %v", api, err)
		}
	}
	two := fakegpu.Inventory{Count: 2}
	pl, err := resolve(clusters.Spec{
		Topology: &clusters.Topology{Blocks: 1, RacksPerBlock: 2, NodesPerRack: 1, RackKey: "example.com/rack"},
		NodeGroups: []clusters.NodeGroup{
			{Count: 1, GPUs: &clusters.GroupGPUs{Inventory: two, API: clusters.GPUAPIBoth}},
			{Count: 1, GPUs: &clusters.GroupGPUs{Inventory: two}},
			{Count: 1, GPUs: &clusters.GroupGPUs{Inventory: two, API: clusters.GPUAPIBoth}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ps := pl.plugins("img")
	if len(ps) != 2 || ps[0].API != clusters.GPUAPIBoth || ps[1].API != clusters.GPUAPIDevicePlugin || ps[0].CliqueLabel != "example.com/rack" {
		t.Errorf("plugins %+v, want both (clique label example.com/rack) and device-plugin", ps)
	}
	if pl.GPUGroups[2].Inventory != 0 {
		t.Errorf("third group's DaemonSet %d, want the first's (same inventory and API)", pl.GPUGroups[2].Inventory)
	}
	pl, err = resolve(clusters.Spec{Nodes: 1, GPU: two, GPUAPI: clusters.GPUAPIDRA})
	if err != nil {
		t.Fatal(err)
	}
	if ps := pl.plugins("img"); len(ps) != 1 || ps[0].API != clusters.GPUAPIDRA || ps[0].CliqueLabel != clusters.DefaultRackKey {
		t.Errorf("shorthand plugins %+v, want one with DRA and the default rack key", ps)
	}
	pl, err = resolve(clusters.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if ps := pl.plugins("img"); len(ps) != 1 || ps[0].API != clusters.GPUAPIDevicePlugin {
		t.Errorf("default plugins %+v, want the device plugin", ps)
	}
}

// TestPlanOneInventory: a cluster whose GPU workers share an inventory keeps the one DaemonSet it
// always had, whatever its groups, and a one-group kwok cluster keeps its node names.
func TestPlanOneInventory(t *testing.T) {
	for _, spec := range []clusters.Spec{
		{},
		{Nodes: 3, GPU: fakegpu.Inventory{Count: 4}},
		{NodeGroups: []clusters.NodeGroup{
			{Count: 1, GPUs: &clusters.GroupGPUs{}, Labels: map[string]string{"rack": "r1"}},
			{Count: 1, GPUs: &clusters.GroupGPUs{Inventory: fakegpu.Default()}, Labels: map[string]string{"rack": "r2"}},
			{Count: 11, Kubelet: clusters.SimulatedNodes, GPUs: &clusters.GroupGPUs{Inventory: fakegpu.Inventory{Count: 2}}},
		}},
	} {
		pl, err := resolve(spec)
		if err != nil {
			t.Fatal(err)
		}
		plugins := pl.plugins("img")
		if len(plugins) != 1 || plugins[0].Instance != "" || plugins[0].Selector() != LabelWorker+"=true" {
			t.Errorf("%+v: plugins %+v, want the one DaemonSet on %s=true", spec, plugins, LabelWorker)
		}
		if names := pl.kwokNodeNames(); pl.KwokNodes > 0 && (len(names) != 1 || names[0][0] != "gpu-node-00" || names[0][10] != "gpu-node-10") {
			t.Errorf("%+v: kwok names %v", spec, names)
		}
	}
}
