package suites_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/internal/testenv"
	"github.com/gangbench/gangbench/suites"
	"github.com/gangbench/gangbench/suites/framework"
	"github.com/gangbench/gangbench/suites/mutants"
)

// monitorFailure is what the suite binary prints when the run-wide status monitor found a
// regression it did not excuse as a known issue; STA-MON is its assertion in run.json.
const monitorFailure = "STATUS MONOTONICITY VIOLATION"

// TestProofMutants builds each deliberately wrong scheduler (or apiserver) of suites/mutants from
// the k8s.io/kubernetes source (cached by patch content) and runs only the suite it is wrong for
// against it, narrowed to the features that hold the assertions the mutant names (proofFeatures):
// that suite must fail, with at least those assertions. The mutants
// report the version they were built from (v1.37.2) or, where it matters (status-leaves-true, whose
// flips resemble a known upstream race), a fork's version of that line, so this also proves the
// suites do not trust a version string. The pristine build passing the same suites is TestConformance's part.
//
// The mutants run in parallel with each other and with the other red runs (see redRun), three at a
// time in make test (TEST_PARALLEL; Go's default is GOMAXPROCS): each is its own process and
// cluster, a red run spends most of its time in waits, and a contended machine can only make a
// wrong build fail later, not pass. The pristine runs stay serial, before them.
func TestProofMutants(t *testing.T) {
	redRun(t)
	ms, err := mutants.All(suites.SuiteNames())
	if err != nil {
		t.Fatal(err)
	}
	var upstream string
	if testenv.Long() {
		upstream = upstreamBinary(t)
	}
	var stock *k8sbin.Set
	if slices.ContainsFunc(ms, func(m mutants.Mutant) bool { return m.Patch.Binary != k8sbin.SchedulerBinaryName }) {
		// Ensured here, once, before the parallel subtests, for the mutants that replace another component.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		stock, err = k8sbin.Ensure(ctx, "", k8sbin.Options{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	all := suites.All()
	var mu sync.Mutex
	caughtByUpstream := map[string][]string{}
	t.Cleanup(func() {
		// The comparison table of the closing notes: which mutants upstream's specs also catch.
		// A cleanup, not a defer: the parallel subtests run after this function returns.
		// Only the mutants that ran: -run may select a few.
		for _, m := range ms {
			if failed, ran := caughtByUpstream[m.Name]; m.Upstream && ran {
				t.Logf("upstream specs vs mutant %-26s (suite %s): failed %v", m.Name, m.Suite, failed)
			}
		}
	})
	for _, m := range ms {
		t.Run(m.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			start := time.Now()
			bin, err := k8sbin.EnsurePatched(ctx, "", m.Patch, k8sbin.Options{Progress: testLog{t}})
			if err != nil {
				t.Fatal(err)
			}
			built := time.Since(start)
			var args []string
			switch m.Patch.Binary {
			case k8sbin.SchedulerBinaryName:
				args = []string{"-scheduler-binary", bin}
			default:
				// Any other component: a bin dir of the stock binaries with the mutant in its place.
				dir := t.TempDir()
				for name, p := range map[string]string{k8sbin.APIServerBinary: stock.APIServer, k8sbin.ControllerManagerBinary: stock.ControllerManager, k8sbin.SchedulerBinaryName: stock.Scheduler} {
					if name == m.Patch.Binary {
						p = bin
					}
					if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
						t.Fatal(err)
					}
				}
				args = []string{"-kube-bin-dir", dir}
			}
			test := suites.TestFunc(m.Suite)
			if test == "" {
				t.Fatalf("%s: suite %s has no test in this binary", m.File, m.Suite)
			}
			// Where upstream has specs about the behaviour, make test-long runs them on the same
			// cluster after the suite: whether upstream's own tests notice is reported, not required.
			re := proofRunRE(test, proofFeatures(m, all))
			// Whether upstream's specs notice the mutant is a report, not a proof (the suite's
			// assertions are), so make test leaves it to make test-long.
			if m.Upstream && upstream != "" {
				args = append(args, "-upstream-binary", upstream)
			}
			// A suite of a workload feature needs its cluster to host it.
			if fs := suites.ClusterFeatures(m.Suite); len(fs) > 0 {
				args = append(args, "-features", strings.Join(fs, ","))
			}
			// Half the waits: a wrong build makes positive waits run out (a pristine run's set-up
			// steps take seconds of their 30-90 s), and pass thresholds do not scale.
			args = append(args, "-timeout-scale", "0.5")
			runStart := time.Now()
			err, out, failed := runSuiteBinary(t, re, args...)
			if upstream != "" && m.Upstream {
				mu.Lock()
				caughtByUpstream[m.Name] = append(slices.Clone(failed["TestUpstream"]), failed["TestUpstreamJobs"]...)
				mu.Unlock()
			}
			t.Logf("mutant %s (%s): built in %s, suite %s and upstream's specs ran %s; failed assertions %v; monitor failure %v; upstream specs failed %v",
				m.Name, m.Wrong, built.Round(time.Second), m.Suite, time.Since(runStart).Round(time.Second), failed[test], strings.Contains(out, monitorFailure), append(slices.Clone(failed["TestUpstream"]), failed["TestUpstreamJobs"]...))
			if m.Upstream && upstream != "" && !strings.Contains(out, "--- PASS: TestUpstream") && !strings.Contains(out, "--- FAIL: TestUpstream") {
				t.Errorf("upstream's specs did not run against mutant %s:\n%s", m.Name, tail(out, 30))
			}
			if err == nil {
				t.Fatalf("suite %s passed against mutant %s (%s):\n%s", m.Suite, m.Name, m.Wrong, tail(out, 60))
			}
			if !strings.Contains(out, "=== RUN   "+test) {
				t.Fatalf("suite %s never ran against mutant %s (the cluster did not start?):\n%s", m.Suite, m.Name, tail(out, 60))
			}
			for _, alt := range m.CaughtBy {
				caught := false
				for _, id := range strings.Split(alt, "|") {
					if id == "STA-MON" {
						caught = caught || strings.Contains(out, monitorFailure)
					} else {
						caught = caught || containsID(failed, id)
					}
				}
				if !caught {
					t.Errorf("%s did not fail against mutant %s (%s); failed: %v\n%s", alt, m.Name, m.Wrong, failed, tail(out, 40))
				}
			}
		})
	}
}

