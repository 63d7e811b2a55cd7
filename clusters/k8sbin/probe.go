package k8sbin

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// probeTimeout bounds `--version`: a binary that starts serving instead of
// printing its version (a mistaken path, a wrapper script) must not hang
// the harness.
const probeTimeout = 20 * time.Second

// versionPatterns recognise the --version output of the binaries this
// package deals with. Versions are returned with a leading "v" whatever the
// binary prints, so they compare equal to module versions.
var versionPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\bKubernetes v?(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)`),    // kube-apiserver, -scheduler, ...
	regexp.MustCompile(`\betcd Version: v?(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)`), // etcd
	regexp.MustCompile(`\bkwok version v?(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)`),  // kwok
}

// ProbeVersion runs `<path> --version` (20s timeout) and returns the version
// it reports, e.g. "v1.37.2" for a kube binary printing
// "Kubernetes v1.37.2", "v3.7.0" for etcd's "etcd Version: 3.7.0", "v0.8.0"
// for "kwok version v0.8.0 ...". It errors, naming path and quoting the
// output, when the file is not executable or the output is not recognised.
func ProbeVersion(ctx context.Context, path string) (string, error) {
	return probe(ctx, path, versionPatterns, "")
}

// ProbeKubeVersion is ProbeVersion for a binary that must be a Kubernetes component, such as a
// scheduler given with --scheduler-binary: only "Kubernetes vX.Y.Z" is accepted, so an etcd or kwok
// binary (whose versions ProbeVersion recognises) is refused before a cluster is started with it
// in the scheduler's place.
func ProbeKubeVersion(ctx context.Context, path string) (string, error) {
	return probe(ctx, path, versionPatterns[:1], `not a Kubernetes component (kube-scheduler prints "Kubernetes vX.Y.Z")`)
}

// probe runs `path --version` and matches its output against patterns. notOurs, when set, is the
// complaint for output that another of versionPatterns recognises (a real program, just not the
// kind wanted).
func probe(ctx context.Context, path string, patterns []*regexp.Regexp, notOurs string) (string, error) {
	abs, err := checkExecutable(path)
	if err != nil {
		return "", fmt.Errorf("probing version: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, abs, "--version")
	cmd.WaitDelay = 2 * time.Second // a child keeping stdout open must not outlive the timeout by much
	out, runErr := cmd.CombinedOutput()
	text := string(out)
	for _, re := range patterns {
		if m := re.FindStringSubmatch(text); m != nil {
			return "v" + m[1], nil
		}
	}
	shown := strings.TrimSpace(text)
	if len(shown) > 2000 {
		shown = shown[:2000] + "..."
	}
	if shown == "" {
		shown = "(no output)"
	}
	other := false
	for _, re := range versionPatterns {
		other = other || re.MatchString(text)
	}
	switch {
	case notOurs != "" && other && runErr == nil:
		return "", fmt.Errorf("%s is %s; --version printed: %s", abs, notOurs, shown)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "", fmt.Errorf("%s --version did not finish in time (limit %s); output: %s", abs, probeTimeout, shown)
	case runErr != nil:
		return "", fmt.Errorf("%s --version failed (%v); output: %s", abs, runErr, shown)
	default:
		return "", fmt.Errorf("%s --version printed no recognisable version; output: %s", abs, shown)
	}
}
