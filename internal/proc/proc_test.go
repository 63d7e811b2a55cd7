package proc

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statLine is a /proc/<pid>/stat line with the given state, parent, utime, stime and start time.
func statLine(pid int, comm, state string, ppid, utime, stime, start int) string {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	// cutime cstime priority nice threads itrealvalue starttime …
	return strconv.Itoa(pid) + " (" + comm + ") " + state + " " + strconv.Itoa(ppid) + " 1 1 0 -1 0 0 0 0 0 " +
		strconv.Itoa(utime) + " " + strconv.Itoa(stime) + " 0 0 20 0 4 0 " + strconv.Itoa(start) + " 1000 100\n"
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Stat
		err        bool
	}{
		// The kernel allows spaces and parentheses in the command; only the last ')' ends it.
		{"odd command", statLine(42, "kube sched) (uler", "S", 7, 250, 50, 9000), Stat{State: "S", PPID: 7, UTime: 250, STime: 50, StartTime: 9000}, false},
		{"zombie", statLine(43, "x", "Z", 1, 0, 0, 5), Stat{State: "Z", PPID: 1, StartTime: 5}, false},
		{"truncated", "8 (short) S 1 2\n", Stat{}, true},
		{"no command", "8 short S 1 2\n", Stat{}, true},
		{"not a number", strings.Replace(statLine(9, "x", "S", 1, 0, 0, 5), " 5 1000", " x 1000", 1), Stat{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.line))
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("ParseStat(%q) = %+v, %v; want %+v, error %v", tc.line, got, err, tc.want, tc.err)
			}
		})
	}
}

// fixture makes a proc filesystem of the given files (path below the root: content).
func fixture(t *testing.T, files map[string]string) Root {
	t.Helper()
	dir := t.TempDir()
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Root(dir)
}

func TestDescendantsAndComm(t *testing.T) {
	files := map[string]string{
		"14/stat": "garbage", // unreadable entries are skipped, not fatal
		"self":    "not a pid",
		"12/comm": "kube-controller\n",
	}
	for _, p := range []struct{ pid, ppid int }{{10, 1}, {11, 10}, {12, 11}, {13, 10}, {20, 1}} {
		files[strconv.Itoa(p.pid)+"/stat"] = statLine(p.pid, "x", "S", p.ppid, 0, 0, 1)
	}
	root := fixture(t, files)
	got, err := root.Descendants(10)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{11, 12, 13}) {
		t.Errorf("Descendants(10) = %v, want [11 12 13]", got)
	}
	if c, err := root.Comm(12); err != nil || c != "kube-controller" {
		t.Errorf("Comm(12) = %q, %v", c, err)
	}
	if _, err := root.Stat(14); err == nil || !strings.Contains(err.Error(), "14/stat") {
		t.Errorf("Stat of a garbled file = %v, want an error naming it", err)
	}
}

// startChild starts a shell that prints "ready" once its traps are set, and waits for that line:
// a signal sent before the trap is installed would be handled by the default action instead.
func startChild(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd, _ := startChildIn(t, script, nil)
	return cmd
}

// startChildIn is startChild with process attributes; it returns the words after "ready".
func startChildIn(t *testing.T, script string, attr *syscall.SysProcAttr) (*exec.Cmd, []string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = attr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // a no-op once the process is reaped
	line, err := bufio.NewReader(out).ReadString('\n')
	words := strings.Fields(line)
	if len(words) == 0 || words[0] != "ready" {
		t.Fatalf("child printed %q (%v), want ready", line, err)
	}
	return cmd, words[1:]
}

// stubborn ignores SIGTERM. exec keeps the ignored disposition, so the sleep is the one process and
// SIGKILL leaves no orphan behind.
const stubborn = `trap '' TERM; echo ready; exec sleep 60`

func TestRefAliveAndPidReuse(t *testing.T) {
	self := RefOf(os.Getpid())
	if !self.Alive() || self.StartTime == 0 {
		t.Fatalf("RefOf(self) = %+v, alive %v", self, self.Alive())
	}
	// Same pid, another start time: the pid was reused, the recorded process is gone.
	if (Ref{PID: self.PID, StartTime: self.StartTime + 1}).Alive() {
		t.Error("pid reuse not detected")
	}
	if (Ref{}).Alive() || RefOf(1<<30).Alive() {
		t.Error("a zero or absent pid is alive")
	}
}

