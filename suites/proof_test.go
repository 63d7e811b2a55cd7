package suites_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/internal/testenv"
	"github.com/gangbench/gangbench/suites"
)

// These tests prove that the suites can fail: they run the suite binary (this test binary, re-executed
// with other flags) against a cluster that is wrong in a known way and assert that the suites notice.
// A suite that passes against a broken scheduler is a bug in the suite.

// Feature names and statements may contain '/', so the ID is found by its shape, not by position.
var failLineRE = regexp.MustCompile(`--- FAIL: (Test[A-Za-z]+)/.+?/([A-Z]{2,5}-[0-9][0-9A-Za-z]*)_`)

// runSuiteBinary re-executes this binary as a suite run and returns its exit error, output and the
// failed assertion IDs per top-level test.
func runSuiteBinary(t *testing.T, testRE string, args ...string) (error, string, map[string][]string) {
	t.Helper()
	// A kind run (cluster create, every suite, delete) takes about 10 minutes here; the bound is
	// for a run that hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	argv := append([]string{"-test.run=" + testRE, "-test.v", "-test.count=1", "-run-dir", filepath.Join(t.TempDir(), "run")}, args...)
	cmd := exec.CommandContext(ctx, os.Args[0], argv...)
	cmd.Env = append(os.Environ(), "GANGBENCH_PROOF_CHILD=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	failed := map[string][]string{}
	for _, m := range failLineRE.FindAllStringSubmatch(out.String(), -1) {
		failed[m[1]] = append(failed[m[1]], m[2])
	}
	for k := range failed {
		sort.Strings(failed[k])
	}
	return err, out.String(), failed
}

// redRun marks a proof against a wrong build: skipped where proofs are, and parallel with the other
// red runs. Only the red runs are parallel, so the pristine runs that must pass (TestConformanceKind,
// TestProofUpstream) have the machine to themselves, before the red ones start.
func redRun(t *testing.T) {
	t.Helper()
	skipUnlessProof(t)
	t.Parallel()
}

func skipUnlessProof(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real clusters; skipped with -short")
	}
	if os.Getenv("GANGBENCH_PROOF_CHILD") == "1" {
		t.Skip("inside a proof run")
	}
}

// behavioural are the suites that judge the scheduler (validation judges the apiserver).
var behavioural = []string{"TestExperiments", "TestBarriers", "TestMinCount", "TestPreemption", "TestStatus", "TestObservability", "TestFaults"}

// TestProofGangSchedulingOff runs the behavioural suites against a scheduler with GenericWorkload=false
// (it ignores PodGroups and schedules pods one by one). Every behavioural suite must report failures.
// (The validation suite checks the apiserver, not the scheduler; TestProofGangAPIOff covers its
// failure mode: an apiserver that does not serve the API stops the run before any test.)
//
// Half the timeouts, as on kind and for the mutants: a scheduler that ignores PodGroups makes most
// steps wait out their deadlines, and a failure that must show shows as well at half (pass
// thresholds do not scale).
//
// Upstream's gang specs run on the same cluster after the suites and must fail too: the proof that
// their second opinion is a real one, without a cluster and a serial run of its own.
func TestProofGangSchedulingOff(t *testing.T) {
	redRun(t)
	proveGangSchedulingOff(t, upstreamBinary(t), "-timeout-scale", "0.5")
}

// TestProofGangSchedulingOffKind is the same proof on kind: the wrong scheduler is swapped into the
// control-plane node, the lanes that need real kubelets use the workers, and the suites must fail
// there as they do on local.
//
// It repeats on kind the proof TestProofGangSchedulingOff makes in full on local, so it runs in
// `make test-long`; `make test` keeps kind's short form of it, clusters/kind's
// TestIntegrationKindWrongScheduler (the seed's gangs split on real kubelets under a scheduler with
// gang scheduling off), beside every suite passing on kind (TestConformanceKind).
func TestProofGangSchedulingOffKind(t *testing.T) {
	testenv.SkipUnlessLong(t, "TestProofGangSchedulingOff makes this proof in full on local, and clusters/kind TestIntegrationKindWrongScheduler its short form on kind")
	redRun(t)
	skipWithoutEngine(t)
	// Half the timeouts, as on local (13 min at full scale here).
	proveGangSchedulingOff(t, "", "-provider", "kind", "-timeout-scale", "0.5")
}

