package kind

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// On cgroup v1 hosts runc freezes a container's cgroup while it applies device rules and thaws it
// afterwards. When a kind node is killed while a runc inside it sits between the two (a pod being
// started as the cluster is deleted), the cgroup stays FROZEN, its `runc init` can never receive
// SIGKILL, and the engine's remove fails with "tried to kill container, but did not receive an exit
// event" (seen in make test). Thawing the node's frozen cgroups lets the remove go through.

// kindClusterLabel is the label kind puts on every node container of a cluster.
const kindClusterLabel = "io.x-k8s.kind.cluster"

// thawNodes thaws every frozen freezer cgroup under the cluster's node containers and returns how
// many it thawed. Hosts without a cgroup v1 freezer have none.
func (p *Provider) thawNodes(ctx context.Context, engine, cluster string) (int, error) {
	var out bytes.Buffer
	if err := p.opts.Runner(ctx, &out, engine, "ps", "-aq", "--filter", "label="+kindClusterLabel+"="+cluster); err != nil {
		return 0, err
	}
	thawed := 0
	var errs []error
	for _, id := range strings.Fields(out.String()) {
		var pid bytes.Buffer
		if err := p.opts.Runner(ctx, &pid, engine, "inspect", "-f", "{{.State.Pid}}", id); err != nil {
			errs = append(errs, err)
			continue
		}
		root, err := freezerDir(filepath.Join("/proc", strings.TrimSpace(pid.String()), "cgroup"), "/sys/fs/cgroup/freezer")
		if err != nil || root == "" {
			errs = append(errs, err)
			continue
		}
		n, err := thawFrozen(root)
		thawed += n
		errs = append(errs, err)
	}
	return thawed, errors.Join(errs...)
}

// freezerDir reads a /proc/<pid>/cgroup file and returns the process's freezer cgroup directory
// under mount, or "" when it has no v1 freezer.
func freezerDir(procCgroup, mount string) (string, error) {
	b, err := os.ReadFile(procCgroup)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && strings.Contains(","+parts[1]+",", ",freezer,") {
			return filepath.Join(mount, parts[2]), nil
		}
	}
	return "", sc.Err()
}

// thawFrozen writes THAWED to every freezer.state under root that reads FROZEN (parents first, as
// the walk goes) and returns how many it wrote.
func thawFrozen(root string) (int, error) {
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a cgroup removed during the walk
			}
			return err
		}
		if d.IsDir() || d.Name() != "freezer.state" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(b)) != "FROZEN" {
			return nil
		}
		if err := os.WriteFile(path, []byte("THAWED"), 0o644); err != nil {
			return fmt.Errorf("thaw %s: %w", filepath.Dir(path), err)
		}
		n++
		return nil
	})
	return n, err
}
