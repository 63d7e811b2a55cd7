package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The stream is a real `go test -json` run (one package with a passing, a failing and a skipped
// test, each with a subtest or a log line) followed by a package whose binary timed out inside a test
// one that passed, and one whose parallel test resumed after the serial ones.
func streamGolden(t *testing.T) (printed, recorded string) {
	t.Helper()
	in, err := os.Open(filepath.Join("testdata", "go-test.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	rec := filepath.Join(t.TempDir(), "events.json")
	var out strings.Builder
	if err := run([]string{"stream", "-o", rec, "-step", "test"}, in, &out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), rec + "\x00" + string(b)
}

func TestStreamPrintsWhatPlainGoTestPrints(t *testing.T) {
	printed, _ := streamGolden(t)
	for _, want := range []string{
		"why it failed", "inner broke", "--- FAIL: TestFail (0.00s)", // a failed test, whole
		"FAIL\tgithub.com/gangbench/gangbench/demo\t0.029s",            // package lines
		"waiting for the cluster", "panic: test timed out after 10m0s", // a test that never ended
		"ok  \tgithub.com/gangbench/gangbench/passes\t0.010s",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("printed output lacks %q:\n%s", want, printed)
		}
	}
	for _, not := range []string{"quiet", "no engine", "=== RUN   TestPass", "\nPASS\n"} {
		if strings.Contains(printed, not) {
			t.Errorf("printed output has %q, from a test that passed or skipped:\n%s", not, printed)
		}
	}
	// The hung test's output comes before the package's verdict, as go test prints it.
	if i, j := strings.Index(printed, "waiting for the cluster"), strings.Index(printed, "FAIL\tgithub.com/gangbench/gangbench/hangs"); i > j {
		t.Errorf("the hung test's output follows its package's verdict:\n%s", printed)
	}
}

func TestTableFromRecordedEvents(t *testing.T) {
	_, rec := streamGolden(t)
	file, _, _ := strings.Cut(rec, "\x00")
	var out strings.Builder
	if err := run([]string{"table", "-top", "2", file}, nil, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	// Every test and subtest that ended: TestPass, TestPass/sub, TestOK, TestRed, TestRed/a; TestFail,
	// TestFail/inner; TestSkip.
	if !strings.Contains(got, "tests: 5 passed, 2 failed, 1 skipped\n") {
		t.Errorf("closing line wrong:\n%s", got)
	}
	// Slowest package first, module prefix stripped, the hung package's 10 minutes counted.
	if !regexp.MustCompile(`(?s)test\s+hangs\s+FAIL\s+0\s+0\s+0\s+10m0s.*test\s+demo\s+FAIL\s+2\s+2\s+1\s+30ms`).MatchString(got) {
		t.Errorf("package table wrong:\n%s", got)
	}
	if !strings.Contains(got, "slowest top-level tests (2 of 5;") {
		t.Errorf("-top 2 not honoured:\n%s", got)
	}
	// A parallel test reports 0.01 s of its own; its time is from its resume to its end.
	if !regexp.MustCompile(`\n  parallel\s+TestRed\s+ok\s+45s\s*\n`).MatchString(got) {
		t.Errorf("the parallel test's time is not its wall clock from its resume:\n%s", got)
	}
	if !regexp.MustCompile(`\n  test\s+10m2s\s*\n`).MatchString(got) {
		t.Errorf("wall time of the step wrong:\n%s", got)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"stream"}, {"stream", "-o"}, {"table"}, {"table", "-top", "x", "f"}, {"nope"}} {
		if err := run(args, strings.NewReader(""), &strings.Builder{}); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if err := run([]string{"table", filepath.Join("testdata", "missing.json")}, nil, &strings.Builder{}); err == nil {
		t.Error("a missing event file: no error")
	}
}
