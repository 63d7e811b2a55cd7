package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gangbench/gangbench/clusters/k8sbin"
)

// Prerequisite is one thing this machine must provide for the kind provider. Prerequisites checks
// them all without building anything, so `gangbench doctor`, `--provider auto` and EnsureNodeImage
// judge a machine the same way.
type Prerequisite struct {
	// Name is what was checked ("debootstrap", "libseccomp").
	Name string
	// OK says it is there; Detail says what was found, or what needs it when it is missing.
	OK     bool
	Detail string
	// Packages are the Debian packages that provide it (empty when no package does).
	Packages []string
	// Fix is the exact command (or, where no command can, the step) that provides it; "" when OK.
	Fix string
	// ForBuild marks what only building the node image needs: a node image in the engine or the
	// cache, or one given with --node-image, makes it moot.
	ForBuild bool
	// Warning marks a check whose shortfall is reported but stops nothing (MissingPrerequisites
	// leaves it out): free space is an estimate, and a build that reuses cached parts needs less.
	Warning bool
}

// FS is what Prerequisites needs to know about a filesystem.
type FS struct {
	// Type is statfs's f_type (it tells cgroup v2 from v1's tmpfs).
	Type int64
	// Avail is the space an unprivileged user may still write, in bytes.
	Avail uint64
}

// Host is how Prerequisites looks at the machine; tests replace the fields with fakes.
type Host struct {
	LookPath func(file string) (string, error)
	Geteuid  func() int
	Getenv   func(key string) string
	// Output runs name with args and returns its standard output.
	Output func(ctx context.Context, name string, args ...string) ([]byte, error)
	// Statfs describes the filesystem holding path.
	Statfs func(path string) (FS, error)
}

// ThisHost is the Host of this machine.
func ThisHost() Host {
	return Host{
		LookPath: exec.LookPath,
		Geteuid:  os.Geteuid,
		Getenv:   os.Getenv,
		Output: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).Output()
		},
		Statfs: func(path string) (FS, error) {
			var st syscall.Statfs_t
			if err := syscall.Statfs(path, &st); err != nil {
				return FS{}, err
			}
			return FS{Type: int64(st.Type), Avail: st.Bavail * uint64(st.Bsize)}, nil
		},
	}
}

// MinBuildFreeBytes is the free space the node image build wants in the cache dir's filesystem.
// What lands there on a cold build of one version: about 1 GiB of control-plane and node binaries,
// the Debian root filesystem (its tree and its tarball while it is made, under 1 GiB), the node
// image archive (about 1.5 GiB, written to a temporary file and renamed) and, when the engine keeps
// its images on the same filesystem (the usual /var/lib/docker on /), the loaded image again.
// That is about 5 GiB; the Go build and module caches of a cold Kubernetes build add a few more
// and usually share the filesystem too. 10 GiB leaves room for those. Below it doctor and the
// build warn rather than refuse: a build that reuses cached parts needs far less.
const MinBuildFreeBytes = 10 << 30

// Filesystem magic numbers (statfs(2)): /sys/fs/cgroup is cgroup2 on a v2 host and a tmpfs
// holding the v1 hierarchies otherwise.
const (
	cgroup2Magic = 0x63677270
	tmpfsMagic   = 0x01021994
)

