package k8sbin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TargetKubernetesPatched is one control-plane binary built from k8s.io/kubernetes with a Patch
// applied (to a copy of the source, see patchedSource): a deliberately wrong scheduler (or apiserver) that proves a suite can fail. Its cache
// directory is keyed by the version and the patch's digest, so editing a patch rebuilds it and an
// unchanged one is reused.
const TargetKubernetesPatched = "kubernetes-patched"

// Patch is a small source change to k8s.io/kubernetes at some version, applied to one binary's build
// (the module cache stays pristine).
type Patch struct {
	// Name identifies the patch in errors and progress.
	Name string `json:"name"`
	// Binary is the k8s.io/kubernetes/cmd/<Binary> to build: kube-scheduler or kube-apiserver.
	Binary string `json:"binary"`
	Edits  []Edit `json:"edits"`
	// Stamp, when set, is the version the binary reports instead of the one it was built from: what
	// a fork's build says ("v1.37.2-dirty", "v1.37.3-alpha.0.12+0123abcd"). A stamp without edits
	// is a control: the pristine code under a fork's version, to prove a result does not hang on
	// the version string.
	Stamp string `json:"stamp,omitempty"`
	// Cover, when set, builds the binary with Go's coverage instrumentation of these packages
	// (a -coverpkg pattern), so a run under GOCOVERDIR reports which statements ran.
	Cover string `json:"cover,omitempty"`
}

// Edit replaces Old by New in File (relative to the module root). Old must occur exactly once after
// Anchor (or in the whole file when Anchor is empty), so a patch that no longer matches its source
// is an error rather than a silent no-op that would make a proof vacuous.
type Edit struct {
	File   string `json:"file"`
	Anchor string `json:"anchor,omitempty"`
	Old    string `json:"old"`
	New    string `json:"new"`
}

