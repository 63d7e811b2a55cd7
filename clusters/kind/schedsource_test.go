package kind

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind/schedimage"
	"github.com/gangbench/gangbench/clusters/kind/schedimage/schedimagetest"
)

func TestResolveSchedulerBinary(t *testing.T) {
	if _, err := resolve(clusters.Spec{SchedulerBinary: "/opt/kube-scheduler"}); err != nil {
		t.Errorf("scheduler binary refused: %v", err)
	}
	img := clusters.Images{Scheduler: "example.com/kube-scheduler:gang"}
	if _, err := resolve(clusters.Spec{Images: img}); err != nil {
		t.Errorf("scheduler image refused: %v", err)
	}
	_, err := resolve(clusters.Spec{SchedulerBinary: "/opt/kube-scheduler", Images: img})
	if err == nil || !strings.Contains(err.Error(), "both an image (example.com/kube-scheduler:gang) and a binary (/opt/kube-scheduler)") {
		t.Errorf("image and binary: %v", err)
	}
}

// schedulerBinaryHarness is a harness whose cluster's scheduler mirror pod runs ref once swapped, and
// whose control-plane node answers `kube-scheduler --version` in the scheduler container with
// reported (or fails when reported is "").
func schedulerBinaryHarness(t *testing.T, ref, reported string) *harness {
	t.Helper()
	h := newHarness(t, Options{}, testShape{Workers: 1})
	inner := h.kind.onCreate
	h.kind.onCreate = func(name string) ([]nodes.Node, error) {
		ns, err := inner(name)
		if err != nil {
			return nil, err
		}
		// The fake apiserver shows the mirror pod of the manifest being swapped in.
		h.cs = newFakeClusterClient(name, len(h.workers), ref)
		h.cp.handle = func(n *fakeNode, c *fakeCmd) error {
			if c.line() == "crictl exec c0ffee kube-scheduler --version" {
				if reported == "" {
					return c.fail(`exec failed: "kube-scheduler": executable file not found in $PATH`)
				}
				return c.out("Kubernetes " + reported + "\n")
			}
			return h.behave.handle(n, c)
		}
		return ns, nil
	}
	return h
}

func TestCreateWithSchedulerBinary(t *testing.T) {
	bin := schedimagetest.StaticScheduler(t, "v1.37.2")
	want, err := schedimage.Inspect(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	h := schedulerBinaryHarness(t, want.Ref, "v1.37.2-fork.1")
	spec := clusters.Spec{
		Name: testCluster, SchedulerBinary: bin, ReadyTimeout: 10 * time.Second,
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Scheduler: {"GenericWorkload": false}},
	}
	cl, err := h.p.Create(context.Background(), h.spec(spec))
	if err != nil {
		t.Fatal(err)
	}
	// The version is what the running scheduler says, not what the binary said on this machine.
	if v := cl.Versions[clusters.Scheduler]; v != "v1.37.2-fork.1" {
		t.Errorf("scheduler version %q (all: %v)", v, cl.Versions)
	}
	st, err := readState(h.root, testCluster)
	if err != nil || st.SchedulerImage != want.Ref || st.SchedulerBinary != bin {
		t.Errorf("state records image %q binary %q (%v); want %q from %q", st.SchedulerImage, st.SchedulerBinary, err, want.Ref, bin)
	}

	// Built here, not taken from the engine.
	for _, c := range h.runner.calls {
		if strings.Contains(c, " save ") || strings.Contains(c, " image inspect ") {
			t.Errorf("asked the engine: %q", c)
		}
	}
	// The control plane, and only it, imported the scheduler image: the binary at
	// /usr/local/bin/kube-scheduler, under the content-derived name.
	if len(h.workers[0].imported) != 1 {
		t.Errorf("worker imported %d archives, want the device plugin's only", len(h.workers[0].imported))
	}
	if len(h.cp.imported) != 1 {
		t.Fatalf("control plane imported %d archives, want 1", len(h.cp.imported))
	}
	content, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got := archivedFile(t, h.cp.imported[0], want.Ref, schedimage.BinaryPath); !bytes.Equal(got, content) {
		t.Errorf("archive's %s is %d bytes, not the binary (%d bytes)", schedimage.BinaryPath, len(got), len(content))
	}
	if _, err := os.Stat(filepath.Join(h.root, testCluster, "scheduler-image.tar")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("archive left in the state dir after loading: %v", err)
	}

	// The static pod runs the loaded image, never pulled, with the spec's scheduler flags.
	var pod corev1.Pod
	if err := yaml.Unmarshal([]byte(h.cp.files["/etc/kubernetes/gangbench-kube-scheduler.yaml.tmp"]), &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if c.Image != want.Ref || c.ImagePullPolicy != corev1.PullNever || c.Command[0] != "kube-scheduler" {
		t.Errorf("scheduler container image %q pull policy %q command %v", c.Image, c.ImagePullPolicy, c.Command)
	}
	if !strings.Contains(strings.Join(c.Command, " "), "--feature-gates=GenericWorkload=false") {
		t.Errorf("scheduler flags lost: %v", c.Command)
	}
	if len(h.cp.callsMatching("crictl inspecti "+want.Ref)) != 1 || len(h.cp.callsMatching("mv /etc/kubernetes/gangbench-kube-scheduler.yaml.tmp "+manifestDir+"/kube-scheduler.yaml")) != 1 {
		t.Errorf("image not checked or manifest not installed; calls: %v", h.cp.calls)
	}
	if err := cl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// archivedFile returns the content of path in the image tagged ref of a docker-archive.
func archivedFile(t *testing.T, archive []byte, ref, path string) []byte {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(archive)), nil }, &tag)
	if err != nil {
		t.Fatalf("imported archive has no image %s: %v", ref, err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v, %v", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the layer: %v", path, err)
		}
		if h.Name == strings.TrimPrefix(path, "/") {
			if h.Mode != 0o755 {
				t.Errorf("%s has mode %o, want 755", path, h.Mode)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

func TestCreateWithSchedulerBinaryVersionFallback(t *testing.T) {
	// A container that cannot be asked: the version the binary reported before it was wrapped is
	// recorded, not the image tag.
	bin := schedimagetest.StaticScheduler(t, "v1.37.2")
	want, err := schedimage.Inspect(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	h := schedulerBinaryHarness(t, want.Ref, "")
	cl, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster, SchedulerBinary: bin, ReadyTimeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	if v := cl.Versions[clusters.Scheduler]; v != "v1.37.2" {
		t.Errorf("scheduler version %q, want the probed v1.37.2", v)
	}
}

func TestCreateDynamicSchedulerBinaryFailsEarly(t *testing.T) {
	bin := schedimagetest.WriteELF(t, filepath.Join(t.TempDir(), "kube-scheduler"), schedimagetest.Machine(), "/lib64/ld-linux-x86-64.so.2")
	h := newHarness(t, Options{}, testShape{Workers: 1})
	_, err := h.p.Create(context.Background(), h.spec(clusters.Spec{Name: testCluster, SchedulerBinary: bin}))
	if err == nil || !strings.Contains(err.Error(), bin) || !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("got %v, want the path and 'dynamically linked'", err)
	}
	if len(h.kind.created) != 0 {
		t.Error("kind create ran")
	}
	if e := dirEntries(t, h.root); len(e) != 0 {
		t.Errorf("state dir not empty: %v", e)
	}
}
