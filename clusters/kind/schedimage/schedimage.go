// Package schedimage wraps a kube-scheduler binary (a fork, a PR build, gangbench's own build) into
// a container image without a container engine, so that the kind provider runs the very binary the
// local provider would run. The image holds the binary at /usr/local/bin/kube-scheduler, on PATH,
// because kubeadm's static pod runs `kube-scheduler` by name; nothing else is in it, so the binary
// must be static.
//
// The image is reproducible and its reference is derived from the binary
// (gangbench.dev/kube-scheduler:<version>-<first 12 hex of its sha256>): a rebuilt fork is a new
// image, which matters because the node never pulls (imagePullPolicy Never) and a stale image of the
// same name would otherwise be run silently.
package schedimage

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/internal/binimage"
)

const (
	// Repository is the image name every built scheduler image is tagged under. It is never pulled
	// (the archive is imported into the node), so no registry needs to exist at gangbench.dev.
	Repository = "gangbench.dev/kube-scheduler"
	// BinaryPath is where the binary sits in the image, and the entrypoint.
	BinaryPath = "/usr/local/bin/kube-scheduler"
	// PathEnv is the image's PATH: kubeadm's manifest runs `kube-scheduler` without a directory.
	PathEnv = "PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"

	// digestLen is how much of the binary's sha256 (hex) goes into the tag.
	digestLen = 12
	// maxTag is the OCI distribution limit on a tag's length.
	maxTag = 128
)

// Binary is a kube-scheduler binary that passed Inspect: static, for this machine, and a Kubernetes
// component. Its image is built from it by Image and WriteArchive.
type Binary struct {
	// Path is the binary's absolute path.
	Path string
	// Version is what the binary reports for --version, e.g. "v1.37.2".
	Version string
	// SHA256 is the hex sha256 of the binary.
	SHA256 string
	// Ref is the image reference, RefFor(Version, SHA256).
	Ref string
}

// Inspect checks that path can run in a scheduler image (a static linux executable for this
// machine's architecture, which kind's nodes share), asks it for its version with
// k8sbin.ProbeKubeVersion and hashes it. Every error names the path.
func Inspect(ctx context.Context, path string) (*Binary, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("scheduler binary %s: %w", path, err)
	}
	// The ELF is checked before the binary is run: a dynamic one would start fine here and only
	// fail in the node, where the image has no libc and no loader.
	if err := CheckStatic(abs); err != nil {
		return nil, err
	}
	version, err := k8sbin.ProbeKubeVersion(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("scheduler binary: %w", err)
	}
	sum, err := fileSHA256(abs)
	if err != nil {
		return nil, fmt.Errorf("scheduler binary %s: %w", abs, err)
	}
	return &Binary{Path: abs, Version: version, SHA256: sum, Ref: RefFor(version, sum)}, nil
}

// elfMachines are the ELF machines of the GOARCH values kind nodes exist for.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
}

// CheckStatic returns an error naming path unless it is an ELF executable without an interpreter
// or shared library dependencies, built for runtime.GOARCH. A shell script is refused too: the
// image has no shell.
func CheckStatic(path string) error {
	if fi, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("scheduler binary %s does not exist", path)
		}
		return fmt.Errorf("scheduler binary %s: %w", path, err)
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("scheduler binary %s is not a regular file (mode %s)", path, fi.Mode())
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("scheduler binary %s is not an ELF executable (%v); the kind provider runs it in an image that holds nothing else, so it must be a static linux binary", path, err)
	}
	defer func() { _ = f.Close() }()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("scheduler binary %s is an ELF %s, not an executable", path, f.Type)
	}
	if want, ok := elfMachines[runtime.GOARCH]; ok && f.Machine != want {
		return fmt.Errorf("scheduler binary %s is built for %s, but the kind nodes here run linux/%s (%s)", path, f.Machine, runtime.GOARCH, want)
	}
	if interp := interpreter(f); interp != "" {
		return fmt.Errorf("scheduler binary %s is dynamically linked (ELF interpreter %s): it would not run in the scheduler image, which holds nothing but the binary; build it static (CGO_ENABLED=0, as gangbench's own builds are)", path, interp)
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("scheduler binary %s needs shared libraries (%s): it would not run in the scheduler image, which holds nothing but the binary; build it static (CGO_ENABLED=0)", path, strings.Join(libs, ", "))
	}
	return nil
}

