package k8sbin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// tailLines is how much of a failed command's output a BuildError keeps:
// enough to show a compile error and its context, small enough to print.
const tailLines = 40

// GoBuilder builds targets from module source with the go command. The
// recipe mirrors a manual build that is known to work, flag for flag, so a
// Go build cache warmed by that build is reused.
type GoBuilder struct {
	// GoBin is the go command; "" means "go" from PATH.
	GoBin string
	// Log receives the combined output of every go command (nil: discarded;
	// the last lines are kept for errors either way). When Options.Progress
	// is a terminal, point Log at a file, not the same terminal. It must be
	// safe for concurrent use if the GoBuilder is shared between goroutines.
	Log io.Writer
	// Env is appended to the environment after the defaults, so it can
	// override them (a later KEY=VALUE wins), e.g. "CGO_ENABLED=1".
	Env []string
	// TempDir is where throwaway build modules are created; "" means
	// os.TempDir().
	TempDir string
}

// BuildError is a failed go command: its argv, working dir, exit error and
// the tail of its output.
type BuildError struct {
	Args   []string // argv; Args[0] is the go binary
	Dir    string
	Err    error
	Output string // last ~40 lines of combined stdout+stderr
}

func (e *BuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (in %s): %v", quoteArgs(e.Args), e.Dir, e.Err)
	if out := strings.TrimRight(e.Output, "\n"); out != "" {
		fmt.Fprintf(&b, "\n--- last %d lines of output ---\n%s", tailLines, out)
	}
	return b.String()
}

func (e *BuildError) Unwrap() error { return e.Err }

// goEnv is the environment every go command runs with: the caller's plus
// settings that make the build independent of the caller's setup: no
// go.work, go.mod edits allowed (the wrapper modules are generated), the
// installed toolchain only (no toolchain download: only the module proxy is
// reachable), and static binaries.
//
// Note CGO_ENABLED is part of the Go build cache key in effect (it changes
// which files of net, os/user and runtime/cgo compile, and so the key of
// every package above them): a cache warmed with CGO_ENABLED=1 is not
// reused here unless Env sets CGO_ENABLED=1 too.
func (g *GoBuilder) goEnv(extra ...string) []string {
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	env = append(env, g.Env...)
	return append(env, extra...) // exec uses the last value of a duplicated key
}

func (g *GoBuilder) goBin() string {
	if g.GoBin != "" {
		return g.GoBin
	}
	return "go"
}

// command prepares a go command that, on ctx cancellation, is killed with
// its whole process group: `go build` forks compile/link workers that
// would otherwise keep burning CPU after the go process itself is killed.
func (g *GoBuilder) command(ctx context.Context, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, g.goBin(), args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second // don't hang on a grandchild holding stdout
	return cmd
}

// run runs one go command, streaming its output to Log and returning a
// *BuildError carrying argv and the output tail on failure.
func (g *GoBuilder) run(ctx context.Context, dir string, extraEnv []string, args ...string) error {
	tail := &tailBuffer{max: tailLines}
	var out io.Writer = tail
	if g.Log != nil {
		out = io.MultiWriter(g.Log, tail)
	}
	cmd := g.command(ctx, dir, g.goEnv(extraEnv...), args...)
	cmd.Stdout, cmd.Stderr = out, out // same writer: exec serialises writes
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return &BuildError{Args: append([]string{g.goBin()}, args...), Dir: dir, Err: err, Output: tail.String()}
	}
	return nil
}

// moduleInfo is the subset of `go mod download -json` output used here.
type moduleInfo struct {
	Path, Version, Error, GoMod, Dir string
}

