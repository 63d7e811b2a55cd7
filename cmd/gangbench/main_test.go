package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/suites"
	"github.com/gangbench/gangbench/suites/framework"
)

var update = flag.Bool("update", false, "rewrite docs/assertions.md")

// TestAssertionDocUpToDate keeps docs/assertions.md generated from the code: IDs and statements live
// in the suites, and the doc must not drift from them.
func TestAssertionDocUpToDate(t *testing.T) {
	var b bytes.Buffer
	if err := writeAssertionDoc(&b, framework.Catalogue(suites.All())); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "assertions.md")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with `make docs`)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("docs/assertions.md is out of date with the suites; run `make docs` (or go test ./cmd/gangbench -update)")
	}
}

// TestAssertionIDsUnique guards the property results and docs rely on.
func TestAssertionIDsUnique(t *testing.T) {
	seen := map[string]string{}
	for _, a := range framework.Catalogue(suites.All()) {
		if prev, ok := seen[a.ID]; ok {
			t.Errorf("assertion ID %s used twice: %q and %q", a.ID, prev, a.Statement)
		}
		seen[a.ID] = a.Statement
		if a.Statement == "" || a.Ref == "" || a.Suite == "" {
			t.Errorf("assertion %s lacks a statement, reference or suite: %+v", a.ID, a)
		}
		if strings.Contains(a.Statement, "\n") {
			t.Errorf("assertion %s statement spans lines", a.ID)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"cluster", "create", "--nodes", "0"}, &out, &errb); code != exitUsage {
		t.Errorf("--nodes 0: exit %d, want %d (stderr %q)", code, exitUsage, errb.String())
	}
	if !strings.Contains(errb.String(), "nodes: 0") {
		t.Errorf("error does not name the field and value: %q", errb.String())
	}
	errb.Reset()
	if code := run([]string{"e2e", "--suites", "nope"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `unknown suite "nope"`) {
		t.Errorf("--suites nope: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"cluster", "create", "--scheduler-feature-gates", "GenericWorkload=maybe"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `"maybe"`) {
		t.Errorf("bad gate value: exit %d, stderr %q", code, errb.String())
	}
}
