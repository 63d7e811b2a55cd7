// Package k8sbin produces the control-plane binaries a local gangbench
// cluster runs: kube-apiserver, kube-controller-manager and kube-scheduler
// for a given Kubernetes version, plus the etcd that version pins and the
// kwok controller.
//
// Nothing is downloaded as a prebuilt binary: the only thing reachable is the
// Go module proxy, so every binary is compiled from module source
// (k8s.io/kubernetes, go.etcd.io/etcd/server/v3, sigs.k8s.io/kwok) by a
// Builder, and the results are cached under the user cache dir, keyed by
// component name and version:
//
//	<cache>/kubernetes/<version>/{kube-apiserver,kube-controller-manager,kube-scheduler}
//	<cache>/etcd/<version>/etcd
//	<cache>/kwok/<version>/kwok
//
// Builds are atomic (build into a temp dir, then rename) and serialised per
// version by an flock, so concurrent gangbench processes build a version once.
package k8sbin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	// DefaultKubernetesVersion is built when Ensure is given "".
	DefaultKubernetesVersion = "v1.37.2"
	// DefaultKwokVersion is the kwok controller built when Options.KwokVersion is "".
	DefaultKwokVersion = "v0.8.0"

	// Target names understood by Builders and used as cache sub-directories.
	TargetKubernetes = "kubernetes"
	TargetEtcd       = "etcd"
	TargetKwok       = "kwok"

	// Targets of a kind node image (see nodetargets.go): the node-side Kubernetes binaries, the
	// container runtime, CNI plugins, crictl and the pause program.
	TargetKubernetesNode = "kubernetes-node"
	TargetContainerd     = "containerd"
	TargetRunc           = "runc"
	TargetCNIPlugins     = "cni-plugins"
	TargetCriTools       = "cri-tools"
	TargetPause          = "pause"

	// Binary names.
	APIServerBinary         = "kube-apiserver"
	ControllerManagerBinary = "kube-controller-manager"
	SchedulerBinaryName     = "kube-scheduler"
	EtcdBinary              = "etcd"
	KwokBinary              = "kwok"

	// CacheDirEnv names the environment variable consulted when
	// Options.CacheDir is empty.
	CacheDirEnv = "GANGBENCH_CACHE_DIR"
)

// Set holds the absolute paths of a complete, runnable set of binaries and
// the versions they were built for.
type Set struct {
	KubernetesVersion, EtcdVersion, KwokVersion string

	APIServer, ControllerManager, Scheduler, Etcd, Kwok string
}

// Target is one thing a Builder can build. Name is TargetKubernetes (which
// yields the three kube binaries), TargetEtcd or TargetKwok.
type Target struct {
	Name    string
	Version string
	// Patch is set for TargetKubernetesPatched only: the change built into Patch.Binary, from a
	// copy of the source kept in SourceDir (one per version, locked while a build uses it).
	Patch     *Patch
	SourceDir string
	// Package is set for TargetSchedulerPerf only: the package below SchedulerPerfRoot to build.
	Package string
}

// binaries lists what t produces: Binaries(t.Name), or the one patched binary.
func (t Target) binaries() []string {
	switch t.Name {
	case TargetKubernetesPatched:
		if t.Patch == nil {
			return nil
		}
		return []string{t.Patch.Binary}
	case TargetUpstreamE2E:
		return []string{UpstreamE2EBinary}
	case TargetSchedulerPerf:
		return []string{SchedulerPerfBinary}
	}
	return Binaries(t.Name)
}

// cacheKey is t's directory under <cache>/<name>: the version, and for a patched build the patch's
// digest as well.
func (t Target) cacheKey() string {
	switch {
	case t.Patch != nil:
		return t.Version + "-" + t.Patch.Digest()
	case t.Name == TargetUpstreamE2E:
		return t.Version + "-" + upstreamE2EDigest()
	case t.Name == TargetSchedulerPerf:
		return t.Version + "-" + strings.ReplaceAll(t.Package, "/", "-") + "-r" + schedPerfRecipe
	}
	return t.Version
}

// Builder compiles a Target into outDir. It must leave every binary named by
// Binaries(t.Name) as an executable file directly in outDir. progress is
// called with done=false when a component starts and done=true when it
// finishes; components that were started but never finished are shown as
// failed when Build returns an error. progress is never nil.
//
// Builder is the seam tests replace: GoBuilder runs real `go` commands.
type Builder interface {
	Build(ctx context.Context, t Target, outDir string, progress func(component string, done bool)) error
}

// EtcdPinner is optionally implemented by a Builder that can tell which etcd
// version a Kubernetes version pins. GoBuilder implements it; for Builders
// that do not, Ensure falls back to EtcdVersionFor (which runs `go`).
type EtcdPinner interface {
	EtcdVersionFor(ctx context.Context, kubeVersion string) (string, error)
}

