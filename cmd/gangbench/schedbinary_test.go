package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/kind/schedimage/schedimagetest"
	"github.com/gangbench/gangbench/clusters/providers"
)

func kindFlags(bin, image string) clusterFlags {
	return clusterFlags{
		provider: kind.ProviderName, name: "gangbench", nodes: 1, gpusPerNode: 8,
		k8sVersion: clusters.DefaultKubernetesVersion, timeout: time.Minute,
		schedulerBin: bin, schedulerImage: image,
	}
}

// TestSchedulerBinaryReachesKind: --scheduler-binary is the way to test a fork on either provider,
// so with --provider kind it must reach the kind provider's spec and be accepted there.
func TestSchedulerBinaryReachesKind(t *testing.T) {
	f := kindFlags("/opt/kube-scheduler", "")
	spec, err := f.spec()
	if err != nil {
		t.Fatal(err)
	}
	if spec.SchedulerBinary != "/opt/kube-scheduler" {
		t.Errorf("spec.SchedulerBinary = %q", spec.SchedulerBinary)
	}
	if _, err := kind.RenderConfig(spec, kind.Options{}); err != nil {
		t.Errorf("the kind provider refuses the spec: %v", err)
	}

	f = kindFlags("/opt/kube-scheduler", "example.com/kube-scheduler:gang")
	_, err = f.spec()
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--scheduler-image example.com/kube-scheduler:gang and --scheduler-binary /opt/kube-scheduler") {
		t.Errorf("image and binary: %v, want a usage error naming both", err)
	}

	// Whether a provider takes images is its capability, asked once the provider is resolved.
	f = kindFlags("", "example.com/kube-scheduler:gang")
	f.provider, f.newProvider = "local", providers.New
	if _, err := f.request("local"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--scheduler-binary works with every provider") {
		t.Errorf("--scheduler-image on local: %v", err)
	}
	f.provider = "docker"
	if _, err := f.spec(); !errors.As(err, &ue) || !strings.Contains(err.Error(), `--provider "docker": accepted local, kind, auto`) {
		t.Errorf("--provider docker: %v", err)
	}
}

func TestCompareSideImageAndBinaryRefused(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"compare", "--new-scheduler-binary", "/opt/pr", "--new-scheduler-image", "example.com/ks:pr"}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "--new-scheduler-binary and --new-scheduler-image") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

// TestCompareUnknownProfileRefused: compare's perf clusters take perf run's profiles, checked before
// anything is built.
func TestCompareUnknownProfileRefused(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"compare", "--profile", "loud", "--run-dir", t.TempDir()}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), `--profile "loud": accepted: quiet, realistic`) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

// TestE2EKindChecksSchedulerBinaryFirst: a binary that cannot run in an image is refused before the
// suites are compiled, naming the file.
func TestE2EKindChecksSchedulerBinaryFirst(t *testing.T) {
	bin := schedimagetest.WriteELF(t, filepath.Join(t.TempDir(), "kube-scheduler"), schedimagetest.Machine(), "/lib64/ld-linux-x86-64.so.2")
	var out, errb bytes.Buffer
	start := time.Now()
	code := run([]string{"e2e", "--provider", "kind", "--scheduler-binary", bin, "--run-dir", t.TempDir()}, &out, &errb)
	if code != 4 || !strings.Contains(errb.String(), bin) || !strings.Contains(errb.String(), "dynamically linked") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s: the suites were compiled first?", d)
	}
}

func TestAbsPath(t *testing.T) {
	if p := absPath("rel/kube-scheduler"); !filepath.IsAbs(p) || !strings.HasSuffix(p, "rel/kube-scheduler") {
		t.Errorf("absPath = %q", p)
	}
	if p := absPath("/opt/kube-scheduler"); p != "/opt/kube-scheduler" {
		t.Errorf("absPath = %q", p)
	}
}

func TestComparePairOrderAlternates(t *testing.T) {
	old, new := &compareSide{name: "old"}, &compareSide{name: "new"}
	var got []string
	for rep := 1; rep <= 4; rep++ {
		for _, s := range pairOrder([]*compareSide{old, new}, rep) {
			got = append(got, s.name)
		}
	}
	if want := "old new new old old new new old"; strings.Join(got, " ") != want {
		t.Errorf("order %q, want %q: each side must run first and second equally often", strings.Join(got, " "), want)
	}
}
