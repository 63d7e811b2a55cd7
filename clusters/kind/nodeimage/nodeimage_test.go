package nodeimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gangbench/gangbench/clusters/k8sbin"
)

func testInputs() inputs {
	return inputs{
		Revision:          recipeRevision,
		KubernetesVersion: "v1.37.2",
		EtcdVersion:       "v3.6.5",
		Targets:           map[string]string{"containerd": "v2.1.0", "runc": "v1.3.0", "pause": "v1.37.2"},
		Kind:              "v0.33.0",
		Rootfs:            rootfsKey("bookworm"),
		Arch:              "amd64",
		Plugin:            "example.test/plugin:v1@sha256:0000",
		Entrypoint:        "abcd",
	}
}

func TestInputsKey(t *testing.T) {
	base := testInputs()
	k := base.key()
	if len(k) != 16 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("key %q, want 16 hex digits", k)
	}

	// Equal inputs, maps filled in another order: the same key.
	same := base
	same.Targets = map[string]string{}
	for _, n := range []string{"runc", "pause", "containerd"} {
		same.Targets[n] = base.Targets[n]
	}
	if got := same.key(); got != k {
		t.Errorf("key %s for equal inputs (targets filled in another order), want %s", got, k)
	}

	for _, tc := range []struct {
		name string
		edit func(*inputs)
	}{
		{"revision", func(in *inputs) { in.Revision = "999" }},
		{"kubernetes version", func(in *inputs) { in.KubernetesVersion = "v1.37.3" }},
		{"etcd version", func(in *inputs) { in.EtcdVersion = "v3.6.6" }},
		{"a target version", func(in *inputs) { in.Targets["runc"] = "v1.3.1" }},
		{"a target added", func(in *inputs) { in.Targets["cri-tools"] = "v1.37.0" }},
		{"kind version", func(in *inputs) { in.Kind = "v0.34.0" }},
		{"rootfs key", func(in *inputs) { in.Rootfs = rootfsKey("trixie") }},
		{"arch", func(in *inputs) { in.Arch = "arm64" }},
		{"plugin digest", func(in *inputs) { in.Plugin = "example.test/plugin:v1@sha256:1111" }},
		{"no plugin", func(in *inputs) { in.Plugin = "" }},
		{"entrypoint hash", func(in *inputs) { in.Entrypoint = "abce" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := testInputs()
			tc.edit(&in)
			if got := in.key(); got == k {
				t.Errorf("key %s unchanged after changing the %s", got, tc.name)
			}
		})
	}
	if base.key() != k {
		t.Errorf("key of the base inputs changed (%s, then %s): the cases must not share its map", k, base.key())
	}
}

func TestRefAndIsGangbench(t *testing.T) {
	ref := Ref("v1.37.2", "0123456789abcdef")
	if ref != "gangbench.dev/kind-node:v1.37.2-0123456789abcdef" {
		t.Errorf("Ref = %q", ref)
	}
	for r, want := range map[string]bool{
		ref:                                      true,
		"kindest/node:v1.37.2":                   false,
		"gangbench.dev/kind-node-other:v1":       false,
		"example.test/gangbench.dev/kind-node:x": false,
	} {
		if got := IsGangbench(r); got != want {
			t.Errorf("IsGangbench(%q) = %v, want %v", r, got, want)
		}
	}
}

