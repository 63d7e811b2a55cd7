package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf"
	"github.com/gangbench/gangbench/perf/loadgen"
	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/suites"
	"github.com/gangbench/gangbench/suites/framework"
)

// The signal tests run the real gangbench binary, interrupt it at one phase of its work, and check
// that nothing of the run is left on the machine: no process, no cluster state, no temp dir. Each
// run gets its own GANGBENCH_STATE_DIR and TMPDIR and a marker in its environment, which every
// descendant inherits, so its processes are found (and only they are killed) by walking /proc.

// markerEnv tags the environment of a run's processes.
const markerEnv = "GANGBENCH_SIGNAL_TEST"

// sigRun is one gangbench process under test.
type sigRun struct {
	t                        *testing.T
	root, state, tmp, runDir string
	marker                   string
	cmd                      *exec.Cmd
	out                      *os.File // read end of the output pipe

	mu    sync.Mutex
	lines []string
	done  chan struct{}
	err   error // cmd.Wait's
	// drained is closed when the output pipe reaches its end.
	drained chan struct{}
}

// startRun starts bin with args in the repository root (e2e compiles ./suites from there); the
// argument "{run}" stands for the run's results directory.
func startRun(t *testing.T, bin string, args ...string) *sigRun {
	t.Helper()
	root := t.TempDir()
	r := &sigRun{
		t: t, root: root, state: filepath.Join(root, "state"), tmp: filepath.Join(root, "tmp"), runDir: filepath.Join(root, "run"),
		marker: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()), done: make(chan struct{}), drained: make(chan struct{}),
	}
	for _, d := range []string{r.state, r.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.out = pr
	args = append([]string(nil), args...)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "{run}", r.runDir)
	}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Dir = filepath.Join("..", "..")
	r.cmd.Env = append(os.Environ(), "GANGBENCH_STATE_DIR="+r.state, "TMPDIR="+r.tmp, markerEnv+"="+r.marker)
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Logf("started gangbench %s (pid %d)", strings.Join(args, " "), r.cmd.Process.Pid)
	go func() {
		defer close(r.drained)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, sc.Text())
			r.mu.Unlock()
		}
	}()
	go func() {
		err := r.cmd.Wait()
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(r.done)
	}()
	// Whatever happens to the test, nothing of this run may outlive it.
	t.Cleanup(r.cleanup)
	return r
}

// output is everything the process printed so far.
func (r *sigRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// poll calls cond every 50 ms until it holds or timeout passes; it reports what it waited for and
// what it last saw.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) bool {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return true
		}
		select {
		case <-deadline.C:
			t.Errorf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
			return false
		case <-tick.C:
		}
	}
}

// waitLine waits until a line of output matches re, or the process exits first.
func (r *sigRun) waitLine(timeout time.Duration, re string) {
	r.t.Helper()
	rx := regexp.MustCompile(re)
	ok := poll(r.t, timeout, fmt.Sprintf("a line matching %q", re), func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range r.lines {
			if rx.MatchString(l) {
				return true, ""
			}
		}
		select {
		case <-r.done:
			return true, "exited"
		default:
		}
		if n := len(r.lines); n > 0 {
			return false, r.lines[n-1]
		}
		return false, "no output"
	})
	if !ok || r.exited() {
		r.t.Fatalf("gangbench did not reach the phase (exited: %v); output:\n%s", r.exited(), r.output())
	}
}

func (r *sigRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// interrupt sends SIGINT to gangbench alone, as a terminal's Ctrl-C would (the components run in
// process groups of their own, so a terminal's Ctrl-C reaches only gangbench too).
func (r *sigRun) interrupt() { r.t.Helper(); r.signal(syscall.SIGINT) }

func (r *sigRun) signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("%v: %v", sig, err)
	}
}

// waitExit waits for gangbench to exit and returns its exit code.
func (r *sigRun) waitExit(timeout time.Duration) int {
	r.t.Helper()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		r.t.Fatalf("gangbench did not exit within %s of SIGINT; output:\n%s", timeout, r.output())
	}
	// Its last lines may still be in the pipe when the exit is seen; a child that inherited the
	// pipe could hold it open, so the wait for the reader's end is bounded.
	select {
	case <-r.drained:
	case <-time.After(5 * time.Second):
	}
	code := r.cmd.ProcessState.ExitCode()
	r.t.Logf("gangbench exited with %d", code)
	return code
}

// proc is a process found in /proc.
type proc struct {
	pid     int
	cmdline string
}

