package nodeimage

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The fake GPUs' DRA plugin (fakegpu/draplugin) answers NodePrepareResources with CDI device IDs
// and writes their specs to /var/run/cdi; the kubelet passes the IDs to containerd, which applies
// the specs only with CDI enabled. containerd 2.x enables it by default (enable_cdi = true,
// cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi'], also when it migrates kind's version 2 config);
// containerd 1.7 needs both set in the CRI plugin's config. The node image carries containerd 2.x
// and kind's config as is, so nothing needs adding; these checks keep it that way: a containerd
// older than 2, or a config that turns CDI off or drops /var/run/cdi, fails the build instead of
// leaving DRA pods in ContainerCreating with "unresolvable CDI devices".

// CDISpecDir is the CDI spec directory the DRA plugin writes to, which containerd must read.
const CDISpecDir = "/var/run/cdi"

var (
	enableCDIRE   = regexp.MustCompile(`(?m)^\s*enable_cdi\s*=\s*(\S+)`)
	cdiSpecDirsRE = regexp.MustCompile(`(?m)^\s*cdi_spec_dirs\s*=\s*\[([^\]]*)\]`)
)

// checkCDIConfig refuses a containerd config that turns CDI off or sets spec directories without
// CDISpecDir; a config that says nothing gets containerd 2's defaults, which are right.
func checkCDIConfig(cfg []byte) error {
	if m := enableCDIRE.FindSubmatch(cfg); m != nil && string(m[1]) != "true" {
		return fmt.Errorf("containerd config sets enable_cdi = %s: the fake GPUs' DRA plugin hands containers CDI devices", m[1])
	}
	if m := cdiSpecDirsRE.FindSubmatch(cfg); m != nil {
		for _, d := range strings.Split(string(m[1]), ",") {
			if strings.Trim(strings.TrimSpace(d), `"'`) == CDISpecDir {
				return nil
			}
		}
		return fmt.Errorf("containerd config sets cdi_spec_dirs = [%s] without %s, where the fake GPUs' DRA plugin writes its CDI specs", m[1], CDISpecDir)
	}
	return nil
}

// checkContainerdCDI refuses a containerd whose CDI is off by default (before 2.0), since the
// config relies on the default.
func checkContainerdCDI(version string) error {
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return fmt.Errorf("containerd version %q: %w", version, err)
	}
	if n < 2 {
		return fmt.Errorf("containerd %s enables CDI only when configured (enable_cdi, cdi_spec_dirs), and the node's config relies on containerd 2's default", version)
	}
	return nil
}
