package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind/nodeimage"
	"github.com/gangbench/gangbench/fakegpu/image"
)

// NodeImageOptions say how EnsureNodeImage builds.
type NodeImageOptions struct {
	// KubernetesVersion is the node's Kubernetes ("" means the default).
	KubernetesVersion string
	// Engine is the container engine the image is loaded into ("" detects one).
	Engine string
	// Bins is where binaries are cached and built.
	Bins k8sbin.Options
	// Mirror is the Debian archive ("" means this machine's apt sources').
	Mirror string
	// ModuleRoot is the gangbench source the device plugin is built from ("" finds it).
	ModuleRoot string
	// Runner runs engine commands (nil: ExecRunner).
	Runner Runner
	// Progress shows the build (nil: none).
	Progress *k8sbin.Progress
	// Log receives notes.
	Log func(string)

	// Rebuild builds the image even when it is cached.
	Rebuild bool
	// Host is how the build's prerequisites are checked before anything is built (nil: ThisHost).
	Host *Host

	noBuild bool
}

// CachedNodeImage says which node image EnsureNodeImage would use and where it is, building nothing
// (the device plugin binary is compiled, since its digest is part of the image's key).
func CachedNodeImage(ctx context.Context, o NodeImageOptions) (string, error) {
	o.noBuild = true
	img, err := EnsureNodeImage(ctx, o)
	if err != nil {
		return "", err
	}
	if img.InEngine {
		return img.Ref + " (in the engine)", nil
	}
	return img.Ref + " (cached archive " + img.Archive + "; loaded at the next create)", nil
}

// EnsureNodeImage returns gangbench's kind node image for a Kubernetes version, building it when
// neither the engine nor the cache has it (see package nodeimage). The fake GPU device plugin of
// this source tree is preloaded, so its digest is part of the image's key.
func EnsureNodeImage(ctx context.Context, o NodeImageOptions) (*nodeimage.Image, error) {
	run := o.Runner
	if run == nil {
		run = ExecRunner
	}
	engine, err := DetectEngineWith(ctx, o.Engine, run)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "gangbench-nodeimage-plugin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// Built once per call: the look before a build and the build both need its digest.
	var (
		pluginImg  v1.Image
		pluginErr  error
		pluginDone bool
	)
	plugin := func(ctx context.Context) (v1.Image, string, error) {
		if pluginDone {
			return pluginImg, defaultPluginRef, pluginErr
		}
		pluginDone = true
		root := o.ModuleRoot
		if root == "" {
			if root, pluginErr = findModuleRoot(); pluginErr != nil {
				return nil, "", pluginErr
			}
		}
		bin := filepath.Join(tmp, "fakegpu-device-plugin")
		if err := image.BuildBinary(ctx, root, bin); err != nil {
			pluginErr = fmt.Errorf("build device plugin binary: %w", err)
			return nil, "", pluginErr
		}
		pluginImg, pluginErr = image.Image(bin)
		return pluginImg, defaultPluginRef, pluginErr
	}
	no := nodeimage.Options{
		KubernetesVersion: o.KubernetesVersion, Bins: o.Bins, Mirror: o.Mirror, Engine: engine,
		Run: run, PluginImage: plugin, Progress: o.Progress, Log: o.Log, NoBuild: o.noBuild, Rebuild: o.Rebuild,
	}
	if !o.noBuild {
		// Look before building: a machine that cannot build the image must say so now, not after the
		// binaries' half hour (runc needs libseccomp, the root filesystem debootstrap and root).
		build := o.Rebuild
		if !build {
			look := no
			look.NoBuild, look.Progress, look.Log = true, nil, nil
			_, err := nodeimage.Ensure(ctx, look)
			switch {
			case errors.Is(err, nodeimage.ErrNotCached):
				build = true
			case err != nil:
				return nil, err
			}
		}
		if build {
			if err := checkBuildPrerequisites(ctx, o); err != nil {
				return nil, err
			}
		}
	}
	return nodeimage.Ensure(ctx, no)
}

// checkBuildPrerequisites returns a *PrerequisiteError when this machine lacks what a node image
// build needs.
func checkBuildPrerequisites(ctx context.Context, o NodeImageOptions) error {
	h := ThisHost()
	if o.Host != nil {
		h = *o.Host
	}
	cache, err := k8sbin.CacheDirOf(o.Bins)
	if err != nil {
		return err
	}
	ps := Prerequisites(ctx, h, cache)
	for _, p := range ps {
		if !p.OK && p.Warning && o.Log != nil {
			o.Log("warning: " + p.Name + ": " + p.Detail + "; " + p.Fix)
		}
	}
	var missing []Prerequisite
	for _, p := range MissingPrerequisites(ps, true) {
		// What the cluster itself needs (cgroups) is the provider's to report, not the build's.
		if p.ForBuild {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return &PrerequisiteError{Missing: missing}
	}
	return nil
}

// PruneNodeImages removes gangbench's node images from the engine and the cache.
func PruneNodeImages(ctx context.Context, engine string, bins k8sbin.Options, run Runner) ([]string, error) {
	if run == nil {
		run = ExecRunner
	}
	engine, err := DetectEngineWith(ctx, engine, run)
	if err != nil {
		return nil, err
	}
	return nodeimage.Prune(ctx, engine, run, bins)
}
