package kind

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/internal/proc"
)

// TestProcesses finds a cluster's processes below its node containers' init processes, by the host
// pid the engine reports, and classifies them by command name.
func TestProcesses(t *testing.T) {
	root := t.TempDir()
	addProc := func(pid, ppid int, comm string) {
		dir := filepath.Join(root, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := fmt.Sprintf("%d (%s) S %d 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 100 10\n", pid, comm, ppid)
		for name, body := range map[string]string{"stat": stat, "comm": comm + "\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	addProc(100, 1, "systemd") // the control-plane node's init
	addProc(101, 100, "containerd")
	addProc(102, 101, "containerd-shim")
	addProc(103, 102, "kube-apiserver")
	addProc(104, 102, "etcd")
	addProc(105, 102, "kube-scheduler")
	addProc(106, 102, "kube-controller") // the kernel keeps 15 bytes of kube-controller-manager
	addProc(107, 100, "kubelet")
	addProc(200, 1, "systemd") // a worker
	addProc(201, 200, "kubelet")
	addProc(202, 200, "fakegpu-plugin")
	addProc(300, 1, "dockerd") // not the cluster's
	var calls []string
	p := &Provider{opts: Options{Runner: func(_ context.Context, out io.Writer, name string, args ...string) error {
		calls = append(calls, name+" "+strings.Join(args, " "))
		switch {
		case args[0] == "ps":
			fmt.Fprintln(out, "cp\nw1")
		case args[0] == "inspect" && args[len(args)-1] == "cp":
			fmt.Fprintln(out, "100")
		case args[0] == "inspect" && args[len(args)-1] == "w1":
			fmt.Fprintln(out, "200")
		}
		return nil
	}}}
	got, err := p.processes(context.Background(), &state{Name: "gb", Engine: "docker"}, proc.Root(root))
	if err != nil {
		t.Fatal(err)
	}
	want := map[clusters.Component][]int{
		clusters.APIServer: {103}, clusters.Etcd: {104}, clusters.Scheduler: {105}, clusters.ControllerManager: {106},
		clusters.Kubelet: {107, 201}, containerd: {101, 102}, nodeOther: {100, 200, 202},
	}
	for c, pids := range got {
		slices.Sort(pids)
		if !slices.Equal(pids, want[c]) {
			t.Errorf("%s: %v, want %v", c, pids, want[c])
		}
	}
	if len(got) != len(want) {
		t.Errorf("components %v, want %v", got, want)
	}
	if calls[0] != "docker ps -q --filter label="+kindClusterLabel+"=gb" {
		t.Errorf("listed nodes with %q", calls[0])
	}
}
