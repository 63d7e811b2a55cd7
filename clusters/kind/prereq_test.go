package kind

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters/k8sbin"
)

// fakeHost is a machine described by what is on it.
type fakeHost struct {
	euid     int
	path     map[string]bool // binaries on PATH
	seccomp  bool            // pkg-config knows libseccomp
	libc     bool            // the compiler has a libc.a
	cgroupFS int64
	free     uint64
	existing string // the only directory that exists, for the disk check's walk up
	cc       string // $CC
}

func (f fakeHost) host() Host {
	return Host{
		LookPath: func(file string) (string, error) {
			if f.path[file] {
				return "/usr/bin/" + file, nil
			}
			return "", errors.New("executable file not found in $PATH")
		},
		Geteuid: func() int { return f.euid },
		Getenv: func(k string) string {
			if k == "CC" {
				return f.cc
			}
			return ""
		},
		Output: func(_ context.Context, name string, args ...string) ([]byte, error) {
			switch {
			case name == "pkg-config" && strings.Join(args, " ") == "--modversion libseccomp":
				if f.seccomp {
					return []byte("2.6.0\n"), nil
				}
				return nil, errors.New("exit status 1")
			case len(args) == 1 && args[0] == "-print-file-name=libc.a":
				if f.libc {
					return []byte("/usr/lib/x86_64-linux-gnu/libc.a\n"), nil
				}
				return []byte("libc.a\n"), nil
			}
			return nil, errors.New("unexpected command " + name)
		},
		Statfs: func(path string) (FS, error) {
			if path == "/sys/fs/cgroup" {
				if f.cgroupFS == 0 {
					return FS{}, &fs.PathError{Op: "statfs", Path: path, Err: os.ErrNotExist}
				}
				return FS{Type: f.cgroupFS}, nil
			}
			if path != f.existing {
				return FS{}, &fs.PathError{Op: "statfs", Path: path, Err: os.ErrNotExist}
			}
			return FS{Avail: f.free}, nil
		},
	}
}

// ready is a root machine with everything the build needs.
func ready() fakeHost {
	return fakeHost{
		path:    map[string]bool{"apt-get": true, "debootstrap": true, "pkg-config": true, "gcc": true},
		seccomp: true, libc: true, cgroupFS: cgroup2Magic, free: 50 << 30, existing: "/cache",
	}
}

func names(ps []Prerequisite) string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	return strings.Join(n, ",")
}

