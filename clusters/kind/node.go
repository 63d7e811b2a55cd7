package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"sigs.k8s.io/kind/pkg/cluster/constants"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
)

// nodeRun runs a command inside a node container and returns its stdout. Errors name the node and
// quote stderr: kind's own RunError carries only the exit status.
func nodeRun(ctx context.Context, n nodes.Node, stdin io.Reader, name string, args ...string) (string, error) {
	var stdout bytes.Buffer
	stderr := &tailWriter{max: stderrCap}
	cmd := n.CommandContext(ctx, name, args...).SetStdout(&stdout).SetStderr(stderr)
	if stdin != nil {
		cmd.SetStdin(stdin)
	}
	if err := cmd.Run(); err != nil {
		msg := fmt.Sprintf("node %s: %s %s: %v", n.String(), name, strings.Join(args, " "), err)
		if s := strings.TrimSpace(stderr.String()); s != "" {
			msg += ": " + s
		}
		if ctx.Err() != nil {
			return stdout.String(), fmt.Errorf("%s: %w", msg, ctx.Err())
		}
		return stdout.String(), errors.New(msg)
	}
	return stdout.String(), nil
}

// nodeSh runs a shell script inside a node (kindest/node has a POSIX sh, systemctl, crictl, curl).
func nodeSh(ctx context.Context, n nodes.Node, script string) (string, error) {
	return nodeRun(ctx, n, nil, "sh", "-c", script)
}

// clusterNodes are a cluster's nodes by role.
type clusterNodes struct {
	ControlPlane nodes.Node
	Workers      []nodes.Node
	All          []nodes.Node
}

func listClusterNodes(api kindAPI, name string) (*clusterNodes, error) {
	all, err := api.ListNodes(name)
	if err != nil {
		return nil, fmt.Errorf("kind cluster %q: list nodes: %w", name, err)
	}
	cps, err := nodeutils.ControlPlaneNodes(all)
	if err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", name, err)
	}
	if len(cps) == 0 {
		return nil, fmt.Errorf("kind cluster %q has no control-plane node (nodes: %s)", name, nodeNames(all))
	}
	workers, err := nodeutils.SelectNodesByRole(all, constants.WorkerNodeRoleValue)
	if err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", name, err)
	}
	return &clusterNodes{ControlPlane: cps[0], Workers: workers, All: all}, nil
}

func nodeNames(ns []nodes.Node) string {
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.String()
	}
	return strings.Join(names, ", ")
}

// loadArchive imports the image archive at path into every node, concurrently (one reader each).
// nodeutils.LoadImageArchive takes no context; each import ends with its `ctr import`.
func loadArchive(ctx context.Context, path string, ns []nodes.Node) error {
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() {
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			f, err := os.Open(path)
			if err != nil {
				errs[i] = err
				return
			}
			defer f.Close()
			if err := nodeutils.LoadImageArchive(n, f); err != nil {
				errs[i] = fmt.Errorf("node %s: load image archive %s: %w", n.String(), path, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func nodesOf(ns ...nodes.Node) []nodes.Node { return ns }
