package nodeimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/clusters/k8sbin"
)

func TestCheckCDIConfig(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		want      string // "" for no error
	}{
		{name: "silent (containerd 2 defaults)", cfg: "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"x\"\n"},
		{name: "enabled", cfg: "[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n  cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n"},
		{name: "v3 quoting", cfg: "[plugins.'io.containerd.cri.v1.runtime']\n    enable_cdi = true\n    cdi_spec_dirs = ['/var/run/cdi']\n"},
		{name: "disabled", cfg: "[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = false\n", want: "enable_cdi = false"},
		{name: "other dirs", cfg: "  cdi_spec_dirs = [\"/etc/cdi\"]\n", want: "/var/run/cdi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCDIConfig([]byte(tc.cfg))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	// kindBaseEntries refuses such a config, naming the file.
	files := kindTestFiles()
	files["etc/containerd/config.toml"] += "  enable_cdi = false\n"
	if _, _, err := kindBaseEntries(writeKindFiles(t, files)); err == nil || !strings.Contains(err.Error(), "config.toml") {
		t.Errorf("kindBaseEntries with CDI off: %v", err)
	}
}

func TestContainerdCDI(t *testing.T) {
	if err := checkContainerdCDI(k8sbin.DefaultContainerdVersion); err != nil {
		t.Errorf("the node's containerd %s: %v", k8sbin.DefaultContainerdVersion, err)
	}
	if err := checkContainerdCDI("v1.7.27"); err == nil || !strings.Contains(err.Error(), "enable_cdi") {
		t.Errorf("containerd 1.7: %v", err)
	}
	if err := checkContainerdCDI("latest"); err == nil {
		t.Error("no error for an unparsable version")
	}
}

// TestKindConfigCDI checks the config the node image really carries (kind's, from the module
// gangbench links): it passes the check and, when the node's containerd is in the binary cache,
// containerd itself reads it with CDI on and /var/run/cdi among its spec directories.
func TestKindConfigCDI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", KindModule).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("the %s module's source is not at hand (go list: %v)", KindModule, err)
	}
	cfgPath := filepath.Join(dir, "images", "base", "files", "etc", "containerd", "config.toml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCDIConfig(cfg); err != nil {
		t.Errorf("%s: %v", cfgPath, err)
	}
	cache, err := k8sbin.CacheDirOf(k8sbin.Options{})
	if err != nil {
		t.Skip(err)
	}
	containerd := filepath.Join(cache, k8sbin.TargetContainerd, k8sbin.DefaultContainerdVersion, "containerd")
	if _, err := os.Stat(containerd); err != nil {
		t.Skipf("containerd %s not built yet (%v): the config alone was checked", k8sbin.DefaultContainerdVersion, err)
	}
	dump, err := exec.CommandContext(ctx, containerd, "--config", cfgPath, "config", "dump").Output()
	if err != nil {
		t.Fatalf("%s config dump: %v", containerd, err)
	}
	if !enableCDIRE.Match(dump) || checkCDIConfig(dump) != nil || !cdiSpecDirsRE.Match(dump) {
		t.Errorf("containerd %s with kind's config does not have CDI on with %s:\n%s", k8sbin.DefaultContainerdVersion, CDISpecDir, dump)
	}
}
