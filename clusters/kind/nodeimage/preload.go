package nodeimage

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gangbench/gangbench/internal/poll"
	"github.com/gangbench/gangbench/internal/proc"
)

// preloadConfig is the config of the throwaway containerd that fills the node's image store: only
// the content store and the metadata database are needed (images are imported unpacked by the
// node's containerd when a container first uses them, as kind's own build does with --no-unpack),
// so the CRI, NRI, task and snapshot plugins that would touch this machine's /run, /opt or cgroups
// are disabled.
const preloadConfig = `version = 3
root = %q
state = %q
disabled_plugins = [
  "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime",
  "io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt", "io.containerd.internal.v1.tracing",
  "io.containerd.runtime.v2.task", "io.containerd.monitor.task.v1.cgroups", "io.containerd.service.v1.tasks-service",
  "io.containerd.grpc.v1.tasks", "io.containerd.podsandbox.controller.v1.podsandbox",
  "io.containerd.sandbox.controller.v1.shim", "io.containerd.grpc.v1.sandbox-controllers",
  "io.containerd.snapshotter.v1.overlayfs", "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs",
]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""

[metrics]
  address = ""
`

// preloadTree imports the docker-archive at archive into a containerd root at work/root, with the
// containerd and ctr binaries of the node (so the database is written by the version that will
// read it), in the "k8s.io" namespace the kubelet's CRI uses, pinned as kind pins its own preloaded
// images. The containerd process is always stopped before this returns.
func preloadTree(ctx context.Context, containerd, ctr, archive, work string) (root string, err error) {
	root = filepath.Join(work, "root")
	state := filepath.Join(work, "state")
	// Unix socket paths are limited to 108 bytes: a deep cache dir would exceed that, and so can a
	// deep $TMPDIR, for which /tmp is the fallback.
	sockDir, err := os.MkdirTemp("", "gangbench-ctrd-")
	if err != nil {
		return "", err
	}
	if len(filepath.Join(sockDir, "c.sock.ttrpc")) > 100 {
		os.RemoveAll(sockDir)
		if sockDir, err = os.MkdirTemp("/tmp", "gbctrd-"); err != nil {
			return "", err
		}
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "c.sock")
	cfg := filepath.Join(work, "config.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, preloadConfig, root, state, sock, sock+".ttrpc"), 0o600); err != nil {
		return "", err
	}
	logPath := filepath.Join(work, "containerd.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer lf.Close()
	cmd := exec.Command(containerd, "--config", cfg)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start containerd for the image preload: %w", err)
	}
	server := proc.WatchGroup(cmd)
	// SIGTERM lets it close its database; a bounded wait, then SIGKILL of its process group.
	defer func() { _ = server.Stop(syscall.SIGTERM, 10*time.Second) }()
	if err := waitSocket(ctx, sock, server, 30*time.Second); err != nil {
		return "", fmt.Errorf("containerd for the image preload: %w\n%s", err, proc.LogTail(logPath, 20))
	}
	args := []string{"--address", sock, "--namespace", "k8s.io", "images", "import",
		"--local", "--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", archive}
	c := exec.CommandContext(ctx, ctr, args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", ctr, strings.Join(args, " "), err, out.String())
	}
	return root, nil
}

// waitSocket waits until a unix socket accepts connections, the process exits, or the deadline.
func waitSocket(ctx context.Context, sock string, server *proc.Child, timeout time.Duration) error {
	return poll.Until(ctx, sock+" to be served", 50*time.Millisecond, timeout, func(context.Context) (bool, string, error) {
		if !server.Running() {
			return false, "", poll.Stop(fmt.Errorf("exited before serving %s (%s)", sock, server.ExitSummary()))
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false, "", err
		}
		c.Close()
		return true, "", nil
	})
}
