// Package image builds the fake GPU device plugin's container image without a container engine:
// a static Go binary in a single-layer image, written as a docker-archive tarball that
// `ctr images import` (what kind's node image loading runs) accepts. The image is reproducible: the
// same binary always gives the same digest, so a re-load of an unchanged plugin is recognisable.
package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gangbench/gangbench/internal/binimage"
)

const (
	// DefaultRef is the image reference the archive is tagged with and the DaemonSet runs. The tag
	// is never pulled (imagePullPolicy IfNotPresent, the image is loaded onto every node), so no
	// registry needs to exist at gangbench.dev.
	DefaultRef = "gangbench.dev/fakegpu-device-plugin:dev"
	// BinaryPath is where the binary sits in the image, and the entrypoint.
	BinaryPath = "/fakegpu-device-plugin"
	// Package is the binary's Go package, relative to the module root.
	Package = "./cmd/fakegpu-device-plugin"

	// outputTail bounds how much of a failed build's output an error carries.
	outputTail = 4 << 10
)

// BuildBinary compiles the device plugin from the module at moduleRoot into out: static
// (CGO_ENABLED=0) for linux on this machine's architecture, which is what kind's nodes run, and
// stripped and trimmed so the result does not depend on where the module lives. The error carries
// the command line and the tail of its output.
func BuildBinary(ctx context.Context, moduleRoot, out string) error {
	abs, err := filepath.Abs(out) // the command runs in moduleRoot, out is relative to the caller
	if err != nil {
		return fmt.Errorf("image: output path %q: %w", out, err)
	}
	argv := []string{"go", "build", "-trimpath", "-ldflags", "-s -w", "-o", abs, Package}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	output, err := cmd.CombinedOutput()
	if err != nil {
		tail := output
		if len(tail) > outputTail {
			tail = append([]byte("..."), tail[len(tail)-outputTail:]...)
		}
		return fmt.Errorf("image: %s (in %s, CGO_ENABLED=0 GOOS=linux GOARCH=%s): %w\n%s",
			strings.Join(quoteArgs(argv), " "), moduleRoot, runtime.GOARCH, err, bytes.TrimSpace(tail))
	}
	return nil
}

// quoteArgs quotes the arguments that need it, so an error's command line can be pasted.
func quoteArgs(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\"'\\$") {
			a = fmt.Sprintf("%q", a)
		}
		out[i] = a
	}
	return out
}

// Image returns the image for the binary at binaryPath: one layer holding BinaryPath (mode 0755),
// entrypoint BinaryPath, linux on runtime.GOARCH (BuildBinary's target), everything dated
// binimage.Epoch.
//
// It runs as root (no User): the plugin creates its socket in the hostPath
// /var/lib/kubelet/device-plugins, which the kubelet owns as root with mode 0750, so a non-root
// user such as 65532 could not. The DaemonSet drops all capabilities instead; root needs none of them
// to write to a directory it owns.
func Image(binaryPath string) (v1.Image, error) {
	bin, err := os.ReadFile(binaryPath)
	if err != nil {
		return nil, fmt.Errorf("image: reading binary: %w", err)
	}
	if len(bin) == 0 {
		return nil, fmt.Errorf("image: binary %s is empty", binaryPath)
	}
	img, err := binimage.Image(bin, binimage.Spec{
		Path: BinaryPath,
		Labels: map[string]string{
			"org.opencontainers.image.title":  "fakegpu-device-plugin",
			"org.opencontainers.image.source": "https://github.com/gangbench/gangbench",
		},
		CreatedBy: "gangbench fakegpu/image: COPY fakegpu-device-plugin " + BinaryPath,
	})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// WriteArchive writes Image(binaryPath) to w as a docker-archive tarball tagged ref (DefaultRef if
// empty), the format `ctr images import` and `docker load` read, and returns the image's manifest
// digest (see binimage.WriteArchive for which digest a runtime shows).
func WriteArchive(w io.Writer, binaryPath, ref string) (digest string, err error) {
	if ref == "" {
		ref = DefaultRef
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("image: reference %q: %w", ref, err)
	}
	img, err := Image(binaryPath)
	if err != nil {
		return "", err
	}
	d, err := binimage.WriteArchive(w, tag, img)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	return d, nil
}

// WriteArchiveFile is WriteArchive to a new file at path, removed again on failure.
func WriteArchiveFile(path, binaryPath, ref string) (digest string, err error) {
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("image: %w", cerr)
		}
		if err != nil {
			err = errors.Join(err, removeIfExists(path))
		}
	}()
	return WriteArchive(f, binaryPath, ref)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
