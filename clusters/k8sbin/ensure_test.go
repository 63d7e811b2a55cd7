package k8sbin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func listTemps(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestEnsureBuildsThenHitsCache(t *testing.T) {
	cache := t.TempDir()
	fb := &fakeBuilder{}
	ctx := context.Background()
	set, err := Ensure(ctx, "v1.37.2", Options{CacheDir: cache, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	want := &Set{
		KubernetesVersion: "v1.37.2", EtcdVersion: "v3.7.0", KwokVersion: DefaultKwokVersion,
		APIServer:         filepath.Join(cache, "kubernetes", "v1.37.2", "kube-apiserver"),
		ControllerManager: filepath.Join(cache, "kubernetes", "v1.37.2", "kube-controller-manager"),
		Scheduler:         filepath.Join(cache, "kubernetes", "v1.37.2", "kube-scheduler"),
		Etcd:              filepath.Join(cache, "etcd", "v3.7.0", "etcd"),
		Kwok:              filepath.Join(cache, "kwok", DefaultKwokVersion, "kwok"),
	}
	if *set != *want {
		t.Fatalf("set = %+v\nwant  %+v", *set, *want)
	}
	for _, target := range [][2]string{{"kubernetes", "v1.37.2"}, {"etcd", "v3.7.0"}, {"kwok", "v0.8.0"}} {
		if n := fb.count(target[0], target[1]); n != 1 {
			t.Errorf("%s built %d times, want 1", target, n)
		}
		if temps := listTemps(t, filepath.Join(cache, target[0])); len(temps) != 0 {
			t.Errorf("temp dirs left behind: %v", temps)
		}
	}
	for path, v := range map[string]string{set.Scheduler: "v1.37.2", set.Etcd: "v3.7.0", set.Kwok: "v0.8.0"} {
		got, err := ProbeVersion(ctx, path)
		if err != nil || got != v {
			t.Errorf("ProbeVersion(%s) = %q, %v; want %q", path, got, err, v)
		}
	}

	again, err := Ensure(ctx, "v1.37.2", Options{CacheDir: cache, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	if *again != *set {
		t.Errorf("second Ensure = %+v, want %+v", *again, *set)
	}
	if n := fb.total(); n != 3 {
		t.Errorf("second Ensure rebuilt: %d builds in total, want 3", n)
	}
	// The etcd pin was recorded: a fully cached Ensure asks nothing.
	if fb.pins != 1 {
		t.Errorf("EtcdVersionFor called %d times, want 1", fb.pins)
	}

	// A builder that refuses to build sees the complete cache (how a
	// "doctor" check can ask "is it cached?").
	refuse := &fakeBuilder{fail: map[string]error{TargetKubernetes: errors.New("no"), TargetEtcd: errors.New("no"), TargetKwok: errors.New("no")}}
	if _, err := Ensure(ctx, "v1.37.2", Options{CacheDir: cache, Builder: refuse}); err != nil || refuse.total() != 0 || refuse.pins != 0 {
		t.Errorf("cache-only Ensure: %v, builds %d, pins %d", err, refuse.total(), refuse.pins)
	}
	// A garbled pin file is ignored and looked up again.
	if err := os.WriteFile(filepath.Join(cache, "kubernetes", "v1.37.2.etcd-version"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Ensure(ctx, "v1.37.2", Options{CacheDir: cache, Builder: fb}); err != nil || s.EtcdVersion != "v3.7.0" || fb.pins != 2 {
		t.Errorf("garbled pin: %v %v pins=%d", s, err, fb.pins)
	}
}

func TestEnsureDefaultVersionAndCacheEnv(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(CacheDirEnv, cache)
	fb := &fakeBuilder{}
	set, err := Ensure(context.Background(), "", Options{Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	if set.KubernetesVersion != DefaultKubernetesVersion {
		t.Errorf("version = %q", set.KubernetesVersion)
	}
	if want := filepath.Join(cache, "kubernetes", DefaultKubernetesVersion, "kube-scheduler"); set.Scheduler != want {
		t.Errorf("scheduler = %s, want %s (from %s)", set.Scheduler, want, CacheDirEnv)
	}
}

func TestEnsureRejectsInvalidVersionBeforeBuilding(t *testing.T) {
	for _, v := range []string{"1.37.2", "v1.37", "latest", "v1.37.2/../../x", "v01.37.2", "v1.37.2-", " v1.37.2"} {
		cache := filepath.Join(t.TempDir(), "cache")
		fb := &fakeBuilder{}
		_, err := Ensure(context.Background(), v, Options{CacheDir: cache, Builder: fb})
		if err == nil || !strings.Contains(err.Error(), "version") {
			t.Errorf("Ensure(%q) err = %v, want a version error", v, err)
		}
		if fb.total() != 0 {
			t.Errorf("Ensure(%q) built something", v)
		}
		if _, err := os.Stat(cache); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Ensure(%q) created the cache dir", v)
		}
	}
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), Builder: &fakeBuilder{}, KwokVersion: "0.8"}); err == nil {
		t.Error("invalid kwok version accepted")
	}
}

func TestEnsureVersionsAreSeparateKeys(t *testing.T) {
	cache := t.TempDir()
	fb := &fakeBuilder{}
	a, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Ensure(context.Background(), "v1.38.0-rc.1", Options{CacheDir: cache, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	if a.Scheduler == b.Scheduler || filepath.Dir(b.Scheduler) != filepath.Join(cache, "kubernetes", "v1.38.0-rc.1") {
		t.Errorf("versions share or misplace dirs: %s vs %s", a.Scheduler, b.Scheduler)
	}
	if fb.count("kubernetes", "v1.37.2") != 1 || fb.count("kubernetes", "v1.38.0-rc.1") != 1 {
		t.Errorf("builds = %v", fb.calls)
	}
	// Both pin the same etcd and kwok: built once, shared.
	if fb.count("etcd", "v3.7.0") != 1 || fb.count("kwok", "v0.8.0") != 1 || a.Etcd != b.Etcd {
		t.Errorf("etcd/kwok not shared: %v", fb.calls)
	}
	if v, err := ProbeVersion(context.Background(), b.APIServer); err != nil || v != "v1.38.0-rc.1" {
		t.Errorf("probe = %q, %v", v, err)
	}
}

func TestEnsureFailedBuildLeavesNothing(t *testing.T) {
	cache := t.TempDir()
	boom := errors.New("compile exploded")
	fb := &fakeBuilder{fail: map[string]error{TargetKubernetes: boom}}
	_, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, Builder: fb})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "kubernetes v1.37.2") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "kubernetes", "v1.37.2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("final dir exists after failed build: %v", err)
	}
	if temps := listTemps(t, filepath.Join(cache, "kubernetes")); len(temps) != 0 {
		t.Errorf("temp dirs left: %v", temps)
	}
	// A later attempt builds again and succeeds.
	fb2 := &fakeBuilder{}
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, Builder: fb2}); err != nil {
		t.Fatal(err)
	}
	if fb2.count("kubernetes", "v1.37.2") != 1 {
		t.Errorf("retry did not build")
	}
}

func TestEnsureBuilderMissingBinary(t *testing.T) {
	cache := t.TempDir()
	fb := &fakeBuilder{omit: map[string]string{TargetKubernetes: APIServerBinary}}
	_, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, Builder: fb})
	if err == nil || !strings.Contains(err.Error(), "did not produce kube-apiserver") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "kubernetes", "v1.37.2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("incomplete build was installed")
	}
	if temps := listTemps(t, filepath.Join(cache, "kubernetes")); len(temps) != 0 {
		t.Errorf("temp dirs left: %v", temps)
	}
}

