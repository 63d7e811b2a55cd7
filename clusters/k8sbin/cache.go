package k8sbin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lockPollInterval is how often a waiter retries a held lock. flock(2) has
// no cancellable blocking form, so waiting polls LOCK_NB on a ticker and
// watches ctx between tries; builds take minutes, so 100ms is invisible.
const lockPollInterval = 100 * time.Millisecond

const tmpPrefix = ".tmp-"

// ensureTarget returns the cache directory holding t's binaries, building
// them first when the cache has no complete copy.
//
// Protocol, per <cache>/<name>/<version>:
//  1. A complete final dir is a hit (it only ever appears via rename, so
//     seeing it complete without the lock is safe).
//  2. Otherwise take the exclusive flock <cache>/<name>/<version>.lock and
//     re-check: another process may have finished while we waited.
//  3. Build into <cache>/<name>/.tmp-<version>-<random>, verify, rename.
//
// Stale temp dirs left by a killed process are never hits (only the final
// dir is looked at) and are removed once we hold the lock, since the lock
// proves nobody is still writing them.
func ensureTarget(ctx context.Context, cacheDir string, t Target, b Builder, rep *reporter) (string, error) {
	bins := t.binaries()
	if bins == nil {
		return "", fmt.Errorf("unknown build target %q", t.Name)
	}
	if err := validateVersion(t.Name, t.Version); err != nil {
		return "", err
	}
	parent := filepath.Join(cacheDir, t.Name)
	key := t.cacheKey()
	final := filepath.Join(parent, key)
	if complete(final, bins) {
		return final, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	lockPath := filepath.Join(parent, key+".lock")
	waitKey := t.Name + " " + key + " lock"
	waited := false
	unlock, err := lockFile(ctx, lockPath, func() {
		// Another process (or goroutine) is building this version: say so,
		// or a multi-minute silent wait looks like a hang.
		waited = true
		rep.start(waitKey, t.Name+" "+t.Version, "waiting for another build to finish (lock "+lockPath+")", "finished waiting", "gave up waiting")
	})
	if waited {
		rep.finish(waitKey, err == nil)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", t.Name, t.Version, err)
	}
	defer unlock()

	if complete(final, bins) {
		return final, nil
	}
	// A final dir that exists but is incomplete was damaged after the
	// rename (someone deleted a binary); rebuild it rather than fail.
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("removing incomplete cache dir: %w", err)
	}
	removeStaleTemps(parent, key)

	tmp, err := os.MkdirTemp(parent, tmpPrefix+key+"-")
	if err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()

	if err := rep.build(t, func(progress func(string, bool)) error {
		return b.Build(ctx, t, tmp, progress)
	}); err != nil {
		return "", fmt.Errorf("building %s %s: %w", t.Name, t.Version, err)
	}
	for _, bin := range bins {
		if _, err := checkExecutable(filepath.Join(tmp, bin)); err != nil {
			return "", fmt.Errorf("building %s %s: builder did not produce %s: %w", t.Name, t.Version, bin, err)
		}
	}
	// MkdirTemp creates 0700; the cache is meant to be shared like any
	// other user cache entry.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("installing %s %s into cache: %w", t.Name, t.Version, err)
	}
	keep = true
	return final, nil
}

// complete reports whether dir holds every binary as an executable file.
func complete(dir string, bins []string) bool {
	for _, b := range bins {
		if !isExecutableFile(filepath.Join(dir, b)) {
			return false
		}
	}
	return true
}

// removeStaleTemps deletes temp dirs of this exact version. MkdirTemp's
// random part is all digits, so requiring that keeps ".tmp-v1.2.3-" from
// matching a live build of v1.2.3-rc.0 (which holds a different lock).
func removeStaleTemps(parent, version string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	prefix := tmpPrefix + version + "-"
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" {
			continue
		}
		// Best effort: a leftover we cannot delete is harmless.
		os.RemoveAll(filepath.Join(parent, e.Name()))
	}
}

// lockFile takes an exclusive flock on path, calling onWait once if it has
// to wait. It returns the unlock func. The lock belongs to the open file
// description, so it also excludes other goroutines of this process that
// open the file themselves, and the kernel drops it if the process dies.
// The lock file itself is never deleted: deleting it would let a waiter
// lock an unlinked inode while a newcomer locks a fresh one.
func lockFile(ctx context.Context, path string, onWait func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	unlock := func() { f.Close() } // closing releases the flock
	try := func() (bool, error) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK), errors.Is(err, unix.EINTR):
			return false, nil
		default:
			return false, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	ok, err := try()
	if err != nil || ok {
		if err != nil {
			f.Close()
			return nil, err
		}
		return unlock, nil
	}
	if onWait != nil {
		onWait()
	}
	tick := time.NewTicker(lockPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-tick.C:
		}
		ok, err := try()
		if err != nil {
			f.Close()
			return nil, err
		}
		if ok {
			return unlock, nil
		}
	}
}

// etcdPinPath records which etcd a Kubernetes version pins. A published
// module version's go.mod never changes, so the answer can be cached
// forever; with it, a fully cached Ensure runs no go command at all (fast,
// works offline, and has no side effects for callers that only probe the
// cache).
func etcdPinPath(cacheDir, kubeVersion string) string {
	return filepath.Join(cacheDir, TargetKubernetes, kubeVersion+".etcd-version")
}

// readEtcdPin returns the recorded pin, or "" if there is none (or it is
// unreadable or malformed, in which case it is simply looked up again).
func readEtcdPin(cacheDir, kubeVersion string) string {
	data, err := os.ReadFile(etcdPinPath(cacheDir, kubeVersion))
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(data))
	if validateVersion(TargetEtcd, v) != nil {
		return ""
	}
	return v
}

// writeEtcdPin records the pin atomically (temp file + rename, so a reader
// never sees half a version). Best effort: failing only costs a lookup.
func writeEtcdPin(cacheDir, kubeVersion, etcdVersion string) {
	path := etcdPinPath(cacheDir, kubeVersion)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), tmpPrefix+"pin-")
	if err != nil {
		return
	}
	_, werr := f.WriteString(etcdVersion + "\n")
	if cerr := f.Close(); werr != nil || cerr != nil || os.Chmod(f.Name(), 0o644) != nil || os.Rename(f.Name(), path) != nil {
		os.Remove(f.Name())
	}
}
