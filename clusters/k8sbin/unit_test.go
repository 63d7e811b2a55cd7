package k8sbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidateKubeVersion(t *testing.T) {
	for _, v := range []string{"v1.37.2", "v1.0.0", "v1.38.0-rc.1", "v1.38.0-alpha.0", "v10.200.3000"} {
		if err := ValidateKubeVersion(v); err != nil {
			t.Errorf("%q rejected: %v", v, err)
		}
	}
	for _, v := range []string{"", "1.37.2", "v1.37", "v1.37.2.1", "v1.37.x", "latest", "v01.2.3", "v1.37.2-", "v1.37.2-rc..1", "v1.37.2/x", "v1.37.2 ", "v1.37.2+meta"} {
		if err := ValidateKubeVersion(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
	if err := ValidateKubeVersion("1.37.2"); err == nil || !strings.Contains(err.Error(), "did you mean v1.37.2") {
		t.Errorf("missing hint: %v", err)
	}
}

func TestStagingVersionAndLDFlags(t *testing.T) {
	for in, want := range map[string]string{"v1.37.2": "v0.37.2", "v1.38.0-rc.1": "v0.38.0-rc.1", "v1.4.10": "v0.4.10"} {
		if got := stagingVersion(in); got != want {
			t.Errorf("stagingVersion(%s) = %s, want %s", in, got, want)
		}
	}
	if got := kubeLDFlags("v1.37.2"); got != wantLD {
		t.Errorf("ldflags:\n%s\nwant\n%s", got, wantLD)
	}
}

func TestParseGoModForms(t *testing.T) {
	mf, err := parseGoMod([]byte(`module example.com/m // comment
go 1.25
godebug (
	default=go1.25
	panicnil=1
)
require example.com/a v1.0.0
require (
	example.com/b v2.0.0 // indirect
)
replace example.com/a => ../a
replace example.com/b v2.0.0 => example.com/fork v2.1.0
exclude example.com/c v1.0.0
`))
	if err != nil {
		t.Fatal(err)
	}
	if mf.Module != "example.com/m" || mf.Go != "1.25" || strings.Join(mf.Godebug, ",") != "default=go1.25,panicnil=1" {
		t.Errorf("header: %+v", mf)
	}
	if mf.Require["example.com/a"] != "v1.0.0" || mf.Require["example.com/b"] != "v2.0.0" || len(mf.Require) != 2 {
		t.Errorf("require: %v", mf.Require)
	}
	if len(mf.Replace) != 2 || !mf.Replace[0].isLocal() || mf.Replace[1].isLocal() || mf.Replace[1].oldPath() != "example.com/b" {
		t.Errorf("replace: %+v", mf.Replace)
	}
	got := wrapperGoMod("v1.30.1", mf)
	want := `module gangbench.local/k8sbuild

go 1.25

godebug (
	default=go1.25
	panicnil=1
)

require k8s.io/kubernetes v1.30.1

replace (
	example.com/a => example.com/a v0.30.1
	example.com/b v2.0.0 => example.com/fork v2.1.0
)
`
	if got != want {
		t.Errorf("wrapper:\n%s\nwant\n%s", got, want)
	}

	if _, err := parseGoMod([]byte("require (\n\texample.com/a v1\n")); err == nil {
		t.Error("unterminated block accepted")
	}
	if _, err := parseGoMod([]byte("replace example.com/a ../a\n")); err == nil {
		t.Error("replace without => accepted")
	}
}

func TestWrapperFromExcerpt(t *testing.T) {
	mf, err := parseGoMod([]byte(kubeModExcerpt))
	if err != nil {
		t.Fatal(err)
	}
	if got := wrapperGoMod("v1.37.2", mf); got != wantWrapper {
		t.Errorf("wrapper:\n%s\nwant\n%s", got, wantWrapper)
	}
	if mf.Require[etcdServerModule] != "v3.7.0" {
		t.Errorf("etcd pin: %v", mf.Require)
	}
}

// TestRealKubernetesGoMod checks the parser against the genuine go.mod when
// the module cache has it (no download: skipped otherwise).
func TestRealKubernetesGoMod(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skip("no go command")
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "cache", "download", "k8s.io", "kubernetes", "@v", "v1.37.2.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skip("k8s.io/kubernetes@v1.37.2 not in the module cache")
	}
	mf, err := parseGoMod(data)
	if err != nil {
		t.Fatal(err)
	}
	if mf.Module != "k8s.io/kubernetes" || mf.Go == "" || mf.Require[etcdServerModule] != "v3.7.0" {
		t.Errorf("parsed: module %q go %q etcd %q", mf.Module, mf.Go, mf.Require[etcdServerModule])
	}
	if len(mf.Replace) < 20 {
		t.Fatalf("only %d replaces", len(mf.Replace))
	}
	wrapper := wrapperGoMod("v1.37.2", mf)
	for _, r := range mf.Replace {
		if !r.isLocal() || !strings.HasPrefix(r.Old, "k8s.io/") {
			t.Errorf("unexpected replace %+v", r)
		}
		if line := fmt.Sprintf("\t%s => %s v0.37.2\n", r.Old, r.Old); !strings.Contains(wrapper, line) {
			t.Errorf("wrapper lacks %q", line)
		}
	}
	if !strings.Contains(wrapper, "\ngodebug default=go1.26\n") {
		t.Errorf("godebug not copied:\n%s", wrapper[:200])
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 3}
	fmt.Fprint(tb, "a\nb\nc")
	fmt.Fprint(tb, "c\nd\n")
	fmt.Fprint(tb, "e")
	if got := tb.String(); got != "cc\nd\ne" {
		t.Errorf("tail = %q", got)
	}
	long := &tailBuffer{max: 2}
	long.Write([]byte(strings.Repeat("x", 3*maxLineLen) + "\nok\n"))
	if got := long.String(); len(got) != maxLineLen+3 || !strings.HasSuffix(got, "\nok") {
		t.Errorf("long line not capped: %d bytes", len(got))
	}
}

func TestQuoteArgs(t *testing.T) {
	got := quoteArgs([]string{"go", "build", "-ldflags", "-s -w -X a=b", "it's", ""})
	want := `go build -ldflags '-s -w -X a=b' 'it'\''s' ''`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestProbeVersion(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for name, c := range map[string]struct{ out, want string }{
		"apiserver": {"Kubernetes v1.37.2", "v1.37.2"},
		"scheduler": {"Kubernetes v1.38.0-rc.1", "v1.38.0-rc.1"},
		"etcd":      {"etcd Version: 3.7.0\nGit SHA: abc\nGo Version: go1.26.8\nGo OS/Arch: linux/amd64", "v3.7.0"},
		"kwok":      {"kwok version v0.8.0 go1.26.8 (linux/amd64)", "v0.8.0"},
	} {
		p := writeScript(t, filepath.Join(dir, name), "#!/bin/sh\n[ \"$1\" = --version ] || exit 9\necho '"+strings.ReplaceAll(c.out, "\n", "'\necho '")+"'\n", 0o755)
		got, err := ProbeVersion(ctx, p)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, c.want)
		}
	}

	garbage := writeScript(t, filepath.Join(dir, "garbage"), "#!/bin/sh\necho 'hello world'\n", 0o755)
	if _, err := ProbeVersion(ctx, garbage); err == nil || !strings.Contains(err.Error(), garbage) || !strings.Contains(err.Error(), "hello world") {
		t.Errorf("unrecognised: %v", err)
	}
	failing := writeScript(t, filepath.Join(dir, "failing"), "#!/bin/sh\necho 'unknown flag: --version' >&2\nexit 1\n", 0o755)
	if _, err := ProbeVersion(ctx, failing); err == nil || !strings.Contains(err.Error(), failing) || !strings.Contains(err.Error(), "unknown flag") {
		t.Errorf("failing: %v", err)
	}
	noexec := writeScript(t, filepath.Join(dir, "noexec"), "#!/bin/sh\necho Kubernetes v1.37.2\n", 0o644)
	if _, err := ProbeVersion(ctx, noexec); err == nil || !strings.Contains(err.Error(), noexec) || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("noexec: %v", err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := ProbeVersion(ctx, missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing: %v", err)
	}
	if _, err := ProbeVersion(ctx, dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("dir: %v", err)
	}

	// A binary that never exits is cut off (here by the caller's shorter
	// deadline; the built-in 20s limit works the same way).
	hang := writeScript(t, filepath.Join(dir, "hang"), "#!/bin/sh\nexec sleep 60\n", 0o755)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := ProbeVersion(short, hang); err == nil || !strings.Contains(err.Error(), hang) {
		t.Errorf("hang: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("hang took %s", d)
	}
}
