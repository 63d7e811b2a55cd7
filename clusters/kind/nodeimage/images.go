package nodeimage

import (
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImageRepository is where the images preloaded into a gangbench node image are named. The node
// image's kind config sets kubeadm's imageRepository to it, so kubeadm and the kubelet find every
// control-plane image under this name, already present in containerd (nothing is ever pulled: no
// registry answers at this name).
const ImageRepository = "gangbench.dev/k8s"

// pathEnv is the PATH of every image: kubeadm's static pods run their binaries by name.
const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// minimalBase is the little a static Go binary expects of a distroless image: users, groups and a
// writable /tmp.
func minimalBase() []entry {
	return []entry{
		fileEntry("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")),
		fileEntry("/etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n")),
		fileEntry("/etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")),
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/root", Mode: 0o700, Dir: true},
	}
}

// component is one image to preload: its name under ImageRepository, tags, and how it is made.
type component struct {
	Name string   // kube-apiserver
	Tags []string // v1.37.2
	// Aliases are further full references of the same image.
	Aliases []string
	// Binary is the file put at BinaryPath and run as the entrypoint.
	Binary, BinaryPath string
	// OnRootfs puts the binary on the node's Debian root filesystem instead of the minimal base:
	// kube-proxy runs iptables, nft and conntrack from its own image.
	OnRootfs bool
}

// refs are the component's image references.
func (c component) refs() ([]name.Tag, error) {
	var out []name.Tag
	for _, t := range c.Tags {
		r, err := name.NewTag(ImageRepository + "/" + c.Name + ":" + t)
		if err != nil {
			return nil, fmt.Errorf("image %s:%s: %w", c.Name, t, err)
		}
		out = append(out, r)
	}
	for _, a := range c.Aliases {
		r, err := name.NewTag(a)
		if err != nil {
			return nil, fmt.Errorf("image %s alias %s: %w", c.Name, a, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// componentImage assembles c's image. rootfs is the root filesystem layer, shared with the node.
func componentImage(c component, rootfs v1.Layer) (v1.Image, error) {
	if _, err := os.Stat(c.Binary); err != nil {
		return nil, fmt.Errorf("image %s: %w", c.Name, err)
	}
	var layers []v1.Layer
	if c.OnRootfs {
		layers = append(layers, rootfs)
	} else {
		base, err := entriesLayer(minimalBase())
		if err != nil {
			return nil, err
		}
		layers = append(layers, base)
	}
	bin, err := entriesLayer([]entry{copyEntry(c.BinaryPath, 0o755, c.Binary)})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", c.Name, err)
	}
	layers = append(layers, bin)
	binaryPath, name := c.BinaryPath, c.Name
	return layeredImage(layers, func(c *v1.Config) {
		c.Env = []string{pathEnv}
		c.Entrypoint = []string{binaryPath}
		c.Labels = map[string]string{"dev.gangbench.component": name}
	})
}

// layeredImage is an image of layers for this machine's platform, created at the epoch (so its
// digest depends on its content alone), with the config set sets.
func layeredImage(layers []v1.Layer, set func(*v1.Config)) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = goarch(), "linux"
	cf.Created = v1.Time{Time: epoch()}
	set(&cf.Config)
	return mutate.ConfigFile(img, cf)
}

// writeImagesArchive writes the components' images as one docker-archive tarball (what
// `ctr images import` reads).
func writeImagesArchive(out string, cs []component, rootfs v1.Layer, extra map[name.Reference]v1.Image) error {
	m := map[name.Reference]v1.Image{}
	for r, img := range extra {
		m[r] = img
	}
	for _, c := range cs {
		img, err := componentImage(c, rootfs)
		if err != nil {
			return err
		}
		refs, err := c.refs()
		if err != nil {
			return err
		}
		for _, r := range refs {
			m[r] = img
		}
	}
	if err := tarball.MultiRefWriteToFile(out, m); err != nil {
		return fmt.Errorf("write preloaded images archive: %w", err)
	}
	return nil
}

// imageRef is ImageRepository/name:tag.
func imageRef(n, tag string) string { return ImageRepository + "/" + n + ":" + tag }

// etcdTag is kubeadm's etcd image tag for an etcd version: v3.7.0 -> 3.7.0-0.
func etcdTag(etcdVersion string) string { return strings.TrimPrefix(etcdVersion, "v") + "-0" }
