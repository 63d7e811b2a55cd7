package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// spawner starts child processes from one OS thread that stays alive until the spawner is closed.
// Linux delivers Pdeathsig when the *thread* that forked the child exits, not the process; Go may
// retire idle threads, so forking from an arbitrary goroutine could kill a healthy component at a
// random moment. Pinning all forks to one locked thread ties the children's lives to that thread,
// and the thread's life to the harness: if the harness dies (even by SIGKILL) the kernel kills them.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go func() {
		// Never unlocked: when this goroutine returns the runtime terminates the thread, which is the
		// last-resort kill for anything still running.
		runtime.LockOSThread()
		defer close(s.done)
		for r := range s.reqs {
			r.reply <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	reply := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, reply: reply}:
	case <-s.done:
		return errors.New("spawner closed")
	}
	return <-reply
}

func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}

// process is one running component.
type process struct {
	name    string
	path    string
	args    []string
	logPath string
	cmd     *exec.Cmd
	logFile *os.File
	exited  chan struct{} // closed when Wait returns
	waitErr error
}

func (p *process) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// startProcess launches path with args, appending stdout and stderr to logPath.
func startProcess(sp *spawner, name, path string, args []string, logPath string, env []string) (*process, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	fmt.Fprintf(lf, "=== %s starting at %s: %s %s\n", name, time.Now().Format(time.RFC3339), path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout = lf
	cmd.Stderr = lf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Pdeathsig: syscall.SIGKILL,
		// Own process group, so a Ctrl-C on the terminal reaches only the harness, which then tears
		// down in the safe order instead of every component dying at once.
		Setpgid: true,
	}
	if err := sp.start(cmd); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	p := &process{name: name, path: path, args: args, logPath: logPath, cmd: cmd, logFile: lf, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		lf.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop sends sig, waits up to grace, then SIGKILLs and waits for the exit.
func (p *process) stop(sig syscall.Signal, grace time.Duration) error {
	if p == nil || p.cmd == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	t2 := time.NewTimer(10 * time.Second)
	defer t2.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t2.C:
		return fmt.Errorf("%s (pid %d) did not exit 10s after SIGKILL", p.name, p.pid())
	}
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitSummary says how a process ended, for errors.
func (p *process) exitSummary() string {
	if p.running() {
		return "running"
	}
	if p.waitErr != nil {
		return p.waitErr.Error()
	}
	return "exited with status 0"
}

// logTail returns the last n lines of a log file, for errors that must show why a component failed.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// procStartTime returns the start time (clock ticks since boot, field 22 of /proc/PID/stat) of a
// process, so that a pid recorded in a state file is recognised even after the pid was reused.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces and parentheses; fields after the last ')' are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	// After ')' comes field 3 (state); field 22 is therefore index 19.
	if len(fields) < 20 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	if fields[0] == "Z" {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// sameProcessAlive reports whether pid still is the process that had startTime.
func sameProcessAlive(pid int, startTime uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := procStartTime(pid)
	return err == nil && st == startTime
}

// signalRecorded signals a process known only from the state file, after checking it is still the
// same process, then waits up to grace for it to go away.
func signalRecorded(ctx context.Context, pid int, startTime uint64, sig syscall.Signal, grace time.Duration) bool {
	if !sameProcessAlive(pid, startTime) {
		return true
	}
	_ = syscall.Kill(pid, sig)
	return waitGone(ctx, pid, startTime, grace)
}

// waitGone polls /proc (there is no way to wait on a process that is not our child) with a deadline.
func waitGone(ctx context.Context, pid int, startTime uint64, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if !sameProcessAlive(pid, startTime) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return !sameProcessAlive(pid, startTime)
		case <-tick.C:
		}
	}
}
