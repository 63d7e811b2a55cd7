package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportLayout keeps the import rules DESIGN.md draws: suites and perf never import each other
// (what both need lives in observe/ or scenarios/), results and fakegpu import no other package of
// ours but the leaf helpers in internal/ (which import nothing of ours outside internal/), scenarios
// and observe reach clusters only through client-go, and clusters import none of the layers above.
func TestImportLayout(t *testing.T) {
	const mod = "github.com/gangbench/gangbench/"
	forbidden := map[string][]string{
		"suites":    {"perf"},
		"perf":      {"suites", "cmd"},
		"observe":   {"suites", "perf", "clusters", "cmd"},
		"scenarios": {"suites", "perf", "observe", "clusters", "cmd"},
		"clusters":  {"suites", "perf", "observe", "scenarios", "lab", "cmd"},
		"results":   {""}, // nothing of ours outside results/ and internal/
		"fakegpu":   {""},
		"internal":  {""},
	}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "_output" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		rules, ok := forbidden[top]
		if !ok || top == "clusters" && strings.HasSuffix(path, "_test.go") {
			// A provider's own integration tests may drive it with the workload builders above it.
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			ours, isOurs := strings.CutPrefix(p, mod)
			if !isOurs {
				continue
			}
			for _, bad := range rules {
				if bad == "" && !strings.HasPrefix(ours, top+"/") && ours != top && !strings.HasPrefix(ours, "internal/") || bad != "" && (ours == bad || strings.HasPrefix(ours, bad+"/")) {
					t.Errorf("%s imports %s: %s must not import %q (DESIGN.md, imports point down)", rel, p, top, bad)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoConcreteProvider keeps perf, suites and lab off the concrete providers, transitively: they
// get clusters from request.Factory (clusters/providers, wired in by main and the suites' TestMain)
// and ask Capabilities what a cluster can do, so a new provider changes none of them.
func TestNoConcreteProvider(t *testing.T) {
	const mod = "github.com/gangbench/gangbench/"
	out, err := exec.Command("go", "list", "-deps", mod+"suites", mod+"suites/framework", mod+"perf/...", mod+"lab/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, concrete := range []string{"clusters/kind", "clusters/local", "clusters/existing", "clusters/providers"} {
			if p == mod+concrete || strings.HasPrefix(p, mod+concrete+"/") {
				t.Errorf("perf, suites or lab depend on %s: build clusters through request.Factory instead", p)
			}
		}
	}
}
