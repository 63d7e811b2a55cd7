package schedimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gangbench/gangbench/clusters/kind/schedimage"
	"github.com/gangbench/gangbench/clusters/kind/schedimage/schedimagetest"
	"github.com/gangbench/gangbench/internal/binimage"
)

func inspect(t *testing.T, path string) *schedimage.Binary {
	t.Helper()
	b, err := schedimage.Inspect(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// archive writes b's archive and returns its bytes and the digest WriteArchive reported.
func archive(t *testing.T, b *schedimage.Binary) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	d, err := b.WriteArchive(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), d
}

// readArchive is how a test reads a docker-archive back: the image tagged ref in it.
func readArchive(t *testing.T, data []byte, ref string) v1.Image {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, &tag)
	if err != nil {
		t.Fatalf("archive has no image tagged %s: %v", ref, err)
	}
	return img
}

// layerEntries reads back every entry of img's single layer.
func layerEntries(t *testing.T, img v1.Image) map[string]binimage.File {
	t.Helper()
	files, err := binimage.Files(img)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestImageOfStaticBinary(t *testing.T) {
	bin := schedimagetest.StaticScheduler(t, "v1.37.2")
	b := inspect(t, bin)
	content, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if b.Version != "v1.37.2" || b.SHA256 != hex.EncodeToString(sum[:]) || b.Path != bin {
		t.Errorf("inspected %+v", b)
	}
	if want := "gangbench.dev/kube-scheduler:v1.37.2-" + hex.EncodeToString(sum[:])[:12]; b.Ref != want {
		t.Errorf("ref %q, want %q", b.Ref, want)
	}

	data, digest := archive(t, b)
	img := readArchive(t, data, b.Ref)
	if d, err := img.Digest(); err != nil || d.String() != digest {
		t.Errorf("archive's image digest %v (%v), WriteArchive said %s", d, err, digest)
	}
	files := layerEntries(t, img)
	kb, ok := files["usr/local/bin/kube-scheduler"]
	if !ok {
		t.Fatalf("layer lacks usr/local/bin/kube-scheduler: %v", slices.Sorted(maps.Keys(files)))
	}
	if kb.Header.Typeflag != tar.TypeReg || kb.Header.Mode != 0o755 || !bytes.Equal(kb.Data, content) || kb.Header.ModTime.Unix() != 0 || kb.Header.Uid != 0 {
		t.Errorf("binary entry: type %c mode %o mtime %s uid %d, content equal %v", kb.Header.Typeflag, kb.Header.Mode, kb.Header.ModTime, kb.Header.Uid, bytes.Equal(kb.Data, content))
	}
	for _, dir := range []string{"usr/", "usr/local/", "usr/local/bin/", "tmp/"} {
		if e, ok := files[dir]; !ok || e.Header.Typeflag != tar.TypeDir {
			t.Errorf("layer lacks directory %s", dir)
		}
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH || cfg.Created.Unix() != 0 {
		t.Errorf("platform %s/%s created %s", cfg.OS, cfg.Architecture, cfg.Created)
	}
	// kubeadm's manifest runs `kube-scheduler` by name: the image's PATH must find it.
	var path string
	for _, e := range cfg.Config.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	if !slices.Contains(strings.Split(path, ":"), "/usr/local/bin") {
		t.Errorf("env %v: PATH lacks /usr/local/bin", cfg.Config.Env)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{schedimage.BinaryPath}) || cfg.Config.User != "" {
		t.Errorf("entrypoint %v user %q", cfg.Config.Entrypoint, cfg.Config.User)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "v1.37.2" || cfg.Config.Labels["dev.gangbench.binary.sha256"] != b.SHA256 {
		t.Errorf("labels %v", cfg.Config.Labels)
	}

	// The archive's manifest.json names the ref: that is the name ctr records.
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no manifest.json in the archive: %v", err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{b.Ref}) {
			t.Errorf("manifest.json %+v", m)
		}
		break
	}
}

func TestSameBinarySameImage(t *testing.T) {
	bin := schedimagetest.StaticScheduler(t, "v1.37.2")
	a1, d1 := archive(t, inspect(t, bin))
	a2, d2 := archive(t, inspect(t, bin))
	if d1 != d2 || !bytes.Equal(a1, a2) {
		t.Errorf("the same binary gave two images: %s, %s (archives equal: %v)", d1, d2, bytes.Equal(a1, a2))
	}

	// A rebuilt fork of the same version is a new image under a new name: the node never pulls,
	// so a reused name would run the old binary.
	content, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "kube-scheduler")
	if err := os.WriteFile(changed, append(content, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	b1, b2 := inspect(t, bin), inspect(t, changed)
	if b2.Version != b1.Version || b2.Ref == b1.Ref {
		t.Errorf("changed binary: version %s ref %s; original %s %s", b2.Version, b2.Ref, b1.Version, b1.Ref)
	}
	if _, d3 := archive(t, b2); d3 == d1 {
		t.Errorf("changed binary, same digest %s", d3)
	}
}

func TestBinaryChangedAfterInspect(t *testing.T) {
	bin := schedimagetest.StaticScheduler(t, "v1.37.2")
	b := inspect(t, bin)
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{0})
	f.Close()
	if _, err := b.WriteArchive(io.Discard); err == nil || !strings.Contains(err.Error(), "changed since it was inspected") {
		t.Errorf("WriteArchive after the binary changed: %v", err)
	}
}

func TestRefFor(t *testing.T) {
	sum := strings.Repeat("0123456789abcdef", 4)
	long := "v1.37.2-" + strings.Repeat("x", 200)
	for _, tc := range []struct{ version, want string }{
		{"v1.37.2", "gangbench.dev/kube-scheduler:v1.37.2-0123456789ab"},
		{"v1.37.0-gangbench.1", "gangbench.dev/kube-scheduler:v1.37.0-gangbench.1-0123456789ab"},
		{"v1.38.0-alpha.1+0f3a9c/dirty", "gangbench.dev/kube-scheduler:v1.38.0-alpha.1-0f3a9c-dirty-0123456789ab"},
		{"", "gangbench.dev/kube-scheduler:v-0123456789ab"},
		{long, "gangbench.dev/kube-scheduler:" + long[:128-13] + "-0123456789ab"},
	} {
		got := schedimage.RefFor(tc.version, sum)
		if got != tc.want {
			t.Errorf("RefFor(%q) = %q, want %q", tc.version, got, tc.want)
		}
		if _, err := name.NewTag(got, name.StrictValidation); err != nil {
			t.Errorf("RefFor(%q) = %q is not a valid tag: %v", tc.version, got, err)
		}
	}
}

func TestInspectRefuses(t *testing.T) {
	dir := t.TempDir()
	other := elf.EM_AARCH64
	if schedimagetest.Machine() == elf.EM_AARCH64 {
		other = elf.EM_X86_64
	}
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho Kubernetes v1.37.2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"dynamically linked", schedimagetest.WriteELF(t, filepath.Join(dir, "dynamic"), schedimagetest.Machine(), "/lib64/ld-linux-x86-64.so.2"),
			[]string{"dynamically linked", "/lib64/ld-linux-x86-64.so.2", "CGO_ENABLED=0"}},
		{"another architecture", schedimagetest.WriteELF(t, filepath.Join(dir, "foreign"), other, ""), []string{"is built for " + other.String()}},
		{"a shell script", script, []string{"not an ELF executable"}},
		{"missing", filepath.Join(dir, "missing"), []string{"does not exist"}},
		{"a directory", dir, []string{"not a regular file"}},
		{"not a Kubernetes component", schedimagetest.StaticScheduler(t, "garbage"), []string{"--version printed no recognisable version", "Kubernetes garbage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := schedimage.Inspect(context.Background(), tc.path)
			if err == nil {
				t.Fatalf("accepted: %+v", b)
			}
			for _, w := range append([]string{tc.path}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func TestCheckStatic(t *testing.T) {
	dir := t.TempDir()
	// An ELF without an interpreter for this machine passes (it is never run here).
	if err := schedimage.CheckStatic(schedimagetest.WriteELF(t, filepath.Join(dir, "static"), schedimagetest.Machine(), "")); err != nil {
		t.Errorf("static ELF refused: %v", err)
	}
	if err := schedimage.CheckStatic(schedimagetest.StaticScheduler(t, "v1.37.2")); err != nil {
		t.Errorf("CGO_ENABLED=0 Go binary refused: %v", err)
	}
	// A dynamically linked binary of this machine, where there is one: the helper's ELF is
	// synthetic, this one is what a user with a cgo build would give.
	for _, p := range []string{"/bin/sh", "/usr/bin/env"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		f.Close()
		if !dynamic {
			continue
		}
		if err := schedimage.CheckStatic(p); err == nil || !regexp.MustCompile(`dynamically linked \(ELF interpreter /\S+\)`).MatchString(err.Error()) {
			t.Errorf("CheckStatic(%s) = %v", p, err)
		}
		break
	}
}