// proveGangSchedulingOff runs the behavioural suites (and, with upstream set, upstream's gang specs
// from that binary after them) against a scheduler with GenericWorkload=false; all must fail.
func proveGangSchedulingOff(t *testing.T, upstream string, args ...string) {
	t.Helper()
	tests := slices.Clone(behavioural)
	if upstream != "" {
		tests = append(tests, "TestUpstream")
		args = append(args, "-upstream-binary", upstream)
	}
	// Narrowed to the features that hold gangOffIDs: each suite must fail, and those are the
	// assertions required to; the rest of each suite (most of it fails too, seen in full runs) would
	// cost minutes and prove nothing more.
	re := proofRunRE(strings.Join(tests, "|"), featuresWith(suites.All(), "", gangOffIDs))
	err, out, failed := runSuiteBinary(t, re, append(args, "-scheduler-feature-gates", "GenericWorkload=false")...)
	t.Logf("failed assertions against a scheduler without gang scheduling: %v", failed)
	if upstream != "" && len(failed["TestUpstream"]) == 0 {
		t.Errorf("upstream's specs passed (or did not run) against a scheduler with gang scheduling off:\n%s", tail(out, 40))
	}
	if err == nil {
		t.Fatalf("the suites passed against a scheduler with gang scheduling off:\n%s", tail(out, 60))
	}
	for _, test := range behavioural {
		if len(failed[test]) == 0 {
			t.Errorf("%s reported no failure against a scheduler with gang scheduling off", test)
		}
	}
	for _, id := range gangOffIDs {
		if !strings.Contains(out, "--- FAIL") || !containsID(failed, id) {
			t.Errorf("%s did not fail against a scheduler with gang scheduling off", id)
		}
	}
}

// kindConformanceTests are the suites make test runs on kind: those whose outcome can depend on the
// provider. Experiments and faults place gangs on real kubelets with the device plugin's GPUs and
// restart kubelets; barriers' and observability's checks read the scheduler's metrics, which kind
// serves from a static pod through its own endpoint. MinCount, preemption, status and validation run
// on kind's lanes of simulated nodes exactly as on local, against the same binaries: that repetition
// is make test-long's (every suite on kind), and the suites package's own run holds them on local.
var kindConformanceTests = []string{"TestExperiments", "TestBarriers", "TestObservability", "TestFaults"}

// gangOffIDs must fail against a scheduler with gang scheduling off: the defining gang behaviours
// (FLT-02 and FLT-15: gangs split across a scheduler restart and under unhealthy GPUs) and one
// assertion of each behavioural suite that has none of those.
var gangOffIDs = []string{"EXP-1b", "BAR-05", "BAR-16", "MIN-04", "PRE-01", "STA-01", "OBS-03", "FLT-02", "FLT-15"}

// TestConformanceKind runs the suites on a kind cluster when a container engine answers: real
// kubelets with the device plugin next to kwok lanes. Everything that passes on local must pass
// there (or skip with a reason that names what kind lacks, which the suites record). make test runs
// the suites whose outcome can depend on the provider (kindConformanceTests), make test-long every one.
//
// Upstream's gang specs run there too: their pods use the e2e busybox and pause images, which only
// gangbench's node image provides (no registry is reachable), so this also proves those images work.
func TestConformanceKind(t *testing.T) {
	skipUnlessProof(t)
	skipWithoutEngine(t)
	tests := slices.Clone(kindConformanceTests)
	if testenv.Long() {
		tests = append(slices.Clone(behavioural), "TestValidation")
	}
	tests = append(tests, "TestUpstream")
	err, out, failed := runSuiteBinary(t, "^("+strings.Join(tests, "|")+")$", "-provider", "kind", "-upstream-binary", upstreamBinary(t))
	if err != nil || len(failed) > 0 {
		// The cause once more after the output's tail: a CI log shows only the end.
		cause := fmt.Sprintf("the suites on kind: %v; failed assertions %v; failed tests %v", err, failed, failedTests(out, 10))
		t.Errorf("%s\n%s\n%s\n%s", cause, failures(out, 120), tail(out, 40), cause)
	}
	for _, test := range tests {
		if !strings.Contains(out, "--- PASS: "+test+" ") {
			t.Errorf("%s did not pass on kind", test)
		}
	}
}