func TestEnsureStaleTempIsNotAHit(t *testing.T) {
	cache := t.TempDir()
	parent := filepath.Join(cache, "kubernetes")
	// A killed build of this version that had already written everything,
	// and a live-looking temp of a different version with a similar prefix.
	stale := filepath.Join(parent, ".tmp-v1.37.2-123456")
	other := filepath.Join(parent, ".tmp-v1.37.2-rc.0-654321")
	for _, d := range []string{stale, other} {
		for _, b := range Binaries(TargetKubernetes) {
			writeScript(t, filepath.Join(d, b), fakeScript(b, "v0.0.0"), 0o755)
		}
	}
	fb := &fakeBuilder{}
	set, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	if fb.count("kubernetes", "v1.37.2") != 1 {
		t.Errorf("stale temp dir was taken as a cache hit")
	}
	if v, _ := ProbeVersion(context.Background(), set.Scheduler); v != "v1.37.2" {
		t.Errorf("scheduler version %q", v)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp dir not cleaned up")
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another version's temp dir was removed: %v", err)
	}
}

func TestEnsureRebuildsIncompleteFinalDir(t *testing.T) {
	cache := t.TempDir()
	fb := &fakeBuilder{}
	set, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(set.ControllerManager); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, Builder: fb}); err != nil {
		t.Fatal(err)
	}
	if n := fb.count("kubernetes", "v1.37.2"); n != 2 {
		t.Errorf("kubernetes built %d times, want 2 (damaged dir rebuilt)", n)
	}
	if !isExecutableFile(set.ControllerManager) {
		t.Errorf("controller manager not restored")
	}
}

