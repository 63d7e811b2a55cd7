package k8sbin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeGo is a stand-in for the go command: it logs each invocation (cwd,
// argv with element boundaries, relevant env), answers `mod download -json`
// from a canned go.mod, snapshots the generated module files, and "builds"
// executables that answer --version. FAKEGO_FAIL=<substring of argv>
// makes that command print 60 numbered lines and fail; FAKEGO_HANG does
// the same but hangs in a child process instead.
const fakeGo = `#!/bin/sh
argv=""
for a in "$@"; do argv="$argv[$a]"; done
printf '%s\t%s\t%s\n' "$PWD" "$argv" "GOWORK=$GOWORK GOFLAGS=$GOFLAGS GOTOOLCHAIN=$GOTOOLCHAIN CGO_ENABLED=$CGO_ENABLED GOBIN=$GOBIN" >> "$FAKEGO_DIR/log"
if [ -n "$FAKEGO_FAIL" ]; then
  case "$argv" in *"$FAKEGO_FAIL"*)
    i=1; while [ $i -le 60 ]; do echo "line $i"; i=$((i+1)); done
    echo "compile error" >&2
    exit 2;;
  esac
fi
if [ -n "$FAKEGO_HANG" ]; then
  case "$argv" in *"$FAKEGO_HANG"*)
    sleep 60 &
    echo $! > "$FAKEGO_DIR/child.pid"
    echo hanging
    wait
    exit 0;;
  esac
fi
version_line() { # $1 = binary name, $2 = version
  case "$1" in
  etcd) echo "etcd Version: ${2#v}";;
  kwok) echo "kwok version $2 go1.26.8 (linux/amd64)";;
  *) echo "Kubernetes $2";;
  esac
}
mkbin() { # $1 = path, $2 = version
  printf '#!/bin/sh\necho "%s"\n' "$(version_line "$(basename "$1")" "$2")" > "$1"
  chmod 755 "$1"
}
case "$1" in
mod)
  case "$2" in
  download)
    case "$4" in
    k8s.io/kubernetes@v1.37.2) printf '{"Path":"k8s.io/kubernetes","Version":"v1.37.2","GoMod":"%s","Dir":"/nonexistent"}\n' "$FAKEGO_DIR/kubernetes.mod"; exit 0;;
    go.etcd.io/etcd/server/v3@v3.7.0|sigs.k8s.io/kwok@v0.8.0) printf '{"Path":"x","Version":"y","GoMod":"/dev/null"}\n'; exit 0;;
    *) printf '{\n\t"Path": "%s",\n\t"Version": "%s",\n\t"Error": "%s: reading https://proxy.golang.org/x/@v/y.info: 404 Not Found\\n\\tserver response: not found"\n}\n' "${4%@*}" "${4#*@}" "$4"; exit 1;;
    esac;;
  tidy) cp go.mod "$FAKEGO_DIR/tidy.go.mod"; exit 0;;
  esac;;
get) cp go.mod "$FAKEGO_DIR/get.go.mod"; exit 0;;
build)
  out=""; prev=""; last=""
  for a in "$@"; do
    if [ "$prev" = "-o" ]; then out="$a"; fi
    prev="$a"; last="$a"
  done
  case "$out" in */) out="$out$(basename "$last")";; esac
  if [ "$last" = "." ]; then cp main.go "$FAKEGO_DIR/main.go"; mkbin "$out" v3.7.0; exit 0; fi
  mkbin "$out" v1.37.2; exit 0;;
install) mkbin "$GOBIN/kwok" v0.8.0; exit 0;;
esac
echo "fake go: unexpected $*" >&2
exit 3
`

// kubeModExcerpt has the shape of kubernetes' go.mod: generated header,
// go and godebug lines, require blocks with the etcd pin, replace block.
const kubeModExcerpt = `// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	github.com/blang/semver/v4 v4.0.0
	go.etcd.io/etcd/client/v3 v3.7.0
	k8s.io/api v0.0.0
)

require (
	go.etcd.io/etcd/server/v3 v3.7.0 // indirect
	go.etcd.io/raft/v3 v3.7.0 // indirect
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
	k8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
)
`

const wantWrapper = `module gangbench.local/k8sbuild

go 1.26.0

godebug default=go1.26

require k8s.io/kubernetes v1.37.2

replace (
	k8s.io/api => k8s.io/api v0.37.2
	k8s.io/apimachinery => k8s.io/apimachinery v0.37.2
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.37.2
)
`

const wantLD = "-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=v1.37.2 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"

const wantEnv = "GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0"

type goCall struct{ dir, argv, env string }

// newFakeGo installs fakeGo in a temp dir and returns a GoBuilder using it
// plus the dir where it logs.
func newFakeGo(t *testing.T) (*GoBuilder, string) {
	t.Helper()
	dir := t.TempDir()
	writeScript(t, filepath.Join(dir, "go"), fakeGo, 0o755)
	writeScript(t, filepath.Join(dir, "kubernetes.mod"), kubeModExcerpt, 0o644)
	t.Setenv("FAKEGO_DIR", dir)
	t.Setenv("FAKEGO_FAIL", "")
	t.Setenv("FAKEGO_HANG", "")
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	return &GoBuilder{GoBin: filepath.Join(dir, "go"), TempDir: tmp}, dir
}

func readCalls(t *testing.T, dir string) []goCall {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var calls []goCall
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 3 {
			t.Fatalf("bad log line %q", l)
		}
		calls = append(calls, goCall{f[0], f[1], f[2]})
	}
	return calls
}

