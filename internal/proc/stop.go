package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gangbench/gangbench/internal/poll"
)

// KillWait is how long a process gets to vanish after SIGKILL. The kernel acts at once unless the
// process is stuck in the kernel (uninterruptible I/O, a frozen cgroup), which a longer wait would
// not cure.
const KillWait = 10 * time.Second

// Ref identifies a process across pid reuse: its pid plus its start time. It is what state files
// record, so that another gangbench process can find, check and stop the process later.
type Ref struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
}

// RefOf records a running process. A pid that cannot be read gives a Ref that is never Alive.
func RefOf(pid int) Ref {
	st, _ := StartTime(pid)
	return Ref{PID: pid, StartTime: st}
}

// Alive reports whether the recorded process still runs: the pid exists, is not a zombie, and
// started when the recorded one did.
func (r Ref) Alive() bool {
	if r.PID <= 0 {
		return false
	}
	st, err := StartTime(r.PID)
	return err == nil && st == r.StartTime
}

// Stop sends sig to the recorded process (only while it still is that process), waits up to grace
// for it to go, then SIGKILLs it and waits up to KillWait. A process that is not our child cannot be
// waited for, so /proc is polled.
func (r Ref) Stop(ctx context.Context, sig syscall.Signal, grace time.Duration) error {
	return stop(ctx, fmt.Sprintf("process %d", r.PID),
		func(sig syscall.Signal) {
			if r.Alive() {
				_ = syscall.Kill(r.PID, sig)
			}
		},
		func(ctx context.Context, d time.Duration) error {
			return poll.Until(ctx, fmt.Sprintf("process %d to exit", r.PID), 50*time.Millisecond, d,
				func(context.Context) (bool, string, error) { return !r.Alive(), "still running", nil })
		}, sig, grace)
}

// Child is a child process started by the caller whose exit is awaited (and the child reaped) in
// the background, so that "has it exited" is a channel rather than a guess.
type Child struct {
	cmd    *exec.Cmd
	group  bool          // signals go to the child's process group
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, set before exited is closed
}

// Watch takes over a started command: it calls cmd.Wait in the background. The caller must not
// call cmd.Wait itself.
func Watch(cmd *exec.Cmd) *Child { return watch(cmd, false) }

// WatchGroup is Watch for a command started as the leader of its own process group (Setpgid):
// Stop signals the whole group, so that what the child spawned goes with it.
func WatchGroup(cmd *exec.Cmd) *Child { return watch(cmd, true) }

func watch(cmd *exec.Cmd, group bool) *Child {
	c := &Child{cmd: cmd, group: group, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c
}

// PID is the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Exited is closed once the child has exited and been reaped.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Running reports whether the child has not exited yet.
func (c *Child) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// ExitSummary says how the child ended ("running" while it runs), for errors.
func (c *Child) ExitSummary() string {
	if c.Running() {
		return "running"
	}
	if c.err != nil {
		return c.err.Error()
	}
	return "exited with status 0"
}

// Stop sends sig, waits up to grace for the child to exit, then SIGKILLs it and waits up to
// KillWait. It takes no context: a teardown must finish even when the caller's context is done.
func (c *Child) Stop(sig syscall.Signal, grace time.Duration) error {
	if !c.Running() {
		return nil
	}
	return stop(context.Background(), fmt.Sprintf("process %d", c.PID()),
		func(sig syscall.Signal) {
			if c.group {
				_ = syscall.Kill(-c.PID(), sig)
			} else {
				_ = c.cmd.Process.Signal(sig)
			}
		},
		func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-c.exited:
				return nil
			case <-t.C:
				return fmt.Errorf("still running after %s", d)
			}
		}, sig, grace)
}

// stop is the escalation both kinds of process share: sig, a bounded wait, SIGKILL, a bounded wait.
// signal may fail silently (the process may have gone in between); gone says whether the process
// went within d. Only the caller's context ending cuts it short.
func stop(ctx context.Context, name string, signal func(syscall.Signal), gone func(context.Context, time.Duration) error, sig syscall.Signal, grace time.Duration) error {
	signal(sig)
	err := gone(ctx, grace)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stopping %s with %s: %w", name, sig, err)
	}
	signal(syscall.SIGKILL)
	if err := gone(ctx, KillWait); err != nil {
		return fmt.Errorf("%s survived SIGKILL: %w", name, err)
	}
	return nil
}

// WaitGroupGone waits until process group pgid has no member left: after a SIGKILL the processes
// are gone only once the kernel has torn them down, and a file tree they wrote into can be removed
// safely only then.
func WaitGroupGone(ctx context.Context, pgid int, timeout time.Duration) error {
	return poll.Until(ctx, fmt.Sprintf("process group %d to be gone", pgid), 20*time.Millisecond, timeout,
		func(context.Context) (bool, string, error) { return syscall.Kill(-pgid, 0) != nil, "members left", nil })
}

// LogTail returns the last n lines of a process's log file, for errors that must show why it
// failed; a log that cannot be read says so in place of the lines.
func LogTail(path string, n int) string {
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
