package nodeimage

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWantedBy(t *testing.T) {
	for _, tc := range []struct {
		name, unit string
		want       []string
	}{
		{"one target", "[Unit]\nDescription=x\n\n[Install]\nWantedBy=multi-user.target\n", []string{"multi-user.target"}},
		{"several on one line", "[Install]\nWantedBy=multi-user.target graphical.target\n", []string{"multi-user.target", "graphical.target"}},
		{"several lines, indented", "[Install]\n  WantedBy=a.target\nWantedBy=b.target\n", []string{"a.target", "b.target"}},
		{"commented", "[Install]\n#WantedBy=multi-user.target\n; WantedBy=x.target\n", nil},
		{"other install keys", "[Install]\nRequiredBy=multi-user.target\nAlias=foo.service\n", nil},
		{"none", "[Service]\nExecStart=/bin/true\n", nil},
		{"no final newline", "[Install]\nWantedBy=multi-user.target", []string{"multi-user.target"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := wantedBy([]byte(tc.unit)); !slices.Equal(got, tc.want) {
				t.Errorf("wantedBy = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSandboxImage(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"kind's form", "[plugins.\"io.containerd.grpc.v1.cri\"]\n  # use fixed sandbox image\n  sandbox_image = \"example.test/pause:3.10\"\n", "example.test/pause:3.10"},
		{"no spaces", "sandbox_image=\"example.test/pause:3.9\"\n", "example.test/pause:3.9"},
		{"first of two", "sandbox_image = \"a.test/pause:1\"\nsandbox_image = \"b.test/pause:2\"\n", "a.test/pause:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sandboxImage([]byte(tc.cfg))
			if err != nil {
				t.Fatalf("sandboxImage: %v", err)
			}
			if got != tc.want {
				t.Errorf("sandboxImage = %q, want %q", got, tc.want)
			}
		})
	}
	for _, cfg := range []string{
		"",
		"version = 2\n",
		"# sandbox_image = \"commented.test/pause:1\"\n",
		"other_sandbox_image = \"x.test/pause:1\"\n",
	} {
		if got, err := sandboxImage([]byte(cfg)); err == nil {
			t.Errorf("sandboxImage(%q) = %q, want an error", cfg, got)
		}
	}
}

// writeKindFiles makes a synthetic kind module directory with images/base/files/<rel> = content
// for each entry of files, and returns the module directory.
func writeKindFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(dir, "images", "base", "files", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const testUnit = "[Unit]\nDescription=test\n\n[Service]\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n"

func kindTestFiles() map[string]string {
	return map[string]string{
		"usr/local/bin/entrypoint":                     "#!/bin/bash\nexec \"$@\"\n",
		"kind/bin/x.sh":                                "#!/bin/sh\ntrue\n",
		"kind/README.txt":                              "readme\n",
		"etc/containerd/config.toml":                   "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"example.test/pause:3.10\"\n",
		"etc/systemd/system/kubelet.service":           testUnit,
		"etc/systemd/system/containerd.service":        testUnit,
		"etc/systemd/system/undo-mount-hacks.service":  testUnit,
		"etc/systemd/system/kubelet.service.d/10.conf": "[Service]\n",
	}
}

func TestKindBaseEntries(t *testing.T) {
	files := kindTestFiles()
	es, sandbox, err := kindBaseEntries(writeKindFiles(t, files))
	if err != nil {
		t.Fatalf("kindBaseEntries: %v", err)
	}
	if sandbox != "example.test/pause:3.10" {
		t.Errorf("sandbox = %q, want example.test/pause:3.10", sandbox)
	}
	byPath := map[string]entry{}
	for _, e := range es {
		if _, dup := byPath[e.Path]; dup {
			t.Errorf("entry %s appears twice", e.Path)
		}
		byPath[e.Path] = e
	}

	for rel, content := range files {
		p := "/" + rel
		e, ok := byPath[p]
		if !ok {
			t.Errorf("no entry for %s", p)
			continue
		}
		wantMode := int64(0o644)
		if strings.HasPrefix(p, "/usr/local/bin/") || strings.HasPrefix(p, "/kind/bin/") {
			wantMode = 0o755
		}
		if e.Dir || e.Link != "" || string(e.Data) != content || e.Mode != wantMode {
			t.Errorf("%s: dir=%v link=%q mode=%o data=%q, want a file of mode %o with %q", p, e.Dir, e.Link, e.Mode, e.Data, wantMode, content)
		}
	}
	for _, d := range []string{"/etc", "/etc/systemd/system/kubelet.service.d", "/kind/bin", "/etc/kubernetes/manifests"} {
		if e, ok := byPath[d]; !ok || !e.Dir || e.Mode != 0o755 {
			t.Errorf("%s: %+v (present %v), want a 0755 directory", d, e, ok)
		}
	}
	links := map[string]string{
		"/etc/systemd/system/multi-user.target.wants/kubelet.service":          "/etc/systemd/system/kubelet.service",
		"/etc/systemd/system/multi-user.target.wants/containerd.service":       "/etc/systemd/system/containerd.service",
		"/etc/systemd/system/multi-user.target.wants/undo-mount-hacks.service": "/etc/systemd/system/undo-mount-hacks.service",
		"/etc/systemd/system/systemd-binfmt.service":                           "/dev/null",
	}
	for p, target := range links {
		if e, ok := byPath[p]; !ok || e.Link != target {
			t.Errorf("%s: %+v (present %v), want a symlink to %s", p, e, ok, target)
		}
	}
	var got []string
	for p, e := range byPath {
		if e.Link != "" {
			got = append(got, p)
		}
	}
	if len(got) != len(links) {
		t.Errorf("symlinks %q, want exactly %d", got, len(links))
	}

	// The entries make a valid layer (no path both a file and a directory, and so on).
	if _, err := entriesLayer(es); err != nil {
		t.Errorf("entriesLayer of the base entries: %v", err)
	}
}

func TestKindBaseEntriesUnitTargets(t *testing.T) {
	files := kindTestFiles()
	files["etc/systemd/system/containerd.service"] = "[Install]\nWantedBy=multi-user.target sockets.target\n"
	files["etc/systemd/system/undo-mount-hacks.service"] = "[Service]\nExecStart=/bin/true\n" // no [Install]
	es, _, err := kindBaseEntries(writeKindFiles(t, files))
	if err != nil {
		t.Fatalf("kindBaseEntries: %v", err)
	}
	var links []string
	for _, e := range es {
		if strings.HasSuffix(e.Path, ".service") && strings.Contains(e.Path, ".wants/") {
			links = append(links, e.Path+" -> "+e.Link)
		}
	}
	slices.Sort(links)
	want := []string{
		"/etc/systemd/system/multi-user.target.wants/containerd.service -> /etc/systemd/system/containerd.service",
		"/etc/systemd/system/multi-user.target.wants/kubelet.service -> /etc/systemd/system/kubelet.service",
		"/etc/systemd/system/sockets.target.wants/containerd.service -> /etc/systemd/system/containerd.service",
	}
	if !slices.Equal(links, want) {
		t.Errorf("enable links:\n%s\nwant\n%s", strings.Join(links, "\n"), strings.Join(want, "\n"))
	}
}

func TestKindBaseEntriesErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(map[string]string)
		noDir bool
		inErr []string
	}{
		{"missing unit", func(f map[string]string) { delete(f, "etc/systemd/system/undo-mount-hacks.service") }, false,
			[]string{"undo-mount-hacks.service"}},
		{"no sandbox image", func(f map[string]string) { f["etc/containerd/config.toml"] = "version = 2\n" }, false,
			[]string{"config.toml", "sandbox_image"}},
		{"no files dir", nil, true, []string{filepath.Join("images", "base", "files")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if !tc.noDir {
				files := kindTestFiles()
				tc.edit(files)
				dir = writeKindFiles(t, files)
			}
			es, sandbox, err := kindBaseEntries(dir)
			if err == nil {
				t.Fatalf("kindBaseEntries = %d entries, sandbox %q, want an error", len(es), sandbox)
			}
			for _, s := range tc.inErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}
