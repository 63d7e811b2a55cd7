package k8sbin

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"os"
	"path/filepath"
)

// TargetUpstreamE2E is upstream's own gang e2e specs (test/e2e/scheduling and test/e2e/apps of
// k8s.io/kubernetes at a version) compiled into one test binary: gangbench runs the gang specs
// among them next to its own suites, as a second opinion from upstream. Cached by version and by
// the content of the test main, so editing the main rebuilds it.
const TargetUpstreamE2E = "kubernetes-e2e-scheduling"

// UpstreamE2EBinary is the binary TargetUpstreamE2E produces.
const UpstreamE2EBinary = "e2e-scheduling.test"

//go:embed upstreame2e/main_test.go.txt
var upstreamE2EMain string

func upstreamE2EDigest() string {
	sum := sha256.Sum256([]byte(upstreamE2EMain))
	return hex.EncodeToString(sum[:8])
}

// EnsureUpstreamE2E returns the path of upstream's scheduling e2e test binary for kubeVersion,
// building and caching it first when needed (about 4 minutes cold on 2 cores, seconds warm).
func EnsureUpstreamE2E(ctx context.Context, kubeVersion string, opts Options) (string, error) {
	if kubeVersion == "" {
		kubeVersion = DefaultKubernetesVersion
	}
	if err := ValidateKubeVersion(kubeVersion); err != nil {
		return "", err
	}
	dir, err := EnsureTarget(ctx, Target{Name: TargetUpstreamE2E, Version: kubeVersion}, opts, nil)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, UpstreamE2EBinary), nil
}

// buildUpstreamE2E compiles the test main against k8s.io/kubernetes at the version, in a wrapper
// module like the control plane's (its staging modules pinned to the matching v0 versions); `go
// test -c` with -mod=mod adds the e2e framework's requirements itself.
func (g *GoBuilder) buildUpstreamE2E(ctx context.Context, version, work, outDir string, progress func(string, bool)) error {
	const sources = "kubernetes e2e sources"
	progress(sources, false)
	mf, err := g.kubernetesGoMod(ctx, work, version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(wrapperGoMod(version, mf)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "main_test.go"), []byte(upstreamE2EMain), 0o644); err != nil {
		return err
	}
	if err := g.run(ctx, work, nil, "get", kubernetesModule+"/test/e2e/scheduling@"+version); err != nil {
		return err
	}
	progress(sources, true)
	progress(UpstreamE2EBinary, false)
	if err := g.run(ctx, work, nil, "test", "-c", "-trimpath", "-ldflags", kubeLDFlags(version), "-o", filepath.Join(outDir, UpstreamE2EBinary), "."); err != nil {
		return err
	}
	progress(UpstreamE2EBinary, true)
	return nil
}
