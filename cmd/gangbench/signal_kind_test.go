package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind"
)

// TestSignalKindTeardown interrupts the kind paths at their phases: the node image build during
// debootstrap and during the containerd preload, and a kind cluster create while kind starts the
// nodes. Each must exit, leaving no process, temp dir, mount, build dir, container or network.
// The builds run against a cache of their own whose binaries are links to the real cache's, so
// only the phase under test is rebuilt.
func TestSignalKindTeardown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds node images and starts kind clusters; skipped with -short")
	}
	engine, err := kind.DetectEngine(context.Background(), "")
	if err != nil {
		t.Skip(err.Error())
	}
	real, err := k8sbin.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	// The builds link the cached node binaries and (for the preload) the root filesystem; an
	// image found in the engine leaves no kind-node dir, so that is not what to ask for.
	for _, need := range []string{"kubernetes-node", "debian-rootfs"} {
		if _, err := os.Stat(filepath.Join(real, need)); err != nil {
			t.Skipf("no %s cached in %s yet (a node image build makes it): %v", need, real, err)
		}
	}
	bin := buildGangbench(t)

	// linkedCache is a cache dir whose entries link to the real cache's, but for those named in
	// fresh, which are built anew.
	linkedCache := func(t *testing.T, fresh ...string) string {
		dir := t.TempDir()
		ents, err := os.ReadDir(real)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !e.IsDir() || strings.Contains(strings.Join(fresh, " "), e.Name()) {
				continue
			}
			if err := os.Symlink(filepath.Join(real, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	noBuildLeft := func(t *testing.T, cache string) {
		t.Helper()
		for _, sub := range []string{"debian-rootfs", "kind-node"} {
			matches, _ := filepath.Glob(filepath.Join(cache, sub, "*", ".tmp-*"))
			more, _ := filepath.Glob(filepath.Join(cache, sub, ".tmp-*"))
			if left := append(matches, more...); len(left) > 0 {
				t.Errorf("build dirs left after the interrupt: %v", left)
			}
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mounts), cache) {
			t.Errorf("mounts under %s left after the interrupt", cache)
		}
	}

	// interruptBuild rebuilds the node image into a cache where fresh are built anew, waits for the
	// progress line and a process of the phase, interrupts, and checks nothing is left.
	interruptBuild := func(t *testing.T, line, process string, fresh ...string) {
		cache := linkedCache(t, fresh...)
		r := startRun(t, bin, "kind", "node-image", "--rebuild", "--cache-dir", cache)
		r.waitLine(3*time.Minute, line)
		poll(t, time.Minute, process+" to be running", func() (bool, string) {
			for _, p := range r.procs() {
				if strings.Contains(p.cmdline, process) {
					return true, ""
				}
			}
			return r.exited(), "no " + process + " process"
		})
		r.interrupt()
		if code := r.waitExit(time.Minute); code == 0 {
			t.Errorf("exit code 0 after an interrupted build")
		}
		r.assertNothingLeft(30 * time.Second)
		noBuildLeft(t, cache)
	}
	t.Run("node image during debootstrap", func(t *testing.T) {
		interruptBuild(t, `root filesystem \(debootstrap\): building`, "debootstrap", "debian-rootfs", "kind-node")
	})
	t.Run("node image during the preload", func(t *testing.T) {
		interruptBuild(t, `preloading .* images into containerd's store: building`, "containerd --config", "kind-node")
	})

	t.Run("kind cluster create while kind starts the nodes", func(t *testing.T) {
		const name = "sig-kind"
		r := startRun(t, bin, "cluster", "create", "--provider", "kind", "--name", name, "--nodes", "1")
		containers := func() []string {
			var out bytes.Buffer
			_ = kind.ExecRunner(context.Background(), &out, engine, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+name)
			return strings.Fields(out.String())
		}
		poll(t, 3*time.Minute, "a node container of "+name, func() (bool, string) {
			return len(containers()) > 0, "none yet"
		})
		r.interrupt()
		if code := r.waitExit(3 * time.Minute); code == 0 {
			t.Errorf("exit code 0 after an interrupted create")
		}
		r.assertNothingLeft(30 * time.Second)
		if left := containers(); len(left) > 0 {
			t.Errorf("containers of %s left after the interrupt: %v", name, left)
		}
		if exec.Command(engine, "network", "inspect", "gangbench-"+name).Run() == nil {
			t.Errorf("network gangbench-%s left after the interrupt", name)
		}
	})
}
