package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gangbench/gangbench/clusters/kind/enginecli"
)

// Runner is the seam for every container engine command kind and its node image builder run; it
// is enginecli.Runner, named here so kind's callers need not import the seam's package.
type Runner = enginecli.Runner

// CommandError is a failed engine command and what it printed on stderr (enginecli.CommandError).
type CommandError = enginecli.CommandError

// stderrCap bounds what is kept of a command's stderr: errors quote it, they need not carry a log.
const stderrCap = 4096

// ExecRunner is the Runner that executes commands on this machine.
func ExecRunner(ctx context.Context, stdout io.Writer, name string, args ...string) error {
	path, err := exec.LookPath(name)
	if err != nil {
		return err // *exec.Error wrapping exec.ErrNotFound
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout = stdout
	var stderr tailWriter
	stderr.max = stderrCap
	cmd.Stderr = &stderr
	// A CLI whose child keeps stderr open must not outlive ctx by much.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return &CommandError{Args: append([]string{name}, args...), Stderr: stderr.String(), Err: err}
	}
	return nil
}

// tailWriter keeps the last max bytes written.
type tailWriter struct {
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return string(t.buf) }

// engineProbeTimeout bounds one `<engine> info`: a daemon that does not answer in this time cannot
// run a cluster either, and the check must fail in seconds.
const engineProbeTimeout = 10 * time.Second

// infoArgs asks each engine for its server version: the command fails unless the daemon (or, for
// podman, the service / rootless runtime) answers.
func infoArgs(engine string) []string {
	if engine == "podman" {
		return []string{"info", "--format", "{{json .Version.Version}}"}
	}
	return []string{"info", "--format", "{{json .ServerVersion}}"}
}

// EngineStatus is the result of asking one engine.
type EngineStatus struct {
	Engine string
	// Problem is empty when the engine answered.
	Problem string
}

// NoEngineError says that no container engine answered, and why for each one tried.
type NoEngineError struct {
	Tried []EngineStatus
}

// ErrNoEngine is matched by errors.Is on a NoEngineError.
var ErrNoEngine = errors.New("no container engine answers")

func (e *NoEngineError) Error() string {
	parts := make([]string, len(e.Tried))
	for i, s := range e.Tried {
		parts[i] = s.Engine + ": " + s.Problem
	}
	head := "no container engine answers"
	if len(e.Tried) == 1 {
		head = "container engine " + e.Tried[0].Engine + " does not answer"
	}
	return head + ": " + strings.Join(parts, "; ") + ". The kind provider needs one; use --provider local"
}

// Is makes errors.Is(err, ErrNoEngine) true.
func (e *NoEngineError) Is(target error) bool { return target == ErrNoEngine }

// DetectEngine returns the container engine to run kind nodes on: preferred if it answers, or with
// preferred "" the first of docker, podman, nerdctl whose daemon answers `<engine> info` within 10s.
// kind's own cluster.DetectNodeProvider only checks that a client binary exists (`docker -v`), which
// is true here although no daemon runs, so it cannot tell whether a cluster could be created.
func DetectEngine(ctx context.Context, preferred string) (string, error) {
	return DetectEngineWith(ctx, preferred, ExecRunner)
}

// DetectEngineWith is DetectEngine with the commands run by run. The engines are asked concurrently,
// so the answer comes within one probe timeout however many are tried.
func DetectEngineWith(ctx context.Context, preferred string, run Runner) (string, error) {
	engines := Engines()
	if preferred != "" {
		if !isEngine(preferred) {
			return "", fmt.Errorf("unknown container engine %q (accepted: %s)", preferred, strings.Join(engines, ", "))
		}
		engines = []string{preferred}
	}
	st := make([]EngineStatus, len(engines))
	var wg sync.WaitGroup
	for i, e := range engines {
		wg.Go(func() { st[i] = probeEngine(ctx, e, run) })
	}
	wg.Wait()
	for _, s := range st {
		if s.Problem == "" {
			return s.Engine, nil
		}
	}
	return "", &NoEngineError{Tried: st}
}

func probeEngine(ctx context.Context, engine string, run Runner) EngineStatus {
	cctx, cancel := context.WithTimeout(ctx, engineProbeTimeout)
	defer cancel()
	var out bytes.Buffer
	err := run(cctx, &out, engine, infoArgs(engine)...)
	if err == nil {
		return EngineStatus{Engine: engine}
	}
	return EngineStatus{Engine: engine, Problem: describeProbeError(err, cctx.Err())}
}

// describeProbeError turns a failed `<engine> info` into the one line a user needs.
func describeProbeError(err, ctxErr error) string {
	if errors.Is(err, exec.ErrNotFound) {
		return "not installed"
	}
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return fmt.Sprintf("did not answer within %s", engineProbeTimeout)
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		// The daemon's complaint ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.
		// Is the docker daemon running?") is the useful part; the exit status is not.
		for line := range strings.Lines(ce.Stderr) {
			if l := strings.TrimSpace(line); l != "" {
				return strings.TrimPrefix(l, "Error: ")
			}
		}
		return ce.Err.Error()
	}
	return err.Error()
}