// TestEnsureConcurrentBuildsOnce: the first caller's build blocks until
// the second caller is provably waiting on the lock; then both must get the
// same set from a single build.
func TestEnsureConcurrentBuildsOnce(t *testing.T) {
	cache := t.TempDir()
	fb := &fakeBuilder{started: make(chan Target, 10), release: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	type result struct {
		set *Set
		err error
	}
	first := make(chan result, 1)
	go func() {
		s, err := Ensure(ctx, "v1.37.2", Options{CacheDir: cache, Builder: fb})
		first <- result{s, err}
	}()
	select {
	case tg := <-fb.started:
		if tg.Name != TargetKubernetes {
			t.Fatalf("first build is %v", tg)
		}
	case <-ctx.Done():
		t.Fatal("first build never started")
	}

	waiting := newSignalWriter("waiting for another build")
	second := make(chan result, 1)
	go func() {
		s, err := Ensure(ctx, "v1.37.2", Options{CacheDir: cache, Builder: fb, Progress: waiting})
		second <- result{s, err}
	}()
	select {
	case <-waiting.hit:
	case <-ctx.Done():
		t.Fatal("second caller never waited on the lock")
	}
	close(fb.release) // both have asked: let the one build finish

	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil {
		t.Fatalf("errors: %v / %v", r1.err, r2.err)
	}
	if *r1.set != *r2.set {
		t.Errorf("different sets: %+v vs %+v", *r1.set, *r2.set)
	}
	for _, tg := range [][2]string{{"kubernetes", "v1.37.2"}, {"etcd", "v3.7.0"}, {"kwok", "v0.8.0"}} {
		if n := fb.count(tg[0], tg[1]); n != 1 {
			t.Errorf("%v built %d times, want 1", tg, n)
		}
	}
	if !strings.Contains(waiting.String(), "finished waiting") {
		t.Errorf("progress output missing the end of the wait:\n%s", waiting.String())
	}
}

// TestHelperHoldLock is not a real test: TestEnsureLockWaitCancel runs the
// test binary with it to hold a lock from another process.
func TestHelperHoldLock(t *testing.T) {
	path := os.Getenv("K8SBIN_HOLD_LOCK")
	if path == "" {
		t.Skip("helper process only")
	}
	unlock, err := lockFile(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	os.Stdout.WriteString("locked\n")
	io.Copy(io.Discard, os.Stdin) // hold until the parent closes stdin
}

// TestEnsureLockWaitCancel: a lock held by another process makes Ensure
// wait, and cancelling ctx ends the wait with ctx's error.
func TestEnsureLockWaitCancel(t *testing.T) {
	cache := t.TempDir()
	parent := filepath.Join(cache, "kubernetes")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "K8SBIN_HOLD_LOCK="+filepath.Join(parent, "v1.37.2.lock"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper: %q, %v", line, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := newSignalWriter("waiting for another build")
	done := make(chan error, 1)
	fb := &fakeBuilder{}
	go func() {
		_, err := Ensure(ctx, "v1.37.2", Options{CacheDir: cache, Builder: fb, Progress: waiting})
		done <- err
	}()
	<-waiting.hit
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if fb.total() != 0 {
		t.Errorf("built while another process held the lock")
	}
	if !strings.Contains(waiting.String(), "gave up waiting") {
		t.Errorf("progress output: %s", waiting.String())
	}

	// Once the holder exits the kernel drops its lock.
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, Builder: fb}); err != nil {
		t.Fatal(err)
	}
}

func kubeDir(t *testing.T, version string) string {
	dir := t.TempDir()
	for _, b := range Binaries(TargetKubernetes) {
		writeScript(t, filepath.Join(dir, b), fakeScript(b, version), 0o755)
	}
	return dir
}

func TestKubeBinDirOverride(t *testing.T) {
	cache := t.TempDir()
	dir := kubeDir(t, "v1.37.2-custom")
	fb := &fakeBuilder{}
	set, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, KubeBinDir: dir, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	if set.Scheduler != filepath.Join(dir, "kube-scheduler") || set.APIServer != filepath.Join(dir, "kube-apiserver") ||
		set.ControllerManager != filepath.Join(dir, "kube-controller-manager") {
		t.Errorf("kube paths not from dir: %+v", *set)
	}
	if fb.count("kubernetes", "v1.37.2") != 0 || fb.count("etcd", "v3.7.0") != 1 || fb.count("kwok", "v0.8.0") != 1 {
		t.Errorf("builds = %v", fb.calls)
	}

	// etcd and kwok in the dir are used too, with their probed versions.
	writeScript(t, filepath.Join(dir, "etcd"), fakeScript("etcd", "v3.6.9"), 0o755)
	writeScript(t, filepath.Join(dir, "kwok"), fakeScript("kwok", "v0.7.1"), 0o755)
	fb2 := &fakeBuilder{}
	set, err = Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), KubeBinDir: dir, Builder: fb2})
	if err != nil {
		t.Fatal(err)
	}
	if set.Etcd != filepath.Join(dir, "etcd") || set.EtcdVersion != "v3.6.9" || set.Kwok != filepath.Join(dir, "kwok") || set.KwokVersion != "v0.7.1" {
		t.Errorf("etcd/kwok not from dir: %+v", *set)
	}
	if fb2.total() != 0 {
		t.Errorf("built although the dir had everything: %v", fb2.calls)
	}

	// A broken etcd in the dir is reported, not silently replaced.
	writeScript(t, filepath.Join(dir, "etcd"), "#!/bin/sh\necho hello\n", 0o755)
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), KubeBinDir: dir, Builder: &fakeBuilder{}}); err == nil ||
		!strings.Contains(err.Error(), filepath.Join(dir, "etcd")) {
		t.Errorf("broken etcd: err = %v", err)
	}
}

