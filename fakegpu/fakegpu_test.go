package fakegpu

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// update rewrites the golden files instead of comparing: go test ./fakegpu/ -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		inv  Inventory
		// want are substrings the error must contain; empty means valid.
		want []string
	}{
		{name: "default", inv: Default()},
		{name: "zero value is a GPU-less node", inv: Inventory{}},
		{name: "count only gets defaults", inv: Inventory{Count: 4}},
		{name: "domains of 2", inv: Inventory{Count: 8, NVLinkDomainSize: 2}},
		{name: "custom resource", inv: Inventory{Count: 2, ResourceName: "example.com/fake-gpu", Product: "Fake-GPU_1.0"}},
		{name: "max count", inv: Inventory{Count: MaxCount}},
		{name: "negative count", inv: Inventory{Count: -1}, want: []string{"count", "-1"}},
		{name: "count too large", inv: Inventory{Count: 65}, want: []string{"count", "65", "64"}},
		{name: "resource without domain", inv: Inventory{Count: 1, ResourceName: "gpu"}, want: []string{"resourceName", `"gpu"`}},
		{name: "native resource domain", inv: Inventory{Count: 1, ResourceName: "kubernetes.io/gpu"}, want: []string{"resourceName", "kubernetes.io/gpu"}},
		{name: "requests prefix", inv: Inventory{Count: 1, ResourceName: "requests.example.com/gpu"}, want: []string{"resourceName", "requests."}},
		{name: "bad resource chars", inv: Inventory{Count: 1, ResourceName: "nvidia.com/g pu"}, want: []string{"resourceName", "nvidia.com/g pu"}},
		{name: "product with space", inv: Inventory{Count: 1, Product: "NVIDIA H100"}, want: []string{"product", `"NVIDIA H100"`}},
		{name: "product too long", inv: Inventory{Count: 1, Product: strings.Repeat("a", 64)}, want: []string{"product", "63"}},
		{name: "negative memory", inv: Inventory{Count: 1, MemoryMiB: -5, Product: "X"}, want: []string{"memoryMiB", "-5"}},
		{name: "domain larger than count", inv: Inventory{Count: 4, NVLinkDomainSize: 8}, want: []string{"nvlinkDomainSize", "8", "(4)"}},
		{name: "negative domain", inv: Inventory{Count: 4, NVLinkDomainSize: -1}, want: []string{"nvlinkDomainSize", "-1"}},
		{name: "domain not dividing", inv: Inventory{Count: 8, NVLinkDomainSize: 3}, want: []string{"nvlinkDomainSize 3", "count 8"}},
		{
			name: "every problem reported",
			inv:  Inventory{Count: 100, ResourceName: "gpu", Product: "a b", MemoryMiB: -1},
			want: []string{"count", "resourceName", "product", "memoryMiB"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.inv.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tc.inv, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want error containing %q", tc.inv, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate(%+v) = %q, missing %q", tc.inv, err, w)
				}
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Inventory
		want Inventory
	}{
		{name: "zero keeps count 0", in: Inventory{}, want: Inventory{ResourceName: DefaultResourceName, Product: DefaultProduct, MemoryMiB: DefaultMemoryMiB}},
		{name: "count kept", in: Inventory{Count: 4}, want: Inventory{Count: 4, ResourceName: DefaultResourceName, Product: DefaultProduct, MemoryMiB: DefaultMemoryMiB}},
		{name: "custom product keeps unknown memory", in: Inventory{Count: 2, Product: "A100"}, want: Inventory{Count: 2, ResourceName: DefaultResourceName, Product: "A100"}},
		{name: "set fields kept", in: Default(), want: Default()},
		{name: "explicit memory kept", in: Inventory{Count: 1, MemoryMiB: 1024}, want: Inventory{Count: 1, ResourceName: DefaultResourceName, Product: DefaultProduct, MemoryMiB: 1024}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.WithDefaults(); got != tc.want {
				t.Errorf("WithDefaults(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	tests := []struct {
		name string
		inv  Inventory
		want map[string]string
	}{
		{
			name: "default",
			inv:  Default(),
			want: map[string]string{
				"nvidia.com/gpu.product":       "NVIDIA-H100-80GB-HBM3",
				"nvidia.com/gpu.count":         "8",
				"nvidia.com/gpu.memory":        "81559",
				"nvidia.com/gpu.present":       "true",
				"gangbench.dev/nvlink-domains": "1",
			},
		},
		{
			name: "two domains of four",
			inv:  Inventory{Count: 8, NVLinkDomainSize: 4, Product: "X", MemoryMiB: 100},
			want: map[string]string{
				"nvidia.com/gpu.product":       "X",
				"nvidia.com/gpu.count":         "8",
				"nvidia.com/gpu.memory":        "100",
				"nvidia.com/gpu.present":       "true",
				"gangbench.dev/nvlink-domains": "2",
			},
		},
		{
			name: "unknown memory has no memory label",
			inv:  Inventory{Count: 1, Product: "X"},
			want: map[string]string{
				"nvidia.com/gpu.product":       "X",
				"nvidia.com/gpu.count":         "1",
				"nvidia.com/gpu.present":       "true",
				"gangbench.dev/nvlink-domains": "1",
			},
		},
		{name: "no GPUs, no labels", inv: Inventory{}, want: map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.inv.Labels()
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Labels() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeviceIDs(t *testing.T) {
	inv := Default()
	a1, a2, b := inv.DeviceIDs("gpu-node-000"), inv.DeviceIDs("gpu-node-000"), inv.DeviceIDs("gpu-node-001")
	if !reflect.DeepEqual(a1, a2) {
		t.Fatalf("DeviceIDs not deterministic: %v vs %v", a1, a2)
	}
	if len(a1) != inv.Count {
		t.Fatalf("got %d IDs, want %d", len(a1), inv.Count)
	}
	re := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9]+$`)
	seen := map[string]bool{}
	for i, id := range append(append([]string{}, a1...), b...) {
		if !re.MatchString(id) {
			t.Errorf("ID %d %q does not match %s", i, id, re)
		}
		if seen[id] {
			t.Errorf("duplicate ID %q across nodes %v %v", id, a1, b)
		}
		seen[id] = true
	}
	if !strings.HasSuffix(a1[7], "-7") {
		t.Errorf("last ID %q should end with its index", a1[7])
	}
	if ids := (Inventory{}).DeviceIDs("n"); ids != nil {
		t.Errorf("no GPUs should give no IDs, got %v", ids)
	}
}

func TestDomainOf(t *testing.T) {
	inv := Inventory{Count: 8, NVLinkDomainSize: 4}
	want := []int{0, 0, 0, 0, 1, 1, 1, 1}
	for i, w := range want {
		if got := inv.DomainOf(i); got != w {
			t.Errorf("DomainOf(%d) = %d, want %d", i, got, w)
		}
	}
	for _, bad := range []int{-1, 8} {
		if got := inv.DomainOf(bad); got != -1 {
			t.Errorf("DomainOf(%d) = %d, want -1", bad, got)
		}
	}
	all := Inventory{Count: 8}
	if got := all.DomainOf(7); got != 0 {
		t.Errorf("size 0 means one domain; DomainOf(7) = %d", got)
	}
	if d := inv.Domains(); d != 2 {
		t.Errorf("Domains() = %d, want 2", d)
	}
}

func TestResources(t *testing.T) {
	got := Inventory{Count: 4}.Resources()
	q, ok := got["nvidia.com/gpu"]
	if !ok || q.Value() != 4 || len(got) != 1 {
		t.Fatalf("Resources() = %v, want only nvidia.com/gpu: 4", got)
	}
	if got := (Inventory{}).Resources(); len(got) != 0 {
		t.Errorf("no GPUs should give no resources, got %v", got)
	}
}

func TestSimulatedNodeIdentityWins(t *testing.T) {
	n := SimulatedNode("n1", Default(), NodeOptions{
		Labels:      map[string]string{"kubernetes.io/hostname": "other", "nvidia.com/gpu.product": "Override", "zone": "a"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "real", "note": "x"},
	})
	for k, want := range map[string]string{"kubernetes.io/hostname": "n1", "nvidia.com/gpu.product": "Override", "zone": "a", "gangbench.dev/managed": "true"} {
		if got := n.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if got := n.Annotations["kwok.x-k8s.io/node"]; got != "fake" {
		t.Errorf("kwok annotation = %q, want fake", got)
	}
	if got := n.Annotations["note"]; got != "x" {
		t.Errorf("extra annotation lost: %v", n.Annotations)
	}
	// Registered as a healthy kubelet registers its node: Ready, no pressure.
	if len(n.Status.Conditions) != 5 || n.Status.Conditions[0].Type != corev1.NodeReady || n.Status.Conditions[0].Status != corev1.ConditionTrue || n.Status.Phase != corev1.NodeRunning {
		t.Errorf("conditions %v, phase %q: want a healthy node's", n.Status.Conditions, n.Status.Phase)
	}
	for _, c := range n.Status.Conditions[1:] {
		if c.Status != corev1.ConditionFalse {
			t.Errorf("condition %s = %s, want False", c.Type, c.Status)
		}
	}
	if !reflect.DeepEqual(n.Status.Capacity, n.Status.Allocatable) {
		t.Errorf("capacity %v != allocatable %v", n.Status.Capacity, n.Status.Allocatable)
	}
}

func TestSimulatedNodeGolden(t *testing.T) {
	tests := []struct {
		name string
		inv  Inventory
		opts NodeOptions
	}{
		{name: "default", inv: Default()},
		{
			name: "custom",
			inv:  Inventory{Count: 4, ResourceName: "example.com/gpu", Product: "Fake-GPU", MemoryMiB: 16384, NVLinkDomainSize: 2},
			opts: NodeOptions{
				CPU:         resource.MustParse("8"),
				Memory:      resource.MustParse("64Gi"),
				Pods:        resource.MustParse("32"),
				Labels:      map[string]string{"topology.kubernetes.io/zone": "zone-a"},
				Taints:      []corev1.Taint{{Key: "gangbench.dev/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
				Annotations: map[string]string{"gangbench.dev/note": "golden"},
				Registered:  metav1.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := yaml.Marshal(SimulatedNode("gpu-node-000", tc.inv, tc.opts))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "node-"+tc.name+".golden.yaml")
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
				t.Errorf("SimulatedNode differs from %s (run with -update if intended):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
			}
		})
	}
}