// Options tunes Ensure. The zero value builds everything into the default
// cache dir with a GoBuilder and prints no progress.
type Options struct {
	// CacheDir is the cache root. Empty means $GANGBENCH_CACHE_DIR, or
	// os.UserCacheDir()/gangbench/bin when that is unset too.
	CacheDir string

	// KubeBinDir, when set, supplies kube-apiserver, kube-controller-manager
	// and kube-scheduler: all three must be present and executable there (a
	// missing one is an error naming the dir and the file, not a build,
	// because mixing a user's binaries with stock ones silently would make
	// results misleading). etcd and kwok are taken from the dir when present
	// (their versions are probed with --version) and built/cached otherwise.
	KubeBinDir string

	// SchedulerBinary overrides the scheduler only (a fork or a mutant). It
	// must exist and be executable.
	SchedulerBinary string

	// EtcdVersion overrides the etcd version (normally the one the
	// Kubernetes version pins in its go.mod), e.g. "v3.7.0".
	EtcdVersion string

	// KwokVersion is the kwok controller version; "" means DefaultKwokVersion.
	KwokVersion string

	// Builder builds missing targets; nil means &GoBuilder{}.
	Builder Builder

	// Progress receives build progress. On a terminal it shows one live
	// line per component (spinner + elapsed time); otherwise one plain line
	// when a component starts and one when it finishes. nil means silent.
	Progress io.Writer
}

var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// ValidateKubeVersion checks that v looks like vMAJOR.MINOR.PATCH with an
// optional pre-release suffix (v1.37.2, v1.38.0-rc.1). The version is used
// as a directory name and in module queries, so anything else is rejected
// before building.
func ValidateKubeVersion(v string) error {
	return validateVersion("kubernetes", v)
}

func validateVersion(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s version is empty: want vMAJOR.MINOR.PATCH, e.g. v1.37.2", what)
	}
	if !versionRE.MatchString(v) {
		hint := ""
		if versionRE.MatchString("v" + v) {
			hint = fmt.Sprintf(" (did you mean v%s?)", v)
		}
		return fmt.Errorf("invalid %s version %q: want vMAJOR.MINOR.PATCH with an optional -prerelease suffix, e.g. v1.37.2%s", what, v, hint)
	}
	return nil
}

// splitVersion returns major, minor, patch and the pre-release suffix
// (including its leading '-') of a version that passed validateVersion.
func splitVersion(v string) (major, minor, patch, pre string) {
	// Build metadata ("+0123abcd", as git describe stamps a fork) says nothing of the release.
	v, _, _ = strings.Cut(v, "+")
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return "", "", "", ""
	}
	return m[1], m[2], m[3], m[4]
}

// Binaries lists the binaries a target produces, in build order (the
// scheduler first: it is what most users need and the first to be ready).
func Binaries(name string) []string {
	switch name {
	case TargetKubernetes:
		return []string{SchedulerBinaryName, APIServerBinary, ControllerManagerBinary}
	case TargetEtcd:
		return []string{EtcdBinary}
	case TargetKwok:
		return []string{KwokBinary}
	}
	return nodeBinaries(name)
}

// DefaultCacheDir returns $GANGBENCH_CACHE_DIR if set, else
// os.UserCacheDir()/gangbench/bin.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache dir: set %s or Options.CacheDir: %w", CacheDirEnv, err)
	}
	return filepath.Join(base, "gangbench", "bin"), nil
}

