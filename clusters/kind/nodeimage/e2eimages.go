package nodeimage

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// Upstream's own gang specs (gangbench e2e --upstream) start pods of the e2e busybox image with
// `/bin/sh -c "<sleep loop>"` (test/e2e/framework/pod MakePod). No node here can pull it, so the
// node image carries an image under that name whose root filesystem is the node's own Debian one:
// it has /bin/sh and sleep, which is all those pods run. The suites point the e2e framework's
// promoter registry at ImageRepository (KUBE_TEST_REPO_LIST), so the name they ask for is
// ImageRepository/busybox:<the tag of the cluster's version>.

// e2eManifest is the file of k8s.io/kubernetes that names the e2e images and their tags.
const e2eManifest = "test/utils/image/manifest.go"

var busyboxConfigRE = regexp.MustCompile(`configs\[BusyBox\]\s*=\s*Config\{[^,]+,\s*"busybox",\s*"([^"]+)"\}`)

// e2eBusyBoxTag reads the busybox tag the e2e framework of the Kubernetes source at k8sDir uses.
func e2eBusyBoxTag(k8sDir string) (string, error) {
	path := filepath.Join(k8sDir, e2eManifest)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("e2e image manifest: %w", err)
	}
	m := busyboxConfigRE.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s: no configs[BusyBox] entry of the form Config{<registry>, \"busybox\", \"<tag>\"}", path)
	}
	return string(m[1]), nil
}