func TestPrerequisites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*fakeHost)
		missing string // with a build
		cluster string // without one (a cached or given image)
		warn    string // reported, stopping nothing
		fixes   []string
	}{
		{name: "ready", edit: func(*fakeHost) {}},
		{
			name: "fresh Debian as root: the user's machine of issue 31",
			edit: func(f *fakeHost) {
				delete(f.path, "debootstrap")
				delete(f.path, "pkg-config")
				f.seccomp = false
			},
			missing: "debootstrap,pkg-config,libseccomp",
			fixes:   []string{"apt-get update && apt-get install -y --no-install-recommends debootstrap pkg-config libseccomp-dev"},
		},
		{
			name:    "libseccomp's development files alone missing",
			edit:    func(f *fakeHost) { f.seccomp = false },
			missing: "libseccomp",
			fixes:   []string{"apt-get update && apt-get install -y --no-install-recommends libseccomp-dev"},
		},
		{
			name: "not root, no compiler",
			edit: func(f *fakeHost) {
				f.euid = 1000
				delete(f.path, "gcc")
			},
			missing: "root,gcc",
			fixes: []string{
				"sudo apt-get update && sudo apt-get install -y --no-install-recommends gcc",
				"run as root (e.g. sudo make e2e), or give a prebuilt image with --node-image, or use --provider local",
			},
		},
		{
			name:    "$CC without a static libc",
			edit:    func(f *fakeHost) { f.cc, f.path["clang"], f.libc = "clang", true, false },
			missing: "static libc",
			fixes:   []string{"apt-get update && apt-get install -y --no-install-recommends libc6-dev"},
		},
		{
			name:    "no apt-get",
			edit:    func(f *fakeHost) { delete(f.path, "apt-get"); delete(f.path, "debootstrap") },
			missing: "debootstrap",
			fixes:   []string{"install debootstrap (Debian's names) with this system's package manager: there is no apt-get here"},
		},
		{
			name:    "cgroup v1 is fine",
			edit:    func(f *fakeHost) { f.cgroupFS = tmpfsMagic },
			missing: "",
		},
		{
			name:    "no cgroups stops kind even with a cached image",
			edit:    func(f *fakeHost) { f.cgroupFS = 0 },
			missing: "cgroups",
			cluster: "cgroups",
			fixes:   []string{"mount cgroup2 at /sys/fs/cgroup, or use --provider local"},
		},
		{
			name: "too little disk warns",
			edit: func(f *fakeHost) { f.free = MinBuildFreeBytes - 1 },
			warn: "disk space",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ready()
			tc.edit(&f)
			// The cache dir does not exist yet: its filesystem is found through its parents.
			ps := Prerequisites(context.Background(), f.host(), "/cache/gangbench/bin")
			missing := MissingPrerequisites(ps, true)
			if got := names(missing); got != tc.missing {
				t.Errorf("missing with a build = %q, want %q\n%+v", got, tc.missing, ps)
			}
			if got := names(MissingPrerequisites(ps, false)); got != tc.cluster {
				t.Errorf("missing without a build = %q, want %q", got, tc.cluster)
			}
			var warn []Prerequisite
			for _, p := range ps {
				if !p.OK && p.Warning {
					warn = append(warn, p)
				}
			}
			if got := names(warn); got != tc.warn {
				t.Errorf("warnings = %q, want %q", got, tc.warn)
			}
			if got := PrerequisiteFixes(missing); strings.Join(got, "\n") != strings.Join(tc.fixes, "\n") {
				t.Errorf("fixes = %q, want %q", got, tc.fixes)
			}
			for _, p := range ps {
				if p.Detail == "" {
					t.Errorf("%s has no detail", p.Name)
				}
				if !p.OK && p.Fix == "" {
					t.Errorf("%s is missing without a fix", p.Name)
				}
			}
		})
	}
}

func TestPrerequisiteErrorLeadsWithTheFix(t *testing.T) {
	f := ready()
	f.seccomp = false
	err := &PrerequisiteError{Missing: MissingPrerequisites(Prerequisites(context.Background(), f.host(), "/cache"), true)}
	msg := err.Error()
	for _, want := range []string{"missing libseccomp (pkg-config libseccomp not found", "to fix: apt-get update && apt-get install -y --no-install-recommends libseccomp-dev"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

func TestCheckBuildPrerequisitesIgnoresClusterOnes(t *testing.T) {
	f := ready()
	f.cgroupFS = 0
	h := f.host()
	if err := checkBuildPrerequisites(context.Background(), NodeImageOptions{Host: &h, Bins: k8sbinOpts("/cache")}); err != nil {
		t.Errorf("cgroups are not the build's: %v", err)
	}
	f.path = map[string]bool{"apt-get": true, "pkg-config": true, "gcc": true}
	h = f.host()
	var pe *PrerequisiteError
	if err := checkBuildPrerequisites(context.Background(), NodeImageOptions{Host: &h, Bins: k8sbinOpts("/cache")}); !errors.As(err, &pe) || names(pe.Missing) != "debootstrap" {
		t.Errorf("err = %v, want a PrerequisiteError for debootstrap", err)
	}
}

func k8sbinOpts(cache string) k8sbin.Options { return k8sbin.Options{CacheDir: cache} }

// Blockers looks for a cached image (an engine call) only when a build prerequisite is missing;
// these cases never reach it.
func TestBlockers(t *testing.T) {
	ctx := context.Background()
	o := NodeImageOptions{Bins: k8sbinOpts("/cache")}
	f := ready()
	if got := Blockers(ctx, f.host(), o, ""); len(got) != 0 {
		t.Errorf("ready machine: blockers %q", names(got))
	}
	f.cgroupFS = 0
	if got := names(Blockers(ctx, f.host(), o, "")); got != "cgroups" {
		t.Errorf("no cgroups: blockers %q, want cgroups", got)
	}
	f = ready()
	delete(f.path, "debootstrap")
	if got := Blockers(ctx, f.host(), o, "kindest/node:v1.37.0"); len(got) != 0 {
		t.Errorf("with --node-image the build's prerequisites do not count: blockers %q", names(got))
	}
}