// interpreter is the binary's ELF interpreter (PT_INTERP, or the .interp section of a file whose
// program headers were stripped oddly), or "" for a static binary.
func interpreter(f *elf.File) string {
	var r io.Reader
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			r = p.Open()
			break
		}
	}
	if r == nil {
		if s := f.Section(".interp"); s != nil {
			r = s.Open()
		}
	}
	if r == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(r, 4096))
	if s := strings.TrimRight(string(b), "\x00"); s != "" {
		return s
	}
	return "(unreadable)"
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tagUnsafe are the characters a tag may not hold ([A-Za-z0-9_.-] are allowed).
var tagUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// RefFor is the image reference of a binary reporting version whose sha256 is sum (hex):
// Repository:<version, '+' and other characters a tag cannot hold made '-'>-<sum[:12]>, e.g.
// gangbench.dev/kube-scheduler:v1.37.2-0123456789ab.
func RefFor(version, sum string) string {
	v := tagUnsafe.ReplaceAllString(version, "-")
	if v == "" || v[0] == '.' || v[0] == '-' {
		v = "v" + v // a tag starts with a letter, digit or '_'
	}
	short := sum
	if len(short) > digestLen {
		short = short[:digestLen]
	}
	if limit := maxTag - len(short) - 1; len(v) > limit {
		v = v[:limit]
	}
	return Repository + ":" + v + "-" + short
}

// Image returns the image of b: one layer with BinaryPath (mode 0755), its parent directories and
// /tmp (a scratch image has none, and a scheduler fork that writes a profile or a temporary file
// should not fail for that), PATH set, linux/runtime.GOARCH, everything dated binimage.Epoch. It runs as
// root, as kubeadm's own kube-scheduler image does. The binary is read again and must still have
// b's hash: the reference was derived from it.
func (b *Binary) Image() (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("scheduler image: reading binary: %w", err)
	}
	if sum := sha256.Sum256(bin); hex.EncodeToString(sum[:]) != b.SHA256 {
		return nil, fmt.Errorf("scheduler binary %s changed since it was inspected (sha256 %s, now %x); start again", b.Path, b.SHA256, sum)
	}
	img, err := binimage.Image(bin, binimage.Spec{
		Path: BinaryPath,
		Dirs: []binimage.Dir{
			{Name: "tmp/", Mode: 0o1777},
			{Name: "usr/", Mode: 0o755},
			{Name: "usr/local/", Mode: 0o755},
			{Name: "usr/local/bin/", Mode: 0o755},
		},
		Env: []string{PathEnv},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "kube-scheduler",
			"org.opencontainers.image.version": b.Version,
			"org.opencontainers.image.source":  "https://github.com/gangbench/gangbench",
			"dev.gangbench.binary.sha256":      b.SHA256,
		},
		CreatedBy: "gangbench clusters/kind/schedimage: COPY kube-scheduler " + BinaryPath,
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler image: %w", err)
	}
	return img, nil
}

// WriteArchive writes b's image to w as a docker-archive tarball tagged b.Ref, the format
// `ctr images import` (kind's image loading) and `docker load` read, and returns the image's
// manifest digest. The same binary always gives the same bytes.
func (b *Binary) WriteArchive(w io.Writer) (digest string, err error) {
	tag, err := name.NewTag(b.Ref, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("scheduler image: reference %q: %w", b.Ref, err)
	}
	img, err := b.Image()
	if err != nil {
		return "", err
	}
	d, err := binimage.WriteArchive(w, tag, img)
	if err != nil {
		return "", fmt.Errorf("scheduler image: %w", err)
	}
	return d, nil
}