// procs lists the live processes of this run: its marker is in their environment, or its root
// directory in their command line. Zombies are left out: they hold nothing and wait for a reaper.
func (r *sigRun) procs() []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		r.t.Fatal(err)
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		if st, err := os.ReadFile(filepath.Join(dir, "stat")); err != nil || procState(st) == "Z" {
			continue
		}
		env, _ := os.ReadFile(filepath.Join(dir, "environ"))
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		cmdline := strings.ReplaceAll(string(cmd), "\x00", " ")
		if bytes.Contains(env, []byte(markerEnv+"="+r.marker+"\x00")) || strings.Contains(cmdline, r.root) {
			out = append(out, proc{pid, cmdline})
		}
	}
	return out
}

// procState is the state field of /proc/PID/stat (after the command name, which may hold spaces).
func procState(stat []byte) string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return ""
	}
	return string(stat[i+2 : i+3])
}

// assertNothingLeft checks, within timeout (components are stopped in order, or die by Pdeathsig
// a moment after gangbench), that no process of the run remains and that the cluster state and
// temp directories are empty.
func (r *sigRun) assertNothingLeft(timeout time.Duration) {
	r.t.Helper()
	poll(r.t, timeout, "every process of the run to exit", func() (bool, string) {
		ps := r.procs()
		return len(ps) == 0, fmt.Sprint(ps)
	})
	for _, d := range []string{r.state, r.tmp} {
		poll(r.t, 10*time.Second, d+" to be empty", func() (bool, string) {
			ents, err := os.ReadDir(d)
			if err != nil {
				return os.IsNotExist(err), err.Error()
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return len(names) == 0, strings.Join(names, ", ")
		})
	}
	if r.t.Failed() {
		r.t.Logf("gangbench output:\n%s", r.output())
	}
}

// cleanup kills (by pid) whatever of this run is still running and closes the pipe.
func (r *sigRun) cleanup() {
	if !r.exited() {
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	for _, p := range r.procs() {
		r.t.Logf("killing leftover pid %d: %s", p.pid, p.cmdline)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	r.out.Close()
}

// stateEntry waits until the state dir has an entry (a cluster being created) and returns its name.
func (r *sigRun) stateEntry(timeout time.Duration) string {
	r.t.Helper()
	var name string
	ok := poll(r.t, timeout, "a cluster directory in "+r.state, func() (bool, string) {
		ents, _ := os.ReadDir(r.state)
		for _, e := range ents {
			if e.IsDir() {
				name = e.Name()
				return true, ""
			}
		}
		return r.exited(), "empty"
	})
	if !ok || name == "" {
		r.t.Fatalf("no cluster directory appeared (exited: %v); output:\n%s", r.exited(), r.output())
	}
	return name
}

// assertInterruptedRecord checks run.json says the run was interrupted.
func (r *sigRun) assertInterruptedRecord() *results.Run {
	r.t.Helper()
	run, err := results.Read(r.runDir)
	if err != nil {
		r.t.Fatalf("no readable run record after the interrupt: %v; output:\n%s", err, r.output())
	}
	if !run.Interrupted {
		r.t.Errorf("run.json does not say interrupted: %+v", run)
	}
	return run
}

func buildGangbench(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gangbench")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSignalTeardown interrupts gangbench at each phase and checks that the run stops, records
// that it was interrupted where it records anything, and leaves nothing behind.
func TestSignalTeardown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters; skipped with -short")
	}
	bin := buildGangbench(t)

	// Not a signal: a create the components refuse (CompositePodGroup needs the topology gate) says
	// why and leaves nothing behind, the holder's log included.
	t.Run("cluster create that fails", func(t *testing.T) {
		r := startRun(t, bin, "cluster", "create", "--name", "bad", "--nodes", "1", "--features", "composite", "--feature-gates", "TopologyAwareWorkloadScheduling=false")
		if code := r.waitExit(2 * time.Minute); code == 0 {
			t.Errorf("a create the components refuse exited 0")
		}
		if out := r.output(); !strings.Contains(out, "depends on features that are disabled") {
			t.Errorf("the error does not say why:\n%s", out)
		}
		r.assertNothingLeft(time.Minute)
	})

	t.Run("cluster create while starting", func(t *testing.T) {
		r := startRun(t, bin, "cluster", "create", "--foreground", "--name", "sig", "--nodes", "2")
		r.stateEntry(2 * time.Minute)
		r.interrupt()
		if code := r.waitExit(2 * time.Minute); code == 0 {
			t.Errorf("an interrupted create exited 0")
		}
		r.assertNothingLeft(time.Minute)
	})

	t.Run("cluster create while components start", func(t *testing.T) {
		r := startRun(t, bin, "cluster", "create", "--foreground", "--name", "sig", "--nodes", "2")
		apiserverLog := filepath.Join(r.state, "sig", "logs", "kube-apiserver.log")
		poll(t, 2*time.Minute, apiserverLog, func() (bool, string) {
			_, err := os.Stat(apiserverLog)
			return err == nil || r.exited(), "absent"
		})
		r.interrupt()
		if code := r.waitExit(2 * time.Minute); code == 0 {
			t.Errorf("an interrupted create exited 0")
		}
		r.assertNothingLeft(time.Minute)
	})

	t.Run("cluster create after ready", func(t *testing.T) {
		r := startRun(t, bin, "cluster", "create", "--foreground", "--name", "sig", "--nodes", "2")
		r.waitLine(3*time.Minute, "holding the cluster")
		r.interrupt()
		if code := r.waitExit(2 * time.Minute); code != 0 {
			t.Errorf("Ctrl-C on a held cluster is the normal way to delete it; exit %d", code)
		}
		r.assertNothingLeft(time.Minute)
	})

	// SIGTERM (a CI runner cancelling the job, a container stop) is an interrupt like Ctrl-C.
	t.Run("cluster create after ready by SIGTERM", func(t *testing.T) {
		r := startRun(t, bin, "cluster", "create", "--foreground", "--name", "sig", "--nodes", "2")
		r.waitLine(3*time.Minute, "holding the cluster")
		r.signal(syscall.SIGTERM)
		if code := r.waitExit(2 * time.Minute); code != 0 {
			t.Errorf("SIGTERM on a held cluster: exit %d", code)
		}
		r.assertNothingLeft(time.Minute)
	})

	t.Run("perf run while pods are created", func(t *testing.T) {
		// 200 gangs of 3 on 10 nodes × 64 GPUs: creating and binding 600 pods takes seconds, long
		// enough to be interrupted in the middle.
		r := startRun(t, bin, "perf", "run", "--scenario", "smoke", "--nodes", "10", "--gpus-per-node", "64", "--param", "groups=200", "--run-dir", "{run}")
		// events.jsonl is written when a repetition ends, so it cannot tell that pods are being
		// created; the cluster can. The perf cluster is named after the gangbench process.
		r.waitLine(5*time.Minute, "msg=measuring")
		cluster := fmt.Sprintf("perf-%d", r.cmd.Process.Pid)
		if !poll(t, time.Minute, "the first measured pods in the cluster", perfPods(r.state, cluster)) {
			t.Fatalf("output:\n%s", r.output())
		}
		r.interrupt()
		if code := r.waitExit(2 * time.Minute); code != exitError {
			t.Errorf("interrupted perf run: exit %d, want %d", code, exitError)
		}
		r.assertNothingLeft(time.Minute)
		run := r.assertInterruptedRecord()
		if run.Finished.IsZero() || run.Environment.Provider != "local" {
			t.Errorf("partial record incomplete: finished %v, provider %q", run.Finished, run.Environment.Provider)
		}
		if b, err := os.ReadFile(filepath.Join(r.runDir, perf.EventsFile)); err != nil || !bytes.Contains(b, []byte(`"kind":"podCreated"`)) {
			t.Errorf("events.jsonl after the interrupt holds no pod creation (err %v): %.300s", err, b)
		}
		if !strings.Contains(r.output(), ": INTERRUPTED") {
			t.Errorf("the report does not say INTERRUPTED:\n%s", r.output())
		}
	})

	// The e2e phases compile ./suites into _output/bin first; the build cache makes it quick after
	// the first time.
	e2eArgs := []string{"e2e", "--suites", "barriers", "--provider", "local", "--run-dir", "{run}"}

	t.Run("e2e while building", func(t *testing.T) {
		r := startRun(t, bin, e2eArgs...)
		r.waitLine(5*time.Minute, "compiling the suites")
		// The go command has made its work directory (anywhere under TMPDIR): the moment an
		// interrupted build would leak it.
		poll(t, time.Minute, "the go command's work directory under "+r.tmp, func() (bool, string) {
			found, _ := filepath.Glob(filepath.Join(r.tmp, "*", "go-build*"))
			top, _ := filepath.Glob(filepath.Join(r.tmp, "go-build*"))
			return len(found)+len(top) > 0 || r.exited(), "none"
		})
		r.interrupt()
		if code := r.waitExit(2 * time.Minute); code != exitFailures {
			t.Errorf("interrupted e2e: exit %d, want %d", code, exitFailures)
		}
		r.assertNothingLeft(time.Minute)
		r.assertInterruptedRecord()
	})

	// The suite binary inherits SIGINT ignored from `go tool test2json`; until it asks for the
	// signal itself, an interrupt is lost and the suites run to their end (minutes, for all of
	// them). No assertion may run after an interrupt during the cluster start.
	t.Run("e2e while the suites start their cluster", func(t *testing.T) {
		r := startRun(t, bin, e2eArgs...)
		r.stateEntry(10 * time.Minute)
		r.interrupt()
		if code := r.waitExit(time.Minute); code != exitFailures {
			t.Errorf("interrupted e2e: exit %d, want %d", code, exitFailures)
		}
		r.assertNothingLeft(time.Minute)
		if run := r.assertInterruptedRecord(); len(run.Cases) > 0 {
			t.Errorf("%d assertions ran after the interrupt, e.g. %s: the suites did not stop", len(run.Cases), run.Cases[0].ID)
		}
	})

	t.Run("e2e after the first assertion", func(t *testing.T) {
		r := startRun(t, bin, e2eArgs...)
		r.waitLine(10*time.Minute, `^BAR-[0-9]+ `)
		r.interrupt()
		if code := r.waitExit(2 * time.Minute); code != exitFailures {
			t.Errorf("interrupted e2e: exit %d, want %d", code, exitFailures)
		}
		r.assertNothingLeft(time.Minute)
		run := r.assertInterruptedRecord()
		all := 0
		for _, a := range framework.Catalogue(suites.All()) {
			if a.Suite == "barriers" {
				all++
			}
		}
		if n := len(run.Cases); n == 0 || n >= all {
			t.Errorf("run.json holds %d cases; want the few that finished before the interrupt (the suite has %d)", n, all)
		}
		if !strings.Contains(r.output(), "interrupted") {
			t.Errorf("gangbench does not say the run was interrupted:\n%s", r.output())
		}
	})

	// A second Ctrl-C exits at once, without waiting for the teardown the first one started. To
	// give the first one a teardown that hangs, etcd is frozen (SIGSTOP) before it: the provider
	// then waits out its 15 s stop grace on etcd. Even the forced exit leaves no process behind
	// (Pdeathsig kills the components, frozen or not); the state it could not remove goes with
	// `cluster delete --all`.
	t.Run("second interrupt forces exit", func(t *testing.T) {
		r := startRun(t, bin, "cluster", "create", "--foreground", "--name", "sig", "--nodes", "2")
		r.waitLine(3*time.Minute, "holding the cluster")
		etcd, sched := r.component("etcd"), r.component("kube-scheduler")
		if err := syscall.Kill(etcd, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		r.interrupt()
		// The teardown has begun once the scheduler, stopped first, is gone.
		poll(t, time.Minute, "the scheduler to be stopped by the teardown", func() (bool, string) {
			return !r.alive(sched), "running"
		})
		second := time.Now()
		r.interrupt()
		if code := r.waitExit(30 * time.Second); code != 130 {
			t.Errorf("second interrupt: exit %d, want 130", code)
		}
		if d := time.Since(second); d > 10*time.Second {
			t.Errorf("the second interrupt took %s to exit; the teardown it should cut short waits 15 s", d)
		}
		if !strings.Contains(r.output(), "second interrupt, exiting without cleanup") {
			t.Errorf("no word of the forced exit:\n%s", r.output())
		}
		poll(t, time.Minute, "every process of the run to exit after the forced exit", func() (bool, string) {
			ps := r.procs()
			return len(ps) == 0, fmt.Sprint(ps)
		})
		del := exec.Command(bin, "cluster", "delete", "--all")
		del.Env = r.cmd.Env
		if out, err := del.CombinedOutput(); err != nil || !strings.Contains(string(out), `deleted local cluster "sig"`) {
			t.Errorf("cluster delete --all: %v\n%s", err, out)
		}
		r.assertNothingLeft(time.Minute)
	})
}

// component returns the pid of the run's process whose command line starts with the binary name.
func (r *sigRun) component(name string) int {
	r.t.Helper()
	for _, p := range r.procs() {
		if bin, _, _ := strings.Cut(p.cmdline, " "); filepath.Base(bin) == name {
			return p.pid
		}
	}
	r.t.Fatalf("no %s process in the run: %v", name, r.procs())
	return 0
}

// alive reports whether pid is a live (not zombie) process.
func (r *sigRun) alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && procState(st) != "Z"
}

// perfPods returns a function counting the perf run's pods, through the cluster's kubeconfig.
func perfPods(state, cluster string) func() (bool, string) {
	var cs kubernetes.Interface
	return func() (bool, string) {
		if cs == nil {
			cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, cluster, "kubeconfig-admin"))
			if err != nil {
				return false, err.Error()
			}
			if cs, err = kubernetes.NewForConfig(cfg); err != nil {
				return false, err.Error()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: timeline.PhaseLabel})
		if err != nil {
			return false, err.Error()
		}
		// A pod can be in the apiserver while its create call is still in flight, and an interrupt
		// then rightly records no creation for it. Each of the load generator's workers has at most
		// one call in flight (smoke's groups of 3 are created pod by pod), so with more pods stored
		// than workers at least one call has returned and is on record (twenty were not enough under
		// CI's load: all in flight). 600 pods keep the run going.
		want := loadgen.DefaultWorkers + 20
		return len(pods.Items) >= want, fmt.Sprintf("%d pods (want %d)", len(pods.Items), want)
	}
}
