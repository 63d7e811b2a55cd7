package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/plugin"
	"github.com/gangbench/gangbench/internal/testenv"
)

const waitTimeout = 20 * time.Second

func noEnv(string) string { return "" }

func TestRunBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "count", args: []string{"--node-name=n", "--count=0"}, want: []string{"--count=0"}},
		{name: "domain", args: []string{"--node-name=n", "--count=8", "--nvlink-domain-size=5"}, want: []string{"--nvlink-domain-size=5"}},
		{name: "resource", args: []string{"--node-name=n", "--resource-name=kubernetes.io/gpu"}, want: []string{`--resource-name="kubernetes.io/gpu"`}},
		{name: "no node name", args: nil, want: []string{"--node-name", "NODE_NAME"}},
		{name: "not a number", args: []string{"--memory-mib=lots"}, want: []string{"lots", "memory-mib"}},
		{name: "unknown flag", args: []string{"--gpus=8"}, want: []string{"gpus"}},
		{name: "log level", args: []string{"--log-level=loud"}, want: []string{"loud", "log-level"}},
		{name: "positional", args: []string{"--node-name=n", "extra"}, want: []string{`"extra"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(context.Background(), tc.args, io.Discard, &stderr, noEnv); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, io.Discard, &stderr, noEnv); code != exitOK {
		t.Errorf("-h exit %d", code)
	}
	for _, f := range []string{"-count", "-resource-name", "-product", "-memory-mib", "-nvlink-domain-size", "-node-name", "-plugin-dir", "-health-addr", "-health-file", "-log-level",
		"-gpu-api", "-cdi-dir", "-registrar-dir", "-dra-plugin-dir", "-clique-label", "-kubeconfig"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("usage lacks %s", f)
		}
	}
}

// TestRunCancelled serves until the context ends (what a signal does in main) and exits 0. While
// it serves, an Allocate call must leave its record on stdout and nothing else there.
func TestRunCancelled(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stdout, stderr syncBuffer
	go func() {
		done <- run(ctx, []string{"--plugin-dir=" + dir, "--count=2"}, &stdout, &stderr, func(k string) string {
			if k == "NODE_NAME" {
				return "n1"
			}
			return ""
		})
	}()
	sock := filepath.Join(dir, "gangbench-fakegpu.sock")
	waitForFile(t, sock)

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ids := fakegpu.Inventory{Count: 2}.DeviceIDs("n1")
	actx, acancel := context.WithTimeout(ctx, waitTimeout)
	defer acancel()
	if _, err := pluginapi.NewDevicePluginClient(conn).Allocate(actx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids[1:]}},
	}); err != nil {
		t.Fatalf("Allocate: %v; stderr:\n%s", err, stderr.String())
	}
	// The record is written before Allocate answers.
	out := stdout.String()
	got, err := plugin.ParseAllocations(strings.NewReader(out))
	if err != nil || len(got) != 1 || strings.Count(out, "\n") != 1 {
		t.Fatalf("stdout = %q (%v), want exactly one allocation record", out, err)
	}
	if a := got[0]; a.Node != "n1" || a.Resource != "nvidia.com/gpu" || !slices.Equal(a.DeviceIDs, ids[1:]) || a.Call != 1 {
		t.Errorf("record %+v, want call 1 of %v on n1", a, ids[1:])
	}

	stopRun(t, cancel, done, &stderr)
}

// TestSignal runs the real main in a child process (this test binary re-executed) and stops it with
// SIGTERM, as the kubelet stops a pod: it must exit 0 and remove its socket.
func TestSignal(t *testing.T) {
	if os.Getenv("GANGBENCH_FAKEGPU_MAIN") == "1" {
		os.Args = append([]string{"fakegpu-device-plugin"}, strings.Split(os.Getenv("GANGBENCH_FAKEGPU_ARGS"), " ")...)
		main()
		return
	}
	dir := testenv.ShortTempDir(t)
	sock := filepath.Join(dir, "gangbench-fakegpu.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignal$")
	cmd.Env = append(os.Environ(), "GANGBENCH_FAKEGPU_MAIN=1", "NODE_NAME=n1",
		"GANGBENCH_FAKEGPU_ARGS=--plugin-dir="+dir+" --count=4 --nvlink-domain-size=2")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	waitForFile(t, sock)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("child exited with %v; output:\n%s", err, out.String())
		}
	case <-time.After(waitTimeout):
		t.Fatalf("child did not exit within %s of SIGTERM; output:\n%s", waitTimeout, out.String())
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after SIGTERM: %v, want removed", err)
	}
	if !strings.Contains(out.String(), "device plugin stopped") {
		t.Errorf("no clean-stop log; output:\n%s", out.String())
	}
}

// waitForFile polls (bounded) until path exists: the socket appearing is the only sign the child
// gives that it serves.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.After(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Lstat(path); err == nil {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s did not appear within %s", path, waitTimeout)
		case <-tick.C:
		}
	}
}

// fakeAPI is a fake apiserver with node n1, which names objects created with generateName as the
// apiserver does (the DRA helper creates its slices that way).
func fakeAPI() *fake.Clientset {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "n1-uid", Labels: map[string]string{"rack": "r7"}}})
	var n atomic.Int64
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if m, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject()); err == nil && m.GetName() == "" {
			m.SetName(fmt.Sprintf("%s%d", m.GetGenerateName(), n.Add(1)))
		}
		return false, nil, nil
	})
	return cs
}

// sliceDevices is the device names of the one slice of node n1, nil while there is none, and its
// devices' clique.
func sliceDevices(t *testing.T, cs *fake.Clientset) ([]string, string) {
	t.Helper()
	list, err := cs.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		return nil, ""
	}
	names, clique := []string{}, ""
	for _, d := range list.Items[0].Spec.Devices {
		names = append(names, d.Name)
		if a, ok := d.Attributes[fakegpu.AttrCliqueID]; ok && a.StringValue != nil {
			clique = *a.StringValue
		}
	}
	return names, clique
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestRunBoth runs both plugins in one process: the device plugin's socket and the DRA plugin's
// registration socket appear, the ResourceSlice is published with the clique read from the node's
// label, the one health API (not ready: no kubelet answered) names both, and a device it marks
// unhealthy leaves the slice while the device plugin reports it unhealthy too.
func TestRunBoth(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	cs := fakeAPI()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var stdout, stderr syncBuffer
	args := []string{"--gpu-api=both", "--count=2", "--plugin-dir=" + filepath.Join(dir, "dp"), "--registrar-dir=" + filepath.Join(dir, "reg"),
		"--dra-plugin-dir=" + filepath.Join(dir, "dra"), "--cdi-dir=" + filepath.Join(dir, "cdi"), "--clique-label=rack", "--health-addr=" + addr}
	go func() {
		done <- runWith(ctx, args, &stdout, &stderr, func(k string) string {
			if k == "NODE_NAME" {
				return "n1"
			}
			return ""
		}, func(string) (kubernetes.Interface, error) { return cs, nil })
	}()
	waitForFile(t, filepath.Join(dir, "dp", "gangbench-fakegpu.sock"))
	waitForFile(t, filepath.Join(dir, "reg", fakegpu.DRADriver+"-reg.sock"))
	waitForFile(t, filepath.Join(dir, "cdi", "gangbench.dev-gpu.json"))
	testenv.Eventually(t, waitTimeout, "the slice with 2 devices in clique r7", func() bool {
		names, clique := sliceDevices(t, cs)
		return len(names) == 2 && clique == "r7"
	})

	get := func(path string) (int, string) {
		t.Helper()
		var code int
		var body string
		testenv.Eventually(t, waitTimeout, "the health API answers "+path, func() bool {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			code, body = resp.StatusCode, string(b)
			return true
		})
		return code, body
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "device plugin") || !strings.Contains(body, "DRA plugin") {
		t.Errorf("/readyz without a kubelet: %d %q, want 503 naming both plugins", code, body)
	}
	var st plugin.Status
	if code, body := get("/devices"); code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.Driver != fakegpu.DRADriver || st.ResourceName != fakegpu.DefaultResourceName || len(st.Devices) != 2 {
		t.Errorf("/devices: %d %s", code, body)
	}
	resp, err := http.Post("http://"+addr+"/devices/"+st.Devices[1].ID+"/unhealthy", "", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST unhealthy: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	testenv.Eventually(t, waitTimeout, "gpu-1 withdrawn from the slice", func() bool {
		names, _ := sliceDevices(t, cs)
		return slices.Equal(names, []string{"gpu-0"})
	})

	stopRun(t, cancel, done, &stderr)
	if stdout.String() != "" {
		t.Errorf("stdout %q, want only allocation records (there were none)", stdout.String())
	}
}

// TestRunDRA runs the DRA plugin alone with a health file: a device the file lists leaves the
// slice. A bad --gpu-api is a usage error naming the accepted APIs; a client that cannot be made
// is a serving error.
func TestRunDRA(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	cs := fakeAPI()
	file := filepath.Join(dir, "unhealthy")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var stderr syncBuffer
	args := []string{"--gpu-api=dra", "--count=3", "--registrar-dir=" + filepath.Join(dir, "reg"), "--poll-interval=50ms",
		"--dra-plugin-dir=" + filepath.Join(dir, "dra"), "--cdi-dir=" + filepath.Join(dir, "cdi"), "--health-file=" + file}
	env := func(k string) string {
		if k == "NODE_NAME" {
			return "n1"
		}
		return ""
	}
	go func() {
		done <- runWith(ctx, args, io.Discard, &stderr, env, func(string) (kubernetes.Interface, error) { return cs, nil })
	}()
	testenv.Eventually(t, waitTimeout, "the slice with 3 devices", func() bool { names, _ := sliceDevices(t, cs); return len(names) == 3 })
	if _, err := os.Lstat(filepath.Join(dir, "gangbench-fakegpu.sock")); err == nil {
		t.Error("the device plugin runs with --gpu-api=dra")
	}
	ids := fakegpu.Inventory{Count: 3}.DeviceIDs("n1")
	if err := os.WriteFile(file, []byte(ids[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, "gpu-0 withdrawn", func() bool {
		names, clique := sliceDevices(t, cs)
		return slices.Equal(names, []string{"gpu-1", "gpu-2"}) && clique == "n1"
	})
	stopRun(t, cancel, done, &stderr)

	var out bytes.Buffer
	if code := runWith(context.Background(), []string{"--node-name=n", "--gpu-api=cdi"}, io.Discard, &out, noEnv, nil); code != exitUsage ||
		!strings.Contains(out.String(), `--gpu-api="cdi"`) || !strings.Contains(out.String(), "device-plugin, dra, both") {
		t.Errorf("bad --gpu-api: exit %d, stderr %q", code, out.String())
	}
	out.Reset()
	noClient := func(string) (kubernetes.Interface, error) { return nil, errors.New("not in a cluster") }
	if code := runWith(context.Background(), []string{"--node-name=n", "--gpu-api=dra"}, io.Discard, &out, noEnv, noClient); code != exitError ||
		!strings.Contains(out.String(), "not in a cluster") {
		t.Errorf("no client: exit %d, stderr %q", code, out.String())
	}
}

// stopRun cancels a run started in the background and requires it to return exitOK in time.
func stopRun(t *testing.T, cancel context.CancelFunc, done <-chan int, stderr fmt.Stringer) {
	t.Helper()
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after cancel; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(waitTimeout):
		t.Fatal("run did not return after cancel")
	}
}
