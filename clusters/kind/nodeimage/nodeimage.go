// Package nodeimage builds a kind node image without a registry, from sources reachable through the
// Go module proxy and Debian's archive: a debootstrapped Debian root filesystem, kind's base files
// from the sigs.k8s.io/kind module, the node binaries (kubelet, kubeadm, kubectl, containerd, runc,
// CNI plugins, crictl) built from their modules at pinned versions, and every image kubeadm and the
// cluster start preloaded into containerd's store (control plane, etcd, kube-proxy, pause, the fake
// GPU device plugin), all assembled with go-containerregistry and loaded into the container engine.
//
// Images are cached by content under the binary cache (<cache>/kind-node/<version>/<key>/), where
// key hashes every input; Ensure returns at once when the engine already has the image, reloads a
// cached archive when it does not, and builds otherwise, under a lock so concurrent callers build
// once.
//
// CoreDNS is not preloaded: no gangbench suite resolves names, and building it takes longer than
// the rest of the image. The kind config of a gangbench node image skips kubeadm's CoreDNS phase,
// so no pod waits on an image that is not there.
package nodeimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind/enginecli"
	"github.com/gangbench/gangbench/fakegpu"
)

const (
	// Repository names every node image gangbench builds; a node image under it carries its
	// component images under ImageRepository.
	Repository = "gangbench.dev/kind-node"
	// recipeRevision changes whenever the assembly below changes what an image contains.
	recipeRevision = "4"
	// cacheName is the node images' directory in the binary cache.
	cacheName = "kind-node"
	// LabelKey is the image label holding the content key.
	LabelKey = "dev.gangbench.node-image.key"
)

// entrypointScript wraps kind's entrypoint (see the script for the host facts it handles).
//
//go:embed entrypoint.sh
var entrypointScript []byte

// EntrypointPath is the node image's entrypoint.
const EntrypointPath = "/usr/local/bin/gangbench-entrypoint"

// UnprivilegedEnv, set in a node container, says it runs without --privileged.
const UnprivilegedEnv = "GANGBENCH_UNPRIVILEGED"

// IsGangbench reports whether ref names a node image built here (and so has its component images
// under ImageRepository and no CoreDNS).
func IsGangbench(ref string) bool { return strings.HasPrefix(ref, Repository+":") }

// Options configure Ensure.
type Options struct {
	// KubernetesVersion is what the node runs; "" means k8sbin.DefaultKubernetesVersion.
	KubernetesVersion string
	// Bins is where binaries are cached and how they are built (CacheDir, Builder).
	Bins k8sbin.Options
	// Suite is the Debian release of the root filesystem ("" means DefaultSuite); Mirror the
	// archive it comes from ("" means the one this machine's apt sources use).
	Suite, Mirror string
	// Engine is the container engine CLI the image is loaded into ("docker").
	Engine string
	// Run runs the engine CLI.
	Run enginecli.Runner
	// PluginImage is the fake GPU device plugin image to preload and its reference; nil preloads
	// none.
	PluginImage func(ctx context.Context) (v1.Image, string, error)
	// Progress shows the build; nil shows nothing.
	Progress *k8sbin.Progress
	// Log receives one-line notes (what was reused, where the logs of a failed step are).
	Log func(string)
	// NoBuild only looks: the engine's image or the cached archive (not loaded), else ErrNotCached.
	NoBuild bool
	// Rebuild builds and loads the image even when the engine or the cache has it (the binaries
	// and the root filesystem stay cached).
	Rebuild bool
}

// ErrNotCached is Ensure's answer with NoBuild when neither the engine nor the cache has the image.
var ErrNotCached = errors.New("node image not built yet")

// Image is a node image that the engine has.
type Image struct {
	Ref               string
	KubernetesVersion string
	// Key is the content key (the hash of every input).
	Key string
	// Archive is the cached docker-archive of the image.
	Archive string
	// Built says whether this call built it (false: reused from the engine or the cache).
	Built bool
	// InEngine says whether the engine has it (false only with NoBuild: then only the archive is).
	InEngine bool
	// Versions are the versions of the node's components.
	Versions map[string]string
}

