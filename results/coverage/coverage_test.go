package coverage

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const src = `package queue

func AddPodGroup(x int) int {
	if x > 0 {
		return 1
	}
	return 0
}

func Other() int {
	return 2
}
`

// TestReport: blocks merged across counter files (a block run in any counts), shared files
// narrowed to their gang functions, uncovered blocks named by function, missing files flagged.
func TestReport(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pkg", "queue")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "q.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	const f = "k8s.io/kubernetes/pkg/queue/q.go"
	profile := "mode: set\n" +
		f + ":3.29,4.11 1 1\n" + // the if: ran
		f + ":4.11,6.3 1 0\n" + // return 1: never in this file...
		f + ":4.11,6.3 1 1\n" + // ...but in the next counter file
		f + ":7.2,7.10 1 0\n" + // return 0: never
		f + ":10.18,12.2 1 0\n" // Other: not gang code
	blocks, err := ParseProfile(strings.NewReader(profile))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("%d blocks after merging, want 4: %+v", len(blocks), blocks)
	}
	rs, err := Report(blocks, []Target{
		{Path: "pkg/queue/q.go", Funcs: regexp.MustCompile("PodGroup")},
		{Path: "pkg/queue/gone.go"},
	}, root)
	if err != nil {
		t.Fatal(err)
	}
	q := rs[0]
	if q.Statements != 3 || q.Covered != 2 || len(q.Uncovered) != 1 || q.Uncovered[0].Func != "AddPodGroup" || q.Uncovered[0].StartLine != 7 {
		t.Errorf("report %+v, want 2 of 3 statements, AddPodGroup line 7 uncovered, Other left out", q)
	}
	if !rs[1].Missing {
		t.Errorf("a file not in the source is not flagged: %+v", rs[1])
	}
	md := Markdown("t", rs)
	for _, want := range []string{"2 of 3 (66.7 %)", "| AddPodGroup | 7-7 | 1 |", "not in this source"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	h, err := HTML("t", rs, blocks, root)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h, "<span class=r>\treturn 0</span>") || !strings.Contains(h, "<span class=c>\t\treturn 1</span>") || strings.Contains(h, "<span class=r>\treturn 2") {
		t.Errorf("html marks the wrong lines:\n%s", h)
	}
}

func TestParseProfileErrors(t *testing.T) {
	_, err := ParseProfile(strings.NewReader("mode: set\nnot a block\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err %v, want one naming line 2", err)
	}
}
