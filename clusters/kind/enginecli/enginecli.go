// Package enginecli is the seam through which the kind provider and the node image builder run a
// container engine's CLI (docker, podman, nerdctl): one function type, so tests of either answer
// engine commands from a table, and the error every implementation returns. The implementation that
// executes commands on this machine is kind.ExecRunner.
package enginecli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Runner runs a container engine CLI command with ctx, writing its standard output to stdout (which
// may be nil to discard it). A failure is returned as an error that carries argv and the end of its
// standard error (a *CommandError); a binary that is not installed yields an error wrapping
// exec.ErrNotFound.
type Runner func(ctx context.Context, stdout io.Writer, name string, args ...string) error

// CommandError is a failed engine command and what it printed on stderr.
type CommandError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("%s: %v", strings.Join(e.Args, " "), e.Err)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }
