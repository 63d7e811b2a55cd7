package kind

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestFindModuleRoot(t *testing.T) {
	root, err := findModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "clusters", "kind", "defaults.go")); err != nil {
		t.Errorf("module root %s does not hold this package: %v", root, err)
	}
	if got := moduleLine("// x\nmodule \"github.com/gangbench/gangbench\"\n\ngo 1.26\n"); got != modulePath {
		t.Errorf("moduleLine: %q", got)
	}
}

func TestNewWiresDefaults(t *testing.T) {
	p, err := New(WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	o := p.opts
	if o.BuildPluginArchive == nil || o.DeployDevicePlugin == nil || o.WaitAllocatable == nil || o.WaitPublished == nil || o.Runner == nil {
		t.Errorf("defaults not wired: %+v", o)
	}
	if p.Name() != "kind" {
		t.Errorf("name %q", p.Name())
	}
	if _, err := New(WithEngine("lxc")); err == nil {
		t.Error("unknown engine accepted")
	}
}

// TestDefaultPluginArchive builds the real device plugin and its image archive, as Create does
// before loading it into the workers.
func TestDefaultPluginArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the device plugin binary; skipped in -short mode")
	}
	var buf bytes.Buffer
	if err := buildPluginArchive(context.Background(), "", &buf, defaultPluginRef); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "manifest.json" {
			found = true
		}
	}
	if !found {
		t.Error("archive has no manifest.json: ctr import would refuse it")
	}
}
