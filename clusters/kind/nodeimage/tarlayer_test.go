package nodeimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fileInTar is one tar member read back.
type fileInTar struct {
	Name     string
	Typeflag byte
	Mode     int64
	Linkname string
	Data     string
	ModTime  time.Time
	Uid, Gid int
}

// readTar reads every member of an uncompressed tar stream, in order.
func readTar(t *testing.T, r io.Reader) []fileInTar {
	t.Helper()
	tr := tar.NewReader(r)
	var out []fileInTar
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read tar member %s: %v", h.Name, err)
		}
		out = append(out, fileInTar{Name: h.Name, Typeflag: h.Typeflag, Mode: h.Mode, Linkname: h.Linkname,
			Data: string(data), ModTime: h.ModTime, Uid: h.Uid, Gid: h.Gid})
	}
}

func mapKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func names(fs []fileInTar) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return out
}

func TestWriteEntries(t *testing.T) {
	src := filepath.Join(t.TempDir(), "kubelet")
	if err := os.WriteFile(src, []byte("kubelet binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	es := []entry{
		fileEntry("/usr/local/bin/x", 0o755, []byte("x script")),
		linkEntry("/etc/systemd/system/x.service", "/dev/null"),
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		fileEntry("/etc/passwd", 0o644, []byte("root:x:0:0::/root:/bin/sh\n")),
		copyEntry("/usr/bin/kubelet", 0o755, src),
		fileEntry("usr//share/../share/doc/empty", 0o600, nil), // cleaned, made absolute
	}
	var buf bytes.Buffer
	if err := writeEntries(&buf, es); err != nil {
		t.Fatalf("writeEntries: %v", err)
	}
	got := readTar(t, &buf)
	want := []fileInTar{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Data: "root:x:0:0::/root:/bin/sh\n"},
		{Name: "etc/systemd/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/systemd/system/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/systemd/system/x.service", Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: "/dev/null"},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/kubelet", Typeflag: tar.TypeReg, Mode: 0o755, Data: "kubelet binary"},
		{Name: "usr/local/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/bin/x", Typeflag: tar.TypeReg, Mode: 0o755, Data: "x script"},
		{Name: "usr/share/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/share/doc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/share/doc/empty", Typeflag: tar.TypeReg, Mode: 0o600},
	}
	if !slices.Equal(names(got), names(want)) {
		t.Fatalf("members:\n%s\nwant\n%s", strings.Join(names(got), "\n"), strings.Join(names(want), "\n"))
	}
	for i, g := range got {
		w := want[i]
		if !g.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: mtime %v, want the epoch", g.Name, g.ModTime)
		}
		if g.Uid != 0 || g.Gid != 0 {
			t.Errorf("%s: owner %d:%d, want 0:0", g.Name, g.Uid, g.Gid)
		}
		g.ModTime, g.Uid, g.Gid = time.Time{}, 0, 0
		if g != w {
			t.Errorf("member %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func TestWriteEntriesExplicitDirWins(t *testing.T) {
	dir := entry{Path: "/root", Mode: 0o700, Dir: true}
	file := fileEntry("/root/.ssh/authorized_keys", 0o600, []byte("k"))
	for _, tc := range []struct {
		name string
		es   []entry
	}{
		{"dir first", []entry{dir, file}},
		{"dir last", []entry{file, dir}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeEntries(&buf, tc.es); err != nil {
				t.Fatal(err)
			}
			modes := map[string]int64{}
			for _, f := range readTar(t, &buf) {
				if _, dup := modes[f.Name]; dup {
					t.Errorf("%s written twice", f.Name)
				}
				modes[f.Name] = f.Mode
			}
			if modes["root/"] != 0o700 || modes["root/.ssh/"] != 0o755 || modes["root/.ssh/authorized_keys"] != 0o600 {
				t.Errorf("modes %v (decimal), want root/ 0700, root/.ssh/ 0755 (implicit), the file 0600", modes)
			}
		})
	}
}

func TestWriteEntriesMissingFrom(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-file")
	es := []entry{fileEntry("/a", 0o644, []byte("a")), copyEntry("/usr/bin/kubeadm", 0o755, missing)}
	err := writeEntries(io.Discard, es)
	if err == nil {
		t.Fatal("writeEntries with a missing From file: nil error")
	}
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "/usr/bin/kubeadm") || !strings.Contains(err.Error(), missing) {
		t.Errorf("error %q: want a not-exist error naming /usr/bin/kubeadm and %s", err, missing)
	}
	if l, err := entriesLayer(es); err == nil || !strings.Contains(err.Error(), "/usr/bin/kubeadm") {
		t.Errorf("entriesLayer with a missing From file = %v, %v; want an error naming /usr/bin/kubeadm", l, err)
	}
}

