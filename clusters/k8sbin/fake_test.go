package k8sbin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeBuilder writes tiny shell scripts instead of compiling anything. Each
// script answers --version the way the real binary does, so ProbeVersion
// works on its output.
type fakeBuilder struct {
	etcd string // version EtcdVersionFor reports; "" means v3.7.0

	// started, if set, receives every target as its build begins.
	started chan Target
	// release, if set, makes Build block until it is closed (or ctx ends).
	release chan struct{}
	// fail maps target name -> error returned after writing one binary.
	fail map[string]error
	// omit maps target name -> binary the build "forgets" to produce.
	omit map[string]string

	mu    sync.Mutex
	calls map[string]int // "name version" -> builds
	pins  int            // EtcdVersionFor calls
}

func (f *fakeBuilder) EtcdVersionFor(ctx context.Context, kubeVersion string) (string, error) {
	f.mu.Lock()
	f.pins++
	f.mu.Unlock()
	if f.etcd == "" {
		return "v3.7.0", nil
	}
	return f.etcd, nil
}

func (f *fakeBuilder) count(name, version string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name+" "+version]
}

func (f *fakeBuilder) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

func (f *fakeBuilder) Build(ctx context.Context, t Target, outDir string, progress func(string, bool)) error {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[t.Name+" "+t.Version]++
	f.mu.Unlock()
	if f.started != nil {
		f.started <- t
	}
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i, bin := range Binaries(t.Name) {
		if f.omit[t.Name] == bin {
			continue
		}
		progress(bin, false)
		if err := os.WriteFile(filepath.Join(outDir, bin), []byte(fakeScript(bin, t.Version)), 0o755); err != nil {
			return err
		}
		if err := f.fail[t.Name]; err != nil && i == 0 {
			return err
		}
		progress(bin, true)
	}
	return nil
}

// fakeScript is a shell script printing what `bin --version` prints.
func fakeScript(bin, version string) string {
	var line string
	switch bin {
	case EtcdBinary:
		line = "etcd Version: " + strings.TrimPrefix(version, "v") + "\nGit SHA: GitNotFound\nGo Version: go1.26.8"
	case KwokBinary:
		line = "kwok version " + version + " go1.26.8 (linux/amd64)"
	default:
		line = "Kubernetes " + version
	}
	return fmt.Sprintf("#!/bin/sh\ncat <<'EOF'\n%s\nEOF\n", line)
}

// writeScript writes an executable (or not) file for override tests.
func writeScript(t *testing.T, path, body string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// signalWriter is a Progress writer that closes hit the first time a write
// contains want. It lets a test wait for "this goroutine is now blocked on
// the lock" without sleeping.
type signalWriter struct {
	want string
	hit  chan struct{}

	mu   sync.Mutex
	buf  strings.Builder
	once sync.Once
}

func newSignalWriter(want string) *signalWriter {
	return &signalWriter{want: want, hit: make(chan struct{})}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(p)
	seen := strings.Contains(w.buf.String(), w.want)
	w.mu.Unlock()
	if seen {
		w.once.Do(func() { close(w.hit) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
