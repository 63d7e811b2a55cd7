package k8sbin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests use the real go command and the module proxy, so they are
// opt-in: a full build takes ~20 minutes on 2 cores.
//
//	GANGBENCH_K8SBIN_DRYRUN=1  resolve every module and plan every build
//	                           (`go build -n`): checks the recipes in a minute
//	GANGBENCH_K8SBIN_REAL=all|kubernetes|etcd|kwok  really build into
//	                           $GANGBENCH_CACHE_DIR (or a temp dir)

// testLog sends go's output to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestRealGoDryRun(t *testing.T) {
	if testing.Short() || os.Getenv("GANGBENCH_K8SBIN_DRYRUN") == "" {
		t.Skip("set GANGBENCH_K8SBIN_DRYRUN=1 (and drop -short) to check the recipes against the real go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	// Wrap go so build/install only print what they would run.
	wrapper := writeScript(t, filepath.Join(t.TempDir(), "go"), `#!/bin/sh
case "$1" in
build|install) cmd="$1"; shift; exec "`+goBin+`" "$cmd" -n "$@";;
esac
exec "`+goBin+`" "$@"
`, 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := &GoBuilder{GoBin: wrapper} // -n output is huge: errors keep the tail
	etcd, err := g.EtcdVersionFor(ctx, DefaultKubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubernetes %s pins etcd %s", DefaultKubernetesVersion, etcd)
	for _, tg := range []Target{{Name: TargetKwok, Version: DefaultKwokVersion}, {Name: TargetEtcd, Version: etcd}, {Name: TargetKubernetes, Version: DefaultKubernetesVersion}} {
		if err := g.Build(ctx, tg, t.TempDir(), func(c string, done bool) { t.Logf("%s done=%v", c, done) }); err != nil {
			t.Fatalf("%v: %v", tg, err)
		}
	}
	_, err = g.EtcdVersionFor(ctx, "v1.99.99")
	if err == nil || !strings.Contains(err.Error(), "kubernetes version v1.99.99 is not available from the Go module proxy: ") {
		t.Errorf("unknown version: %v", err)
	}
}

func TestRealBuild(t *testing.T) {
	what := os.Getenv("GANGBENCH_K8SBIN_REAL")
	if testing.Short() || what == "" {
		t.Skip("set GANGBENCH_K8SBIN_REAL=all|kubernetes|etcd|kwok (and drop -short) for a real build")
	}
	cache := os.Getenv(CacheDirEnv)
	if cache == "" {
		cache = t.TempDir()
	}
	ctx := context.Background()
	g := &GoBuilder{Log: testLog{t}}
	if what == "all" {
		set, err := Ensure(ctx, DefaultKubernetesVersion, Options{CacheDir: cache, Builder: g, Progress: os.Stderr})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{set.APIServer, set.ControllerManager, set.Scheduler, set.Etcd, set.Kwok} {
			v, err := ProbeVersion(ctx, p)
			if err != nil {
				t.Error(err)
			}
			t.Logf("%s: %s", p, v)
		}
		return
	}
	version := map[string]string{TargetKubernetes: DefaultKubernetesVersion, TargetKwok: DefaultKwokVersion}[what]
	if what == TargetEtcd {
		var err error
		if version, err = g.EtcdVersionFor(ctx, DefaultKubernetesVersion); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := ensureTarget(ctx, cache, Target{Name: what, Version: version}, g, newReporter(os.Stderr, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range Binaries(what) {
		v, err := ProbeVersion(ctx, filepath.Join(dir, b))
		if err != nil {
			t.Error(err)
		}
		t.Logf("%s: %s", b, v)
	}
}