// inputs are what a node image is made of; their hash is its key.
type inputs struct {
	Revision          string            `json:"revision"`
	KubernetesVersion string            `json:"kubernetesVersion"`
	EtcdVersion       string            `json:"etcdVersion"`
	Targets           map[string]string `json:"targets"`
	Kind              string            `json:"kind"`
	Rootfs            string            `json:"rootfs"`
	Arch              string            `json:"arch"`
	Plugin            string            `json:"plugin,omitempty"`
	// Entrypoint is the hash of gangbench's entrypoint script, which is part of the image.
	Entrypoint string `json:"entrypoint"`
}

func (in inputs) key() string {
	b, _ := json.Marshal(in) // maps marshal in key order: stable
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])[:16]
}

// nodeTargets are the node binaries other than the control plane, by target name.
func nodeTargets(kubeVersion string) []k8sbin.Target {
	return []k8sbin.Target{
		{Name: k8sbin.TargetKubernetesNode, Version: kubeVersion},
		{Name: k8sbin.TargetContainerd, Version: k8sbin.DefaultContainerdVersion},
		{Name: k8sbin.TargetRunc, Version: k8sbin.DefaultRuncVersion},
		{Name: k8sbin.TargetCNIPlugins, Version: k8sbin.DefaultCNIPluginsVersion},
		{Name: k8sbin.TargetCriTools, Version: k8sbin.DefaultCriToolsVersion},
		{Name: k8sbin.TargetPause, Version: kubeVersion},
	}
}

// kindVersion is the version of the kind module this binary links, whose base files are used.
func kindVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == KindModule {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "v0.33.0"
}

func goarch() string { return runtime.GOARCH }

// Ensure returns the node image for o.KubernetesVersion, building it only when neither the engine
// nor the cache has it.
func Ensure(ctx context.Context, o Options) (*Image, error) {
	b, err := newBuild(o)
	if err != nil {
		return nil, err
	}
	return b.ensure(ctx)
}

type build struct {
	o        Options
	cache    string
	version  string
	gb       *k8sbin.GoBuilder
	bins     k8sbin.Options
	plugin   v1.Image
	pluginRf string
}

func newBuild(o Options) (*build, error) {
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = k8sbin.DefaultKubernetesVersion
	}
	if err := k8sbin.ValidateKubeVersion(o.KubernetesVersion); err != nil {
		return nil, err
	}
	if o.Suite == "" {
		o.Suite = DefaultSuite
	}
	if o.Engine == "" {
		o.Engine = "docker"
	}
	if o.Run == nil {
		return nil, errors.New("nodeimage: no engine runner")
	}
	if o.Log == nil {
		o.Log = func(string) {}
	}
	if o.Progress == nil {
		o.Progress = k8sbin.NewProgress(nil)
	}
	cache, err := k8sbin.CacheDirOf(o.Bins)
	if err != nil {
		return nil, err
	}
	gb, _ := o.Bins.Builder.(*k8sbin.GoBuilder)
	if gb == nil {
		gb = &k8sbin.GoBuilder{}
	}
	bins := o.Bins
	bins.CacheDir = cache
	bins.Progress = nil // progress goes through o.Progress
	return &build{o: o, cache: cache, version: o.KubernetesVersion, gb: gb, bins: bins}, nil
}

// step runs fn as one progress step.
func (b *build) step(key, label string, fn func() error) error {
	done := b.o.Progress.Step(key, label)
	err := fn()
	done(err == nil)
	return err
}

func (b *build) inputs(ctx context.Context) (inputs, error) {
	in := inputs{Revision: recipeRevision, KubernetesVersion: b.version, Targets: map[string]string{},
		Kind: kindVersion(), Rootfs: rootfsKey(b.o.Suite), Arch: goarch()}
	sum := sha256.Sum256(entrypointScript)
	in.Entrypoint = hex.EncodeToString(sum[:])
	for _, t := range nodeTargets(b.version) {
		in.Targets[t.Name] = t.Version
	}
	if b.o.PluginImage != nil {
		img, ref, err := b.o.PluginImage(ctx)
		if err != nil {
			return in, fmt.Errorf("device plugin image: %w", err)
		}
		d, err := img.Digest()
		if err != nil {
			return in, err
		}
		b.plugin, b.pluginRf, in.Plugin = img, ref, ref+"@"+d.String()
	}
	return in, nil
}

