package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/testenv"
)

const testNode = "kind-worker"

// twoDomains is 8 GPUs in 2 NVLink domains of 4: IDs 0-3 in domain 0, 4-7 in domain 1.
var twoDomains = fakegpu.Inventory{Count: 8, NVLinkDomainSize: 4}

func testOptions(dir string) Options {
	return Options{
		Inventory:    twoDomains,
		NodeName:     testNode,
		PluginDir:    dir,
		HealthAddr:   "127.0.0.1:0",
		PollInterval: time.Minute, // reactions must come from fsnotify events, not the ticker
	}
}

// healthOf maps device ID → health in a ListAndWatch response.
func healthOf(resp *pluginapi.ListAndWatchResponse) map[string]string {
	m := map[string]string{}
	for _, d := range resp.GetDevices() {
		m[d.GetID()] = d.GetHealth()
	}
	return m
}

// nextList receives the next list and checks the health of the devices in want. Every change sends
// a list and the tests make one change at a time, so the next list is the one to check.
func nextList(t *testing.T, k *fakeKubelet, want map[string]string) {
	t.Helper()
	resp := recv(t, k.lists, "a ListAndWatch update")
	got := healthOf(resp)
	for id, h := range want {
		if got[id] != h {
			t.Fatalf("device %s is %q, want %q; list %v", id, got[id], h, got)
		}
	}
}

func allHealthy(ids []string) map[string]string {
	m := map[string]string{}
	for _, id := range ids {
		m[id] = pluginapi.Healthy
	}
	return m
}

func TestRegisterListAndWatchAndHealth(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	k := startFakeKubelet(t, dir)
	p := startPlugin(t, testOptions(dir))
	ids := twoDomains.DeviceIDs(testNode)

	reg := recv(t, k.regs, "registration")
	if reg.GetVersion() != pluginapi.Version || reg.GetEndpoint() != DefaultSocketName || reg.GetResourceName() != "nvidia.com/gpu" {
		t.Errorf("RegisterRequest = %v, want version %s endpoint %s resource nvidia.com/gpu", reg, pluginapi.Version, DefaultSocketName)
	}
	if o := reg.GetOptions(); !o.GetGetPreferredAllocationAvailable() || o.GetPreStartRequired() {
		t.Errorf("registered options = %v, want preferred allocation and no PreStart", o)
	}
	if o := recv(t, k.opts, "GetDevicePluginOptions"); !o.GetGetPreferredAllocationAvailable() || o.GetPreStartRequired() {
		t.Errorf("GetDevicePluginOptions = %v", o)
	}
	if _, err := os.Stat(filepath.Join(dir, DefaultSocketName)); err != nil {
		t.Errorf("plugin socket: %v", err)
	}

	first := recv(t, k.lists, "initial device list")
	if n := len(first.GetDevices()); n != 8 {
		t.Fatalf("initial list has %d devices, want 8", n)
	}
	for i, d := range first.GetDevices() {
		if d.GetID() != ids[i] || d.GetHealth() != pluginapi.Healthy {
			t.Errorf("device %d = %s %s, want %s Healthy", i, d.GetID(), d.GetHealth(), ids[i])
		}
		numa := d.GetTopology().GetNodes()
		if len(numa) != 1 || numa[0].GetID() != int64(i/4) {
			t.Errorf("device %d topology %v, want NUMA node %d (its NVLink domain)", i, numa, i/4)
		}
	}
	testenv.Eventually(t, waitTimeout, "the plugin records its registration", func() bool { ok, _ := p.Registered(); return ok })

	// SetHealth pushes a new list.
	if err := p.SetHealth(ids[3], false); err != nil {
		t.Fatal(err)
	}
	nextList(t, k, map[string]string{ids[3]: pluginapi.Unhealthy, ids[2]: pluginapi.Healthy})
	// Setting the same health again changes nothing, so no list; the next one must come from the API.
	if err := p.SetHealth(ids[3], false); err != nil {
		t.Fatal(err)
	}
	if err := p.SetHealth("GPU-nope-0", false); err == nil || !strings.Contains(err.Error(), "GPU-nope-0") {
		t.Errorf("SetHealth(unknown) = %v, want error naming it", err)
	}

	base := "http://" + p.HealthAddr()
	post := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("/devices/" + ids[5] + "/unhealthy")
	if code != http.StatusOK || !strings.Contains(body, `"Unhealthy"`) {
		t.Fatalf("POST unhealthy = %d %s", code, body)
	}
	nextList(t, k, map[string]string{ids[3]: pluginapi.Unhealthy, ids[5]: pluginapi.Unhealthy})
	if code, body := post("/devices/" + ids[3] + "/healthy"); code != http.StatusOK || !strings.Contains(body, `"Healthy"`) {
		t.Fatalf("POST healthy = %d %s", code, body)
	}
	nextList(t, k, map[string]string{ids[3]: pluginapi.Healthy, ids[5]: pluginapi.Unhealthy})
	if code, body := post("/devices/GPU-nope-0/unhealthy"); code != http.StatusNotFound || !strings.Contains(body, "GPU-nope-0") {
		t.Errorf("POST unknown = %d %s, want 404 naming the device", code, body)
	}

	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, raw := get("/devices")
	var st Status
	if err := json.Unmarshal(raw, &st); code != http.StatusOK || err != nil {
		t.Fatalf("GET /devices = %d %s (%v)", code, raw, err)
	}
	if st.Node != testNode || st.ResourceName != "nvidia.com/gpu" || !st.Registered || len(st.Devices) != 8 {
		t.Errorf("status = %+v", st)
	}
	if d := st.Devices[5]; d.Health != pluginapi.Unhealthy || !slices.Equal(d.UnhealthyBy, []string{"api"}) || d.NVLinkDomain != 1 {
		t.Errorf("device 5 status = %+v", d)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	if code, b := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d %s", code, b)
	}
}