// proofFeatures names the features of m's suite a proof runs: the one m names, else every feature
// with a step whose assertion m's caughtBy lists. nil means the whole suite: the run-wide status
// monitor (STA-MON) judges what every feature of the suite leaves behind, so a mutant it must catch
// gets them all. Features without such an assertion cannot show the proof anything it requires, and
// running them cost minutes per mutant (mincount's backoff feature alone waits 30 s).
func proofFeatures(m mutants.Mutant, all []framework.Feature) []string {
	if m.Feature != "" {
		return []string{m.Feature}
	}
	var ids []string
	for _, alt := range m.CaughtBy {
		for _, id := range strings.Split(alt, "|") {
			if id == "STA-MON" {
				return nil
			}
			ids = append(ids, id)
		}
	}
	return featuresWith(all, m.Suite, ids)
}

// featuresWith names the features (of suite, or of any suite when "") with a step whose assertion
// is one of ids.
func featuresWith(all []framework.Feature, suite string, ids []string) []string {
	var names []string
	for _, f := range all {
		if suite != "" && f.Suite != suite {
			continue
		}
		if slices.ContainsFunc(f.Steps, func(s framework.Step) bool { return slices.Contains(ids, s.A.ID) }) {
			names = append(names, f.Name)
		}
	}
	return names
}

// proofRunRE is the -test.run pattern for a suite's test narrowed to features (all of them when
// nil), with upstream's gang and Job specs beside it (the Job specs skip themselves on a cluster
// without WorkloadWithJob). Go names a subtest by its name with spaces as '_'.
func proofRunRE(test string, features []string) string {
	re := "^(" + test + "|TestUpstream|TestUpstreamJobs)$"
	if len(features) == 0 {
		return re
	}
	quoted := make([]string, 0, len(features)+1)
	for _, n := range features {
		quoted = append(quoted, regexp.QuoteMeta(strings.ReplaceAll(n, " ", "_")))
	}
	return re + "/^(" + strings.Join(append(quoted, "upstream_gang_specs", "upstream_Job_gang_specs"), "|") + ")$"
}

// TestProofFeatures checks the narrowing without a cluster: every assertion a mutant names exists in
// its suite, and the narrowed run still holds each of them (a renamed feature or a moved assertion
// would otherwise make the proof run features that cannot fail, and fail for the wrong reason).
func TestProofFeatures(t *testing.T) {
	ms, err := mutants.All(suites.SuiteNames())
	if err != nil {
		t.Fatal(err)
	}
	all := suites.All()
	for _, m := range ms {
		names := proofFeatures(m, all)
		t.Logf("%-38s %s: %q", m.Name, m.Suite, names)
		ran := map[string]bool{}
		for _, f := range all {
			if f.Suite == m.Suite && (names == nil || slices.Contains(names, f.Name)) {
				if names != nil && strings.Contains(f.Name, "/") {
					t.Errorf("%s: feature %q has a '/', which -test.run cannot select", m.File, f.Name)
				}
				for _, s := range f.Steps {
					ran[s.A.ID] = true
				}
			}
		}
		if m.Feature != "" && len(ran) == 0 {
			t.Errorf("%s: feature %q: not a feature of suite %s", m.File, m.Feature, m.Suite)
		}
		for _, alt := range m.CaughtBy {
			found := false
			for _, id := range strings.Split(alt, "|") {
				found = found || ran[id] || (id == "STA-MON" && names == nil)
			}
			if !found {
				t.Errorf("%s: caughtBy %s: no such assertion in the features the proof runs (%v) of suite %s", m.File, alt, names, m.Suite)
			}
		}
	}
	// The gang-off proof's narrowing keeps each of its required assertions and a feature of every
	// behavioural suite.
	off := featuresWith(all, "", gangOffIDs)
	for _, id := range gangOffIDs {
		if len(featuresWith(all, "", []string{id})) == 0 {
			t.Errorf("gangOffIDs: %s is no assertion of any feature", id)
		}
	}
	for _, test := range behavioural {
		suite := ""
		for _, n := range suites.SuiteNames() {
			if suites.TestFunc(n) == test {
				suite = n
			}
		}
		if !slices.ContainsFunc(all, func(f framework.Feature) bool { return f.Suite == suite && slices.Contains(off, f.Name) }) {
			t.Errorf("the gang-off proof runs no feature of %s (suite %q): each behavioural suite must fail", test, suite)
		}
	}
	t.Logf("gang-off proof features: %q", off)
	re := regexp.MustCompile(strings.SplitN(proofRunRE("TestMinCount", []string{"gang backoff (x2)"}), "/", 2)[1])
	if !re.MatchString("gang_backoff_(x2)") || re.MatchString("gang_backoff") {
		t.Errorf("proofRunRE does not select exactly the named feature: %s", re)
	}
}

