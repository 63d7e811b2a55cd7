package binimage

import (
	"bytes"
	"io"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var spec = Spec{
	Path:      "/usr/local/bin/tool",
	Dirs:      []Dir{{Name: "tmp/", Mode: 0o1777}, {Name: "usr/local/bin/", Mode: 0o755}},
	Env:       []string{"PATH=/usr/local/bin"},
	Labels:    map[string]string{"org.opencontainers.image.title": "tool"},
	CreatedBy: "test: COPY tool",
}

func TestImageLayout(t *testing.T) {
	bin := []byte("\x7fELF not really")
	img, err := Image(bin, spec)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(img)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"tmp/": 0o1777, "usr/local/bin/": 0o755, "usr/local/bin/tool": 0o755}
	if len(files) != len(want) {
		t.Errorf("layer has %d entries, want %d", len(files), len(want))
	}
	for n, mode := range want {
		f, ok := files[n]
		switch {
		case !ok:
			t.Errorf("layer has no %s", n)
		case f.Header.Mode != mode:
			t.Errorf("%s mode %o, want %o", n, f.Header.Mode, mode)
		case !f.Header.ModTime.Equal(Epoch()):
			t.Errorf("%s mtime %s, want the epoch", n, f.Header.ModTime)
		}
	}
	if got := files["usr/local/bin/tool"].Data; !bytes.Equal(got, bin) {
		t.Errorf("binary in the layer is %q, want %q", got, bin)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{spec.Path}) || !slices.Equal(cfg.Config.Env, spec.Env) ||
		cfg.Config.Labels["org.opencontainers.image.title"] != "tool" || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("config = %+v, os %s arch %s", cfg.Config, cfg.OS, cfg.Architecture)
	}
	if !cfg.Created.Time.Equal(Epoch()) || len(cfg.History) != 1 || cfg.History[0].CreatedBy != spec.CreatedBy {
		t.Errorf("created %s, history %+v", cfg.Created.Time, cfg.History)
	}
}

func TestImageIsReproducible(t *testing.T) {
	digest := func(bin string) string {
		img, err := Image([]byte(bin), spec)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	if a, b := digest("one"), digest("one"); a != b {
		t.Errorf("same binary, digests %s and %s", a, b)
	}
	if a, b := digest("one"), digest("two"); a == b {
		t.Errorf("different binaries, same digest %s", a)
	}
}

func TestImageRefusesARelativePath(t *testing.T) {
	for _, p := range []string{"tool", "", "/usr/local/bin/"} {
		s := spec
		s.Path = p
		if _, err := Image([]byte("x"), s); err == nil {
			t.Errorf("Image with path %q: no error", p)
		}
	}
}

func TestWriteArchiveRoundTrip(t *testing.T) {
	img, err := Image([]byte("bin"), spec)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("example.test/tool:v1", name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	d, err := WriteArchive(&buf, tag, img)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }, &tag)
	if err != nil {
		t.Fatalf("archive has no image tagged %s: %v", tag, err)
	}
	cfgWant, _ := img.ConfigName()
	cfgGot, err := back.ConfigName()
	if err != nil || cfgGot != cfgWant {
		t.Errorf("archived config %s (%v), want %s", cfgGot, err, cfgWant)
	}
	if want, _ := img.Digest(); d != want.String() {
		t.Errorf("WriteArchive returned %s, want the image's digest %s", d, want)
	}
}
