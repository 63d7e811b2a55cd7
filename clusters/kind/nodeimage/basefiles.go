package nodeimage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// KindModule is the module kind's base image files are taken from (images/base/files), at the
// version gangbench links, so the entrypoint and units match the kind library that starts the node.
const KindModule = "sigs.k8s.io/kind"

// enabledUnits are the units kind's base image enables (`systemctl enable`); masked are masked.
var (
	enabledUnits = []string{"kubelet.service", "containerd.service", "undo-mount-hacks.service"}
	maskedUnits  = []string{"systemd-binfmt.service"}
)

// kindBaseEntries returns kind's images/base/files as layer entries, with the modes its Dockerfile
// gives them (scripts 0755, everything else 0644) and the units enabled and masked as the Dockerfile
// does. It also returns the sandbox (pause) image containerd's config names, which the image must
// preload under that name.
func kindBaseEntries(kindDir string) (es []entry, sandbox string, err error) {
	files := filepath.Join(kindDir, "images", "base", "files")
	err = filepath.WalkDir(files, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(files, p)
		if err != nil || rel == "." {
			return err
		}
		dst := "/" + filepath.ToSlash(rel)
		if d.IsDir() {
			es = append(es, dirEntry(dst))
			return nil
		}
		mode := int64(0o644)
		if strings.HasPrefix(dst, "/usr/local/bin/") || strings.HasPrefix(dst, "/kind/bin/") {
			mode = 0o755
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if dst == "/etc/containerd/config.toml" {
			if sandbox, err = sandboxImage(b); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := checkCDIConfig(b); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		es = append(es, fileEntry(dst, mode, b))
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("kind base files (%s): %w", files, err)
	}
	for _, u := range enabledUnits {
		unit, err := os.ReadFile(filepath.Join(files, "etc", "systemd", "system", u))
		if err != nil {
			return nil, "", fmt.Errorf("kind base files: unit %s: %w", u, err)
		}
		for _, target := range wantedBy(unit) {
			es = append(es, linkEntry(path.Join("/etc/systemd/system", target+".wants", u), "/etc/systemd/system/"+u))
		}
	}
	for _, u := range maskedUnits {
		es = append(es, linkEntry("/etc/systemd/system/"+u, "/dev/null"))
	}
	// /sbin/init is the rootfs's (systemd-sysv); /sbin is a usrmerge symlink a layer must not shadow.
	es = append(es, dirEntry("/etc/kubernetes/manifests"))
	return es, sandbox, nil
}

var sandboxRE = regexp.MustCompile(`(?m)^\s*sandbox_image\s*=\s*"([^"]+)"`)

// sandboxImage is the sandbox_image containerd's config names. It is also the pause image kind's
// own node images carry, so pods that name it (gangbench's test pods do) find it here too.
func sandboxImage(cfg []byte) (string, error) {
	m := sandboxRE.FindSubmatch(cfg)
	if m == nil {
		return "", fmt.Errorf("no sandbox_image setting")
	}
	return string(m[1]), nil
}

// wantedBy lists the targets in a unit's [Install] WantedBy= lines.
func wantedBy(unit []byte) []string {
	var out []string
	for line := range strings.Lines(string(unit)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "WantedBy="); ok {
			out = append(out, strings.Fields(v)...)
		}
	}
	return out
}

// criBaseSpec is kind's /etc/containerd/cri-base.json: containerd's default OCI spec with the
// hook that mounts the node's product_uuid into containers and without rlimits (kind's Dockerfile
// makes it with `ctr oci spec | jq`; the same edits are made here on ctr's output).
func criBaseSpec(ctx context.Context, ctr string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, ctr, "oci", "spec").Output()
	if err != nil {
		return nil, fmt.Errorf("%s oci spec: %w", ctr, err)
	}
	var spec map[string]any
	if err := json.Unmarshal(out, &spec); err != nil {
		return nil, fmt.Errorf("%s oci spec: %w", ctr, err)
	}
	hooks, _ := spec["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
	}
	cc, _ := hooks["createContainer"].([]any)
	hooks["createContainer"] = append(cc, map[string]any{"path": "/kind/bin/mount-product-files.sh"})
	spec["hooks"] = hooks
	if p, ok := spec["process"].(map[string]any); ok {
		delete(p, "rlimits")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(spec); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