// Prerequisites checks what the kind provider needs here besides a container engine (whose
// answer and privileges DetectEngine and ProbeEngine check): cgroups for the node containers and,
// for building the node image offline, root and debootstrap (the Debian root filesystem), a C
// compiler with pkg-config and libseccomp's development files (runc is built with cgo and the
// seccomp tag, whose binding finds the library with `pkg-config libseccomp`), a static C library
// (the pause program is linked -static) and free space in cacheDir's filesystem.
func Prerequisites(ctx context.Context, h Host, cacheDir string) []Prerequisite {
	root := h.Geteuid() == 0
	_, aptErr := h.LookPath("apt-get")
	pkg := func(p Prerequisite, pkgs ...string) Prerequisite {
		p.ForBuild = true
		if !p.OK {
			p.Packages = pkgs
			p.Fix = installCommand(pkgs, root, aptErr == nil)
		}
		return p
	}
	var out []Prerequisite

	cg := Prerequisite{Name: "cgroups"}
	switch fs, err := h.Statfs("/sys/fs/cgroup"); {
	case err != nil:
		cg.Detail, cg.Fix = "no cgroup hierarchy at /sys/fs/cgroup ("+err.Error()+"): kind node containers need one", "mount cgroup2 at /sys/fs/cgroup, or use --provider local"
	case fs.Type == cgroup2Magic:
		cg.OK, cg.Detail = true, "v2"
	case fs.Type == tmpfsMagic:
		cg.OK, cg.Detail = true, "v1 (kind's kubelets are configured with failCgroupV1=false for it)"
	default:
		cg.Detail, cg.Fix = fmt.Sprintf("/sys/fs/cgroup is neither cgroup2 nor v1's tmpfs (filesystem type %#x)", fs.Type), "mount cgroup2 at /sys/fs/cgroup, or use --provider local"
	}
	out = append(out, cg)

	r := Prerequisite{Name: "root", OK: root, ForBuild: true, Detail: "running as root"}
	if !root {
		r.Detail = fmt.Sprintf("running as uid %d: debootstrap needs root to build the node image's root filesystem", h.Geteuid())
		r.Fix = "run as root (e.g. sudo make e2e), or give a prebuilt image with --node-image, or use --provider local"
	}
	out = append(out, r)

	look := func(name, what string, pkgs ...string) bool {
		p := Prerequisite{Name: name}
		if path, err := h.LookPath(name); err == nil {
			p.OK, p.Detail = true, path
		} else {
			p.Detail = "not on PATH: " + what
		}
		out = append(out, pkg(p, pkgs...))
		return p.OK
	}
	look("debootstrap", "it builds the node image's Debian root filesystem", "debootstrap")
	hasPkgConfig := look("pkg-config", "runc's seccomp binding finds libseccomp with it", "pkg-config")

	seccomp := Prerequisite{Name: "libseccomp"}
	switch {
	case !hasPkgConfig:
		seccomp.Detail = "cannot be looked up without pkg-config; runc is built against libseccomp's development files"
	default:
		if v, err := h.Output(ctx, "pkg-config", "--modversion", "libseccomp"); err == nil {
			seccomp.OK, seccomp.Detail = true, "development files "+strings.TrimSpace(string(v))
		} else {
			seccomp.Detail = "pkg-config libseccomp not found: runc is built against libseccomp's development files"
		}
	}
	out = append(out, pkg(seccomp, "libseccomp-dev"))

	// cgo and the pause build use $CC when set, gcc otherwise.
	cc := h.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if look(cc, "runc (cgo) and the pause program are compiled with it", "gcc") {
		libc := Prerequisite{Name: "static libc"}
		// gcc prints the bare name back when it has no such file.
		if p, err := h.Output(ctx, cc, "-print-file-name=libc.a"); err == nil && filepath.IsAbs(strings.TrimSpace(string(p))) {
			libc.OK, libc.Detail = true, strings.TrimSpace(string(p))
		} else {
			libc.Detail = "no libc.a: the pause program is linked statically"
		}
		out = append(out, pkg(libc, "libc6-dev"))
	}

	out = append(out, diskPrerequisite(h, cacheDir))
	return out
}

// diskPrerequisite checks the free space of the filesystem that holds (or will hold) cacheDir.
func diskPrerequisite(h Host, cacheDir string) Prerequisite {
	p := Prerequisite{Name: "disk space", ForBuild: true, Warning: true}
	// The cache dir may not exist yet: its nearest existing parent is on the same filesystem.
	dir := cacheDir
	for {
		fs, err := h.Statfs(dir)
		if err == nil {
			gib := float64(fs.Avail) / (1 << 30)
			p.OK = fs.Avail >= MinBuildFreeBytes
			p.Detail = fmt.Sprintf("%.1f GiB free in %s (the build wants %d GiB)", gib, dir, MinBuildFreeBytes>>30)
			if !p.OK {
				p.Fix = fmt.Sprintf("free space in %s, or set GANGBENCH_CACHE_DIR (or --cache-dir) to a directory on a larger filesystem", dir)
			}
			return p
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, os.ErrNotExist) || parent == dir {
			p.Detail = fmt.Sprintf("cannot tell the free space of %s: %v", cacheDir, err)
			p.Fix = "check that " + cacheDir + " can be created and written, or set GANGBENCH_CACHE_DIR"
			return p
		}
		dir = parent
	}
}