func TestKubeBinDirMissingOrNotExecutable(t *testing.T) {
	dir := kubeDir(t, "v1.37.2")
	os.Remove(filepath.Join(dir, "kube-scheduler"))
	fb := &fakeBuilder{}
	_, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), KubeBinDir: dir, Builder: fb})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "kube-scheduler") || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing: err = %v", err)
	}

	dir = kubeDir(t, "v1.37.2")
	os.Chmod(filepath.Join(dir, "kube-apiserver"), 0o644)
	_, err = Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), KubeBinDir: dir, Builder: fb})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "kube-apiserver") || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("not executable: err = %v", err)
	}
	if fb.total() != 0 {
		t.Errorf("built despite a bad override")
	}
}

func TestSchedulerBinaryOverride(t *testing.T) {
	cache := t.TempDir()
	mutant := writeScript(t, filepath.Join(t.TempDir(), "my-scheduler"), fakeScript("kube-scheduler", "v1.37.2-mutant"), 0o755)
	fb := &fakeBuilder{}
	set, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, SchedulerBinary: mutant, Builder: fb})
	if err != nil {
		t.Fatal(err)
	}
	if set.Scheduler != mutant {
		t.Errorf("scheduler = %s, want %s", set.Scheduler, mutant)
	}
	if set.APIServer != filepath.Join(cache, "kubernetes", "v1.37.2", "kube-apiserver") {
		t.Errorf("apiserver = %s", set.APIServer)
	}

	// Combined with KubeBinDir, the scheduler override wins.
	set, err = Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, SchedulerBinary: mutant, KubeBinDir: kubeDir(t, "v1.37.2"), Builder: fb})
	if err != nil || set.Scheduler != mutant {
		t.Errorf("with KubeBinDir: %v, %v", set, err)
	}

	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: cache, SchedulerBinary: missing, Builder: fb}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing override: err = %v", err)
	}
	noexec := writeScript(t, filepath.Join(t.TempDir(), "sched"), "#!/bin/sh\n", 0o644)
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), SchedulerBinary: noexec, Builder: fb}); err == nil ||
		!strings.Contains(err.Error(), noexec) || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("non-executable override: err = %v", err)
	}
}

