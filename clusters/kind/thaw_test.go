package kind

import (
	"os"
	"path/filepath"
	"testing"
)

func TestThawFrozen(t *testing.T) {
	root := t.TempDir()
	write := func(rel, state string) string {
		p := filepath.Join(root, rel, "freezer.state")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(state+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	top := write(".", "THAWED")
	frozen := write("kubelet.slice/pod/cri-containerd-1.scope", "FROZEN")
	freezing := write("kubelet.slice/pod/cri-containerd-2.scope", "FREEZING")
	n, err := thawFrozen(root)
	if err != nil || n != 1 {
		t.Fatalf("thawed %d, err %v; want 1", n, err)
	}
	for p, want := range map[string]string{top: "THAWED\n", frozen: "THAWED", freezing: "FREEZING\n"} {
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s: %q, want %q", p, b, want)
		}
	}
}

func TestFreezerDir(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cgroup")
	content := "12:memory:/docker/abc\n6:freezer:/docker/abc\n0::/\n"
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := freezerDir(p, "/sys/fs/cgroup/freezer")
	if err != nil || got != "/sys/fs/cgroup/freezer/docker/abc" {
		t.Fatalf("got %q, %v", got, err)
	}
	if err := os.WriteFile(p, []byte("0::/docker/abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := freezerDir(p, "/sys/fs/cgroup/freezer"); err != nil || got != "" {
		t.Fatalf("cgroup v2 only: got %q, %v; want none", got, err)
	}
}
