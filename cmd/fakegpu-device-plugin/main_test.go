package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/plugin"
)

const waitTimeout = 20 * time.Second

// shortTempDir keeps unix socket paths under the 107-byte limit, which t.TempDir() can exceed.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

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
	for _, f := range []string{"-count", "-resource-name", "-product", "-memory-mib", "-nvlink-domain-size", "-node-name", "-plugin-dir", "-health-addr", "-health-file", "-log-level"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("usage lacks %s", f)
		}
	}
}

// TestRunCancelled serves until the context ends (what a signal does in main) and exits 0. While
// it serves, an Allocate call must leave its record on stdout and nothing else there.
func TestRunCancelled(t *testing.T) {
	dir := shortTempDir(t)
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

// TestSignal runs the real main in a child process (this test binary re-executed) and stops it with
// SIGTERM, as the kubelet stops a pod: it must exit 0 and remove its socket.
func TestSignal(t *testing.T) {
	if os.Getenv("GANGBENCH_FAKEGPU_MAIN") == "1" {
		os.Args = append([]string{"fakegpu-device-plugin"}, strings.Split(os.Getenv("GANGBENCH_FAKEGPU_ARGS"), " ")...)
		main()
		return
	}
	dir := shortTempDir(t)
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