// Ref is the reference of the node image with key for a Kubernetes version.
func Ref(kubeVersion, key string) string { return Repository + ":" + kubeVersion + "-" + key }

func (b *build) ensure(ctx context.Context) (*Image, error) {
	in, err := b.inputs(ctx)
	if err != nil {
		return nil, err
	}
	key := in.key()
	img := &Image{Ref: Ref(b.version, key), KubernetesVersion: b.version, Key: key}
	dir := filepath.Join(b.cache, cacheName, b.version, key)
	img.Archive = filepath.Join(dir, "image.tar")
	if !b.o.Rebuild && b.engineHas(ctx, img.Ref) {
		b.o.Log("node image " + img.Ref + " is in " + b.o.Engine)
		img.InEngine = true
		return img, b.readVersions(dir, img)
	}
	if b.o.NoBuild {
		if _, err := os.Stat(img.Archive); err != nil {
			return nil, fmt.Errorf("%w: %s (gangbench kind node-image --k8s-version %s builds it)", ErrNotCached, img.Ref, b.version)
		}
		return img, b.readVersions(dir, img)
	}
	parent := filepath.Join(b.cache, cacheName, b.version)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	unlock, err := k8sbin.LockFile(ctx, filepath.Join(parent, key+".lock"), func() {
		b.o.Log("waiting for another gangbench building node image " + img.Ref)
	})
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !b.o.Rebuild && b.engineHas(ctx, img.Ref) {
		img.InEngine = true
		return img, b.readVersions(dir, img)
	}
	removeStale(parent, ".tmp-"+key+"-")
	if _, err := os.Stat(img.Archive); err != nil || b.o.Rebuild {
		if err := b.assemble(ctx, in, dir, img); err != nil {
			return nil, err
		}
		img.Built = true
	}
	if err := b.step("load "+img.Ref, "loading the node image into "+b.o.Engine, func() error {
		return b.o.Run(ctx, io.Discard, b.o.Engine, "load", "-i", img.Archive)
	}); err != nil {
		return nil, fmt.Errorf("load node image %s from %s: %w", img.Ref, img.Archive, err)
	}
	img.InEngine = true
	return img, b.readVersions(dir, img)
}

func (b *build) engineHas(ctx context.Context, ref string) bool {
	return b.o.Run(ctx, io.Discard, b.o.Engine, "image", "inspect", "--format", "{{.Id}}", ref) == nil
}

func (b *build) readVersions(dir string, img *Image) error {
	data, err := os.ReadFile(filepath.Join(dir, "versions.json"))
	if err != nil {
		// The engine's copy outlived the cache (pruned by hand): the versions are in the image.
		return nil
	}
	return json.Unmarshal(data, &img.Versions)
}

