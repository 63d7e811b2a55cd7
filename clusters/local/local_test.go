package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/poll"
	"github.com/gangbench/gangbench/internal/proc"
)

func testLayout() layout {
	return layout{Dir: "/s", PKIDir: "/s/pki", DataDir: "/s/etcd-data", Ports: ports{EtcdClient: 1, EtcdPeer: 2, APIServer: 3, KCM: 4, Scheduler: 5, Kwok: 6}}
}

func TestComponentArgs(t *testing.T) {
	tests := []struct {
		name    string
		c       clusters.Component
		spec    clusters.Spec
		want    []string
		notWant []string
	}{
		{
			name: "apiserver enables the gang API and RBAC",
			c:    clusters.APIServer,
			want: []string{
				"--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1beta1=true",
				"--anonymous-auth=false", "--authorization-mode=RBAC", "--secure-port=3", "--bind-address=127.0.0.1",
				"--etcd-servers=http://127.0.0.1:1", "--client-ca-file=/s/pki/ca.crt", "--token-auth-file=/s/pki/tokens.csv",
				"--service-account-signing-key-file=/s/pki/sa.key", "--service-account-key-file=/s/pki/sa.pub",
			},
		},
		{
			name: "runtime config can remove the gang API",
			c:    clusters.APIServer,
			spec: clusters.Spec{RuntimeConfig: map[string]string{"scheduling.k8s.io/v1beta1": "false"}},
			want: []string{"--runtime-config=scheduling.k8s.io/v1beta1=false"},
		},
		{
			name:    "scheduler gate off only for the scheduler",
			c:       clusters.Scheduler,
			spec:    clusters.Spec{ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Scheduler: {"GenericWorkload": false}}},
			want:    []string{"--feature-gates=GenericWorkload=false", "--kubeconfig=/s/kubeconfig-scheduler", "--secure-port=5", "--leader-elect=false"},
			notWant: []string{"--feature-gates=GenericWorkload=true"},
		},
		{
			name: "cluster-wide gates merge, sorted",
			c:    clusters.ControllerManager,
			spec: clusters.Spec{FeatureGates: map[string]bool{"WorkloadWithJob": true}},
			want: []string{"--feature-gates=GenericWorkload=true,WorkloadWithJob=true", "--service-account-private-key-file=/s/pki/sa.key", "--root-ca-file=/s/pki/ca.crt"},
		},
		{
			name:    "extra args override defaults",
			c:       clusters.Scheduler,
			spec:    clusters.Spec{ExtraArgs: map[clusters.Component]map[string]string{clusters.Scheduler: {"--kube-api-qps": "5000", "leader-elect": "true"}}},
			want:    []string{"--kube-api-qps=5000", "--leader-elect=true"},
			notWant: []string{"--leader-elect=false"},
		},
		{
			name: "apiserver stops in seconds on SIGTERM despite open watches",
			c:    clusters.APIServer,
			want: []string{"--shutdown-send-retry-after=true"},
		},
		{
			name: "etcd on loopback without fsync",
			c:    clusters.Etcd,
			want: []string{"--listen-client-urls=http://127.0.0.1:1", "--initial-cluster=gangbench=http://127.0.0.1:2", "--data-dir=/s/etcd-data", "--unsafe-no-fsync=true"},
		},
		{
			name: "kwok manages only our simulated nodes",
			c:    clusters.Kwok,
			want: []string{"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--config=/s/kwok.yaml", "--kubeconfig=/s/kubeconfig-kwok", "--server-address=127.0.0.1:6"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := componentArgs(tt.c, testLayout(), tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !slices.Contains(args, w) {
					t.Errorf("missing %s in\n%s", w, strings.Join(args, "\n"))
				}
			}
			for _, w := range tt.notWant {
				if slices.Contains(args, w) {
					t.Errorf("unexpected %s", w)
				}
			}
			if !slices.IsSorted(args) {
				t.Errorf("args not sorted: %v", args)
			}
		})
	}
}

func TestComponentArgsRejectsEmptyFlag(t *testing.T) {
	_, err := componentArgs(clusters.Scheduler, testLayout(), clusters.Spec{ExtraArgs: map[clusters.Component]map[string]string{clusters.Scheduler: {"--": "x"}}})
	if err == nil || !strings.Contains(err.Error(), "empty flag name") {
		t.Fatalf("err = %v, want empty flag name", err)
	}
}

