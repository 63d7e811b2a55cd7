package k8sbin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeNotAScheduler is the issue 7 audit of a --scheduler-binary that is not a kube-scheduler:
// every kind of wrong file gets an error naming it and saying what is wrong, and Ensure refuses it
// before building or starting anything.
func TestProbeNotAScheduler(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	trueBin := "/bin/true"
	if _, err := os.Stat(trueBin); err != nil {
		trueBin = writeScript(t, filepath.Join(dir, "true"), "#!/bin/sh\n", 0o755)
	}
	for _, tc := range []struct {
		name, path string
		want       []string // substrings of the error, besides the path
	}{
		// GNU true answers --version with its own; busybox's prints nothing. Either is refused.
		{"/bin/true", trueBin, []string{"--version printed no recognisable version; output: "}},
		{"prints nothing", writeScript(t, filepath.Join(dir, "silent"), "#!/bin/sh\nexit 0\n", 0o755),
			[]string{"--version printed no recognisable version; output: (no output)"}},
		{"prints something else", writeScript(t, filepath.Join(dir, "other"), "#!/bin/sh\necho 'usage: other [--verbose]'\n", 0o755),
			[]string{"--version printed no recognisable version; output: usage: other [--verbose]"}},
		{"fails", writeScript(t, filepath.Join(dir, "fails"), "#!/bin/sh\necho 'flag provided but not defined: -version' >&2\nexit 2\n", 0o755),
			[]string{"--version failed (exit status 2); output: flag provided but not defined: -version"}},
		{"not executable", writeScript(t, filepath.Join(dir, "noexec"), "#!/bin/sh\necho Kubernetes v1.37.2\n", 0o644), []string{"is not executable (mode -rw-r--r--)"}},
		{"not a program", writeScript(t, filepath.Join(dir, "data"), "just text, no interpreter line\n", 0o755), []string{"--version failed", "exec format error"}},
		{"empty", writeScript(t, filepath.Join(dir, "empty"), "", 0o755), []string{"--version failed", "exec format error"}},
		{"a directory", dir, []string{"is not a regular file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for probe, fn := range map[string]func(context.Context, string) (string, error){"ProbeVersion": ProbeVersion, "ProbeKubeVersion": ProbeKubeVersion} {
				v, err := fn(ctx, tc.path)
				if err == nil {
					t.Fatalf("%s(%s) = %q, want an error", probe, tc.path, v)
				}
				for _, w := range append([]string{tc.path}, tc.want...) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not say %q", probe, err, w)
					}
				}
			}
		})
	}

	// Real programs, just not a Kubernetes component: ProbeVersion reads their versions (it is used
	// for etcd and kwok too), ProbeKubeVersion refuses them.
	for _, bin := range []string{EtcdBinary, KwokBinary} {
		p := writeScript(t, filepath.Join(dir, "as-"+bin), fakeScript(bin, "v3.7.0"), 0o755)
		if _, err := ProbeVersion(ctx, p); err != nil {
			t.Errorf("ProbeVersion(%s): %v", bin, err)
		}
		_, err := ProbeKubeVersion(ctx, p)
		if err == nil || !strings.Contains(err.Error(), p+` is not a Kubernetes component (kube-scheduler prints "Kubernetes vX.Y.Z"); --version printed: `) {
			t.Errorf("ProbeKubeVersion(%s): %v", bin, err)
		}
	}
	sched := writeScript(t, filepath.Join(dir, "kube-scheduler"), fakeScript(SchedulerBinaryName, "v1.37.2-mutant"), 0o755)
	if v, err := ProbeKubeVersion(ctx, sched); err != nil || v != "v1.37.2-mutant" {
		t.Errorf("ProbeKubeVersion(kube-scheduler) = %q, %v", v, err)
	}

	// Ensure refuses such an override before it builds anything.
	for _, p := range []string{trueBin, filepath.Join(dir, "as-etcd")} {
		fb := &fakeBuilder{}
		_, err := Ensure(ctx, "v1.37.2", Options{CacheDir: t.TempDir(), SchedulerBinary: p, Builder: fb})
		if err == nil || !strings.HasPrefix(err.Error(), "scheduler binary override: ") || !strings.Contains(err.Error(), p) {
			t.Errorf("Ensure with scheduler %s: %v", p, err)
		}
		if n := fb.total(); n != 0 {
			t.Errorf("Ensure with scheduler %s built %d targets before refusing it", p, n)
		}
	}
}
