package k8sbin

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The binaries a kind node image carries besides the control plane. Each comes from its own Go
// module on the proxy (or, for pause, from a C file in the k8s.io/kubernetes module), at versions
// that run Kubernetes v1.37 (the ones kind v0.33's own base image pins), and is cached like the
// control-plane binaries: <cache>/<target>/<version>/.
const (
	// DefaultContainerdVersion, DefaultRuncVersion, DefaultCNIPluginsVersion and
	// DefaultCriToolsVersion are what a node image gets when nothing else is asked for.
	DefaultContainerdVersion = "v2.3.4"
	DefaultRuncVersion       = "v1.4.3"
	DefaultCNIPluginsVersion = "v1.9.1"
	DefaultCriToolsVersion   = "v1.37.0"

	KubeletBinary   = "kubelet"
	KubeadmBinary   = "kubeadm"
	KubectlBinary   = "kubectl"
	KubeProxyBinary = "kube-proxy"
	PauseBinary     = "pause"
)

// installRecipe builds a target with `go install module/pkg@version`, which needs no wrapper module
// because none of these modules has replace directives.
type installRecipe struct {
	module string
	// pkgs maps each binary to its package path inside module.
	pkgs []installPkg
	tags string
	// ldflags stamps the version the way the project's own Makefile does, so --version is exact.
	ldflags func(version string) string
	// cgo is set for runc, which links libseccomp (Debian's libseccomp-dev).
	cgo bool
}

type installPkg struct{ binary, pkg string }

var installRecipes = map[string]installRecipe{
	TargetContainerd: {
		module: "github.com/containerd/containerd/v2",
		pkgs: []installPkg{
			{"containerd", "cmd/containerd"}, {"ctr", "cmd/ctr"}, {"containerd-shim-runc-v2", "cmd/containerd-shim-runc-v2"},
		},
		// The optional snapshotters are never selected in a kind node (kind builds without them too).
		tags: "no_aufs no_zfs no_btrfs no_devmapper",
		ldflags: func(v string) string {
			return "-s -w -X github.com/containerd/containerd/v2/version.Version=" + v + " -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
		},
	},
	TargetRunc: {
		module: "github.com/opencontainers/runc",
		pkgs:   []installPkg{{"runc", ""}},
		tags:   "seccomp urfave_cli_no_docs",
		ldflags: func(v string) string {
			return "-s -w -X main.version=" + strings.TrimPrefix(v, "v")
		},
		cgo: true,
	},
	TargetCNIPlugins: {
		module: "github.com/containernetworking/plugins",
		pkgs: []installPkg{
			{"host-local", "plugins/ipam/host-local"}, {"loopback", "plugins/main/loopback"},
			{"ptp", "plugins/main/ptp"}, {"bridge", "plugins/main/bridge"}, {"portmap", "plugins/meta/portmap"},
		},
		ldflags: func(v string) string {
			return "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=" + v
		},
	},
	TargetCriTools: {
		module: "sigs.k8s.io/cri-tools",
		pkgs:   []installPkg{{"crictl", "cmd/crictl"}},
		ldflags: func(v string) string {
			return "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=" + v
		},
	},
}

// nodeBinaries is Binaries for the node image targets.
func nodeBinaries(name string) []string {
	switch name {
	case TargetKubernetesNode:
		return []string{KubeletBinary, KubeadmBinary, KubectlBinary, KubeProxyBinary}
	case TargetPause:
		return []string{PauseBinary}
	}
	r, ok := installRecipes[name]
	if !ok {
		return nil
	}
	out := make([]string, len(r.pkgs))
	for i, p := range r.pkgs {
		out[i] = p.binary
	}
	return out
}

func (g *GoBuilder) buildInstall(ctx context.Context, r installRecipe, version, work, outDir string, progress func(string, bool)) error {
	// Fetch first so a bad version gets the same clear error as kubernetes.
	if _, err := g.downloadModule(ctx, work, r.module, version); err != nil {
		return err
	}
	env := []string{"GOBIN=" + outDir}
	if r.cgo {
		env = append(env, "CGO_ENABLED=1")
	}
	for _, p := range r.pkgs {
		progress(p.binary, false)
		pkg := r.module
		if p.pkg != "" {
			pkg += "/" + p.pkg
		}
		args := []string{"install", "-trimpath", "-ldflags", r.ldflags(version)}
		if r.tags != "" {
			args = append(args, "-tags", r.tags)
		}
		if err := g.run(ctx, work, env, append(args, pkg+"@"+version)...); err != nil {
			return err
		}
		progress(p.binary, true)
	}
	return nil
}

