package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gangbench/gangbench/internal/binimage"
)

// fakeBinary writes a stand-in for the plugin binary: the image code never runs it.
func fakeBinary(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fakegpu-device-plugin")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeArchive writes the archive to a file and returns its path and the digest WriteArchive gave.
func writeArchive(t *testing.T, bin, ref string) (string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	digest, err := WriteArchiveFile(out, bin, ref)
	if err != nil {
		t.Fatal(err)
	}
	return out, digest
}

// layerFiles reads back every entry of img's single layer: header and content.
func layerFiles(t *testing.T, img v1.Image) map[string]binimage.File {
	t.Helper()
	files, err := binimage.Files(img)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestWriteArchiveLoadsBack(t *testing.T) {
	bin := fakeBinary(t, "#!fake plugin binary\n")
	path, digest := writeArchive(t, bin, "")

	tag, err := name.NewTag(DefaultRef)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("loading the archive as %s: %v", DefaultRef, err)
	}
	if d, err := img.Digest(); err != nil || d.String() != digest {
		t.Errorf("loaded digest %v (%v), WriteArchive said %s", d, err, digest)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{BinaryPath}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [%s]", cfg.Config.Entrypoint, cfg.Config.Cmd, BinaryPath)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if !cfg.Created.Time.Equal(time.Unix(0, 0)) {
		t.Errorf("created %s, want the fixed epoch", cfg.Created.Time)
	}
	if cfg.Config.User != "" {
		t.Errorf("user %q: the plugin must run as root to write the kubelet's socket directory", cfg.Config.User)
	}
	if len(cfg.RootFS.DiffIDs) != 1 || len(cfg.History) != 1 {
		t.Errorf("rootfs %v history %v, want one layer", cfg.RootFS.DiffIDs, cfg.History)
	}

	files := layerFiles(t, img)
	f, ok := files[strings.TrimPrefix(BinaryPath, "/")]
	if !ok || len(files) != 1 {
		t.Fatalf("layer holds %v, want only %s", slices.Collect(maps.Keys(files)), BinaryPath)
	}
	if f.Header.Typeflag != tar.TypeReg || f.Header.FileInfo().Mode().Perm() != 0o755 || f.Header.Uid != 0 || f.Header.Gid != 0 {
		t.Errorf("file header type %c mode %v uid %d gid %d, want regular 0755 root", f.Header.Typeflag, f.Header.FileInfo().Mode(), f.Header.Uid, f.Header.Gid)
	}
	if !f.Header.ModTime.Equal(time.Unix(0, 0)) {
		t.Errorf("mtime %s, want the fixed epoch", f.Header.ModTime)
	}
	if string(f.Data) != "#!fake plugin binary\n" {
		t.Errorf("file content %q", f.Data)
	}
}

// TestArchiveManifest checks the archive's docker-archive manifest.json: what ctr images import reads
// to name the image.
func TestArchiveManifest(t *testing.T) {
	bin := fakeBinary(t, "x")
	var buf bytes.Buffer
	if _, err := WriteArchive(&buf, bin, "example.com/fake/plugin:v1"); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	var names []string
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{"example.com/fake/plugin:v1"}) || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest.json = %+v (entries %v)", manifest, names)
	}
	for _, want := range []string{manifest[0].Config, manifest[0].Layers[0]} {
		if !slices.Contains(names, want) {
			t.Errorf("archive lacks %s; entries %v", want, names)
		}
	}
}

func TestDigestReproducible(t *testing.T) {
	a := fakeBinary(t, "binary one")
	a2 := fakeBinary(t, "binary one") // same content, other path and mtime
	b := fakeBinary(t, "binary two")
	_, d1 := writeArchive(t, a, "")
	_, d2 := writeArchive(t, a2, "")
	_, d3 := writeArchive(t, b, "")
	if d1 != d2 {
		t.Errorf("same binary gave digests %s and %s", d1, d2)
	}
	if d1 == d3 {
		t.Errorf("different binaries gave the same digest %s", d1)
	}
	if !strings.HasPrefix(d1, "sha256:") {
		t.Errorf("digest %q is not sha256:...", d1)
	}
	// The whole archive is byte-identical too, so a cache keyed on its hash works.
	p1, _ := writeArchive(t, a, "")
	p2, _ := writeArchive(t, a2, "")
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Errorf("archives of the same binary differ")
	}
}

func TestErrors(t *testing.T) {
	if _, err := Image(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Image(missing) succeeded")
	}
	if _, err := Image(fakeBinary(t, "")); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("Image(empty) = %v", err)
	}
	if _, err := WriteArchive(io.Discard, fakeBinary(t, "x"), "Bad Ref!"); err == nil || !strings.Contains(err.Error(), "Bad Ref!") {
		t.Errorf("WriteArchive(bad ref) = %v", err)
	}
	out := filepath.Join(t.TempDir(), "a.tar")
	if _, err := WriteArchiveFile(out, filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Error("WriteArchiveFile(missing binary) succeeded")
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed WriteArchiveFile left %s: %v", out, err)
	}
}

func TestBuildBinaryError(t *testing.T) {
	// A directory without the package: the error must show the command and go's complaint.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/empty\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := BuildBinary(context.Background(), dir, filepath.Join(dir, "out"))
	if err == nil {
		t.Fatal("BuildBinary succeeded without the package")
	}
	for _, want := range []string{"go build -trimpath -ldflags \"-s -w\"", Package, "CGO_ENABLED=0", "fakegpu-device-plugin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestBuildBinary compiles the real plugin: slow (the gRPC stack) so not in -short.
func TestBuildBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the plugin; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "fakegpu-device-plugin")
	if err := BuildBinary(ctx, "../..", out); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatalf("not an ELF binary: %v", err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("binary has an ELF interpreter: not static, it would not run in an empty image")
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("binary has a symbol table: -s not applied")
	}
	_, digest := writeArchive(t, out, "")
	_, again := writeArchive(t, out, "")
	if digest != again {
		t.Errorf("real binary digests differ: %s %s", digest, again)
	}
}