func TestNodeImageConfig(t *testing.T) {
	var layers []v1.Layer
	for _, p := range []string{"/rootfs", "/node", "/preload"} {
		l, err := entriesLayer([]entry{fileEntry(p, 0o644, []byte(p))})
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	img, err := nodeImage(&Image{Key: "0123456789abcdef", KubernetesVersion: "v1.37.2"}, layers)
	if err != nil {
		t.Fatalf("nodeImage: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{EntrypointPath, "/sbin/init"}) {
		t.Errorf("entrypoint %q, want [%s /sbin/init]", cf.Config.Entrypoint, EntrypointPath)
	}
	if !slices.Contains(cf.Config.Env, "container=docker") || !slices.Contains(cf.Config.Env, pathEnv) {
		t.Errorf("env %q, want container=docker and %s", cf.Config.Env, pathEnv)
	}
	if cf.Config.StopSignal != "SIGRTMIN+3" {
		t.Errorf("stop signal %q, want SIGRTMIN+3", cf.Config.StopSignal)
	}
	if cf.Config.Labels[LabelKey] != "0123456789abcdef" || cf.Config.Labels["dev.gangbench.kubernetes-version"] != "v1.37.2" {
		t.Errorf("labels %v, want %s=<key> and the Kubernetes version", cf.Config.Labels, LabelKey)
	}
	if cf.OS != "linux" || cf.Architecture != goarch() || !cf.Created.Time.Equal(epoch()) {
		t.Errorf("os/arch/created %s/%s/%v, want linux/%s/epoch", cf.OS, cf.Architecture, cf.Created, goarch())
	}
	got, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(layers) {
		t.Fatalf("%d layers, want %d", len(got), len(layers))
	}
	for i := range layers {
		g, _ := got[i].Digest()
		w, _ := layers[i].Digest()
		if g != w {
			t.Errorf("layer %d is %s, want %s (order kept)", i, g, w)
		}
	}
}

// fakeEngine is an enginecli.Runner that records every command and answers from answer (nil: success).
type fakeEngine struct {
	calls  []string
	answer func(w io.Writer, args []string) error
}

func (f *fakeEngine) run(_ context.Context, w io.Writer, name string, args ...string) error {
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	if f.answer == nil {
		return nil
	}
	return f.answer(w, args)
}

// called reports whether a call's arguments start with verb (e.g. "load", "image inspect").
func (f *fakeEngine) called(verb string) bool {
	return slices.ContainsFunc(f.calls, func(c string) bool {
		_, args, _ := strings.Cut(c, " ")
		return strings.HasPrefix(args, verb+" ")
	})
}

var errNoSuchImage = errors.New("Error: No such image")

// engineWithout answers every image inspect with an error (the engine has no image).
func engineWithout() *fakeEngine {
	return &fakeEngine{answer: func(_ io.Writer, args []string) error {
		if len(args) >= 2 && args[0] == "image" && args[1] == "inspect" {
			return errNoSuchImage
		}
		return nil
	}}
}

func testOptions(t *testing.T, e *fakeEngine) Options {
	t.Helper()
	return Options{Bins: k8sbin.Options{CacheDir: t.TempDir()}, Run: e.run}
}

var refRE = regexp.MustCompile(`^` + regexp.QuoteMeta(Repository) + `:(v[0-9]+\.[0-9]+\.[0-9]+)-([0-9a-f]{16})$`)

func TestEnsureInEngine(t *testing.T) {
	ctx := context.Background()
	e := &fakeEngine{}
	o := testOptions(t, e)
	img, err := Ensure(ctx, o)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	m := refRE.FindStringSubmatch(img.Ref)
	if m == nil {
		t.Fatalf("Ref %q, want %s:<version>-<16 hex>", img.Ref, Repository)
	}
	if m[1] != k8sbin.DefaultKubernetesVersion || img.KubernetesVersion != k8sbin.DefaultKubernetesVersion || m[2] != img.Key {
		t.Errorf("Ref %q, version %q, key %q: want the default version %s and the key in the ref", img.Ref, img.KubernetesVersion, img.Key, k8sbin.DefaultKubernetesVersion)
	}
	if !img.InEngine || img.Built {
		t.Errorf("InEngine=%v Built=%v, want true, false", img.InEngine, img.Built)
	}
	wantArchive := filepath.Join(o.Bins.CacheDir, cacheName, img.KubernetesVersion, img.Key, "image.tar")
	if img.Archive != wantArchive {
		t.Errorf("Archive %q, want %q", img.Archive, wantArchive)
	}
	wantCalls := []string{"docker image inspect --format {{.Id}} " + img.Ref}
	if !slices.Equal(e.calls, wantCalls) {
		t.Errorf("engine calls %q, want only %q (no load)", e.calls, wantCalls)
	}

	// The key is the one the inputs hash to.
	b, err := newBuild(o)
	if err != nil {
		t.Fatal(err)
	}
	in, err := b.inputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.key() != img.Key {
		t.Errorf("key %s, inputs hash to %s", img.Key, in.key())
	}
	if in.Rootfs != rootfsKey(DefaultSuite) || in.Kind != kindVersion() || in.Plugin != "" || in.Targets[k8sbin.TargetContainerd] != k8sbin.DefaultContainerdVersion {
		t.Errorf("inputs %+v: want the default suite's rootfs key, the linked kind version, no plugin and the node targets", in)
	}

	// A cached versions.json is reported.
	dir := filepath.Dir(img.Archive)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "versions.json"), []byte(`{"kubernetes":"v1.37.2","etcd":"v3.6.5"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := Ensure(ctx, o)
	if err != nil {
		t.Fatalf("Ensure with versions.json: %v", err)
	}
	if again.Ref != img.Ref || again.Versions["etcd"] != "v3.6.5" || again.Versions["kubernetes"] != "v1.37.2" {
		t.Errorf("second Ensure: ref %s versions %v, want %s and the cached versions", again.Ref, again.Versions, img.Ref)
	}
}

func TestEnsureKeyFollowsInputs(t *testing.T) {
	ctx := context.Background()
	refOf := func(edit func(*Options)) string {
		t.Helper()
		o := testOptions(t, &fakeEngine{})
		edit(&o)
		img, err := Ensure(ctx, o)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		return img.Ref
	}
	def := refOf(func(*Options) {})
	if got := refOf(func(o *Options) { o.Suite = DefaultSuite; o.KubernetesVersion = k8sbin.DefaultKubernetesVersion }); got != def {
		t.Errorf("explicit defaults give %s, want %s", got, def)
	}
	if got := refOf(func(o *Options) { o.Mirror = "http://mirror.example/debian" }); got != def {
		t.Errorf("the mirror changed the ref (%s, want %s): it is not part of the content", got, def)
	}
	trixie := refOf(func(o *Options) { o.Suite = "trixie" })
	if trixie == def {
		t.Errorf("suite trixie gives the default suite's ref %s", def)
	}
	other := refOf(func(o *Options) { o.KubernetesVersion = "v1.36.1" })
	if m := refRE.FindStringSubmatch(other); m == nil || m[1] != "v1.36.1" || strings.HasSuffix(def, "-"+m[2]) {
		t.Errorf("v1.36.1 gives %s (default %s): want its version and another key", other, def)
	}
}

func TestEnsureNoBuildNotCached(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare makes the cache state before the NoBuild call.
		prepare func(t *testing.T, o Options)
	}{
		{"empty cache", func(*testing.T, Options) {}},
		{"key dir without an archive", func(t *testing.T, o Options) {
			img := archiveFor(t, o)
			if err := os.Remove(img.Archive); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(filepath.Dir(img.Archive), "versions.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := engineWithout()
			o := Options{Bins: k8sbin.Options{CacheDir: t.TempDir()}, Run: e.run, NoBuild: true}
			tc.prepare(t, o)
			img, err := Ensure(context.Background(), o)
			if !errors.Is(err, ErrNotCached) {
				t.Fatalf("Ensure = %+v, %v; want ErrNotCached", img, err)
			}
			if !strings.Contains(err.Error(), Repository+":"+k8sbin.DefaultKubernetesVersion+"-") {
				t.Errorf("error %q does not name the image", err)
			}
			if e.called("load") {
				t.Errorf("engine calls %q include a load", e.calls)
			}
			if !e.called("image inspect") {
				t.Errorf("engine calls %q: the engine was not asked", e.calls)
			}
		})
	}
}

// archiveFor creates the cached archive of the image Ensure would return for o, found by asking
// with an engine that has it.
func archiveFor(t *testing.T, o Options) *Image {
	t.Helper()
	o.Run = (&fakeEngine{}).run
	img, err := Ensure(context.Background(), o)
	if err != nil {
		t.Fatalf("Ensure (engine has it): %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(img.Archive), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img.Archive, []byte("not really an archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	return img
}

func TestEnsureNoBuildCachedArchive(t *testing.T) {
	e := engineWithout()
	o := Options{Bins: k8sbin.Options{CacheDir: t.TempDir()}, Run: e.run, NoBuild: true}
	want := archiveFor(t, o)
	img, err := Ensure(context.Background(), o)
	if err != nil {
		t.Fatalf("Ensure with a cached archive: %v", err)
	}
	if img.Ref != want.Ref || img.Archive != want.Archive {
		t.Errorf("Ensure = %s (%s), want %s (%s)", img.Ref, img.Archive, want.Ref, want.Archive)
	}
	if img.InEngine || img.Built {
		t.Errorf("InEngine=%v Built=%v, want false, false", img.InEngine, img.Built)
	}
	if e.called("load") {
		t.Errorf("engine calls %q include a load: NoBuild must not load", e.calls)
	}
}

// Without NoBuild, a cached archive the engine lacks is loaded (and not rebuilt).
func TestEnsureLoadsCachedArchive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		loadErr error
	}{
		{"load works", nil},
		{"load fails", errors.New("engine refused")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &fakeEngine{answer: func(_ io.Writer, args []string) error {
				switch args[0] {
				case "image":
					return errNoSuchImage
				case "load":
					return tc.loadErr
				}
				return fmt.Errorf("unexpected command %q", args)
			}}
			o := Options{Bins: k8sbin.Options{CacheDir: t.TempDir()}, Run: e.run, Engine: "podman"}
			want := archiveFor(t, o)
			img, err := Ensure(context.Background(), o)
			wantLoad := "podman load -i " + want.Archive
			if !slices.Contains(e.calls, wantLoad) {
				t.Errorf("engine calls %q, want %q", e.calls, wantLoad)
			}
			if tc.loadErr != nil {
				if !errors.Is(err, tc.loadErr) || !strings.Contains(err.Error(), want.Archive) {
					t.Errorf("Ensure = %v, want the load error naming %s", err, want.Archive)
				}
				return
			}
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if !img.InEngine || img.Built || img.Ref != want.Ref {
				t.Errorf("Ensure = %+v, want %s in the engine, not built", img, want.Ref)
			}
		})
	}
}

func TestEnsureOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Options)
		inErr string
	}{
		{"no runner", func(o *Options) { o.Run = nil }, "runner"},
		{"bad version", func(o *Options) { o.KubernetesVersion = "1.37.2" }, "1.37.2"},
		{"plugin image fails", func(o *Options) {
			o.PluginImage = func(context.Context) (v1.Image, string, error) { return nil, "", errors.New("plugin build broke") }
		}, "plugin build broke"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &fakeEngine{}
			o := testOptions(t, e)
			tc.edit(&o)
			img, err := Ensure(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.inErr) {
				t.Fatalf("Ensure = %+v, %v; want an error containing %q", img, err, tc.inErr)
			}
			if len(e.calls) != 0 {
				t.Errorf("engine calls %q before the options were checked", e.calls)
			}
		})
	}
}

func TestEnsurePluginInKey(t *testing.T) {
	ctx := context.Background()
	refWith := func(data string) (string, error) {
		o := testOptions(t, &fakeEngine{})
		o.PluginImage = func(context.Context) (v1.Image, string, error) {
			img, err := componentImage(component{Name: "plugin", Binary: writeBinary(t, data), BinaryPath: "/plugin"}, nil)
			return img, "example.test/plugin:v1", err
		}
		img, err := Ensure(ctx, o)
		if err != nil {
			return "", err
		}
		return img.Ref, nil
	}
	a, err := refWith("plugin a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := refWith("plugin b")
	if err != nil {
		t.Fatal(err)
	}
	none, err := Ensure(ctx, testOptions(t, &fakeEngine{}))
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == none.Ref {
		t.Errorf("refs with plugin a %s, plugin b %s, no plugin %s: want three keys", a, b, none.Ref)
	}
}

func TestPrune(t *testing.T) {
	const (
		mine1     = Repository + ":v1.37.2-0123456789abcdef"
		mine2     = Repository + ":v1.36.1-fedcba9876543210"
		foreign   = "example.test/other:v1"
		lookalike = Repository + "-other:v1"
	)
	for _, tc := range []struct {
		name       string
		rmFails    string // a ref whose rm fails
		wantErr    bool
		wantRemove []string
	}{
		{"all", "", false, []string{mine1, mine2}},
		{"one rm fails", mine1, true, []string{mine2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			nodeCache := filepath.Join(cache, cacheName, "v1.37.2", "0123456789abcdef")
			rootfsCache := filepath.Join(cache, "debian-rootfs", "bookworm-x")
			for _, d := range []string{nodeCache, rootfsCache} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			var rms []string
			e := &fakeEngine{answer: func(w io.Writer, args []string) error {
				switch {
				case slices.Equal(args, []string{"image", "ls", "--format", "{{.Repository}}:{{.Tag}}", Repository}):
					fmt.Fprintf(w, "%s\n%s\n%s\n%s\n", mine1, foreign, lookalike, mine2)
					return nil
				case len(args) == 3 && args[0] == "image" && args[1] == "rm":
					if args[2] == tc.rmFails {
						return errors.New("image is in use")
					}
					rms = append(rms, args[2])
					return nil
				}
				return fmt.Errorf("unexpected command %q", args)
			}}
			removed, err := Prune(context.Background(), "docker", e.run, k8sbin.Options{CacheDir: cache})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Prune error %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(rms, tc.wantRemove) {
				t.Errorf("removed from the engine %q, want %q (engine calls %q)", rms, tc.wantRemove, e.calls)
			}
			for _, c := range e.calls {
				if strings.Contains(c, foreign) || strings.Contains(c, lookalike) {
					t.Errorf("engine call %q touches a foreign image", c)
				}
			}
			if _, err := os.Stat(filepath.Join(cache, cacheName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("node image cache still there (stat: %v)", err)
			}
			if _, err := os.Stat(rootfsCache); err != nil {
				t.Errorf("root filesystem cache removed: %v", err)
			}
			want := append(slices.Clone(tc.wantRemove), filepath.Join(cache, cacheName))
			if !slices.Equal(removed, want) {
				t.Errorf("Prune returned %q, want %q", removed, want)
			}
		})
	}
}

func TestPruneErrors(t *testing.T) {
	listFails := &fakeEngine{answer: func(io.Writer, []string) error { return errors.New("daemon not running") }}
	cache := t.TempDir()
	removed, err := Prune(context.Background(), "docker", listFails.run, k8sbin.Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "daemon not running") || len(removed) != 0 {
		t.Errorf("Prune with a failing list = %q, %v; want nothing removed and the list error", removed, err)
	}

	// Nothing listed and no cache: nothing removed, no error.
	empty := &fakeEngine{}
	removed, err = Prune(context.Background(), "docker", empty.run, k8sbin.Options{CacheDir: filepath.Join(cache, "none")})
	if err != nil || len(removed) != 0 {
		t.Errorf("Prune of nothing = %q, %v; want nothing and no error", removed, err)
	}
}