func argv(args ...string) string {
	return "[" + strings.Join(args, "][") + "]"
}

func TestGoBuilderKubernetesRecipe(t *testing.T) {
	g, dir := newFakeGo(t)
	out := t.TempDir()
	var events []string
	err := g.Build(context.Background(), Target{Name: TargetKubernetes, Version: "v1.37.2"}, out, func(c string, done bool) {
		if done {
			events = append(events, "done "+c)
		} else {
			events = append(events, "start "+c)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := readCalls(t, dir)
	want := []string{
		argv("mod", "download", "-json", "k8s.io/kubernetes@v1.37.2"),
		argv("get", "k8s.io/kubernetes/cmd/kube-scheduler@v1.37.2", "k8s.io/kubernetes/cmd/kube-apiserver@v1.37.2", "k8s.io/kubernetes/cmd/kube-controller-manager@v1.37.2"),
		argv("build", "-trimpath", "-ldflags", wantLD, "-o", out+"/", "k8s.io/kubernetes/cmd/kube-scheduler"),
		argv("build", "-trimpath", "-ldflags", wantLD, "-o", out+"/", "k8s.io/kubernetes/cmd/kube-apiserver"),
		argv("build", "-trimpath", "-ldflags", wantLD, "-o", out+"/", "k8s.io/kubernetes/cmd/kube-controller-manager"),
	}
	if len(calls) != len(want) {
		t.Fatalf("calls = %v", calls)
	}
	for i, c := range calls {
		if c.argv != want[i] {
			t.Errorf("call %d:\n got %s\nwant %s", i, c.argv, want[i])
		}
		if !strings.HasPrefix(c.env, wantEnv) {
			t.Errorf("call %d env = %s", i, c.env)
		}
		if c.dir != calls[0].dir || !strings.HasPrefix(c.dir, g.TempDir) {
			t.Errorf("call %d ran in %s (first in %s)", i, c.dir, calls[0].dir)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "get.go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if string(gomod) != wantWrapper {
		t.Errorf("wrapper go.mod:\n%s\nwant:\n%s", gomod, wantWrapper)
	}
	for _, b := range Binaries(TargetKubernetes) {
		if v, err := ProbeVersion(context.Background(), filepath.Join(out, b)); err != nil || v != "v1.37.2" {
			t.Errorf("%s: %q %v", b, v, err)
		}
	}
	wantEvents := "start kubernetes sources,done kubernetes sources,start kube-scheduler,done kube-scheduler,start kube-apiserver,done kube-apiserver,start kube-controller-manager,done kube-controller-manager"
	if got := strings.Join(events, ","); got != wantEvents {
		t.Errorf("progress events:\n%s\nwant\n%s", got, wantEvents)
	}
	if entries, _ := os.ReadDir(g.TempDir); len(entries) != 0 {
		t.Errorf("work dirs left in TempDir: %v", entries)
	}
}

func TestGoBuilderEtcdAndKwokRecipes(t *testing.T) {
	g, dir := newFakeGo(t)
	out := t.TempDir()
	if err := g.Build(context.Background(), Target{Name: TargetEtcd, Version: "v3.7.0"}, out, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Build(context.Background(), Target{Name: TargetKwok, Version: "v0.8.0"}, out, nil); err != nil {
		t.Fatal(err)
	}
	calls := readCalls(t, dir)
	want := []string{
		argv("mod", "download", "-json", "go.etcd.io/etcd/server/v3@v3.7.0"),
		argv("get", "go.etcd.io/etcd/server/v3@v3.7.0"),
		argv("mod", "tidy"),
		argv("build", "-trimpath", "-o", filepath.Join(out, "etcd"), "."),
		argv("mod", "download", "-json", "sigs.k8s.io/kwok@v0.8.0"),
		argv("install", "-trimpath", "sigs.k8s.io/kwok/cmd/kwok@v0.8.0"),
	}
	if len(calls) != len(want) {
		t.Fatalf("calls = %v", calls)
	}
	for i, c := range calls {
		if c.argv != want[i] {
			t.Errorf("call %d:\n got %s\nwant %s", i, c.argv, want[i])
		}
	}
	if !strings.HasSuffix(calls[5].env, "GOBIN="+out) {
		t.Errorf("kwok install env = %s", calls[5].env)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "get.go.mod"))
	if !strings.HasPrefix(string(gomod), "module gangbench.local/etcdbuild\n") {
		t.Errorf("etcd go.mod = %q", gomod)
	}
	mainGo, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	if string(mainGo) != etcdMain || !strings.Contains(etcdMain, "etcdmain.Main(os.Args)") {
		t.Errorf("etcd main.go = %q", mainGo)
	}
	if v, err := ProbeVersion(context.Background(), filepath.Join(out, "etcd")); err != nil || v != "v3.7.0" {
		t.Errorf("etcd: %q %v", v, err)
	}
	if v, err := ProbeVersion(context.Background(), filepath.Join(out, "kwok")); err != nil || v != "v0.8.0" {
		t.Errorf("kwok: %q %v", v, err)
	}
}

func TestGoBuilderErrorCarriesArgvAndTail(t *testing.T) {
	g, _ := newFakeGo(t)
	t.Setenv("FAKEGO_FAIL", "cmd/kube-apiserver]")
	var finished []string
	err := g.Build(context.Background(), Target{Name: TargetKubernetes, Version: "v1.37.2"}, t.TempDir(), func(c string, done bool) {
		if done {
			finished = append(finished, c)
		}
	})
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("err = %T %v, want *BuildError", err, err)
	}
	if be.Args[0] != g.GoBin || be.Args[len(be.Args)-1] != "k8s.io/kubernetes/cmd/kube-apiserver" || be.Args[4] != wantLD {
		t.Errorf("args = %q", be.Args)
	}
	lines := strings.Split(be.Output, "\n")
	if len(lines) != tailLines || lines[0] != "line 22" || lines[len(lines)-1] != "compile error" {
		t.Errorf("tail has %d lines, %q ... %q", len(lines), lines[0], lines[len(lines)-1])
	}
	msg := err.Error()
	for _, want := range []string{"build -trimpath -ldflags '-s -w -X", "k8s.io/kubernetes/cmd/kube-apiserver", "exit status 2", "line 60", "compile error"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 21\n") {
		t.Errorf("error message keeps more than the tail")
	}
	if strings.Join(finished, ",") != "kubernetes sources,kube-scheduler" {
		t.Errorf("finished = %v", finished)
	}
}

func TestGoBuilderUnknownVersion(t *testing.T) {
	g, _ := newFakeGo(t)
	err := g.Build(context.Background(), Target{Name: TargetKubernetes, Version: "v1.99.0"}, t.TempDir(), nil)
	want := "kubernetes version v1.99.0 is not available from the Go module proxy: k8s.io/kubernetes@v1.99.0: reading"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v\nwant prefix %s", err, want)
	}
	if _, err := g.EtcdVersionFor(context.Background(), "v1.99.0"); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("EtcdVersionFor err = %v", err)
	}
	err = g.Build(context.Background(), Target{Name: TargetEtcd, Version: "v3.99.0"}, t.TempDir(), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "etcd version v3.99.0 is not available from the Go module proxy") {
		t.Errorf("etcd err = %v", err)
	}
}

func TestGoBuilderEtcdVersionFor(t *testing.T) {
	g, _ := newFakeGo(t)
	v, err := g.EtcdVersionFor(context.Background(), "v1.37.2")
	if err != nil || v != "v3.7.0" {
		t.Errorf("EtcdVersionFor = %q, %v", v, err)
	}
	if _, err := g.EtcdVersionFor(context.Background(), "1.37"); err == nil {
		t.Error("invalid version accepted")
	}
}

// TestGoBuilderCancelKillsProcessGroup: cancelling ctx must stop the go
// command and the workers it forked, not just the go process.
func TestGoBuilderCancelKillsProcessGroup(t *testing.T) {
	g, dir := newFakeGo(t)
	t.Setenv("FAKEGO_HANG", "cmd/kube-scheduler]")
	hanging := newSignalWriter("hanging")
	g.Log = hanging
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- g.Build(ctx, Target{Name: TargetKubernetes, Version: "v1.37.2"}, t.TempDir(), nil)
	}()
	select {
	case <-hanging.hit: // the fake go has forked its long-running child
	case err := <-errc:
		t.Fatalf("Build returned early: %v", err)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Build did not return after cancel")
	}
	data, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(data))
	// SIGKILL to the group is sent before Build returns, but the kernel may
	// take a moment to tear the child down: poll its state, bounded.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") || strings.Contains(string(st), ") X ") {
			return // gone or dead
		}
		select {
		case <-deadline:
			t.Fatalf("child %s survived the cancel: %s", pid, st)
		case <-tick.C:
		}
	}
}

func TestEnsureWithGoBuilderEndToEnd(t *testing.T) {
	g, _ := newFakeGo(t)
	set, err := Ensure(context.Background(), "v1.37.2", Options{CacheDir: t.TempDir(), Builder: g})
	if err != nil {
		t.Fatal(err)
	}
	if set.EtcdVersion != "v3.7.0" || set.KwokVersion != "v0.8.0" {
		t.Errorf("set = %+v", *set)
	}
	for _, p := range []string{set.APIServer, set.ControllerManager, set.Scheduler, set.Etcd, set.Kwok} {
		if _, err := ProbeVersion(context.Background(), p); err != nil {
			t.Error(err)
		}
	}
}