// downloadModule runs `go mod download -json path@version`. An unknown
// version makes go exit non-zero with the reason in the JSON Error field.
func (g *GoBuilder) downloadModule(ctx context.Context, dir, path, version string) (*moduleInfo, error) {
	args := []string{"mod", "download", "-json", path + "@" + version}
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: tailLines}
	var errOut io.Writer = stderr
	if g.Log != nil {
		errOut = io.MultiWriter(g.Log, stderr)
	}
	cmd := g.command(ctx, dir, g.goEnv(), args...)
	cmd.Stdout, cmd.Stderr = &stdout, errOut
	runErr := cmd.Run()
	var info moduleInfo
	jsonErr := json.Unmarshal(stdout.Bytes(), &info)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("go mod download %s@%s: %w", path, version, ctx.Err())
	}
	if runErr != nil || info.Error != "" || jsonErr != nil {
		msg := strings.TrimSpace(info.Error)
		if msg == "" {
			msg = strings.TrimSpace(stderr.String())
		}
		if msg == "" && runErr != nil {
			msg = runErr.Error()
		}
		if msg == "" {
			msg = fmt.Sprintf("unparseable output %q", stdout.String())
		}
		return nil, &ModuleUnavailableError{Path: path, Version: version, Message: msg}
	}
	if info.GoMod == "" {
		return nil, fmt.Errorf("go mod download %s@%s: no go.mod path in %q", path, version, stdout.String())
	}
	return &info, nil
}

// ModuleUnavailableError says a module version could not be fetched.
type ModuleUnavailableError struct {
	Path, Version, Message string
}

func (e *ModuleUnavailableError) Error() string {
	what := e.Path
	switch e.Path {
	case "k8s.io/kubernetes":
		what = TargetKubernetes
	case etcdServerModule:
		what = TargetEtcd
	case kwokModule:
		what = TargetKwok
	}
	return fmt.Sprintf("%s version %s is not available from the Go module proxy: %s", what, e.Version, e.Message)
}

// kubernetesGoMod fetches and parses k8s.io/kubernetes@version's go.mod.
func (g *GoBuilder) kubernetesGoMod(ctx context.Context, dir, version string) (*goModFile, error) {
	info, err := g.downloadModule(ctx, dir, "k8s.io/kubernetes", version)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(info.GoMod)
	if err != nil {
		return nil, fmt.Errorf("kubernetes %s go.mod: %w", version, err)
	}
	mf, err := parseGoMod(data)
	if err != nil {
		return nil, fmt.Errorf("kubernetes %s go.mod (%s): %w", version, info.GoMod, err)
	}
	return mf, nil
}

// EtcdVersionFor returns the etcd version kubeVersion pins: the version of
// go.etcd.io/etcd/server/v3 its go.mod requires (v1.37.2 -> v3.7.0).
func EtcdVersionFor(ctx context.Context, kubeVersion string) (string, error) {
	return (&GoBuilder{}).EtcdVersionFor(ctx, kubeVersion)
}

