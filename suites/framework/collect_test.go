package framework

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/results"
)

func ev(action, test, output string, elapsed float64) []byte {
	b, _ := json.Marshal(testEvent{Action: action, Test: test, Output: output, Elapsed: elapsed})
	return b
}

func TestCollector(t *testing.T) {
	cat := []Assertion{
		{ID: "STA-06", Suite: "status", Statement: "the write shows in podgroups/status metrics", Ref: "r1", Feature: "writer via podgroups/status"},
		{ID: "STA-07", Suite: "status", Statement: "managedFields name the scheduler", Ref: "r2", Feature: "writer via podgroups/status"},
		{ID: "BAR-07", Suite: "barriers", Statement: "bind spread", Ref: "r3", Feature: "spread"},
	}
	var live []string
	c := NewCollector(cat, func(cs results.Case) { live = append(live, cs.ID+" "+string(cs.Verdict)) })
	feature := "TestStatus/writer_via_podgroups/status"
	lines := [][]byte{
		[]byte("not json: a build error line"),
		ev("run", feature+"/STA-06_the_write_shows_in_podgroups/status_metrics", "", 0),
		ev("output", feature+"/STA-06_the_write_shows_in_podgroups/status_metrics", "    status.go:10: delta was 0, want > 0\n", 0),
		ev("fail", feature+"/STA-06_the_write_shows_in_podgroups/status_metrics", "", 1.5),
		ev("fail", feature, "", 1.6),
		ev("output", "TestBarriers/spread/BAR-07_bind_spread", "    barriers.go:1: measurement bindSpreadSeconds=0.012\n", 0),
		ev("pass", "TestBarriers/spread/BAR-07_bind_spread", "", 0.3),
		ev("output", "TestMinCount/lane_setup", "    feature.go:40: set up lane: boom\n", 0),
		ev("fail", "TestMinCount/lane_setup", "", 2),
	}
	for _, l := range lines {
		c.Line(l)
	}
	got := map[string]results.Case{}
	for _, cs := range c.Cases() {
		got[cs.ID+"/"+cs.Name] = cs
	}
	sta06 := got["STA-06/the write shows in podgroups/status metrics"]
	if sta06.Verdict != results.Fail || !strings.Contains(sta06.Message, "delta was 0") || sta06.Ref != "r1" {
		t.Errorf("STA-06 = %+v", sta06)
	}
	if sta07 := got["STA-07/managedFields name the scheduler"]; sta07.Verdict != results.Skip || !strings.Contains(sta07.Message, "not run") {
		t.Errorf("STA-07 (never ran after STA-06 failed) = %+v", sta07)
	}
	if bar := got["BAR-07/bind spread"]; bar.Verdict != results.Pass || bar.Measurements["bindSpreadSeconds"] != 0.012 {
		t.Errorf("BAR-07 = %+v", bar)
	}
	if setup := got["SETUP/lane setup"]; setup.Verdict != results.Error || !strings.Contains(setup.Message, "boom") {
		t.Errorf("setup failure = %+v (all: %v)", setup, got)
	}
	if strings.Join(live, ",") != "STA-06 fail,BAR-07 pass" {
		t.Errorf("live lines = %v", live)
	}
}

// TestCollectorListsEveryAssertion: an assertion of the catalogue that never reported (its feature
// was skipped at set-up, or the binary died) still appears, as a skip that says so.
func TestCollectorListsEveryAssertion(t *testing.T) {
	cat := []Assertion{
		{ID: "FLT-18", Suite: "faults", Statement: "kubelet restart", Feature: "kubelet restart"},
		{ID: "BAR-01", Suite: "barriers", Statement: "served", Feature: "api"},
	}
	c := NewCollector(cat, nil)
	c.Line(ev("pass", "TestBarriers/api/BAR-01_served", "", 0.1))
	var flt *results.Case
	for _, cs := range c.Cases() {
		if cs.ID == "FLT-18" {
			flt = &cs
		}
	}
	if flt == nil || flt.Verdict != results.Skip || !strings.Contains(flt.Message, "reported no result") || !strings.Contains(flt.Message, "kubelet restart") {
		t.Errorf("FLT-18, which never reported: %+v", flt)
	}
}

// TestSuiteOfTest: a top-level test's suite is its words after Test, joined by '-'.
func TestSuiteOfTest(t *testing.T) {
	for top, want := range map[string]string{"TestUpstream": "upstream", "TestUpstreamJobs": "upstream-jobs", "TestPreemptionPolicy": "preemption-policy", "TestBarriers": "barriers"} {
		if got := suiteOfTest(top); got != want {
			t.Errorf("%s: %q, want %q", top, got, want)
		}
	}
}
