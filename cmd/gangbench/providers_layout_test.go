package main

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestLibrariesImportNoProvider keeps issue 32's rule: perf, suites and lab build clusters through
// the one constructor they are handed (request.Factory) and decide on clusters.Capabilities, so
// none of them depends, even transitively, on a concrete provider; only the program's edges (this
// command's main wiring, the suites test binary's TestMain) import clusters/providers.
func TestLibrariesImportNoProvider(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./perf", "./suites", "./lab")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	concrete := regexp.MustCompile(`(?m)^github\.com/gangbench/gangbench/clusters/(local|kind|existing|providers)$`)
	if m := concrete.FindAllString(string(out), -1); len(m) > 0 {
		t.Errorf("perf, suites or lab depend on concrete providers: %v", m)
	}
}