// EtcdVersionFor implements EtcdPinner using this builder's go command.
func (g *GoBuilder) EtcdVersionFor(ctx context.Context, kubeVersion string) (string, error) {
	if err := ValidateKubeVersion(kubeVersion); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(g.TempDir, "gangbench-k8smod-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	mf, err := g.kubernetesGoMod(ctx, dir, kubeVersion)
	if err != nil {
		return "", err
	}
	v, ok := mf.Require[etcdServerModule]
	if !ok {
		return "", fmt.Errorf("kubernetes %s go.mod does not require %s: cannot tell which etcd it pins", kubeVersion, etcdServerModule)
	}
	return v, nil
}

// KubernetesModule is the module path of Kubernetes' source, for callers that read files of it.
const KubernetesModule = kubernetesModule

const (
	kubernetesModule = "k8s.io/kubernetes"
	etcdServerModule = "go.etcd.io/etcd/server/v3"
	kwokModule       = "sigs.k8s.io/kwok"
)

// Build implements Builder.
func (g *GoBuilder) Build(ctx context.Context, t Target, outDir string, progress func(component string, done bool)) error {
	if progress == nil {
		progress = func(string, bool) {}
	}
	if err := validateVersion(t.Name, t.Version); err != nil {
		return err
	}
	outDir, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(g.TempDir, "gangbench-"+t.Name+"build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	switch t.Name {
	case TargetKubernetes:
		return g.buildKubernetes(ctx, t.Version, work, outDir, progress)
	case TargetEtcd:
		return g.buildEtcd(ctx, t.Version, work, outDir, progress)
	case TargetKwok:
		return g.buildKwok(ctx, t.Version, work, outDir, progress)
	case TargetKubernetesNode, TargetKubernetesPatched:
		return g.buildKubernetesBinaries(ctx, t, work, outDir, progress)
	case TargetPause:
		return g.buildPause(ctx, t.Version, work, outDir, progress)
	case TargetUpstreamE2E:
		return g.buildUpstreamE2E(ctx, t.Version, work, outDir, progress)
	case TargetSchedulerPerf:
		return g.buildSchedulerPerf(ctx, t, work, outDir, progress)
	}
	if r, ok := installRecipes[t.Name]; ok {
		return g.buildInstall(ctx, r, t.Version, work, outDir, progress)
	}
	return fmt.Errorf("unknown build target %q", t.Name)
}

// kubeLDFlags stamps the version the way upstream's build does, so
// `--version` and the apiserver's /version report it.
func kubeLDFlags(version string) string {
	major, minor, _, _ := splitVersion(version)
	return strings.Join([]string{
		"-s", "-w",
		"-X", "k8s.io/component-base/version.gitVersion=" + version,
		"-X", "k8s.io/component-base/version.gitMajor=" + major,
		"-X", "k8s.io/component-base/version.gitMinor=" + minor,
		"-X", "k8s.io/component-base/version.gitTreeState=clean",
		"-X", "k8s.io/client-go/pkg/version.gitVersion=" + version,
		"-X", "k8s.io/client-go/pkg/version.gitMajor=" + major,
		"-X", "k8s.io/client-go/pkg/version.gitMinor=" + minor,
	}, " ")
}

func (g *GoBuilder) buildKubernetes(ctx context.Context, version, work, outDir string, progress func(string, bool)) error {
	return g.buildKubernetesBinaries(ctx, Target{Name: TargetKubernetes, Version: version}, work, outDir, progress)
}

// buildKubernetesBinaries builds the binaries of a target made from k8s.io/kubernetes' cmd/ (the
// control plane, or the node side of a kind node image) in a wrapper module.
func (g *GoBuilder) buildKubernetesBinaries(ctx context.Context, t Target, work, outDir string, progress func(string, bool)) (err error) {
	version := t.Version
	const sources = "kubernetes sources"
	progress(sources, false)
	mf, err := g.kubernetesGoMod(ctx, work, version)
	if err != nil {
		return err
	}
	gomod := wrapperGoMod(version, mf)
	if t.Patch != nil {
		if t.SourceDir == "" {
			return fmt.Errorf("patch %s: no source dir to patch in", t.Patch.Name)
		}
		restore, perr := g.patchSource(ctx, work, t)
		if perr != nil {
			return perr
		}
		// The named result: a build whose source could not be put back must not look fine.
		defer func() { err = errors.Join(err, restore()) }()
		gomod += fmt.Sprintf("\nreplace %s => %s\n", kubernetesModule, t.SourceDir)
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	getArgs := []string{"get"}
	for _, b := range t.binaries() {
		getArgs = append(getArgs, "k8s.io/kubernetes/cmd/"+b+"@"+version)
	}
	if err := g.run(ctx, work, nil, getArgs...); err != nil {
		return err
	}
	progress(sources, true)

	stamp := version
	if t.Patch != nil && t.Patch.Stamp != "" {
		stamp = t.Patch.Stamp
	}
	ld := kubeLDFlags(stamp)
	build := []string{"build", "-trimpath", "-ldflags", ld}
	if t.Patch != nil && t.Patch.Cover != "" {
		build = append(build, "-cover", "-covermode=set", "-coverpkg="+t.Patch.Cover)
	}
	// One go build per binary so progress is per component; the shared
	// packages are compiled once and then come from the build cache.
	for _, b := range t.binaries() {
		progress(b, false)
		if err := g.run(ctx, work, nil, append(build, "-o", outDir+string(filepath.Separator), "k8s.io/kubernetes/cmd/"+b)...); err != nil {
			return err
		}
		progress(b, true)
	}
	return nil
}

// patchSource locks t.SourceDir and patches it (Patch.patchedSource); the returned func restores the
// pristine files and unlocks.
func (g *GoBuilder) patchSource(ctx context.Context, work string, t Target) (func() error, error) {
	mod, err := g.downloadModule(ctx, work, kubernetesModule, t.Version)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(t.SourceDir), 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(ctx, t.SourceDir+".lock", nil)
	if err != nil {
		return nil, err
	}
	restore, err := t.Patch.patchedSource(mod.Dir, t.SourceDir)
	if err != nil {
		unlock()
		return nil, err
	}
	return func() error { defer unlock(); return restore() }, nil
}

// etcdMain is the whole etcd command: `go install
// go.etcd.io/etcd/server/v3@v` is refused because etcd's go.mod has replace
// directives, so a throwaway module wraps etcdmain instead.
const etcdMain = `package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
`

func (g *GoBuilder) buildEtcd(ctx context.Context, version, work, outDir string, progress func(string, bool)) error {
	const sources = "etcd sources"
	progress(sources, false)
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte("module gangbench.local/etcdbuild\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(etcdMain), 0o644); err != nil {
		return err
	}
	// Fetch first so a bad version gets the same clear error as kubernetes.
	if _, err := g.downloadModule(ctx, work, etcdServerModule, version); err != nil {
		return err
	}
	if err := g.run(ctx, work, nil, "get", etcdServerModule+"@"+version); err != nil {
		return err
	}
	if err := g.run(ctx, work, nil, "mod", "tidy"); err != nil {
		return err
	}
	progress(sources, true)
	progress(EtcdBinary, false)
	if err := g.run(ctx, work, nil, "build", "-trimpath", "-o", filepath.Join(outDir, EtcdBinary), "."); err != nil {
		return err
	}
	progress(EtcdBinary, true)
	return nil
}

func (g *GoBuilder) buildKwok(ctx context.Context, version, work, outDir string, progress func(string, bool)) error {
	progress(KwokBinary, false)
	if _, err := g.downloadModule(ctx, work, kwokModule, version); err != nil {
		return err
	}
	// Run from an empty dir so no enclosing module interferes; GOBIN sends
	// the binary straight to outDir.
	if err := g.run(ctx, work, []string{"GOBIN=" + outDir}, "install", "-trimpath", kwokModule+"/cmd/kwok@"+version); err != nil {
		return err
	}
	progress(KwokBinary, true)
	return nil
}

// tailBuffer is an io.Writer keeping only the last max lines written.
type tailBuffer struct {
	max     int
	lines   []string
	partial []byte
}

// maxLineLen caps one kept line so a pathological line cannot eat memory.
const maxLineLen = 4096

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.partial = appendCapped(t.partial, p)
			break
		}
		t.partial = appendCapped(t.partial, p[:i])
		t.lines = append(t.lines, string(t.partial))
		t.partial = t.partial[:0]
		if len(t.lines) > t.max {
			t.lines = append(t.lines[:0], t.lines[len(t.lines)-t.max:]...)
		}
		p = p[i+1:]
	}
	return n, nil
}

func appendCapped(dst, src []byte) []byte {
	if room := maxLineLen - len(dst); room < len(src) {
		if room <= 0 {
			return dst
		}
		src = src[:room]
	}
	return append(dst, src...)
}

func (t *tailBuffer) String() string {
	lines := t.lines
	if len(t.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(t.partial))
	}
	if len(lines) > t.max {
		lines = lines[len(lines)-t.max:]
	}
	return strings.Join(lines, "\n")
}
