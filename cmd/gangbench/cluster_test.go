package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// kindOnly are the command's files that are about the kind provider itself, not about choosing
// or using a provider: doctor reports what kind needs on this machine, and `kind node-image`
// builds kind's node image (which e2e builds up front, with progress, for a provider with
// Capabilities.Images). Every other file reaches providers through clusters/providers.
var kindOnly = []string{"doctor.go", "kindimage.go"}

// TestCommandImportsNoProvider keeps the command on the rule perf, suites and lab follow: it
// chooses providers through clusters/providers (Detect, Choices, New) and decides on capabilities,
// so no file but kindOnly imports a concrete provider, and those only kind.
func TestCommandImportsNoProvider(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	concrete := regexp.MustCompile(`^github\.com/gangbench/gangbench/clusters/(local|kind|existing)$`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			m := concrete.FindStringSubmatch(path)
			if m == nil || slices.Contains(kindOnly, f) && m[1] == "kind" {
				continue
			}
			t.Errorf("%s imports %s: choose and reach providers through clusters/providers", f, path)
		}
	}
}

// TestDeleteKubeconfigRefused: `cluster delete --kubeconfig` of a cluster gangbench did not
// create is refused before the cluster is contacted, as a usage error naming the flag that allows
// it; the harness's own state dirs (here empty temporary ones) do not hold that kubeconfig.
func TestDeleteKubeconfigRefused(t *testing.T) {
	state := t.TempDir()
	t.Setenv("GANGBENCH_STATE_DIR", filepath.Join(state, "local"))
	t.Setenv("GANGBENCH_KIND_STATE_DIR", filepath.Join(state, "kind"))
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	// Nothing listens on port 1: a refusal that came after contacting it would say so instead.
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: mine\n  context: {cluster: c, user: u}\ncurrent-context: mine\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"cluster", "delete", "--kubeconfig", kc}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "--allow-existing-cluster") {
		t.Errorf("exit %d, stderr %q: want a usage error naming --allow-existing-cluster", code, errb.String())
	}
}
