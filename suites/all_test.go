package suites

import (
	"go/parser"
	"go/token"
	"testing"
)

// TestRegistry checks that each registered suite's features say they belong to it, that no feature
// is registered twice, and that the Go test named for -test.run filters exists in
// conformance_test.go (a misspelt name would silently run nothing).
func TestRegistry(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "conformance_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	for name, obj := range f.Scope.Objects {
		if obj.Kind.String() == "func" {
			tests[name] = true
		}
	}
	seen := map[string]string{}
	for _, s := range registry() {
		if !tests[s.test] {
			t.Errorf("suite %q: conformance_test.go has no func %s", s.name, s.test)
		}
		fs := s.features()
		if len(fs) == 0 {
			t.Errorf("suite %q has no features", s.name)
		}
		for _, f := range fs {
			if f.Suite != s.name {
				t.Errorf("suite %q: feature %q says it belongs to %q", s.name, f.Name, f.Suite)
			}
			if prev, dup := seen[f.Name]; dup {
				t.Errorf("feature %q registered by %q and %q", f.Name, prev, s.name)
			}
			seen[f.Name] = s.name
		}
	}
}
