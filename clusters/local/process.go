package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/gangbench/gangbench/internal/proc"
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
	child   *proc.Child
}

func (p *process) pid() int {
	if p == nil || p.child == nil {
		return 0
	}
	return p.child.PID()
}

// startProcess launches path with args, appending stdout and stderr to logPath.
func startProcess(sp *spawner, name, path string, args []string, logPath string, env []string) (*process, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	// The child writes to its own copy of the descriptor; ours is needed only until it starts.
	defer lf.Close()
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
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	return &process{name: name, path: path, args: args, logPath: logPath, child: proc.Watch(cmd)}, nil
}

// stop sends sig, waits up to grace, then SIGKILLs and waits for the exit.
func (p *process) stop(sig syscall.Signal, grace time.Duration) error {
	if p == nil || p.child == nil {
		return nil
	}
	if err := p.child.Stop(sig, grace); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// running reports whether the process has not exited.
func (p *process) running() bool { return p != nil && p.child != nil && p.child.Running() }

// exitSummary says how a process ended, for errors.
func (p *process) exitSummary() string { return p.child.ExitSummary() }
