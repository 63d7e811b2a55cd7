package nodeimage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestE2EBusyBoxTag(t *testing.T) {
	write := func(t *testing.T, content string) string {
		t.Helper()
		dir := t.TempDir()
		p := filepath.Join(dir, e2eManifest)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("v1.37.2's form", func(t *testing.T) {
		dir := write(t, "\tconfigs[AuthenticatedWindowsNanoServer] = Config{list.GcAuthenticatedRegistry, \"windows-nanoserver\", \"v1\"}\n\tconfigs[BusyBox] = Config{list.PromoterE2eRegistry, \"busybox\", \"1.37.0-2\"}\n")
		got, err := e2eBusyBoxTag(dir)
		if err != nil || got != "1.37.0-2" {
			t.Fatalf("got %q, %v; want 1.37.0-2", got, err)
		}
	})
	t.Run("no entry names the file", func(t *testing.T) {
		dir := write(t, "package image\n")
		_, err := e2eBusyBoxTag(dir)
		if err == nil || !strings.Contains(err.Error(), e2eManifest) {
			t.Fatalf("want an error naming %s, got %v", e2eManifest, err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, err := e2eBusyBoxTag(t.TempDir()); err == nil {
			t.Fatal("want an error")
		}
	})
}