// forkStamp is what a fork built past the v1.37.2 tag on the release branch reports (git describe
// of a commit after v1.37.3-alpha.0 with a hash): no exact release string, the v1.37 line.
const forkStamp = "v1.37.3-alpha.0.12+0123abcdef01"

// TestProofForkStamp: the pristine v1.37.2 scheduler stamped with a fork's version passes the
// suites where the upstream PodGroup status race shows (experiments, mincount, status) with the
// run-wide monitor clean: a known race it runs into is excused by its release line and evidence, not
// failed for the suffix. The other half, that a scheduler without the keep-True rule fails STA-MON
// whatever its version, is TestProofMutants' status-leaves-true, stamped with a fork's version too.
// The race is rare, so the run logs whether it was met and excused.
func TestProofForkStamp(t *testing.T) {
	redRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	control := k8sbin.Patch{Name: "pristine-fork-stamp", Binary: k8sbin.SchedulerBinaryName, Stamp: forkStamp}
	bin, err := k8sbin.EnsurePatched(ctx, "", control, k8sbin.Options{Progress: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []string{suites.TestFunc("experiments"), suites.TestFunc("mincount"), suites.TestFunc("status")}
	err, out, failed := runSuiteBinary(t, "^("+strings.Join(tests, "|")+")$", "-scheduler-binary", bin)
	if !strings.Contains(out, "scheduler "+forkStamp) {
		t.Errorf("the run does not report the stamped version %s (the stamp did not reach the binary?):\n%s", forkStamp, tail(out, 30))
	}
	if err != nil || len(failed) > 0 || strings.Contains(out, monitorFailure) {
		t.Fatalf("pristine scheduler stamped %s: %v, failed %v, monitor failure %v\n%s\n%s", forkStamp, err, failed, strings.Contains(out, monitorFailure), failures(out, 80), tail(out, 40))
	}
	t.Logf("pristine scheduler stamped %s passed; known races excused in this run: %d", forkStamp, strings.Count(out, "evidence matched"))
}

// upstreamBinary builds (or reuses) upstream's gang e2e specs for the default version.
func upstreamBinary(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin, err := k8sbin.EnsureUpstreamE2E(ctx, "", k8sbin.Options{Progress: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestProofUpstream: upstream's gang specs pass on the pristine scheduler, as TestUpstream cases
// UPS-NN (7 of them at v1.37.2). Their failing against a scheduler with gang scheduling off, which
// makes the second opinion a real one, is TestProofGangSchedulingOff's, on the same cluster as the
// behavioural suites.
//
// Where a container engine answers, TestConformanceKind already runs upstream's specs on the
// pristine scheduler and requires them to pass, so make test runs this only without an engine
// (make test-long always).
func TestProofUpstream(t *testing.T) {
	skipUnlessProof(t)
	if _, err := kind.DetectEngine(context.Background(), ""); err == nil {
		testenv.SkipUnlessLong(t, "a container engine answers, so TestConformanceKind runs upstream's specs on the pristine scheduler")
	}
	err, out, failed := runSuiteBinary(t, "^TestUpstream$", "-upstream-binary", upstreamBinary(t))
	if err != nil || len(failed) > 0 {
		t.Fatalf("upstream's specs on the pristine scheduler: %v, failed %v\n%s\n%s", err, failed, failures(out, 80), tail(out, 40))
	}
	if n := strings.Count(out, "--- PASS: TestUpstream/upstream_gang_specs/UPS-"); n < 7 {
		t.Errorf("%d upstream specs passed, want the 7 gang specs of v1.37.2:\n%s", n, tail(out, 30))
	}
}

// testLog sends build progress to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
