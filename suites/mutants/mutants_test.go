package mutants

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/suites"
)

func TestAllParse(t *testing.T) {
	ms, err := All(suites.SuiteNames())
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, m := range ms {
		covered[m.Suite] = true
	}
	// Every suite must be provably able to fail in its own way.
	for _, s := range suites.SuiteNames() {
		if !covered[s] {
			t.Errorf("no mutant targets suite %s", s)
		}
	}
}

func TestParseErrors(t *testing.T) {
	names := suites.SuiteNames()
	good := "name: x\nsuite: barriers\nwrong: w\ncaughtBy: [BAR-05]\npatch:\n  binary: kube-scheduler\n  edits:\n  - {file: a.go, old: '<', new: '<='}\n"
	if _, err := parse("patches/x.yaml", []byte(good), names); err != nil {
		t.Fatalf("good file: %v", err)
	}
	if m, err := parse("patches/x.yaml", []byte(strings.Replace(good, "[BAR-05]", `["BAR-05|BAR-06"]`, 1)), names); err != nil || m.CaughtBy[0] != "BAR-05|BAR-06" {
		t.Fatalf("alternatives: %v %v", err, m.CaughtBy)
	}
	for _, tt := range []struct{ in, want string }{
		{strings.Replace(good, "suite: barriers", "suite: nosuch", 1), `suite "nosuch"`},
		{strings.Replace(good, "name: x", "name: other", 1), `name "other"`},
		{strings.Replace(good, "[BAR-05]", "[]", 1), "caughtBy: empty"},
		{strings.Replace(good, "[BAR-05]", "[bar5]", 1), `caughtBy[0] "bar5"`},
		{strings.Replace(good, "[BAR-05]", `["BAR-05|x"]`, 1), `caughtBy[0] "BAR-05|x"`},
		{strings.Replace(good, "wrong: w", "wrongly: w", 1), "wrongly"},
		{strings.Replace(good, "binary: kube-scheduler", "binary: kubectl", 1), `binary "kubectl"`},
	} {
		_, err := parse("patches/x.yaml", []byte(tt.in), names)
		if err == nil || !strings.Contains(err.Error(), "patches/x.yaml") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err %v, want one naming patches/x.yaml and %q", err, tt.want)
		}
	}
}

// TestPatchesApply checks every patch against the k8s.io/kubernetes source it is for, when the
// module cache holds it (any cluster build puts it there): a patch whose text drifted away from the
// source would otherwise only fail in the long proof.
func TestPatchesApply(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+k8sbin.DefaultKubernetesVersion)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("k8s.io/kubernetes %s is not in the module cache: %v", k8sbin.DefaultKubernetesVersion, err)
	}
	ms, err := All(suites.SuiteNames())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := m.Patch.Apply(dir); err != nil {
			t.Errorf("%s: %v", m.File, err)
		}
	}
}
