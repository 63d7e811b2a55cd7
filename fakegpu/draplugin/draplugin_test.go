package draplugin

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/plugin"
	"github.com/gangbench/gangbench/internal/testenv"
)

func TestNotifyMethod(t *testing.T) {
	if want := "/" + registerapi.Registration_ServiceDesc.ServiceName + "/NotifyRegistrationStatus"; notifyMethod != want {
		t.Errorf("notifyMethod %q, want %q", notifyMethod, want)
	}
}

func TestNewErrors(t *testing.T) {
	shared, err := plugin.NewHealth(testNode, fakegpu.Inventory{Count: 4}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{name: "empty", opts: Options{}, want: []string{"at least 1", "NodeName", "Client"}},
		{name: "bad inventory", opts: Options{Inventory: fakegpu.Inventory{Count: 4, NVLinkDomainSize: 3}, NodeName: "n", Client: fake.NewClientset()}, want: []string{"nvlinkDomainSize"}},
		{name: "health twice", opts: Options{Inventory: fakegpu.Inventory{Count: 4}, NodeName: testNode, Client: fake.NewClientset(), Health: shared, HealthFile: "/x"}, want: []string{"HealthFile"}},
		{name: "health of other devices", opts: Options{Inventory: fakegpu.Inventory{Count: 2}, NodeName: testNode, Client: fake.NewClientset(), Health: shared}, want: []string{"shared Health"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func readSpec(t *testing.T, path string) *cdispec.Spec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s cdispec.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &s
}

// specEnv is the env of the spec's device name.
func specEnv(t *testing.T, s *cdispec.Spec, name string) []string {
	t.Helper()
	for _, d := range s.Devices {
		if d.Name == name {
			return d.ContainerEdits.Env
		}
	}
	t.Fatalf("spec %s has no device %q: %+v", s.Kind, name, s.Devices)
	return nil
}

// TestPrepareUnprepare calls the DRA service as the kubelet does, over real gRPC: Prepare returns
// each of our devices with its GPU's CDI device (and the request's on the first), having written
// the specs those IDs name; a device already prepared for another claim is refused for that claim
// alone; Unprepare removes the claim's spec and frees its devices.
func TestPrepareUnprepare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	inv := fakegpu.Inventory{Count: 4, NVLinkDomainSize: 2}
	ids := inv.DeviceIDs(testNode)
	two := claim("ns", "two", "uid-two", [2]string{"gpus", "gpu-1"}, [2]string{"gpus", "gpu-2"})
	// Another driver's device in the same claim is not ours to prepare.
	two.Status.Allocation.Devices.Results = append(two.Status.Allocation.Devices.Results,
		resourcev1.DeviceRequestAllocationResult{Request: "nic", Driver: "nic.example.com", Pool: testNode, Device: "eth0"})
	clash := claim("ns", "clash", "uid-clash", [2]string{"gpu", "gpu-2"})
	foreign := claim("ns", "foreign", "uid-foreign", [2]string{"gpu", "gpu-0"})
	foreign.Status.Allocation.Devices.Results[0].Pool = "node-b"
	e := startPlugin(t, 4, func(o *Options) { o.Inventory = inv }, two, clash, foreign)
	k := registerKubelet(t, ctx, e, "")

	// The node's spec is there before any claim: one device per GPU.
	node := readSpec(t, filepath.Join(e.cdiDir, "gangbench.dev-gpu.json"))
	if node.Kind != CDIKind || len(node.Devices) != 4 || node.Version == "" {
		t.Fatalf("node spec %+v", node)
	}
	if env := specEnv(t, node, "gpu-3"); !slices.Equal(env, []string{"FAKEGPU_DEVICE_3=" + ids[3]}) {
		t.Errorf("gpu-3 env %v", env)
	}

	resp, err := k.dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{pbClaim(two), pbClaim(clash), pbClaim(foreign)}})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	got := resp.Claims["uid-two"]
	if got == nil || got.Error != "" || len(got.Devices) != 2 {
		t.Fatalf("claim two: %+v", got)
	}
	claimDev := CDIKind + "=claim-uid-two-gpus"
	for n, d := range got.Devices {
		want := []string{GPUCDIDevice(d.DeviceName)}
		if n == 0 {
			want = append(want, claimDev)
		}
		if d.PoolName != testNode || !slices.Equal(d.RequestNames, []string{"gpus"}) || !slices.Equal(d.CdiDeviceIds, want) {
			t.Errorf("device %d: %+v, want CDI ids %v", n, d, want)
		}
	}
	if got.Devices[0].DeviceName != "gpu-1" || got.Devices[1].DeviceName != "gpu-2" {
		t.Errorf("devices %s, %s, want gpu-1, gpu-2", got.Devices[0].DeviceName, got.Devices[1].DeviceName)
	}
	spec := readSpec(t, filepath.Join(e.cdiDir, "gangbench.dev-gpu_uid-two_gpus.json"))
	env := specEnv(t, spec, "claim-uid-two-gpus")
	// GPUs 1 and 2 are in NVLink domains 0 and 1 (domains of 2).
	for _, w := range []string{"FAKEGPU_VISIBLE_DEVICES=" + ids[1] + "," + ids[2], "FAKEGPU_PRODUCT=" + fakegpu.DefaultProduct, "FAKEGPU_NVLINK_DOMAINS=0,1"} {
		if !slices.Contains(env, w) {
			t.Errorf("claim spec env %v lacks %s", env, w)
		}
	}
	if c := resp.Claims["uid-clash"]; c == nil || !strings.Contains(c.Error, "gpu-2") || !strings.Contains(c.Error, "uid-two") {
		t.Errorf("claim of a device prepared for another: %+v, want an error naming gpu-2 and uid-two", c)
	}
	if c := resp.Claims["uid-foreign"]; c == nil || !strings.Contains(c.Error, "node-b") {
		t.Errorf("claim of another node's device: %+v, want an error naming node-b", c)
	}
	if p := e.p.Prepared(); !slices.Equal(p, []string{"uid-two"}) {
		t.Errorf("prepared %v", p)
	}

	// Prepare is idempotent: the kubelet asks again after a restart. It also keeps the node's spec,
	// which a node whose /var/run was cleared lost.
	if err := os.Remove(filepath.Join(e.cdiDir, "gangbench.dev-gpu.json")); err != nil {
		t.Fatal(err)
	}
	again, err := k.dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{pbClaim(two)}})
	if err != nil || again.Claims["uid-two"].Error != "" || len(again.Claims["uid-two"].Devices) != 2 {
		t.Errorf("second prepare: %+v, %v", again, err)
	}
	if n := readSpec(t, filepath.Join(e.cdiDir, "gangbench.dev-gpu.json")); len(n.Devices) != 4 {
		t.Errorf("node spec after prepare: %+v", n)
	}

	un, err := k.dra.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{pbClaim(two)}})
	if err != nil || un.Claims["uid-two"] == nil || un.Claims["uid-two"].Error != "" {
		t.Fatalf("NodeUnprepareResources: %+v, %v", un, err)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, "gangbench.dev-gpu_uid-two_gpus.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("claim spec after unprepare: %v, want removed", err)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, "gangbench.dev-gpu.json")); err != nil {
		t.Errorf("node spec after unprepare: %v, want kept", err)
	}
	if p := e.p.Prepared(); len(p) != 0 {
		t.Errorf("prepared after unprepare: %v", p)
	}
	// gpu-2 is free again; unpreparing an unknown claim is not an error.
	resp, err = k.dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{pbClaim(clash)}})
	if err != nil || resp.Claims["uid-clash"].Error != "" {
		t.Errorf("prepare after the other claim left: %+v, %v", resp, err)
	}
	un, err = k.dra.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{{Namespace: "ns", Name: "gone", Uid: "uid-gone"}}})
	if err != nil || un.Claims["uid-gone"].Error != "" {
		t.Errorf("unprepare of an unknown claim: %+v, %v", un, err)
	}
}