func TestRefStopEscalates(t *testing.T) {
	cmd := startChild(t, stubborn)
	reaped := make(chan struct{})
	// The child is ours, so it stays a zombie until waited for; Alive must count a zombie as gone.
	go func() { _ = cmd.Wait(); close(reaped) }()
	ref := RefOf(cmd.Process.Pid)
	if !ref.Alive() {
		t.Fatal("child not alive after start")
	}
	start := time.Now()
	if err := ref.Stop(context.Background(), syscall.SIGTERM, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("stopped after %s: SIGTERM should have been ignored for the whole grace period", d)
	}
	if ref.Alive() {
		t.Error("still alive after Stop")
	}
	<-reaped
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("child ended with %v, want killed by SIGKILL", cmd.ProcessState)
	}
	// Stopping a process that is gone (or whose pid another process took) signals nothing.
	if err := ref.Stop(context.Background(), syscall.SIGTERM, time.Second); err != nil {
		t.Errorf("Stop of a gone process: %v", err)
	}
}

func TestRefStopHonoursContext(t *testing.T) {
	cmd := startChild(t, stubborn)
	go func() { _ = cmd.Wait() }()
	ref := RefOf(cmd.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := ref.Stop(ctx, syscall.SIGTERM, time.Hour)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with an ended context = %v, want the context's error", err)
	}
	if !ref.Alive() {
		t.Error("the context ended before the grace period: SIGKILL must not have been sent")
	}
}

func TestChildStop(t *testing.T) {
	t.Run("polite", func(t *testing.T) {
		c := Watch(startChild(t, `trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done`))
		start := time.Now()
		if err := c.Stop(syscall.SIGTERM, time.Minute); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("a child that exits on SIGTERM took %s", d)
		}
		if c.Running() || !strings.Contains(c.ExitSummary(), "exit status 7") {
			t.Errorf("after Stop: running %v, %q; want exited with status 7", c.Running(), c.ExitSummary())
		}
	})
	t.Run("stubborn", func(t *testing.T) {
		c := Watch(startChild(t, stubborn))
		if !c.Running() || c.ExitSummary() != "running" {
			t.Fatalf("fresh child: running %v, %q", c.Running(), c.ExitSummary())
		}
		start := time.Now()
		if err := c.Stop(syscall.SIGTERM, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("stopped after %s: SIGTERM should have been ignored for the whole grace period", d)
		}
		select {
		case <-c.Exited():
		default:
			t.Fatal("Exited not closed after Stop")
		}
		if !strings.Contains(c.ExitSummary(), "killed") {
			t.Errorf("ExitSummary = %q, want killed", c.ExitSummary())
		}
		if err := c.Stop(syscall.SIGTERM, time.Second); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

// A group stop reaches what the child started: here a grandchild that, like its parent, ignores
// SIGTERM. Killing only the leader would leave it running, and the group would not be gone.
func TestChildStopGroup(t *testing.T) {
	cmd, words := startChildIn(t, `trap '' TERM; sleep 60 & echo ready $!; wait`, &syscall.SysProcAttr{Setpgid: true})
	if len(words) != 1 {
		t.Fatalf("no grandchild pid: %v", words)
	}
	grandchild, _ := strconv.Atoi(words[0])
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	c := WatchGroup(cmd)
	if err := c.Stop(syscall.SIGTERM, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := WaitGroupGone(context.Background(), c.PID(), 5*time.Second); err != nil {
		t.Fatalf("grandchild %d outlived the group stop: %v", grandchild, err)
	}
}

func TestLogTail(t *testing.T) {
	p := fixture(t, map[string]string{"log": "a\nb\nc\nd\n"}).Path("log")
	if got := LogTail(p, 2); got != "c\nd" {
		t.Errorf("LogTail = %q, want c, d", got)
	}
	if got := LogTail(p+".missing", 2); !strings.HasPrefix(got, "(no log: ") {
		t.Errorf("LogTail of a missing file = %q", got)
	}
}
