package suites_test

import (
	"strings"
	"testing"
)

// TestFailures: the messages under a failed assertion are kept, passing tests and parents whose
// failure is only their children's are left out, and the cap holds.
func TestFailures(t *testing.T) {
	out := `=== RUN   TestStatus
    --- FAIL: TestStatus/observedGeneration/STA-05_next_write (45.01s)
        wait_final.go:171: PodGroup gang True/Scheduled: settled after 14s; last seen generation 0, False/Unschedulable
        lane.go:88: lane status-2: 3 pods, 0 bound
    --- PASS: TestStatus/observedGeneration/STA-03_false (2.00s)
--- FAIL: TestStatus (47.00s)
--- PASS: TestBarriers (3.00s)
FAIL
`
	got := failures(out, 10)
	for _, want := range []string{"STA-05_next_write", "settled after 14s", "lane status-2: 3 pods, 0 bound"} {
		if !strings.Contains(got, want) {
			t.Errorf("failures() lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"STA-03", "TestBarriers", "--- FAIL: TestStatus (47"} {
		if strings.Contains(got, not) {
			t.Errorf("failures() has %q:\n%s", not, got)
		}
	}
	if capped := failures(out, 2); strings.Count(capped, "\n") != 3 || !strings.HasSuffix(capped, "…\n") {
		t.Errorf("failures(out, 2) = %q, want 2 lines and an ellipsis", capped)
	}
}

// A parallel subtest's messages printed under its "=== NAME" header, away from its "--- FAIL"
// line, are found there (the last CI failure's cause was lost that way).
func TestFailuresOfParallelSubtests(t *testing.T) {
	out := `=== RUN   TestBarriers/dying/BAR-47_both
=== NAME  TestBarriers/other/BAR-01_ok
    barriers.go:10: unrelated log
=== NAME  TestBarriers/dying/BAR-47_both
    wait.go:372: timed out after 1m0s waiting for a FailedScheduling event on dying-1
=== NAME  TestBarriers
    --- PASS: TestBarriers/other/BAR-01_ok (1.00s)
    --- FAIL: TestBarriers/dying/BAR-47_both (61.21s)
--- FAIL: TestBarriers (61.21s)
`
	got := failures(out, 10)
	if !strings.Contains(got, "timed out after 1m0s waiting for a FailedScheduling event on dying-1") || strings.Contains(got, "unrelated log") {
		t.Errorf("failures() = %q, want BAR-47's message and not BAR-01's", got)
	}
}
