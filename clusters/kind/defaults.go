package kind

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/deploy"
	"github.com/gangbench/gangbench/fakegpu/image"
)

// This file is the only one that knows the fake device plugin's packages; everything else goes
// through the function fields of Options, which tests replace.

// defaultPluginRef is the device plugin image reference when Spec.Images.Plugin is empty.
const defaultPluginRef = image.DefaultRef

// modulePath is gangbench's module, whose source the device plugin binary is built from.
const modulePath = "github.com/gangbench/gangbench"

// wireDefaults fills the function fields left nil with the real implementations.
func wireDefaults(o *Options) {
	if o.BuildPluginArchive == nil {
		root := o.ModuleRoot
		o.BuildPluginArchive = func(ctx context.Context, w io.Writer, ref string) error {
			return buildPluginArchive(ctx, root, w, ref)
		}
	}
	if o.DeployDevicePlugin == nil {
		o.DeployDevicePlugin = func(ctx context.Context, cs kubernetes.Interface, d PluginDeployment) error {
			return deploy.Apply(ctx, cs, deploy.Options{
				Image: d.Image, Inventory: d.Inventory, API: d.API, CliqueLabel: d.CliqueLabel, NodeSelector: d.NodeSelector, Instance: d.Instance,
			})
		}
	}
	if o.EnsureNodeImage == nil {
		bins, root, run, log := o.Bins, o.ModuleRoot, o.Runner, o.Logger
		o.EnsureNodeImage = func(ctx context.Context, kubeVersion, engine string) (string, error) {
			prog := k8sbin.NewProgress(bins.Progress)
			defer prog.Close()
			img, err := EnsureNodeImage(ctx, NodeImageOptions{
				KubernetesVersion: kubeVersion, Engine: engine, Bins: bins, ModuleRoot: root, Runner: run, Progress: prog,
				Log: func(s string) {
					if log != nil {
						log.Info(s)
					}
				},
			})
			if err != nil {
				return "", err
			}
			return img.Ref, nil
		}
	}
	if o.ProbePrivilege == nil {
		run := o.Runner
		o.ProbePrivilege = func(ctx context.Context, engine, image string) ([]string, error) {
			return ProbePrivilege(ctx, run, engine, image)
		}
	}
	if o.WaitPublished == nil {
		o.WaitPublished = func(ctx context.Context, cs kubernetes.Interface, selector string, inv fakegpu.Inventory, timeout time.Duration) error {
			return deploy.WaitPublished(ctx, cs, selector, inv, timeout)
		}
	}
	if o.WaitAllocatable == nil {
		o.WaitAllocatable = func(ctx context.Context, cs kubernetes.Interface, selector string, inv fakegpu.Inventory, timeout time.Duration) error {
			return deploy.WaitAllocatable(ctx, cs, selector, inv, timeout)
		}
	}
}

// buildPluginArchive compiles the device plugin from the gangbench module source and writes its
// image archive to w.
func buildPluginArchive(ctx context.Context, root string, w io.Writer, ref string) error {
	if root == "" {
		var err error
		if root, err = findModuleRoot(); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "gangbench-fakegpu-plugin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "fakegpu-device-plugin")
	if err := image.BuildBinary(ctx, root, bin); err != nil {
		return fmt.Errorf("build device plugin binary: %w", err)
	}
	if _, err := image.WriteArchive(w, bin, ref); err != nil {
		return fmt.Errorf("write device plugin image archive: %w", err)
	}
	return nil
}

// findModuleRoot walks up from the working directory to the go.mod of gangbench's module.
func findModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && moduleLine(string(b)) == modulePath {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("the fake device plugin is built from the gangbench source, and no %s module encloses %s: run from the gangbench checkout or set the kind provider's ModuleRoot", modulePath, wd)
		}
	}
}

func moduleLine(gomod string) string {
	for line := range strings.Lines(gomod) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