// nodeSlices are the ResourceSlices of our driver on testNode.
func nodeSlices(t *testing.T, cs *fake.Clientset) []resourcev1.ResourceSlice {
	t.Helper()
	list, err := cs.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []resourcev1.ResourceSlice
	for _, s := range list.Items {
		if s.Spec.Driver == fakegpu.DRADriver && s.Spec.NodeName != nil && *s.Spec.NodeName == testNode {
			out = append(out, s)
		}
	}
	return out
}

// sliceDevices are the device names the one slice of testNode has, or nil while there is not
// exactly one.
func sliceDevices(t *testing.T, cs *fake.Clientset) []string {
	t.Helper()
	ss := nodeSlices(t, cs)
	if len(ss) != 1 {
		return nil
	}
	names := []string{}
	for _, d := range ss[0].Spec.Devices {
		names = append(names, d.Name)
	}
	return names
}

func waitSliceDevices(t *testing.T, cs *fake.Clientset, want ...string) {
	t.Helper()
	var last []string
	deadline := time.After(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if last = sliceDevices(t, cs); slices.Equal(last, want) {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("slice devices %v after %s, want %v", last, waitTimeout, want)
		case <-tick.C:
		}
	}
}

// TestSlicePublished: the node's one slice is the pool named after it, owned by the node, with
// fakegpu.Devices' devices (clique included).
func TestSlicePublished(t *testing.T) {
	inv := fakegpu.Inventory{Count: 2}
	e := startPlugin(t, 2, func(o *Options) { o.Clique = "rack-1" })
	waitSliceDevices(t, e.cs, "gpu-0", "gpu-1")
	s := nodeSlices(t, e.cs)[0]
	if s.Spec.Pool.Name != testNode || s.Spec.Pool.ResourceSliceCount != 1 {
		t.Errorf("pool %+v", s.Spec.Pool)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].UID != "node-a-uid" {
		t.Errorf("owners %+v, want the node", s.OwnerReferences)
	}
	want := fakegpu.Devices(testNode, inv, fakegpu.SliceOptions{Clique: "rack-1"})
	if !apiequality.Semantic.DeepEqual(s.Spec.Devices, want) {
		t.Errorf("devices %+v, want %+v", s.Spec.Devices, want)
	}
	if got := e.p.Published(); !slices.Equal(got, []string{"gpu-0", "gpu-1"}) {
		t.Errorf("Published %v", got)
	}
}