// buildPause compiles the pause program of a Kubernetes version (build/pause/linux/pause.c in
// k8s.io/kubernetes) statically with the C compiler, as upstream's pause image Makefile does.
func (g *GoBuilder) buildPause(ctx context.Context, kubeVersion, work, outDir string, progress func(string, bool)) error {
	progress(PauseBinary, false)
	info, err := g.downloadModule(ctx, work, "k8s.io/kubernetes", kubeVersion)
	if err != nil {
		return err
	}
	src := filepath.Join(info.Dir, "build", "pause", "linux", "pause.c")
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("pause source of kubernetes %s: %w", kubeVersion, err)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return fmt.Errorf("the pause program is C: %s is needed to build it (apt-get install gcc libc6-dev): %w", cc, err)
	}
	args := []string{"-Os", "-Wall", "-Werror", "-static", "-DVERSION=" + PauseVersionOf(kubeVersion), "-o", filepath.Join(outDir, PauseBinary), src}
	cmd := exec.CommandContext(ctx, cc, args...)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		return &BuildError{Args: append([]string{cc}, args...), Dir: work, Err: err, Output: string(out)}
	}
	progress(PauseBinary, true)
	return nil
}

// PauseVersionOf is the pause image tag a Kubernetes version's kubeadm asks for (its
// constants.PauseVersion; 3.10.2 for v1.36 and v1.37, the releases gangbench runs).
func PauseVersionOf(kubeVersion string) string { return "3.10.2" }

// EnsureTarget returns the cache dir holding t's binaries, building them when missing, with the
// cache and locking of Ensure. prog shows the build (nil: a display of its own on opts.Progress).
func EnsureTarget(ctx context.Context, t Target, opts Options, prog *Progress) (string, error) {
	cacheDir := opts.CacheDir
	var err error
	if cacheDir == "" {
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	if cacheDir, err = filepath.Abs(cacheDir); err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	builder := opts.Builder
	if builder == nil {
		builder = &GoBuilder{}
	}
	if prog == nil {
		prog = NewProgress(opts.Progress)
		defer prog.Close()
	}
	return ensureTarget(ctx, cacheDir, t, builder, prog.r)
}

// CacheDirOf is the cache root opts resolve to (Options.CacheDir, $GANGBENCH_CACHE_DIR or the
// user cache dir), absolute; other caches of gangbench (kind node images) live beside the binaries.
func CacheDirOf(opts Options) (string, error) {
	d := opts.CacheDir
	if d == "" {
		var err error
		if d, err = DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	return filepath.Abs(d)
}

// Progress is Ensure's progress display (mpb spinners on a terminal, plain lines elsewhere), for
// other long builds made of steps, so that one terminal shows one display.
type Progress struct{ r *reporter }

// NewProgress shows progress on w; nil w shows nothing.
func NewProgress(w io.Writer) *Progress { return &Progress{r: newReporter(w, false)} }

// Step starts a step labelled label and returns the function that ends it.
func (p *Progress) Step(key, label string) func(ok bool) {
	p.r.start(key, label)
	return func(ok bool) { p.r.finish(key, ok) }
}

// Close ends the display, marking steps still running as failed.
func (p *Progress) Close() { p.r.close() }

// LockFile takes an exclusive flock on path, waiting while ctx lasts and calling onWait once if it
// has to wait; it returns the unlock function. The lock file is never deleted.
func LockFile(ctx context.Context, path string, onWait func()) (func(), error) {
	return lockFile(ctx, path, onWait)
}

// ModuleDir downloads module@version through the Go module proxy (or finds it in the module cache)
// and returns its source directory.
func (g *GoBuilder) ModuleDir(ctx context.Context, module, version string) (string, error) {
	dir, err := os.MkdirTemp(g.TempDir, "gangbench-mod-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	info, err := g.downloadModule(ctx, dir, module, version)
	if err != nil {
		return "", err
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no source dir in its answer", module, version)
	}
	return info.Dir, nil
}