func TestEnsurePlainProgress(t *testing.T) {
	var out bytes.Buffer
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), Builder: &fakeBuilder{}, Progress: &out}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"kube-scheduler v1.37.2: building\n",
		"kube-scheduler v1.37.2: built (",
		"kube-apiserver v1.37.2: built (",
		"kube-controller-manager v1.37.2: built (",
		"etcd v3.7.0: built (",
		"kwok v0.8.0: built (",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("progress output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b[") {
		t.Errorf("escape codes in non-terminal output:\n%q", got)
	}
	// The scheduler comes first.
	if strings.Index(got, "kube-scheduler") > strings.Index(got, "kube-apiserver") {
		t.Errorf("scheduler not built first:\n%s", got)
	}

	// A failing build marks its unfinished component as failed.
	out.Reset()
	fb := &fakeBuilder{fail: map[string]error{TargetKubernetes: errors.New("boom")}}
	if _, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), Builder: fb, Progress: &out}); err == nil {
		t.Fatal("no error")
	}
	if !strings.Contains(out.String(), "kube-scheduler v1.37.2: FAILED (") {
		t.Errorf("failure not shown:\n%s", out.String())
	}
}

func TestReporterTTY(t *testing.T) {
	var out bytes.Buffer
	r := newReporter(&out, true)
	err := r.build(Target{Name: TargetKubernetes, Version: "v1.37.2"}, func(progress func(string, bool)) error {
		progress("kube-scheduler", false)
		progress("kube-scheduler", true)
		progress("kube-apiserver", false)
		return errors.New("boom")
	})
	if err == nil {
		t.Fatal("error lost")
	}
	r.close() // waits for mpb's final frame
	got := out.String()
	for _, want := range []string{"kube-scheduler v1.37.2", "built", "kube-apiserver v1.37.2", "FAILED"} {
		if !strings.Contains(got, want) {
			t.Errorf("tty output lacks %q:\n%q", want, got)
		}
	}
}

func TestReporterNilWriter(t *testing.T) {
	r := newReporter(nil, false)
	r.start("a", "a")
	r.finish("a", true)
	if err := r.build(Target{Name: TargetKwok, Version: "v0.8.0"}, func(p func(string, bool)) error { p("kwok", false); return nil }); err != nil {
		t.Fatal(err)
	}
	r.close()
}