// installCommand is the command that installs pkgs on this machine.
func installCommand(pkgs []string, root, apt bool) string {
	if !apt {
		return "install " + strings.Join(pkgs, " ") + " (Debian's names) with this system's package manager: there is no apt-get here"
	}
	// update first: a fresh machine (or container) often has no package lists yet.
	sudo := ""
	if !root {
		sudo = "sudo "
	}
	return sudo + "apt-get update && " + sudo + "apt-get install -y --no-install-recommends " + strings.Join(pkgs, " ")
}

// MissingPrerequisites are the prerequisites in ps that are not met, warnings aside; build says
// whether the node image must be built here (else those only a build needs do not count).
func MissingPrerequisites(ps []Prerequisite, build bool) []Prerequisite {
	var out []Prerequisite
	for _, p := range ps {
		if !p.OK && !p.Warning && (build || !p.ForBuild) {
			out = append(out, p)
		}
	}
	return out
}

// PrerequisiteFixes are the commands that fix missing: the packages in one install command, then
// every other fix once, in order.
func PrerequisiteFixes(missing []Prerequisite) []string {
	var pkgs, others []string
	// The first package's command says how this machine installs packages; it installs them all.
	var install Prerequisite
	seen := map[string]bool{}
	for _, p := range missing {
		if len(p.Packages) > 0 {
			for _, k := range p.Packages {
				if !seen[k] {
					seen[k] = true
					pkgs = append(pkgs, k)
				}
			}
			if install.Fix == "" {
				install = p
			}
			continue
		}
		if p.Fix != "" && !seen[p.Fix] {
			seen[p.Fix] = true
			others = append(others, p.Fix)
		}
	}
	var out []string
	if len(pkgs) > 0 {
		out = append(out, strings.Replace(install.Fix, strings.Join(install.Packages, " "), strings.Join(pkgs, " "), 1))
	}
	return append(out, others...)
}

// PrerequisiteError says what this machine lacks for kind, and how to fix it.
type PrerequisiteError struct {
	// What could not be done; "" means building the node image.
	What    string
	Missing []Prerequisite
}

func (e *PrerequisiteError) Error() string {
	var what []string
	for _, p := range e.Missing {
		what = append(what, p.Name+" ("+p.Detail+")")
	}
	head := e.What
	if head == "" {
		head = "the kind node image cannot be built on this machine"
	}
	return head + ": missing " + strings.Join(what, "; ") +
		"\nto fix: " + strings.Join(PrerequisiteFixes(e.Missing), "\n  and: ")
}

// Blockers are the missing prerequisites that keep the kind provider from working here (none: it
// can): those of the cluster itself, and those of the node image build unless an image is given
// (explicit, as --node-image) or the one for o is already in o.Engine or the cache.
func Blockers(ctx context.Context, h Host, o NodeImageOptions, explicit string) []Prerequisite {
	// An unresolvable cache dir leaves the disk check looking at the working directory's
	// filesystem; the build itself reports that error.
	cache, _ := k8sbin.CacheDirOf(o.Bins)
	ps := Prerequisites(ctx, h, cache)
	build := explicit == ""
	if build && len(MissingPrerequisites(ps, true)) > len(MissingPrerequisites(ps, false)) {
		// Only now, as it compiles the device plugin to know the image's key.
		if _, err := CachedNodeImage(ctx, o); err == nil {
			build = false
		}
	}
	return MissingPrerequisites(ps, build)
}
