package kind

import (
	"context"
	"io"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"
)

// engineNode is a kind node whose commands run as `<engine> exec` without --privileged, which
// kind's own node adds and an engine that refuses privileged containers refuses for exec too. The
// command gets the node container's capabilities either way: all of them for a privileged node,
// all the engine grants for one started without (see privilege.go).
type engineNode struct {
	nodes.Node
	engine string
}

func (n engineNode) Command(command string, args ...string) kindexec.Cmd {
	return &engineNodeCmd{engine: n.engine, node: n.String(), command: command, args: args}
}

func (n engineNode) CommandContext(ctx context.Context, command string, args ...string) kindexec.Cmd {
	return &engineNodeCmd{engine: n.engine, node: n.String(), command: command, args: args, ctx: ctx}
}

// engineNodeCmd builds its argv at Run time, as kind's does, because SetStdin decides on -i.
type engineNodeCmd struct {
	engine, node, command string
	args, env             []string
	stdin                 io.Reader
	stdout, stderr        io.Writer
	ctx                   context.Context
}

func (c *engineNodeCmd) argv() []string {
	argv := []string{"exec"}
	if c.stdin != nil {
		argv = append(argv, "-i")
	}
	for _, e := range c.env {
		argv = append(argv, "-e", e)
	}
	return append(append(argv, c.node, c.command), c.args...)
}

func (c *engineNodeCmd) Run() error {
	var cmd kindexec.Cmd
	if c.ctx != nil {
		cmd = kindexec.CommandContext(c.ctx, c.engine, c.argv()...)
	} else {
		cmd = kindexec.Command(c.engine, c.argv()...)
	}
	if c.stdin != nil {
		cmd.SetStdin(c.stdin)
	}
	if c.stdout != nil {
		cmd.SetStdout(c.stdout)
	}
	if c.stderr != nil {
		cmd.SetStderr(c.stderr)
	}
	return cmd.Run()
}

func (c *engineNodeCmd) SetEnv(env ...string) kindexec.Cmd  { c.env = env; return c }
func (c *engineNodeCmd) SetStdin(r io.Reader) kindexec.Cmd  { c.stdin = r; return c }
func (c *engineNodeCmd) SetStdout(w io.Writer) kindexec.Cmd { c.stdout = w; return c }
func (c *engineNodeCmd) SetStderr(w io.Writer) kindexec.Cmd { c.stderr = w; return c }

// engineKind is kind's provider with its nodes' commands run without --privileged.
type engineKind struct {
	kindAPI
	engine string
}

func (k engineKind) ListNodes(name string) ([]nodes.Node, error) {
	ns, err := k.kindAPI.ListNodes(name)
	for i, n := range ns {
		ns[i] = engineNode{Node: n, engine: k.engine}
	}
	return ns, err
}