func TestHealthFile(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	healthFile := filepath.Join(testenv.ShortTempDir(t), "unhealthy")
	k := startFakeKubelet(t, dir)
	opts := testOptions(dir)
	opts.HealthFile = healthFile
	p := startPlugin(t, opts)
	ids := p.DeviceIDs()
	recv(t, k.regs, "registration")
	nextList(t, k, allHealthy(ids))

	write := func(content string) {
		t.Helper()
		// Write-then-rename, as a careful writer would, so no half-written file is read.
		tmp := healthFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, healthFile); err != nil {
			t.Fatal(err)
		}
	}
	write("# drained for test\n" + ids[0] + "\n\n  " + ids[7] + "  \nGPU-unknown-9\n")
	nextList(t, k, map[string]string{ids[0]: pluginapi.Unhealthy, ids[7]: pluginapi.Unhealthy, ids[1]: pluginapi.Healthy})

	// The API cannot heal what the file lists, and the file does not heal what the API marked.
	if err := p.SetHealth(ids[0], true); err != nil {
		t.Fatal(err)
	}
	if err := p.SetHealth(ids[1], false); err != nil {
		t.Fatal(err)
	}
	nextList(t, k, map[string]string{ids[0]: pluginapi.Unhealthy, ids[1]: pluginapi.Unhealthy, ids[7]: pluginapi.Unhealthy})
	if by := p.Status().Devices[0].UnhealthyBy; !slices.Equal(by, []string{"file"}) {
		t.Errorf("device 0 unhealthy by %v, want [file]", by)
	}

	if err := os.Remove(healthFile); err != nil {
		t.Fatal(err)
	}
	nextList(t, k, map[string]string{ids[0]: pluginapi.Healthy, ids[1]: pluginapi.Unhealthy, ids[7]: pluginapi.Healthy})
}

func TestAllocate(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	opts := testOptions(dir)
	opts.Inventory.Product = "Fake-GPU"
	opts.Inventory.MemoryMiB = 1024
	var log lockedBuffer
	opts.AllocationLog = &log
	p := startPlugin(t, opts, func(p *Plugin) { p.now = func() time.Time { return testTime } })
	c := dialPlugin(t, p.Plugin)
	ids := p.DeviceIDs()
	ctx := context.Background()

	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{ids[2]}},
		{DevicesIds: []string{ids[5], ids[1], ids[4]}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetContainerResponses()); n != 2 {
		t.Fatalf("%d container responses, want 2", n)
	}
	want := []struct {
		ids, domains string
	}{
		{ids[2], "0"},
		{ids[5] + "," + ids[1] + "," + ids[4], "0,1"},
	}
	for i, cr := range resp.GetContainerResponses() {
		env, ann := cr.GetEnvs(), cr.GetAnnotations()
		if env[EnvVisibleDevices] != want[i].ids || env[EnvProduct] != "Fake-GPU" || env[EnvNVLinkDomains] != want[i].domains {
			t.Errorf("container %d envs = %v, want %s=%s", i, env, EnvVisibleDevices, want[i].ids)
		}
		if ann[AnnotationDeviceIDs] != want[i].ids || ann[AnnotationProduct] != "Fake-GPU" ||
			ann[AnnotationMemoryMiB] != "1024" || ann[AnnotationNVLinkDomains] != want[i].domains {
			t.Errorf("container %d annotations = %v", i, ann)
		}
		if len(cr.GetDevices()) != 0 || len(cr.GetMounts()) != 0 {
			t.Errorf("container %d gets real devices or mounts: %v", i, cr)
		}
	}

	for name, req := range map[string][]string{
		"unknown":   {ids[0], "GPU-00000000-99"},
		"duplicate": {ids[0], ids[0]},
		"empty":     {},
	} {
		_, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: req}}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: Allocate(%v) = %v, want InvalidArgument", name, req, err)
		}
		if name == "unknown" && !strings.Contains(err.Error(), "GPU-00000000-99") {
			t.Errorf("unknown-ID error %q does not name the ID", err)
		}
	}

	if _, err := c.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids[:1]}); err != nil {
		t.Errorf("PreStartContainer: %v", err)
	}

	// The granted call is recorded per container, in the log and in memory; the rejected ones are not.
	wantRecords := []Allocation{
		{Time: testTime, Node: testNode, Resource: "nvidia.com/gpu", DeviceIDs: []string{ids[2]}, Call: 1, Container: 0},
		{Time: testTime, Node: testNode, Resource: "nvidia.com/gpu", DeviceIDs: []string{ids[5], ids[1], ids[4]}, Call: 1, Container: 1},
	}
	if got := p.Allocations(); !reflect.DeepEqual(got, wantRecords) {
		t.Errorf("Allocations() = %+v, want %+v", got, wantRecords)
	}
	if got, err := ParseAllocations(strings.NewReader(log.String())); err != nil || !reflect.DeepEqual(got, wantRecords) {
		t.Errorf("allocation log parses to %+v (%v), want %+v; log:\n%s", got, err, wantRecords, log.String())
	}
}

func TestGetPreferredAllocationRPC(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	p := startPlugin(t, testOptions(dir))
	c := dialPlugin(t, p.Plugin)
	ids := p.DeviceIDs()
	pick := func(idx ...int) []string {
		out := make([]string, len(idx))
		for i, x := range idx {
			out[i] = ids[x]
		}
		return out
	}

	resp, err := c.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
			// Spread availability: only domain 1 can hold all 4.
			{AvailableDeviceIDs: pick(0, 4, 1, 5, 2, 6, 7), AllocationSize: 4},
			// Device 0 must be in: fill its domain first, then one more from domain 1.
			{AvailableDeviceIDs: pick(0, 1, 2, 4, 5, 6, 7), MustIncludeDeviceIDs: pick(0), AllocationSize: 4},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetContainerResponses()
	if len(got) != 2 {
		t.Fatalf("%d responses, want 2", len(got))
	}
	if want := pick(4, 5, 6, 7); !slices.Equal(got[0].GetDeviceIDs(), want) {
		t.Errorf("spread request got %v, want one domain %v", got[0].GetDeviceIDs(), want)
	}
	if want := pick(0, 1, 2, 4); !slices.Equal(got[1].GetDeviceIDs(), want) {
		t.Errorf("must-include request got %v, want %v", got[1].GetDeviceIDs(), want)
	}

	_, err = c.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: []string{"GPU-x-1"}, AllocationSize: 1}},
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown available ID: %v, want InvalidArgument", err)
	}
}

