package k8sbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const patchSrc = `package p

func a() int {
	if n < min {
		return 1
	}
	return 0
}

func b() int {
	if n < min {
		return 2
	}
	return 0
}
`

func TestEditApply(t *testing.T) {
	tests := []struct {
		name    string
		e       Edit
		want    string // a substring of the result
		wantErr string
	}{
		{"unique text", Edit{File: "p.go", Old: "return 1", New: "return 10"}, "return 10", ""},
		{"ambiguous text needs an anchor", Edit{File: "p.go", Old: "if n < min {", New: "if n <= min {"}, "", "occurs 2 times"},
		{"anchor picks the first occurrence after it", Edit{File: "p.go", Anchor: "func b()", Old: "if n < min {", New: "if n <= min {"}, "func b() int {\n\tif n <= min {", ""},
		{"missing text", Edit{File: "p.go", Old: "return 3", New: "return 4"}, "", "not found"},
		{"missing anchor", Edit{File: "p.go", Anchor: "func c()", Old: "return 0", New: "return 5"}, "", "anchor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.e.apply("demo", patchSrc)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "patch demo: p.go") {
					t.Fatalf("err %v, want one naming the patch and file and saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("result lacks %q:\n%s", tt.want, got)
			}
			if strings.Count(got, "\n") != strings.Count(patchSrc, "\n") {
				t.Errorf("the edit changed more than its line:\n%s", got)
			}
		})
	}
}

func TestPatchDigestAndValidate(t *testing.T) {
	p := Patch{Name: "x", Binary: SchedulerBinaryName, Edits: []Edit{{File: "a.go", Old: "<", New: "<="}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	q := p
	q.Name = "renamed"
	if p.Digest() != q.Digest() {
		t.Error("renaming a patch changed its digest (and so would rebuild it)")
	}
	q.Edits = []Edit{{File: "a.go", Old: "<", New: ">"}}
	if p.Digest() == q.Digest() {
		t.Error("a different edit has the same digest: the cache would serve the wrong build")
	}
	for _, bad := range []Patch{
		{Name: "b", Binary: "kubectl", Edits: p.Edits},
		{Name: "b", Binary: SchedulerBinaryName},
		{Name: "b", Binary: SchedulerBinaryName, Edits: []Edit{{File: "../a.go", Old: "x", New: "y"}}},
		{Name: "b", Binary: SchedulerBinaryName, Edits: []Edit{{File: "a.txt", Old: "x", New: "y"}}},
		{Name: "b", Binary: SchedulerBinaryName, Edits: []Edit{{File: "a.go", Old: "x", New: "x"}}},
		{Name: "b", Binary: SchedulerBinaryName, Stamp: "1.37"},
	} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "patch b") {
			t.Errorf("%+v: err %v, want one naming the patch", bad, err)
		}
	}
}

// TestPatchStamp: a stamp alone is a valid control build, its digest differs from the pristine
// patch's, a patch without a stamp keeps the digest it had before stamps existed, and the stamp
// reaches the version ldflags with its major and minor read past the build metadata.
func TestPatchStamp(t *testing.T) {
	control := Patch{Name: "fork", Binary: SchedulerBinaryName, Stamp: "v1.37.3-alpha.0.12+0123abcd"}
	if err := control.Validate(); err != nil {
		t.Fatalf("stamp-only control: %v", err)
	}
	plain := Patch{Name: "x", Binary: SchedulerBinaryName, Edits: []Edit{{File: "a.go", Old: "<", New: "<="}}}
	stamped := plain
	stamped.Stamp = "v1.37.2-dirty"
	if plain.Digest() == stamped.Digest() {
		t.Error("a stamped build has the unstamped one's digest: the cache would serve the wrong version")
	}
	// The digest of this patch before Stamp existed (cached mutant builds stay valid).
	if got, want := plain.Digest(), "ff50f20796097948"; got != want {
		t.Errorf("digest of an unstamped patch %s, want %s (unchanged)", got, want)
	}
	ld := kubeLDFlags(control.Stamp)
	for _, want := range []string{"version.gitVersion=v1.37.3-alpha.0.12+0123abcd", "version.gitMajor=1 ", "version.gitMinor=37 "} {
		if !strings.Contains(ld, want) {
			t.Errorf("ldflags %q lack %q", ld, want)
		}
	}
}

func TestPatchedSource(t *testing.T) {
	mod, dir := t.TempDir(), filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(filepath.Join(mod, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"pkg/p.go": patchSrc, "pkg/q.go": "package p\n", "go.mod": "module k8s.io/kubernetes\n"} {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	p := Patch{Name: "two", Binary: SchedulerBinaryName, Edits: []Edit{
		{File: "pkg/p.go", Old: "return 1", New: "return 10"},
		{File: "pkg/p.go", Old: "return 2", New: "return 20"},
	}}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for round := range 2 { // the second round reuses the copy
		restore, err := p.patchedSource(mod, dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := read("pkg/p.go"); !strings.Contains(got, "return 10") || !strings.Contains(got, "return 20") {
			t.Errorf("round %d: both edits of one file must land in the copy:\n%s", round, got)
		}
		if read("pkg/q.go") != "package p\n" || read("go.mod") != "module k8s.io/kubernetes\n" {
			t.Errorf("round %d: the untouched files were not copied as they are", round)
		}
		if err := restore(); err != nil {
			t.Fatal(err)
		}
		if read("pkg/p.go") != patchSrc {
			t.Errorf("round %d: restore left the patched file in the copy", round)
		}
	}
	if src, _ := os.ReadFile(filepath.Join(mod, "pkg", "p.go")); string(src) != patchSrc {
		t.Error("the module source was modified; it must stay pristine")
	}
	bad := Patch{Name: "bad", Binary: SchedulerBinaryName, Edits: []Edit{{File: "pkg/p.go", Old: "return 3", New: "x"}}}
	if _, err := bad.patchedSource(mod, dir); err == nil || !strings.Contains(err.Error(), "patch bad: pkg/p.go") {
		t.Errorf("err %v, want one naming the patch and the file", err)
	}
}
