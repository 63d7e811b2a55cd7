package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/results"
)

// execPerf runs the perf command on its own (main.go registers it under the root).
func execPerf(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newPerfCmd(testGlobals(), &out, &errb)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errb.String(), err
}

func TestPerfUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--param", "groups"}, `--param "groups": want name=value`},
		{[]string{"run", "--scenario", "no-such-scenario"}, `no scenario file or shipped scenario named "no-such-scenario"`},
		{[]string{"run", "--scenario", "smoke", "--param", "gruops=3"}, `--param gruops: no selected scenario declares a parameter "gruops"`},
		{[]string{"run", "--scenario", "smoke", "--labels", "gpu"}, "--scenario and --labels select scenarios two ways; give one"},
		{[]string{"run", "--scenario", "gpu-gang-64x8", "--nodes", "50"}, "perf/scenarios/gpu-gang-64x8.yaml:19: phases[0].fill: 0.9 of 50 nodes × 8 GPUs (--nodes 50) is 360 GPUs, less than one group (512 GPUs)"},
		{[]string{"run", "--scenario", "smoke", "--slo", "../../perf/testdata/slo/invalid.yaml"}, "invalid.yaml:6: objectives[0].source: missing"},
		{[]string{"run", "--scenario", "smoke", "--fault", "scheduler-kil@50%"}, `--fault: fault "scheduler-kil@50%": unknown action "kil" (accepted: kill, restart); want COMPONENT-ACTION@WHEN`},
		{[]string{"run", "--scenario", "smoke", "--fault", "scheduler-kill@50%", "--kubeconfig", "/dev/null"}, "--fault with --kubeconfig: fault injection needs a provider that can restart components (local or kind)"},
		// Faults the provider cannot inject are refused before binaries are built or a cluster starts.
		{[]string{"run", "--scenario", "smoke", "--fault", "kubelet-restart@50%"}, `--fault: fault kubelet-restart@50%: the local provider has no kubelets (kwok simulates its nodes); kubelet faults need --provider kind`},
		{[]string{"run", "--scenario", "smoke", "--provider", "kind", "--fault", "apiserver-restart@30%"}, `--fault: fault apiserver-restart@30%: the kind provider cannot stop and start kube-apiserver`},
		{[]string{"run", "--scenario", "smoke", "--fault", "gpu-unhealthy:1x999@50%"}, `--fault: fault gpu-unhealthy:1x999@50%: GPUs on 999 nodes, but scenario smoke has`},
		{[]string{"run", "--scenario", "smoke", "--fault", "gpu-unhealthy:2x1:0s@50%"}, `HOLD "0s" is not a positive duration`},
		{[]string{"run", "--scenario", "smoke", "--provider", "kind", "--kwok-nodes", "3"}, "--kwok-nodes: perf run derives the kwok nodes"},
		{[]string{"run", "--scenario", "smoke", "--rounds", "0"}, "--rounds 0: accepted: 1 to 20"},
		{[]string{"run", "--scenario", "smoke", "--rounds", "21", "--reference"}, "--rounds 21: accepted: 1 to 20"},
		{[]string{"report", "--format", "yaml", "../../perf/testdata/runs/default-500"}, `--format "yaml": accepted: text, markdown, json, bench`},
	} {
		_, err := execPerf(t, tc.args...)
		var ue usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (usage error: %v), want one containing %q", tc.args, err, errors.As(err, &ue), tc.want)
		}
	}
}

func TestPerfReport(t *testing.T) {
	out, err := execPerf(t, "report", "../../perf/testdata/runs/default-500")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gangbench perf run 20261129-170346-5fdc: PASS", "BenchmarkGang/smoke/nodes=500\t1\t"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if _, err := execPerf(t, "report", t.TempDir()); err == nil || !strings.Contains(err.Error(), "run.json") {
		t.Errorf("a directory without run.json: %v", err)
	}
	out, err = execPerf(t, "list")
	if err != nil || !regexp.MustCompile(`(?m)^upstream-3gangs-1000pods +upstream,default `).MatchString(out) {
		t.Errorf("list: %v\n%s", err, out)
	}
}

// TestIntegrationPerfKindQuiet runs a small benchmark on kind in the default (quiet) profile: real
// workers must join although the controller-manager runs only the profile's controllers, and the
// run must pass its built-in objectives with the profile on record.
func TestIntegrationPerfKindQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kind cluster; skipped with -short")
	}
	if _, err := kind.DetectEngine(context.Background(), ""); err != nil {
		t.Skip(err.Error())
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"perf", "run", "--provider", "kind", "--workers", "1", "--scenario", "smoke", "--nodes", "20",
		"--param", "groups=40", "--run-dir", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	r, err := results.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Environment.Profile != "quiet" || r.Environment.Provider != "kind" {
		t.Errorf("environment %+v, want provider kind, profile quiet", r.Environment)
	}
}