// Digest names the patch's content: 16 hex digits of the SHA-256 of its binary and edits. The name
// is left out, so renaming a patch does not rebuild it.
func (p Patch) Digest() string {
	// Stamp and Cover join the digest only when set (omitempty), so the digests (and cached
	// builds) of the patches that have neither stay what they were.
	b, _ := json.Marshal(struct {
		Binary string
		Edits  []Edit
		Stamp  string `json:",omitempty"`
		Cover  string `json:",omitempty"`
	}{p.Binary, p.Edits, p.Stamp, p.Cover}) // cannot fail: only strings
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Validate checks what can be checked without the source.
func (p Patch) Validate() error {
	switch p.Binary {
	case SchedulerBinaryName, APIServerBinary, ControllerManagerBinary:
	default:
		return fmt.Errorf("patch %s: binary %q: want %s, %s or %s", p.Name, p.Binary, SchedulerBinaryName, APIServerBinary, ControllerManagerBinary)
	}
	if p.Stamp != "" {
		if major, _, _, _ := splitVersion(p.Stamp); major == "" {
			return fmt.Errorf("patch %s: stamp %q: not a version (want e.g. v1.37.2-acme.1 or v1.37.3-alpha.0.12+0123abcd)", p.Name, p.Stamp)
		}
	}
	if len(p.Edits) == 0 && p.Stamp == "" && p.Cover == "" {
		return fmt.Errorf("patch %s: edits: none, no stamp and no cover (a patch that changes nothing proves nothing)", p.Name)
	}
	for i, e := range p.Edits {
		switch {
		case e.File == "" || filepath.IsAbs(e.File) || strings.Contains(e.File, ".."):
			return fmt.Errorf("patch %s: edits[%d].file %q: want a path inside the module", p.Name, i, e.File)
		case !strings.HasSuffix(e.File, ".go"):
			return fmt.Errorf("patch %s: edits[%d].file %q: only Go files can be overlaid", p.Name, i, e.File)
		case e.Old == "":
			return fmt.Errorf("patch %s: edits[%d].old: empty", p.Name, i)
		case e.Old == e.New:
			return fmt.Errorf("patch %s: edits[%d]: old and new are the same", p.Name, i)
		}
	}
	return nil
}

// apply returns src with e applied, or an error naming the patch and file when Old is not found
// exactly once after Anchor.
func (e Edit) apply(patch, src string) (string, error) {
	start := 0
	if e.Anchor != "" {
		if n := strings.Count(src, e.Anchor); n != 1 {
			return "", fmt.Errorf("patch %s: %s: anchor %q occurs %d times, want 1", patch, e.File, e.Anchor, n)
		}
		start = strings.Index(src, e.Anchor)
	}
	rest := src[start:]
	i := strings.Index(rest, e.Old)
	if i < 0 {
		return "", fmt.Errorf("patch %s: %s: text to replace not found: %q", patch, e.File, e.Old)
	}
	if e.Anchor == "" && strings.Count(rest, e.Old) != 1 {
		return "", fmt.Errorf("patch %s: %s: text to replace occurs %d times (add an anchor): %q", patch, e.File, strings.Count(rest, e.Old), e.Old)
	}
	return src[:start] + rest[:i] + e.New + rest[i+len(e.Old):], nil
}

// Apply returns the files p changes, module-relative, with their patched content, reading the
// source from the module directory modDir.
func (p Patch) Apply(modDir string) (map[string]string, error) {
	patched := map[string]string{}
	for _, e := range p.Edits {
		src, ok := patched[e.File]
		if !ok {
			b, err := os.ReadFile(filepath.Join(modDir, e.File))
			if err != nil {
				return nil, fmt.Errorf("patch %s: %w", p.Name, err)
			}
			src = string(b)
		}
		out, err := e.apply(p.Name, src)
		if err != nil {
			return nil, err
		}
		patched[e.File] = out
	}
	return patched, nil
}

// sourceComplete marks a finished copy of the module source.
const sourceComplete = ".gangbench-source-complete"

// patchedSource prepares dir as a copy of the module source in modDir with p applied, and returns a
// function that puts the pristine files back. `go build -overlay` cannot replace files in the module
// cache, so patched builds use this copy through a replace directive instead. The copy stays at one
// path per version, and only the patched files change between builds: the Go build cache keys
// packages by content, so each build recompiles only what its patch touches (and what imports it).
// The caller holds dir's lock.
func (p Patch) patchedSource(modDir, dir string) (restore func() error, err error) {
	patched, err := p.Apply(modDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, sourceComplete)); err != nil {
		if err := copySource(modDir, dir); err != nil {
			return nil, fmt.Errorf("copying %s: %w", modDir, err)
		}
	}
	restore = func() error {
		var errs []error
		for file := range patched {
			errs = append(errs, copyFile(filepath.Join(modDir, file), filepath.Join(dir, file)))
		}
		return errors.Join(errs...)
	}
	for file, content := range patched {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			return nil, errors.Join(err, restore())
		}
	}
	return restore, nil
}

// copySource copies the module tree (read-only in the module cache) into dir, writable, and marks
// it complete last, so an interrupted copy is redone.
func copySource(modDir, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	err := filepath.WalkDir(modDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(modDir, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, dst)
		}
		return nil // the module zip holds no symlinks or devices
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, sourceComplete), nil, 0o644)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	// Remove first: a file copied from the read-only module cache may have kept its mode.
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// EnsurePatched returns the path of p.Binary built from k8s.io/kubernetes at kubeVersion with p
// applied, building and caching it first when needed. It reports the version it was built from,
// like the pristine binary, so a proof against it is also a proof that the suites do not trust the
// version string.
func EnsurePatched(ctx context.Context, kubeVersion string, p Patch, opts Options) (string, error) {
	if kubeVersion == "" {
		kubeVersion = DefaultKubernetesVersion
	}
	if err := ValidateKubeVersion(kubeVersion); err != nil {
		return "", err
	}
	if err := p.Validate(); err != nil {
		return "", err
	}
	cacheDir, err := CacheDirOf(opts)
	if err != nil {
		return "", err
	}
	t := Target{Name: TargetKubernetesPatched, Version: kubeVersion, Patch: &p, SourceDir: filepath.Join(cacheDir, TargetKubernetesPatched, "src", kubeVersion)}
	dir, err := EnsureTarget(ctx, t, opts, nil)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, p.Binary), nil
}