// TestUnhealthyWithdrawn: a device marked unhealthy through any of the device plugin's controls
// (the API, the HTTP API, the health file) leaves the slice, and comes back once healthy.
func TestUnhealthyWithdrawn(t *testing.T) {
	file := filepath.Join(testenv.ShortTempDir(t), "unhealthy")
	e := startPlugin(t, 3, func(o *Options) { o.HealthFile = file })
	ids := fakegpu.Inventory{Count: 3}.DeviceIDs(testNode)
	waitSliceDevices(t, e.cs, "gpu-0", "gpu-1", "gpu-2")

	if err := e.p.SetHealth(ids[1], false); err != nil {
		t.Fatal(err)
	}
	waitSliceDevices(t, e.cs, "gpu-0", "gpu-2")

	// The HTTP API the device plugin has, on this plugin.
	srv := httptest.NewServer(plugin.NewHandler(e.p))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/devices/"+ids[0]+"/unhealthy", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ds plugin.DeviceStatus
	if err := json.NewDecoder(resp.Body).Decode(&ds); err != nil || resp.StatusCode != http.StatusOK || ds.Health != "Unhealthy" {
		t.Errorf("POST unhealthy: %d %+v %v", resp.StatusCode, ds, err)
	}
	_ = resp.Body.Close()
	waitSliceDevices(t, e.cs, "gpu-2")
	if resp, err := http.Post(srv.URL+"/devices/GPU-nope/unhealthy", "", nil); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST for an unknown device: %v %v, want 404", resp, err)
	} else {
		_ = resp.Body.Close()
	}
	for _, id := range ids[:2] {
		if err := e.p.SetHealth(id, true); err != nil {
			t.Fatal(err)
		}
	}
	waitSliceDevices(t, e.cs, "gpu-0", "gpu-1", "gpu-2")

	// The health file.
	if err := os.WriteFile(file, []byte(ids[2]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitSliceDevices(t, e.cs, "gpu-0", "gpu-1")
	if st := e.p.Status(); st.Devices[2].Health != "Unhealthy" || !slices.Equal(st.Devices[2].UnhealthyBy, []string{"file"}) {
		t.Errorf("status of the listed device %+v", st.Devices[2])
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitSliceDevices(t, e.cs, "gpu-0", "gpu-1", "gpu-2")
}

// TestSharedHealth: with the device plugin's Health, a change made there (its HTTP API, its file)
// withdraws the device from the slice too.
func TestSharedHealth(t *testing.T) {
	inv := fakegpu.Inventory{Count: 2}
	h, err := plugin.NewHealth(testNode, inv, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := startPlugin(t, 2, func(o *Options) { o.Health = h })
	waitSliceDevices(t, e.cs, "gpu-0", "gpu-1")
	if err := h.Set(inv.DeviceIDs(testNode)[0], false); err != nil {
		t.Fatal(err)
	}
	waitSliceDevices(t, e.cs, "gpu-1")
}

// TestWatchHealthStatus: the kubelet's health stream gets every device at once and again after a
// change.
func TestWatchHealthStatus(t *testing.T) {
	inv := fakegpu.Inventory{Count: 2}
	p, err := New(Options{Inventory: inv, NodeName: testNode, Client: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan kubeletplugin.DeviceHealthReport)
	done := make(chan error, 1)
	go func() { done <- (&driver{p: p}).WatchHealthStatus(ctx, reports) }()
	recv := func() kubeletplugin.DeviceHealthReport {
		t.Helper()
		select {
		case r := <-reports:
			return r
		case <-time.After(waitTimeout):
			t.Fatal("no health report")
			return kubeletplugin.DeviceHealthReport{}
		}
	}
	health := func(r kubeletplugin.DeviceHealthReport) []string {
		var out []string
		for _, d := range r.Devices {
			if d.PoolName != testNode {
				t.Errorf("device %+v not in pool %s", d, testNode)
			}
			out = append(out, d.DeviceName+"="+string(d.Health))
		}
		return out
	}
	if got := health(recv()); !slices.Equal(got, []string{"gpu-0=Healthy", "gpu-1=Healthy"}) {
		t.Errorf("first report %v", got)
	}
	if err := p.SetHealth(inv.DeviceIDs(testNode)[1], false); err != nil {
		t.Fatal(err)
	}
	if got := health(recv()); !slices.Equal(got, []string{"gpu-0=Healthy", "gpu-1=Unhealthy"}) {
		t.Errorf("report after a change %v", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchHealthStatus: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("WatchHealthStatus did not return after cancel")
	}
}
