// Package binimage wraps one static binary into a container image without a container engine or a
// registry: a single-layer image assembled with go-containerregistry and written as a
// docker-archive tarball, the format `ctr images import` (kind's image loading) and `docker load`
// read. Everything in it is dated the Unix epoch and its tar headers are fixed but for the sizes, so
// the same binary always gives the same digest, and a changed binary a new one.
//
// It is a leaf package: the kind provider's scheduler image (clusters/kind/schedimage) and the fake
// GPU device plugin's image (fakegpu/image) are both made by it.
package binimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Epoch dates the config, the history and every file, so the digest depends on the content alone
// (the SOURCE_DATE_EPOCH=0 convention ko uses too).
func Epoch() time.Time { return time.Unix(0, 0).UTC() }

// Dir is a directory the layer holds besides the binary.
type Dir struct {
	// Name is the directory's path without the leading slash and with a trailing one, e.g. "tmp/".
	Name string
	// Mode is its permission bits, e.g. 0o755 or 0o1777.
	Mode int64
}

// Spec says how the binary sits in its image.
type Spec struct {
	// Path is the binary's absolute path in the image (mode 0755) and the image's entrypoint.
	Path string
	// Dirs are written to the layer before the binary, in this order (tar readers create a missing
	// parent anyway; list the ones whose mode matters, or that the binary needs to exist).
	Dirs []Dir
	// Env is the image's environment, e.g. a PATH that holds Path's directory.
	Env []string
	// Labels are the image config's labels.
	Labels map[string]string
	// CreatedBy is the layer's history entry.
	CreatedBy string
}

// Image returns the image of bin: one layer with s.Dirs and the binary at s.Path, entrypoint
// s.Path, working directory /, linux on runtime.GOARCH (the architecture of the kind nodes on this
// machine), everything dated Epoch. It runs as root (no User): each caller says why that is right
// for its binary.
func Image(bin []byte, s Spec) (v1.Image, error) {
	if !strings.HasPrefix(s.Path, "/") || strings.HasSuffix(s.Path, "/") {
		return nil, fmt.Errorf("binary path %q in the image is not an absolute file path", s.Path)
	}
	layerTar, err := layer(bin, s)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	cfg := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: Epoch()},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: []string{s.Path},
			Env:        s.Env,
			WorkingDir: "/",
			Labels:     s.Labels,
		},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   l,
		History: v1.History{Created: v1.Time{Time: Epoch()}, CreatedBy: s.CreatedBy},
	})
	if err != nil {
		return nil, fmt.Errorf("adding layer: %w", err)
	}
	return img, nil
}

// layer is the layer's tar: s.Dirs, then the binary. Headers are fixed but for the binary's size,
// so the bytes depend on bin and s alone.
func layer(bin []byte, s Spec) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(bin) + 8<<10)
	tw := tar.NewWriter(&buf)
	var entries []*tar.Header
	for _, d := range s.Dirs {
		entries = append(entries, &tar.Header{Typeflag: tar.TypeDir, Name: d.Name, Mode: d.Mode})
	}
	entries = append(entries, &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(s.Path, "/"), Mode: 0o755, Size: int64(len(bin))})
	for _, h := range entries {
		h.ModTime = Epoch()
		h.Format = tar.FormatUSTAR // no PAX records, whose content could vary
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header %s: %w", h.Name, err)
		}
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteArchive writes img to w as a docker-archive tarball (manifest.json, config, gzipped layer)
// tagged tag, and returns the image's manifest digest ("sha256:..."). A runtime that imports the
// archive rebuilds the manifest and may record a different manifest digest; the config digest (the
// image ID crictl shows) is the same everywhere.
func WriteArchive(w io.Writer, tag name.Tag, img v1.Image) (digest string, err error) {
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	if err := tarball.Write(tag, img, w); err != nil {
		return "", fmt.Errorf("writing archive of %s: %w", tag, err)
	}
	return d.String(), nil
}

// File is one entry of an image's layer, as Files reads it back.
type File struct {
	Header *tar.Header
	Data   []byte
}

// Files reads back every entry of a single-layer image such as Image makes, by name: what tests of
// the callers check the layout with.
func Files(img v1.Image) (map[string]File, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	out := map[string]File{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[h.Name] = File{h, data}
	}
}