// assemble builds the image archive into dir (via a temp dir renamed at the end, so a killed build
// never leaves a half archive that looks complete).
func (b *build) assemble(ctx context.Context, in inputs, dir string, img *Image) (err error) {
	parent := filepath.Dir(dir)
	work, err := os.MkdirTemp(parent, ".tmp-"+img.Key+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	for _, t := range nodeTargets(b.version) {
		if t.Name == k8sbin.TargetContainerd {
			if err := checkContainerdCDI(t.Version); err != nil {
				return err
			}
		}
	}
	// Binaries first: they are the long part, and every later step needs them.
	set, err := k8sbin.Ensure(ctx, b.version, b.bins)
	if err != nil {
		return err
	}
	dirs := map[string]string{}
	for _, t := range nodeTargets(b.version) {
		d, err := k8sbin.EnsureTarget(ctx, t, b.bins, b.o.Progress)
		if err != nil {
			return err
		}
		dirs[t.Name] = d
	}
	bin := func(target, name string) string { return filepath.Join(dirs[target], name) }
	rootfsPath, err := b.rootfs(ctx)
	if err != nil {
		return err
	}
	rootfs, err := fileLayer(rootfsPath)
	if err != nil {
		return err
	}
	kindDir, err := b.gb.ModuleDir(ctx, KindModule, in.Kind)
	if err != nil {
		return fmt.Errorf("kind base files: %w", err)
	}

	k8sDir, err := b.gb.ModuleDir(ctx, k8sbin.KubernetesModule, b.version)
	if err != nil {
		return fmt.Errorf("kubernetes source (for the e2e image tags): %w", err)
	}
	busybox, err := e2eBusyBoxTag(k8sDir)
	if err != nil {
		return err
	}
	refs, err := kubeadmImages(ctx, bin(k8sbin.TargetKubernetesNode, k8sbin.KubeadmBinary), b.version)
	if err != nil {
		return err
	}
	base, sandbox, err := kindBaseEntries(kindDir)
	if err != nil {
		return err
	}
	comps := []component{
		{Name: k8sbin.APIServerBinary, Tags: []string{b.version}, Binary: set.APIServer, BinaryPath: "/usr/local/bin/" + k8sbin.APIServerBinary},
		{Name: k8sbin.ControllerManagerBinary, Tags: []string{b.version}, Binary: set.ControllerManager, BinaryPath: "/usr/local/bin/" + k8sbin.ControllerManagerBinary},
		{Name: k8sbin.SchedulerBinaryName, Tags: []string{b.version}, Binary: set.Scheduler, BinaryPath: "/usr/local/bin/" + k8sbin.SchedulerBinaryName},
		{Name: k8sbin.KubeProxyBinary, Tags: []string{b.version}, Binary: bin(k8sbin.TargetKubernetesNode, k8sbin.KubeProxyBinary), BinaryPath: "/usr/local/bin/" + k8sbin.KubeProxyBinary, OnRootfs: true},
		// The etcd the local provider runs (the version Kubernetes' go.mod pins), under the tag this
		// kubeadm asks for, which can name another patch release.
		{Name: "etcd", Tags: []string{kubeadmTag(refs, "etcd", etcdTag(set.EtcdVersion))}, Binary: set.Etcd, BinaryPath: "/usr/local/bin/etcd"},
		{Name: "pause", Tags: []string{k8sbin.PauseVersionOf(b.version)}, Aliases: []string{sandbox, fakegpu.PodImage}, Binary: bin(k8sbin.TargetPause, k8sbin.PauseBinary), BinaryPath: "/pause"},
		// Upstream's e2e busybox (see e2eimages.go): the node's root filesystem, pausing when run
		// without a command.
		{Name: "busybox", Tags: []string{busybox}, Binary: bin(k8sbin.TargetPause, k8sbin.PauseBinary), BinaryPath: "/usr/local/bin/pause", OnRootfs: true},
	}
	if err := checkKubeadmImages(refs, comps); err != nil {
		return err
	}
	preloadDir := filepath.Join(work, "preload")
	archive := filepath.Join(work, "images.tar")
	var preloadLayer v1.Layer
	if err := b.step("preload", "preloading "+fmt.Sprint(len(comps))+" images into containerd's store", func() error {
		extra := map[name.Reference]v1.Image{}
		if b.plugin != nil {
			tag, err := name.NewTag(b.pluginRf)
			if err != nil {
				return fmt.Errorf("device plugin image ref %q: %w", b.pluginRf, err)
			}
			extra[tag] = b.plugin
		}
		if err := writeImagesArchive(archive, comps, rootfs, extra); err != nil {
			return err
		}
		if err := os.MkdirAll(preloadDir, 0o700); err != nil {
			return err
		}
		root, err := preloadTree(ctx, bin(k8sbin.TargetContainerd, "containerd"), bin(k8sbin.TargetContainerd, "ctr"), archive, preloadDir)
		if err != nil {
			return err
		}
		out := filepath.Join(work, "preload.tar.gz")
		if err := tarTree(root, "var/lib/containerd", out, nil); err != nil {
			return err
		}
		os.RemoveAll(preloadDir)
		os.Remove(archive)
		preloadLayer, err = fileLayer(out)
		return err
	}); err != nil {
		return err
	}

	versions := map[string]string{"kubernetes": b.version, "etcd": set.EtcdVersion, "kind-base-files": in.Kind, "debian": b.o.Suite}
	for _, t := range nodeTargets(b.version) {
		versions[t.Name] = t.Version
	}
	var final v1.Image
	if err := b.step("assemble", "assembling node image "+img.Ref, func() error {
		spec, err := criBaseSpec(ctx, bin(k8sbin.TargetContainerd, "ctr"))
		if err != nil {
			return err
		}
		es := base
		vj, _ := json.MarshalIndent(versions, "", "  ")
		es = append(es,
			fileEntry("/etc/containerd/cri-base.json", 0o644, spec),
			fileEntry("/kind/version", 0o644, []byte(b.version+"\n")),
			fileEntry(EntrypointPath, 0o755, entrypointScript),
			fileEntry("/kind/gangbench-versions.json", 0o644, append(vj, '\n')),
		)
		for _, n := range []string{k8sbin.KubeletBinary, k8sbin.KubeadmBinary, k8sbin.KubectlBinary} {
			es = append(es, copyEntry("/usr/bin/"+n, 0o755, bin(k8sbin.TargetKubernetesNode, n)))
		}
		for _, n := range k8sbin.Binaries(k8sbin.TargetContainerd) {
			es = append(es, copyEntry("/usr/local/bin/"+n, 0o755, bin(k8sbin.TargetContainerd, n)))
		}
		es = append(es, copyEntry("/usr/local/bin/crictl", 0o755, bin(k8sbin.TargetCriTools, "crictl")),
			copyEntry("/usr/local/sbin/runc", 0o755, bin(k8sbin.TargetRunc, "runc")))
		for _, n := range k8sbin.Binaries(k8sbin.TargetCNIPlugins) {
			es = append(es, copyEntry("/opt/cni/bin/"+n, 0o755, bin(k8sbin.TargetCNIPlugins, n)))
		}
		nodeLayer, err := entriesLayer(es)
		if err != nil {
			return err
		}
		final, err = nodeImage(img, []v1.Layer{rootfs, nodeLayer, preloadLayer})
		if err != nil {
			return err
		}
		ref, err := name.NewTag(img.Ref)
		if err != nil {
			return err
		}
		return tarball.WriteToFile(filepath.Join(work, "image.tar"), ref, final)
	}); err != nil {
		return fmt.Errorf("node image %s: %w", img.Ref, err)
	}
	vj, _ := json.MarshalIndent(versions, "", "  ")
	if err := os.WriteFile(filepath.Join(work, "versions.json"), vj, 0o644); err != nil {
		return err
	}
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"preload.tar.gz"} {
		os.Remove(filepath.Join(work, f))
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Rename(work, dir); err != nil {
		return err
	}
	img.Versions = versions
	return nil
}

// nodeImage is the final image: the layers, and the config kind's base image Dockerfile sets.
func nodeImage(img *Image, layers []v1.Layer) (v1.Image, error) {
	return layeredImage(layers, func(c *v1.Config) {
		// systemd must know it runs in a container, and exits on SIGRTMIN+3 (SIGTERM re-executes it).
		c.Env = []string{"container=docker", pathEnv}
		c.StopSignal = "SIGRTMIN+3"
		c.Entrypoint = []string{EntrypointPath, "/sbin/init"}
		c.Labels = map[string]string{LabelKey: img.Key, "dev.gangbench.kubernetes-version": img.KubernetesVersion}
	})
}

// rootfs returns the cached root filesystem tarball, building it when missing.
func (b *build) rootfs(ctx context.Context) (string, error) {
	key := rootfsKey(b.o.Suite)
	parent := filepath.Join(b.cache, "debian-rootfs")
	final := filepath.Join(parent, key, "rootfs.tar.gz")
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	unlock, err := k8sbin.LockFile(ctx, filepath.Join(parent, key+".lock"), nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	removeStale(parent, ".tmp-"+key+"-")
	mirror := b.o.Mirror
	if mirror == "" {
		if mirror, err = DebianMirror(b.o.Suite); err != nil {
			return "", err
		}
	}
	work, err := os.MkdirTemp(parent, ".tmp-"+key+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	out := filepath.Join(work, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return "", err
	}
	if err := b.step("rootfs", "Debian "+b.o.Suite+" root filesystem (debootstrap)", func() error {
		return buildRootfs(ctx, b.o.Suite, mirror, work, filepath.Join(out, "rootfs.tar.gz"), b.o.Log)
	}); err != nil {
		return "", err
	}
	if err := os.Rename(out, filepath.Join(parent, key)); err != nil {
		return "", err
	}
	return final, nil
}

// kubeadmImages asks the node's kubeadm which images it will run for version under
// ImageRepository (offline: the version is given, so nothing is looked up).
func kubeadmImages(ctx context.Context, kubeadm, version string) ([]string, error) {
	cmd := exec.CommandContext(ctx, kubeadm, "config", "images", "list", "--kubernetes-version", version, "--image-repository", ImageRepository)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s config images list: %w\n%s", kubeadm, err, stderr.String())
	}
	return strings.Fields(string(out)), nil
}

// kubeadmTag is the tag kubeadm's image list gives the image named n, or def when it lists none.
func kubeadmTag(refs []string, n, def string) string {
	for _, r := range refs {
		if rest, ok := strings.CutPrefix(r, ImageRepository+"/"+n+":"); ok {
			return rest
		}
	}
	return def
}

// checkKubeadmImages makes sure every image kubeadm names (but CoreDNS, see the package comment) is
// among the components, so a version whose kubeadm wants another etcd or pause tag fails here and
// not as a kubeadm timeout inside the node.
func checkKubeadmImages(refs []string, comps []component) error {
	have := map[string]bool{}
	for _, c := range comps {
		for _, t := range c.Tags {
			have[imageRef(c.Name, t)] = true
		}
	}
	var missing []string
	for _, r := range refs {
		if strings.Contains(r, "/coredns") {
			continue
		}
		if !have[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kubeadm wants images the node image does not make: %s (made: %s)", strings.Join(missing, ", "), strings.Join(slices.Sorted(func(yield func(string) bool) {
			for k := range have {
				if !yield(k) {
					return
				}
			}
		}), ", "))
	}
	return nil
}

