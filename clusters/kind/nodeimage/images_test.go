package nodeimage

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestKubeadmTag(t *testing.T) {
	refs := []string{
		ImageRepository + "/kube-apiserver:v1.37.2",
		ImageRepository + "/etcd-druid:9.9.9", // another image whose name starts with etcd
		ImageRepository + "/etcd:3.6.5-0",
		ImageRepository + "/pause:3.10.1",
		"example.test/pause:3.9", // another repository
	}
	for _, tc := range []struct {
		name, image, def, want string
	}{
		{"etcd found", "etcd", "3.7.0-0", "3.6.5-0"},
		{"pause found", "pause", "3.1", "3.10.1"},
		{"absent: default", "coredns", "v1.12.0", "v1.12.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kubeadmTag(refs, tc.image, tc.def); got != tc.want {
				t.Errorf("kubeadmTag(%s, %s) = %q, want %q", tc.image, tc.def, got, tc.want)
			}
		})
	}
	if got := kubeadmTag(nil, "etcd", "3.7.0-0"); got != "3.7.0-0" {
		t.Errorf("kubeadmTag(no refs) = %q, want the default 3.7.0-0", got)
	}
}

func TestEtcdTag(t *testing.T) {
	for in, want := range map[string]string{"v3.7.0": "3.7.0-0", "v3.6.5": "3.6.5-0", "3.5.1": "3.5.1-0"} {
		if got := etcdTag(in); got != want {
			t.Errorf("etcdTag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckKubeadmImages(t *testing.T) {
	comps := []component{
		{Name: "kube-apiserver", Tags: []string{"v1.37.2"}},
		{Name: "etcd", Tags: []string{"3.6.5-0"}},
		{Name: "pause", Tags: []string{"3.10.1"}, Aliases: []string{"example.test/pause:3.10"}},
	}
	for _, tc := range []struct {
		name    string
		refs    []string
		missing []string // named in the error; none means no error
	}{
		{"all made, CoreDNS ignored", []string{imageRef("kube-apiserver", "v1.37.2"), imageRef("etcd", "3.6.5-0"), imageRef("pause", "3.10.1"), ImageRepository + "/coredns/coredns:v1.12.1"}, nil},
		{"nothing asked", nil, nil},
		{"other etcd tag", []string{imageRef("kube-apiserver", "v1.37.2"), imageRef("etcd", "3.6.6-0")}, []string{imageRef("etcd", "3.6.6-0")}},
		{"other pause tag and unknown image", []string{imageRef("pause", "3.11"), imageRef("kube-proxy", "v1.37.2")}, []string{imageRef("pause", "3.11"), imageRef("kube-proxy", "v1.37.2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkKubeadmImages(tc.refs, comps)
			if len(tc.missing) == 0 {
				if err != nil {
					t.Fatalf("checkKubeadmImages: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkKubeadmImages(%q) = nil, want an error naming %q", tc.refs, tc.missing)
			}
			for _, m := range tc.missing {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not name %s", err, m)
				}
			}
			// The error also lists what is made, so the mismatch is plain.
			if !strings.Contains(err.Error(), imageRef("etcd", "3.6.5-0")) {
				t.Errorf("error %q does not list the made etcd image", err)
			}
		})
	}
}

func TestComponentRefs(t *testing.T) {
	c := component{Name: "pause", Tags: []string{"3.10.1", "latest"}, Aliases: []string{"example.test/pause:3.10"}}
	refs, err := c.refs()
	if err != nil {
		t.Fatalf("refs: %v", err)
	}
	var got []string
	for _, r := range refs {
		got = append(got, r.Name())
	}
	want := []string{ImageRepository + "/pause:3.10.1", ImageRepository + "/pause:latest", "example.test/pause:3.10"}
	if !slices.Equal(got, want) {
		t.Errorf("refs = %q, want %q", got, want)
	}
	for _, bad := range []component{
		{Name: "pause", Tags: []string{"bad tag"}},
		{Name: "pause", Tags: []string{"3.10"}, Aliases: []string{"UPPER/case:1"}},
	} {
		if refs, err := bad.refs(); err == nil {
			t.Errorf("refs of %+v = %v, want an error", bad, refs)
		} else if !strings.Contains(err.Error(), "pause") {
			t.Errorf("error %q does not name the component", err)
		}
	}
}

// writeBinary writes a fake binary and returns its path.
func writeBinary(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// imageFiles reads every layer of img and returns the last header of each path.
func imageFiles(t *testing.T, img v1.Image) map[string]fileInTar {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fileInTar{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range readTar(t, rc) {
			out[f.Name] = f
		}
		rc.Close()
	}
	return out
}

func TestComponentImageMinimalBase(t *testing.T) {
	binPath := writeBinary(t, "apiserver binary")
	c := component{Name: "kube-apiserver", Tags: []string{"v1.37.2"}, Binary: binPath, BinaryPath: "/usr/local/bin/kube-apiserver"}
	img, err := componentImage(c, nil) // the rootfs layer is not used without OnRootfs
	if err != nil {
		t.Fatalf("componentImage: %v", err)
	}
	files := imageFiles(t, img)
	for _, tc := range []struct {
		name string
		typ  byte
		mode int64
	}{
		{"etc/passwd", tar.TypeReg, 0o644},
		{"etc/group", tar.TypeReg, 0o644},
		{"tmp/", tar.TypeDir, 0o1777},
		{"root/", tar.TypeDir, 0o700},
		{"usr/local/bin/kube-apiserver", tar.TypeReg, 0o755},
	} {
		f, ok := files[tc.name]
		if !ok {
			t.Errorf("%s missing from the image (have %v)", tc.name, mapKeys(files))
			continue
		}
		if f.Typeflag != tc.typ || f.Mode != tc.mode {
			t.Errorf("%s: type %c mode %o, want type %c mode %o", tc.name, f.Typeflag, f.Mode, tc.typ, tc.mode)
		}
	}
	if got := files["usr/local/bin/kube-apiserver"].Data; got != "apiserver binary" {
		t.Errorf("binary content %q, want the file's", got)
	}
	if !strings.Contains(files["etc/passwd"].Data, "root:x:0:0:") {
		t.Errorf("/etc/passwd has no root: %q", files["etc/passwd"].Data)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/kube-apiserver"}) {
		t.Errorf("entrypoint %q, want the binary path", cf.Config.Entrypoint)
	}
	if !slices.Equal(cf.Config.Env, []string{pathEnv}) {
		t.Errorf("env %q, want %q", cf.Config.Env, pathEnv)
	}
	if cf.OS != "linux" || cf.Architecture != goarch() || !cf.Created.Time.Equal(epoch()) {
		t.Errorf("os/arch/created = %s/%s/%v, want linux/%s/epoch", cf.OS, cf.Architecture, cf.Created, goarch())
	}
	if cf.Config.Labels["dev.gangbench.component"] != "kube-apiserver" {
		t.Errorf("labels %v, want dev.gangbench.component=kube-apiserver", cf.Config.Labels)
	}
}

func TestComponentImageOnRootfs(t *testing.T) {
	rootfs, err := entriesLayer([]entry{fileEntry("/usr/sbin/iptables", 0o755, []byte("iptables"))})
	if err != nil {
		t.Fatal(err)
	}
	want, err := rootfs.Digest()
	if err != nil {
		t.Fatal(err)
	}
	c := component{Name: "kube-proxy", Tags: []string{"v1.37.2"}, Binary: writeBinary(t, "proxy"), BinaryPath: "/usr/local/bin/kube-proxy", OnRootfs: true}
	for _, onRootfs := range []bool{true, false} {
		c.OnRootfs = onRootfs
		img, err := componentImage(c, rootfs)
		if err != nil {
			t.Fatalf("componentImage(OnRootfs=%v): %v", onRootfs, err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if len(layers) != 2 {
			t.Fatalf("OnRootfs=%v: %d layers, want 2", onRootfs, len(layers))
		}
		got, err := layers[0].Digest()
		if err != nil {
			t.Fatal(err)
		}
		if (got == want) != onRootfs {
			t.Errorf("OnRootfs=%v: first layer %s, rootfs layer %s", onRootfs, got, want)
		}
		files := imageFiles(t, img)
		if _, ok := files["usr/sbin/iptables"]; ok != onRootfs {
			t.Errorf("OnRootfs=%v: iptables from the rootfs present = %v", onRootfs, ok)
		}
		if _, ok := files["etc/passwd"]; ok == onRootfs {
			t.Errorf("OnRootfs=%v: minimal base's /etc/passwd present = %v", onRootfs, ok)
		}
		if f := files["usr/local/bin/kube-proxy"]; f.Data != "proxy" || f.Mode != 0o755 {
			t.Errorf("OnRootfs=%v: binary %+v, want mode 755 with the file's content", onRootfs, f)
		}
	}
}

func TestComponentImageMissingBinary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-binary")
	_, err := componentImage(component{Name: "etcd", Binary: missing, BinaryPath: "/usr/local/bin/etcd"}, nil)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "etcd") {
		t.Errorf("componentImage with a missing binary: %v, want a not-exist error naming etcd", err)
	}
}

func TestWriteImagesArchive(t *testing.T) {
	rootfs, err := entriesLayer([]entry{fileEntry("/bin/sh", 0o755, []byte("sh"))})
	if err != nil {
		t.Fatal(err)
	}
	extraRef, err := name.NewTag("example.test/plugin:v1")
	if err != nil {
		t.Fatal(err)
	}
	extra, err := componentImage(component{Name: "plugin", Binary: writeBinary(t, "plugin"), BinaryPath: "/plugin"}, rootfs)
	if err != nil {
		t.Fatal(err)
	}
	cs := []component{
		{Name: "etcd", Tags: []string{"3.6.5-0"}, Binary: writeBinary(t, "etcd"), BinaryPath: "/usr/local/bin/etcd"},
		{Name: "pause", Tags: []string{"3.10.1"}, Aliases: []string{"example.test/pause:3.10"}, Binary: writeBinary(t, "pause"), BinaryPath: "/pause"},
	}
	out := filepath.Join(t.TempDir(), "images.tar")
	if err := writeImagesArchive(out, cs, rootfs, map[name.Reference]v1.Image{extraRef: extra}); err != nil {
		t.Fatalf("writeImagesArchive: %v", err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(out) })
	if err != nil {
		t.Fatalf("manifest of %s: %v", out, err)
	}
	var tags []string
	for _, d := range m {
		tags = append(tags, d.RepoTags...)
	}
	slices.Sort(tags)
	want := []string{"example.test/plugin:v1", ImageRepository + "/etcd:3.6.5-0", ImageRepository + "/pause:3.10.1", "example.test/pause:3.10"}
	slices.Sort(want)
	if !slices.Equal(tags, want) {
		b, _ := json.Marshal(m)
		t.Errorf("archive tags %q, want %q\n%s", tags, want, b)
	}
	// The pause tag and its alias are one image.
	for _, d := range m {
		if slices.Contains(d.RepoTags, "example.test/pause:3.10") && !slices.Contains(d.RepoTags, ImageRepository+"/pause:3.10.1") {
			t.Errorf("pause alias is a separate image: %q", d.RepoTags)
		}
	}

	cs[0].Binary = filepath.Join(t.TempDir(), "missing")
	if err := writeImagesArchive(filepath.Join(t.TempDir(), "x.tar"), cs, rootfs, nil); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Errorf("writeImagesArchive with a missing binary: %v, want an error naming etcd", err)
	}
}
