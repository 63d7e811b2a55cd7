package kind

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// The probe program is a real executable: it runs here and exits 0.
func TestTrueELFRuns(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the probe program is x86-64; this is %s", runtime.GOARCH)
	}
	prog, err := trueELF()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "true")
	if err := os.WriteFile(p, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(p).CombinedOutput(); err != nil {
		t.Fatalf("probe program: %v %s", err, out)
	}
	img, err := probeImage()
	if err != nil {
		t.Fatal(err)
	}
	if cf, err := img.ConfigFile(); err != nil || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/bin/true" {
		t.Errorf("probe image config %+v, %v: want entrypoint /bin/true", cf, err)
	}
}