// TestConformanceFeatures runs the suites of workload features (suites.ClusterFeatures) on one local
// cluster that hosts all their features: in the package's own run (TestMain's cluster, gang core
// only) they skip, naming the gate that is off. One cluster for all, as `gangbench e2e --features
// all` runs them; each suite alone with only its own features is what its wrong builds' proofs run.
func TestConformanceFeatures(t *testing.T) {
	skipUnlessProof(t)
	var tests, features []string
	for _, name := range suites.SuiteNames() {
		fs := suites.ClusterFeatures(name)
		if len(fs) == 0 {
			continue
		}
		tests = append(tests, suites.TestFunc(name))
		for _, f := range fs {
			if !slices.Contains(features, f) {
				features = append(features, f)
			}
		}
	}
	err, out, failed := runSuiteBinary(t, "^("+strings.Join(tests, "|")+")$", "-features", strings.Join(features, ","))
	if err != nil || len(failed) > 0 {
		cause := fmt.Sprintf("suites %v with features %v: %v; failed assertions %v; failed tests %v", tests, features, err, failed, failedTests(out, 10))
		t.Errorf("%s\n%s\n%s\n%s", cause, failures(out, 120), tail(out, 40), cause)
	}
	// Every assertion must run, but those of features that need real kubelets: this cluster is local.
	kubeletOnly := map[string]bool{}
	for _, f := range suites.All() {
		if f.NeedsKubelets {
			kubeletOnly[strings.ReplaceAll(f.Name, " ", "_")] = true
		}
	}
	for _, test := range tests {
		if !strings.Contains(out, "--- PASS: "+test+" ") {
			t.Errorf("%s did not pass on a cluster with features %v\n%s", test, features, tail(out, 40))
		}
		for _, l := range strings.Split(out, "\n") {
			_, sub, ok := strings.Cut(l, "--- SKIP: "+test+"/")
			if feature, _, _ := strings.Cut(sub, "/"); ok && !kubeletOnly[feature] {
				t.Errorf("%s skipped %s on a cluster with features %v\n%s", test, strings.TrimSpace(sub), features, tail(out, 40))
			}
		}
	}
}

func skipWithoutEngine(t *testing.T) {
	t.Helper()
	if _, err := kind.DetectEngine(context.Background(), ""); err != nil {
		t.Skipf("no container engine answers, so no kind cluster: %v", err)
	}
}

// TestProofGangAPIOff starts a cluster whose apiserver does not serve scheduling.k8s.io/v1beta1: the
// run must stop before any test with an error that names the missing runtime-config.
func TestProofGangAPIOff(t *testing.T) {
	redRun(t)
	err, out, failed := runSuiteBinary(t, "^TestBarriers$", "-runtime-config", "scheduling.k8s.io/v1beta1=false")
	if err == nil {
		t.Fatalf("the run succeeded against an apiserver without the gang API:\n%s", tail(out, 40))
	}
	if !strings.Contains(out, "--runtime-config=scheduling.k8s.io/v1beta1=true") {
		t.Errorf("the error does not say which runtime-config is missing:\n%s", tail(out, 40))
	}
	if strings.Contains(out, "=== RUN") || len(failed) > 0 {
		t.Errorf("tests ran although the preflight should have stopped the run:\n%s", tail(out, 40))
	}
}

func containsID(failed map[string][]string, id string) bool {
	for _, ids := range failed {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
	}
	return false
}

// failures returns what `go test -v` printed under each failed test: the messages that say why,
// which sit above the run's last lines and so are lost from a tail. A pristine run that must pass
// reports these first, so a CI log shows the cause (the child's run directory is a temp dir).
func failures(out string, maxLines int) string {
	lines := strings.Split(out, "\n")
	var b strings.Builder
	n := 0
	for i, l := range lines {
		k := strings.Index(l, "--- FAIL: ")
		if k < 0 || strings.TrimSpace(l[:k]) != "" {
			continue
		}
		var body []string
		for _, m := range lines[i+1:] {
			trimmed := strings.TrimLeft(m, " \t")
			if trimmed == "" || len(m)-len(trimmed) <= k || strings.HasPrefix(trimmed, "--- ") || strings.HasPrefix(trimmed, "=== ") {
				break
			}
			body = append(body, m)
		}
		if len(body) == 0 {
			// A parallel subtest's messages are printed under its "=== NAME" (or CONT, RUN)
			// headers as they happen, not under its "--- FAIL" line: gather them there. A parent
			// whose failure is its children's has none.
			name, _, _ := strings.Cut(strings.TrimSpace(l[k+len("--- FAIL: "):]), " (")
			body = printedUnder(lines, name)
		}
		if len(body) == 0 {
			continue
		}
		for _, m := range append([]string{l}, body...) {
			if n == maxLines {
				b.WriteString("…\n")
				return b.String()
			}
			b.WriteString(m + "\n")
			n++
		}
	}
	return b.String()
}

// printedUnder returns the lines `go test -v` printed under the headers of test name ("=== RUN",
// "=== CONT", "=== NAME"), each block up to the next header or result line.
func printedUnder(lines []string, name string) []string {
	var out []string
	in := false
	for _, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "=== ") || strings.HasPrefix(trimmed, "--- ") {
			f := strings.Fields(trimmed)
			in = len(f) == 3 && f[0] == "===" && f[2] == name
			continue
		}
		if in && trimmed != "" {
			out = append(out, l)
		}
	}
	return out
}

// failedTests names the first max tests (subtests included) the output reports as failed, each cut
// to its first 120 characters: for a failure that no assertion ID names (a lane's set-up).
func failedTests(out string, max int) []string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		_, name, ok := strings.Cut(l, "--- FAIL: ")
		if !ok {
			continue
		}
		if len(name) > 120 {
			name = name[:120] + "…"
		}
		if names = append(names, name); len(names) == max {
			break
		}
	}
	return names
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
