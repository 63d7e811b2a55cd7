package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/results"
	"github.com/gangbench/gangbench/suites"
	"github.com/gangbench/gangbench/suites/framework"
)

// issue31Log is the end of a suites.log whose binary failed while building the kind node image:
// test2json wrapped the binary's stderr into JSON events.
const issue31Log = `{"Time":"2026-12-06T10:00:00Z","Action":"start","Package":"github.com/gangbench/gangbench/suites"}
{"Time":"2026-12-06T10:00:01Z","Action":"output","Package":"github.com/gangbench/gangbench/suites","Output":"building runc v1.4.3\n"}
{"Time":"2026-12-06T10:00:02Z","Action":"output","Package":"github.com/gangbench/gangbench/suites","Output":"gangbench suites: create cluster: node image: go install github.com/opencontainers/runc@v1.4.3: exit status 1\n"}
{"Time":"2026-12-06T10:00:02Z","Action":"output","Package":"github.com/gangbench/gangbench/suites","Output":"# pkg-config --cflags  -- libseccomp\n"}
{"Time":"2026-12-06T10:00:02Z","Action":"output","Package":"github.com/gangbench/gangbench/suites","Output":"Package libseccomp was not found in the pkg-config search path.\n"}
{"Time":"2026-12-06T10:00:02Z","Action":"output","Package":"github.com/gangbench/gangbench/suites","Output":"pkg-config: exit status 1\n"}
{"Time":"2026-12-06T10:00:02Z","Action":"output","Package":"github.com/gangbench/gangbench/suites","Output":"FAIL\tgithub.com/gangbench/gangbench/suites\t1500.1s\n"}
{"Time":"2026-12-06T10:00:02Z","Action":"fail","Package":"github.com/gangbench/gangbench/suites","Elapsed":1500.1}
`

// noneRanRun is the run runSuites records when the suite binary fails before any assertion.
func noneRanRun(t *testing.T) (*results.Run, int) {
	t.Helper()
	cat := framework.Catalogue(suites.All())
	coll := framework.NewCollector(cat, nil)
	for _, l := range strings.Split(issue31Log, "\n") {
		coll.Line([]byte(l))
	}
	r := &results.Run{ID: "r1", Command: "e2e", Cases: coll.Cases()}
	r.Cases = append(r.Cases, results.Case{ID: harnessCaseID, Suite: "harness", Name: "the suite binary ran to completion", Verdict: results.Error,
		Message: fmt.Sprintf("the suite binary: exit status 1; the end of suites.log:\n%s", suitesLogTail([]byte(issue31Log), 30))})
	return r, len(cat)
}

func TestE2EReportLeadsWithTheCauseWhenNothingRan(t *testing.T) {
	r, n := noneRanRun(t)
	var b strings.Builder
	if err := writeE2EReport(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 15 {
		t.Errorf("%d lines for a run in which nothing ran, want the cause and one line:\n%s", len(lines), out)
	}
	cause := strings.Index(out, "Package libseccomp was not found")
	notRun := strings.Index(out, fmt.Sprintf("the %d selected assertions did not run", n))
	if cause < 0 || notRun < 0 || cause > notRun {
		t.Errorf("want the cause, then the line saying the %d assertions did not run:\n%s", n, out)
	}
	if c := strings.Count(out, "did not run") + strings.Count(out, "reported no result"); c != 1 {
		t.Errorf("%d lines about assertions that did not run, want 1:\n%s", c, out)
	}
	for _, noise := range []string{`"Action"`, "FAIL\t", "\n  exit status 1\n"} {
		if strings.Contains(out, noise) {
			t.Errorf("report carries test2json's framing %q:\n%s", noise, out)
		}
	}
}

func TestE2EReportListsEveryAssertionOnceOneRan(t *testing.T) {
	r, n := noneRanRun(t)
	r.Cases[0].Verdict, r.Cases[0].Message = results.Pass, ""
	var b strings.Builder
	if err := writeE2EReport(&b, r); err != nil {
		t.Fatal(err)
	}
	// The full report: a line (and a detail line) per assertion that did not run.
	if c := strings.Count(b.String(), framework.NotReported); c != n-1 {
		t.Errorf("%d not-run lines, want %d", c, n-1)
	}
}

func TestSuitesLogTail(t *testing.T) {
	got := suitesLogTail([]byte(issue31Log+"raw stderr line\n"), 3)
	want := "Package libseccomp was not found in the pkg-config search path.\npkg-config: exit status 1\nraw stderr line"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