// Ensure returns a complete set of binaries for kubeVersion ("" means
// DefaultKubernetesVersion), building and caching whatever is missing.
func Ensure(ctx context.Context, kubeVersion string, opts Options) (set *Set, err error) {
	if kubeVersion == "" {
		kubeVersion = DefaultKubernetesVersion
	}
	if err := ValidateKubeVersion(kubeVersion); err != nil {
		return nil, err
	}
	kwokVersion := opts.KwokVersion
	if kwokVersion == "" {
		kwokVersion = DefaultKwokVersion
	}
	if err := validateVersion("kwok", kwokVersion); err != nil {
		return nil, err
	}
	if opts.EtcdVersion != "" {
		if err := validateVersion("etcd", opts.EtcdVersion); err != nil {
			return nil, err
		}
	}

	cacheDir := opts.CacheDir
	if cacheDir == "" {
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	if cacheDir, err = filepath.Abs(cacheDir); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}

	builder := opts.Builder
	if builder == nil {
		builder = &GoBuilder{}
	}

	set = &Set{KubernetesVersion: kubeVersion, KwokVersion: kwokVersion}

	// Validate the cheap user-supplied overrides before any long build, so
	// a typo fails in milliseconds rather than after 20 minutes.
	var scheduler string
	if opts.SchedulerBinary != "" {
		if scheduler, err = checkExecutable(opts.SchedulerBinary); err != nil {
			return nil, fmt.Errorf("scheduler binary override: %w", err)
		}
		// Running it once is cheap next to a build, and a binary that is not a kube-scheduler
		// (/bin/true, an etcd, a wrapper that prints something else) would otherwise only fail
		// once a cluster had been started around it.
		if _, err := ProbeKubeVersion(ctx, scheduler); err != nil {
			return nil, fmt.Errorf("scheduler binary override: %w", err)
		}
	}
	var etcdFromDir, kwokFromDir string
	if opts.KubeBinDir != "" {
		dir, err := filepath.Abs(opts.KubeBinDir)
		if err != nil {
			return nil, fmt.Errorf("kube bin dir %s: %w", opts.KubeBinDir, err)
		}
		paths := map[string]string{}
		for _, b := range Binaries(TargetKubernetes) {
			p, err := checkExecutable(filepath.Join(dir, b))
			if err != nil {
				return nil, fmt.Errorf("kube bin dir %s: %s: %w", dir, b, err)
			}
			paths[b] = p
		}
		set.APIServer, set.ControllerManager, set.Scheduler = paths[APIServerBinary], paths[ControllerManagerBinary], paths[SchedulerBinaryName]
		// etcd and kwok are optional in the dir; a present but broken one
		// is an error rather than silently replaced by a cached one.
		if p, ok := optionalExecutable(filepath.Join(dir, EtcdBinary)); ok {
			etcdFromDir = p
		}
		if p, ok := optionalExecutable(filepath.Join(dir, KwokBinary)); ok {
			kwokFromDir = p
		}
	}

	rep := newReporter(opts.Progress, false)
	defer rep.close()

	if set.Scheduler == "" {
		dir, err := ensureTarget(ctx, cacheDir, Target{Name: TargetKubernetes, Version: kubeVersion}, builder, rep)
		if err != nil {
			return nil, err
		}
		set.APIServer = filepath.Join(dir, APIServerBinary)
		set.ControllerManager = filepath.Join(dir, ControllerManagerBinary)
		set.Scheduler = filepath.Join(dir, SchedulerBinaryName)
	}
	if scheduler != "" {
		set.Scheduler = scheduler
	}

	switch {
	case etcdFromDir != "":
		v, err := ProbeVersion(ctx, etcdFromDir)
		if err != nil {
			return nil, fmt.Errorf("kube bin dir %s: %w", opts.KubeBinDir, err)
		}
		set.Etcd, set.EtcdVersion = etcdFromDir, v
	default:
		v := opts.EtcdVersion
		if v == "" {
			v = readEtcdPin(cacheDir, kubeVersion)
		}
		if v == "" {
			if p, ok := builder.(EtcdPinner); ok {
				v, err = p.EtcdVersionFor(ctx, kubeVersion)
			} else {
				v, err = EtcdVersionFor(ctx, kubeVersion)
			}
			if err != nil {
				return nil, err
			}
			if err := validateVersion("etcd", v); err != nil {
				return nil, fmt.Errorf("etcd version pinned by kubernetes %s: %w", kubeVersion, err)
			}
			writeEtcdPin(cacheDir, kubeVersion, v)
		}
		dir, err := ensureTarget(ctx, cacheDir, Target{Name: TargetEtcd, Version: v}, builder, rep)
		if err != nil {
			return nil, err
		}
		set.Etcd, set.EtcdVersion = filepath.Join(dir, EtcdBinary), v
	}

	if kwokFromDir != "" {
		v, err := ProbeVersion(ctx, kwokFromDir)
		if err != nil {
			return nil, fmt.Errorf("kube bin dir %s: %w", opts.KubeBinDir, err)
		}
		set.Kwok, set.KwokVersion = kwokFromDir, v
	} else {
		dir, err := ensureTarget(ctx, cacheDir, Target{Name: TargetKwok, Version: kwokVersion}, builder, rep)
		if err != nil {
			return nil, err
		}
		set.Kwok = filepath.Join(dir, KwokBinary)
	}
	return set, nil
}

// checkExecutable returns the absolute path of p if it is an executable
// regular file (symlinks followed), or an error saying what is wrong with it.
func checkExecutable(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s does not exist", abs)
	}
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (mode %s)", abs, fi.Mode())
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not executable (mode %s)", abs, fi.Mode())
	}
	return abs, nil
}

// optionalExecutable reports whether p exists at all and returns its
// absolute path. Existence alone decides "present": a present but broken
// file is then reported by ProbeVersion (which names it) instead of being
// silently replaced by a cached build.
func optionalExecutable(p string) (string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	if _, err := os.Lstat(abs); err != nil {
		return "", false
	}
	return abs, true
}

// isExecutableFile is checkExecutable as a predicate, for cache hit checks.
func isExecutableFile(p string) bool {
	_, err := checkExecutable(p)
	return err == nil
}

// quoteArgs renders argv so that it can be pasted into a shell.
func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`;&|<>*?()[]{}#~") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}