// Prune removes every node image gangbench built from the engine (only images under Repository)
// and the node image cache; the binaries and the root filesystem stay cached. It returns what it
// removed.
func Prune(ctx context.Context, engine string, run enginecli.Runner, bins k8sbin.Options) ([]string, error) {
	var out bytes.Buffer
	if err := run(ctx, &out, engine, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", Repository); err != nil {
		return nil, fmt.Errorf("list node images in %s: %w", engine, err)
	}
	var removed []string
	var errs []error
	for _, ref := range strings.Fields(out.String()) {
		if !IsGangbench(ref) {
			continue
		}
		if err := run(ctx, io.Discard, engine, "image", "rm", ref); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, ref)
	}
	cache, err := k8sbin.CacheDirOf(bins)
	if err != nil {
		return removed, errors.Join(append(errs, err)...)
	}
	dir := filepath.Join(cache, cacheName)
	if _, err := os.Stat(dir); err == nil {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		} else {
			removed = append(removed, dir)
		}
	}
	return removed, errors.Join(errs...)
}

// removeStale removes the temp dirs of builds that were killed (the caller holds the lock that
// every build of the same key takes, so none of them is still being written).
func removeStale(parent, prefix string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			p := filepath.Join(parent, e.Name())
			unmountUnder(p)
			_ = os.RemoveAll(p)
		}
	}
}