// TestKubeletRestart restarts the fake kubelet on the same socket path, as a kubelet restart does.
// The plugin must re-create its socket if the kubelet removed it, and register again. Both the
// fsnotify path and the polling fallback are covered.
func TestKubeletRestart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		removeSocket  bool
		poll          bool
		pollInterval  time.Duration
		wantNewSocket bool
	}{
		{name: "fsnotify, kubelet removes plugin socket", removeSocket: true, pollInterval: time.Minute, wantNewSocket: true},
		{name: "fsnotify, plugin socket kept", pollInterval: time.Minute},
		{name: "polling, kubelet removes plugin socket", removeSocket: true, poll: true, pollInterval: 20 * time.Millisecond, wantNewSocket: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.ShortTempDir(t)
			k1 := startFakeKubelet(t, dir)
			opts := testOptions(dir)
			opts.PollInterval = tc.pollInterval
			p := startPlugin(t, opts, func(p *Plugin) { p.noWatch = tc.poll })
			recv(t, k1.regs, "first registration")
			nextList(t, k1, allHealthy(p.DeviceIDs()))
			starts := p.serverStarts.Load()

			k1.stop()
			// The old stream ends because the kubelet went away.
			recv(t, k1.streamEnd, "end of the first kubelet's stream")
			if tc.removeSocket {
				// What the kubelet's device manager does at start: clear the sockets directory.
				if err := os.Remove(p.SocketPath()); err != nil {
					t.Fatal(err)
				}
			}
			k2 := startFakeKubelet(t, dir)
			reg := recv(t, k2.regs, "registration with the restarted kubelet")
			if reg.GetEndpoint() != DefaultSocketName || reg.GetResourceName() != "nvidia.com/gpu" {
				t.Errorf("re-registration = %v", reg)
			}
			// The new kubelet can reach the plugin and gets the full list.
			nextList(t, k2, allHealthy(p.DeviceIDs()))
			if _, err := os.Lstat(p.SocketPath()); err != nil {
				t.Fatalf("plugin socket after restart: %v", err)
			}
			if renewed := p.serverStarts.Load() > starts; renewed != tc.wantNewSocket {
				t.Errorf("socket re-created = %v, want %v", renewed, tc.wantNewSocket)
			}
			// Health changes reach the new kubelet.
			if err := p.SetHealth(p.DeviceIDs()[6], false); err != nil {
				t.Fatal(err)
			}
			nextList(t, k2, map[string]string{p.DeviceIDs()[6]: pluginapi.Unhealthy})
		})
	}
}

// TestRegisterWaitsForKubelet starts the plugin before the kubelet: it must register once the
// kubelet socket appears.
func TestRegisterWaitsForKubelet(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	p := startPlugin(t, testOptions(dir))
	testenv.Eventually(t, waitTimeout, "a failed registration attempt is recorded", func() bool { _, err := p.Registered(); return err != nil })
	resp, err := http.Get("http://" + p.HealthAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz before registration = %d, want 503", resp.StatusCode)
	}
	k := startFakeKubelet(t, dir)
	recv(t, k.regs, "registration once the kubelet is up")
	nextList(t, k, allHealthy(p.DeviceIDs()))
}

func TestShutdown(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	k := startFakeKubelet(t, dir)
	p := startPlugin(t, testOptions(dir))
	recv(t, k.regs, "registration")
	recv(t, k.lists, "initial list")

	if err := p.stop(t); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	if _, err := os.Lstat(p.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("plugin socket after shutdown: %v, want it removed", err)
	}
	if err := recv(t, k.streamEnd, "end of the ListAndWatch stream"); !errors.Is(err, io.EOF) && status.Code(err) != codes.Unavailable {
		t.Errorf("stream ended with %v, want EOF or Unavailable", err)
	}
	if _, err := http.Get("http://" + p.HealthAddr() + "/healthz"); err == nil {
		t.Errorf("health API still serving after shutdown")
	}
	if err := p.Run(context.Background()); err == nil {
		t.Errorf("second Run succeeded, want error")
	}
}

func TestNew(t *testing.T) {
	long := "/tmp/" + strings.Repeat("d", 110)
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{name: "defaults", opts: Options{Inventory: fakegpu.Inventory{Count: 8}, NodeName: "n"}},
		{name: "no GPUs", opts: Options{NodeName: "n"}, want: []string{"count", "at least 1"}},
		{name: "invalid inventory", opts: Options{Inventory: fakegpu.Inventory{Count: 8, NVLinkDomainSize: 3}, NodeName: "n"}, want: []string{"nvlinkDomainSize"}},
		{name: "no node", opts: Options{Inventory: fakegpu.Inventory{Count: 1}}, want: []string{"NodeName"}},
		{name: "kubelet socket elsewhere", opts: Options{Inventory: fakegpu.Inventory{Count: 1}, NodeName: "n", PluginDir: "/a", KubeletSocket: "/b/kubelet.sock"},
			want: []string{"/b/kubelet.sock", "must be in PluginDir"}},
		{name: "socket path too long", opts: Options{Inventory: fakegpu.Inventory{Count: 1}, NodeName: "n", PluginDir: long}, want: []string{"longer than the 107"}},
		{name: "socket name with dir", opts: Options{Inventory: fakegpu.Inventory{Count: 1}, NodeName: "n", SocketName: "a/b.sock"}, want: []string{"a/b.sock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.opts)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if p.SocketPath() != pluginapi.DevicePluginPath+DefaultSocketName || p.opts.KubeletSocket != pluginapi.KubeletSocket {
					t.Errorf("defaults: socket %s kubelet %s", p.SocketPath(), p.opts.KubeletSocket)
				}
				return
			}
			if err == nil {
				t.Fatalf("New(%+v) = nil error, want %q", tc.opts, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