func TestValidate(t *testing.T) {
	ok := clusters.Spec{Nodes: 4, GPU: fakegpu.Inventory{Count: 8}}
	if err := Validate(ok); err != nil {
		t.Fatalf("valid spec rejected: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*clusters.Spec)
		want string
	}{
		{"zero nodes", func(s *clusters.Spec) { s.Nodes = 0 }, "nodes: 0"},
		{"negative nodes", func(s *clusters.Spec) { s.Nodes = -3 }, "nodes: -3"},
		{"bad name", func(s *clusters.Spec) { s.Name = "Bad_Name" }, `cluster name "Bad_Name"`},
		{"bad version", func(s *clusters.Spec) { s.KubernetesVersion = "1.37" }, "1.37"},
		{"bad gpu count", func(s *clusters.Spec) { s.GPU.Count = -1 }, "gpu:"},
		{"unknown component", func(s *clusters.Spec) {
			s.ExtraArgs = map[clusters.Component]map[string]string{"kubelet": {"v": "4"}}
		}, `unknown component "kubelet"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.mod(&s)
			err := Validate(s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestFreePortsDistinct(t *testing.T) {
	p, err := freePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, x := range p {
		if x <= 0 || seen[x] {
			t.Fatalf("bad or duplicate port %d in %v", x, p)
		}
		seen[x] = true
	}
}

func TestStateRoundTripAndLiveness(t *testing.T) {
	dir := t.TempDir()
	st := &state{Name: "x", Owner: proc.RefOf(os.Getpid()), Procs: map[string]proc.Ref{"etcd": {PID: 1 << 30, StartTime: 1}}}
	if err := writeState(dir, st); err != nil {
		t.Fatal(err)
	}
	got, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Owner.Alive() {
		t.Error("this process is not recognised as alive")
	}
	if got.Procs["etcd"].Alive() {
		t.Error("a pid that does not exist is reported alive")
	}
	// Same pid, different start time: a reused pid must not count as the recorded process.
	if (proc.Ref{PID: os.Getpid(), StartTime: got.Owner.StartTime + 1}).Alive() {
		t.Error("pid reuse not detected")
	}
	if _, err := readState(t.TempDir()); err == nil || !strings.Contains(err.Error(), clusters.ErrNotFound.Error()) {
		t.Errorf("missing state: err = %v", err)
	}
}

func TestProcessStopEscalates(t *testing.T) {
	sp := newSpawner()
	defer sp.close()
	log := filepath.Join(t.TempDir(), "p.log")
	// A process that ignores SIGTERM must still be gone after stop: SIGKILL follows the grace period.
	p, err := startProcess(sp, "stubborn", "/bin/sh", []string{"-c", "trap '' TERM; echo started; while :; do sleep 0.05; done"}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The trap must be installed before SIGTERM is sent; the script says so by printing "started".
	err = poll.Until(context.Background(), "the script to start", 10*time.Millisecond, 10*time.Second, func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(log)
		if !p.running() {
			return false, "", poll.Stop(fmt.Errorf("script exited (%s): %q", p.exitSummary(), b))
		}
		return strings.Contains(string(b), "\nstarted"), fmt.Sprintf("log %q", b), err
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.stop(syscall.SIGTERM, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if p.running() {
		t.Fatal("still running after stop")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("stopped after %s: SIGTERM should have been ignored for the grace period", d)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "stubborn starting") {
		t.Errorf("log lacks the start line: %q", b)
	}
}

// TestPdeathsig runs a helper process that starts a child through the spawner and is then SIGKILLed:
// the child must die with it. This is the guarantee that no component outlives the harness.
func TestPdeathsig(t *testing.T) {
	if os.Getenv("GANGBENCH_PDEATHSIG_HELPER") == "1" {
		sp := newSpawner()
		p, err := startProcess(sp, "sleeper", "/bin/sleep", []string{"300"}, os.Getenv("GANGBENCH_PDEATHSIG_LOG"), nil)
		if err != nil {
			os.Exit(3)
		}
		fmt.Println(p.pid())
		select {} // wait to be killed
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPdeathsig$")
	cmd.Env = append(os.Environ(), "GANGBENCH_PDEATHSIG_HELPER=1", "GANGBENCH_PDEATHSIG_LOG="+filepath.Join(t.TempDir(), "l"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		t.Fatalf("helper printed no pid: %q", buf[:n])
	}
	ref := proc.RefOf(pid)
	if !ref.Alive() {
		t.Fatalf("child %d not running", pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// The child is not ours (it was the helper's), so only /proc tells when it is gone.
	err = poll.Until(context.Background(), fmt.Sprintf("child %d to die with its SIGKILLed parent", pid), 50*time.Millisecond, 10*time.Second,
		func(context.Context) (bool, string, error) { return !ref.Alive(), "still running", nil })
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal(err)
	}
}

// TestNodeLeaseGracePeriod: a longer node lease raises the controller-manager's grace period with
// it, so the node lifecycle controller does not mark simulated nodes NotReady between renewals; the
// default lease leaves the controller-manager's default alone, and a user's flag wins.
func TestNodeLeaseGracePeriod(t *testing.T) {
	has := func(args []string, want string) bool { return slices.Contains(args, want) }
	args, err := componentArgs(clusters.ControllerManager, testLayout(), clusters.Spec{NodeLeaseSeconds: 3600})
	if err != nil || !has(args, "--node-monitor-grace-period=3610s") {
		t.Errorf("lease 3600 s: %v %v", args, err)
	}
	args, _ = componentArgs(clusters.ControllerManager, testLayout(), clusters.Spec{})
	for _, a := range args {
		if strings.HasPrefix(a, "--node-monitor-grace-period") {
			t.Errorf("default lease: %s set", a)
		}
	}
	args, _ = componentArgs(clusters.ControllerManager, testLayout(), clusters.Spec{NodeLeaseSeconds: 3600,
		ExtraArgs: map[clusters.Component]map[string]string{clusters.ControllerManager: {"node-monitor-grace-period": "99s"}}})
	if !has(args, "--node-monitor-grace-period=99s") {
		t.Errorf("a user's flag must win: %v", args)
	}
}
