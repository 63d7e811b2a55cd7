package providers

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters/kind"
)

// engine is a container engine CLI stand-in: it answers `info` when up, and runs containers
// (`run`) when runs; everything else (loading and removing the probe image) succeeds.
func engine(up, runs bool) kind.Runner {
	return func(_ context.Context, _ io.Writer, name string, args ...string) error {
		switch {
		case name != "docker":
			return &exec.Error{Name: name, Err: exec.ErrNotFound}
		case args[0] == "info" && !up, args[0] == "run" && !runs:
			return &kind.CommandError{Args: append([]string{name}, args...), Err: errors.New("exit status 125"), Stderr: "Error: permission denied\n"}
		}
		return nil
	}
}

// host is a machine with cgroups v2, or without a cgroup hierarchy.
func host(cgroups bool) *kind.Host {
	return &kind.Host{
		LookPath: func(f string) (string, error) { return "/usr/bin/" + f, nil },
		Geteuid:  func() int { return 0 },
		Getenv:   func(string) string { return "" },
		Output: func(context.Context, string, ...string) ([]byte, error) {
			return []byte("/usr/lib/libc.a\n"), nil
		},
		Statfs: func(path string) (kind.FS, error) {
			if path == "/sys/fs/cgroup" && !cgroups {
				return kind.FS{}, errors.New("no such file or directory")
			}
			return kind.FS{Type: 0x63677270, Avail: 100 << 30}, nil
		},
	}
}

// TestDetect: auto chooses kind only when an engine answers, runs kind nodes and the machine has
// what kind needs; otherwise the default provider, saying why. The node image is given, so that
// nothing is looked up in a cache (or compiled to find its key).
func TestDetect(t *testing.T) {
	tests := []struct {
		name    string
		run     kind.Runner
		cgroups bool
		want    string
		reason  string
		blocked bool
	}{
		{"no engine", engine(false, false), true, Default, "no container engine answers", false},
		{"engine refuses kind nodes", engine(true, false), true, Default, "docker answers but cannot run kind nodes", false},
		{"machine lacks cgroups", engine(true, true), false, Default, "docker answers, but kind cannot work here: missing cgroups", true},
		{"kind works", engine(true, true), true, kind.ProviderName, "docker answers and runs privileged containers", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Detect(context.Background(), DetectOptions{Engine: "docker", NodeImage: "kindest/node:given", run: tt.run, host: host(tt.cgroups)})
			if c.Provider != tt.want || !strings.Contains(c.Reason, tt.reason) || c.Blocked != tt.blocked {
				t.Errorf("Detect = %+v, want provider %s, blocked %v, a reason containing %q", c, tt.want, tt.blocked, tt.reason)
			}
		})
	}
}