func TestEntriesLayer(t *testing.T) {
	es := []entry{
		fileEntry("/kind/version", 0o644, []byte("v1.37.2\n")),
		linkEntry("/etc/systemd/system/multi-user.target.wants/kubelet.service", "/etc/systemd/system/kubelet.service"),
		dirEntry("/etc/kubernetes/manifests"),
	}
	l, err := entriesLayer(es)
	if err != nil {
		t.Fatalf("entriesLayer: %v", err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]fileInTar{}
	for _, f := range readTar(t, rc) {
		files[f.Name] = f
	}
	if f := files["kind/version"]; f.Data != "v1.37.2\n" || f.Mode != 0o644 || f.Typeflag != tar.TypeReg {
		t.Errorf("kind/version: %+v", f)
	}
	if f := files["etc/systemd/system/multi-user.target.wants/kubelet.service"]; f.Typeflag != tar.TypeSymlink || f.Linkname != "/etc/systemd/system/kubelet.service" {
		t.Errorf("enable link: %+v", f)
	}
	for _, d := range []string{"etc/", "etc/kubernetes/", "etc/kubernetes/manifests/", "etc/systemd/system/multi-user.target.wants/", "kind/"} {
		if f, ok := files[d]; !ok || f.Typeflag != tar.TypeDir || f.Mode != 0o755 {
			t.Errorf("%s: %+v (present %v), want a 0755 directory", d, f, ok)
		}
	}

	// The digest depends on the content only: not on the order of the entries, and not on when.
	digest := func(es []entry) string {
		t.Helper()
		l, err := entriesLayer(es)
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	d0 := digest(es)
	if d := digest([]entry{es[2], es[0], es[1]}); d != d0 {
		t.Errorf("digest %s after reordering the entries, want %s", d, d0)
	}
	changed := slices.Clone(es)
	changed[0] = fileEntry("/kind/version", 0o644, []byte("v1.37.3\n"))
	if d := digest(changed); d == d0 {
		t.Errorf("digest %s unchanged after changing a file", d)
	}
	changed[0] = fileEntry("/kind/version", 0o755, []byte("v1.37.2\n"))
	if d := digest(changed); d == d0 {
		t.Errorf("digest %s unchanged after changing a mode", d)
	}
}

// makeTree makes a tree with a file, a subdir, a symlink, a hard link, a fifo and a directory
// whose contents are to be skipped, and returns its root.
func makeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, content string, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	write("a.txt", "hello", 0o640)
	write("sub/b.sh", "#!/bin/sh\n", 0o755)
	write("dev/console", "not a device", 0o600)
	write("dev/pts/0", "nested", 0o600)
	if err := os.Chmod(filepath.Join(root, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	// "sub/hard" sorts after "a.txt", so a.txt is the first name of the pair.
	if err := os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "sub", "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return root
}

// readTarGz reads a gzipped tar file.
func readTarGz(t *testing.T, p string) []fileInTar {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not gzipped: %v", p, err)
	}
	return readTar(t, zr)
}

func TestTarTree(t *testing.T) {
	root := makeTree(t)
	for _, tc := range []struct {
		name, prefix, want string // want prefixes every name
	}{
		{"no prefix", "", ""},
		{"prefix", "var/lib/containerd", "var/lib/containerd/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "tree.tar.gz")
			if err := tarTree(root, tc.prefix, out, []string{"dev"}); err != nil {
				t.Fatalf("tarTree: %v", err)
			}
			members := readTarGz(t, out)
			files := map[string]fileInTar{}
			for _, f := range members {
				files[f.Name] = f
			}
			p := tc.want
			wantNames := []string{p + "a.txt", p + "dev/", p + "link", p + "sub/", p + "sub/b.sh", p + "sub/hard"}
			if got := names(members); !slices.Equal(got, wantNames) {
				t.Fatalf("members %q, want %q (no fifo, nothing under dev/)", got, wantNames)
			}
			for _, tc := range []struct {
				name     string
				typ      byte
				mode     int64
				data     string
				linkname string
			}{
				{p + "a.txt", tar.TypeReg, 0o640, "hello", ""},
				{p + "dev/", tar.TypeDir, 0o755, "", ""},
				{p + "link", tar.TypeSymlink, 0o777, "", "a.txt"},
				{p + "sub/", tar.TypeDir, 0o750, "", ""},
				{p + "sub/b.sh", tar.TypeReg, 0o755, "#!/bin/sh\n", ""},
				{p + "sub/hard", tar.TypeLink, 0o640, "", p + "a.txt"},
			} {
				f := files[tc.name]
				if f.Typeflag != tc.typ || f.Mode&0o7777 != tc.mode || f.Data != tc.data || f.Linkname != tc.linkname {
					t.Errorf("%s: type %c mode %o data %q link %q; want type %c mode %o data %q link %q",
						tc.name, f.Typeflag, f.Mode&0o7777, f.Data, f.Linkname, tc.typ, tc.mode, tc.data, tc.linkname)
				}
				if f.Uid != os.Getuid() || f.Gid != os.Getgid() {
					t.Errorf("%s: owner %d:%d, want the file's %d:%d", tc.name, f.Uid, f.Gid, os.Getuid(), os.Getgid())
				}
			}
		})
	}
}

func TestTarTreeNoSkip(t *testing.T) {
	root := makeTree(t)
	out := filepath.Join(t.TempDir(), "tree.tar.gz")
	if err := tarTree(root, "", out, nil); err != nil {
		t.Fatalf("tarTree: %v", err)
	}
	got := names(readTarGz(t, out))
	want := []string{"a.txt", "dev/", "dev/console", "dev/pts/", "dev/pts/0", "link", "sub/", "sub/b.sh", "sub/hard"}
	if !slices.Equal(got, want) {
		t.Errorf("members %q, want %q", got, want)
	}
}

func TestTarTreeErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-root")
	out := filepath.Join(t.TempDir(), "tree.tar.gz")
	err := tarTree(missing, "", out, nil)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("tarTree of a missing root: %v, want an error naming it", err)
	}
	if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("failed tarTree left %s behind (stat: %v)", out, serr)
	}
	if err := tarTree(makeTree(t), "", filepath.Join(missing, "out.tar.gz"), nil); err == nil {
		t.Error("tarTree into a missing directory: nil error")
	}
}

func TestFileLayer(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tree.tar.gz")
	if err := tarTree(makeTree(t), "", out, []string{"dev"}); err != nil {
		t.Fatal(err)
	}
	l, err := fileLayer(out)
	if err != nil {
		t.Fatalf("fileLayer: %v", err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got := names(readTar(t, rc)); !slices.Contains(got, "sub/b.sh") {
		t.Errorf("layer members %q, want sub/b.sh among them", got)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	size, err := l.Size()
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(raw)) {
		t.Errorf("layer size %d, file size %d: the gzipped file should be used as is", size, len(raw))
	}
}
