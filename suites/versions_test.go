package suites

import (
	"github.com/gangbench/gangbench/suites/framework"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/scenarios/gangapi"
)

func TestVersionDifferencesNameRealAssertions(t *testing.T) {
	known := map[string]bool{}
	for _, a := range framework.Catalogue(All()) {
		known[a.ID] = true
	}
	seen := map[string]bool{}
	for _, d := range VersionDifferences() {
		if !known[d.ID] {
			t.Errorf("version difference for unknown assertion %s", d.ID)
		}
		if d.Minor != 36 || d.Reason == "" {
			t.Errorf("%s: minor %d, reason %q", d.ID, d.Minor, d.Reason)
		}
		key := d.ID
		if seen[key] {
			t.Errorf("%s listed twice", d.ID)
		}
		seen[key] = true
	}
}

func TestApplyVersionDifference(t *testing.T) {
	fail := func(id, msg string) results.Case { return results.Case{ID: id, Verdict: results.Fail, Message: msg} }
	for _, tc := range []struct {
		name    string
		c       results.Case
		version string
		want    results.Verdict
		wantMsg string
	}{
		{"listed failure on v1.36", fail("PRE-04", "timed out"), "v1.36.3", results.Skip, "differs in v1.36.3"},
		{"not expressible on v1.36", fail("MIN-09", "immutable"), "v1.36.3", results.Skip, "not expressible"},
		{"listed failure on v1.37 stays a failure", fail("PRE-04", "timed out"), "v1.37.2", results.Fail, "timed out"},
		{"unlisted failure on v1.36 stays a failure", fail("BAR-16", "split 2+1"), "v1.36.3", results.Fail, "split 2+1"},
		{"pass stays a pass", results.Case{ID: "PRE-04", Verdict: results.Pass}, "v1.36.3", results.Pass, ""},
		{"conversion refused a v1beta1 field", fail("XYZ-01", "create: "+gangapi.ErrNotExpressible.Error()+": PodGroup spec.preemptionPolicy"), "v1.36.3", results.Skip, "not expressible"},
		{"unknown version", fail("PRE-04", "timed out"), "", results.Fail, "timed out"},
	} {
		got := ApplyVersionDifference(tc.c, tc.version)
		if got.Verdict != tc.want || !strings.Contains(got.Message, tc.wantMsg) {
			t.Errorf("%s: %s %q, want %s containing %q", tc.name, got.Verdict, got.Message, tc.want, tc.wantMsg)
		}
	}
}

func TestNotComparable(t *testing.T) {
	if n := NotComparable("v1.37.1", "v1.37.2"); len(n) != 0 {
		t.Errorf("same minor: %d not comparable, want 0", len(n))
	}
	n := NotComparable("v1.36.3", "v1.37.2")
	if len(n) != len(VersionDifferences()) || !strings.HasPrefix(n["PRE-04"], "v1.36 differs") {
		t.Errorf("v1.36 vs v1.37: %d entries (want %d), PRE-04 %q", len(n), len(VersionDifferences()), n["PRE-04"])
	}
	if _, ok := n["BAR-16"]; ok {
		t.Error("BAR-16 holds on both versions and must stay comparable")
	}
}
