package draplugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/plugin"
)

// Flags are the DRA settings of the binary.
type Flags struct {
	// API is which plugins run: the device plugin, the DRA plugin or both.
	API fakegpu.API
	// CDIDir, RegistrarDir and PluginDataDir are Options' fields of the same names.
	CDIDir, RegistrarDir, PluginDataDir string
	// CliqueLabel is the node label whose value is the GPUs' NVLink clique (the rack label when
	// the cluster has a topology); "" makes the node its own clique. A DaemonSet runs the same
	// arguments on every node, so the clique is read from the node rather than passed.
	CliqueLabel string
	// Kubeconfig is the client's kubeconfig; "" means the in-cluster config (the pod's service
	// account).
	Kubeconfig string
}

// BindFlags defines the DRA flags (named in fakegpu/plugin, with the device plugin's) on fs and returns a function to call after fs.Parse that checks
// them; its errors name the flag and the value, all of them at once.
func BindFlags(fs *flag.FlagSet) func() (Flags, error) {
	var f Flags
	api := string(fakegpu.APIDevicePlugin)
	names := make([]string, 0, len(fakegpu.APIs()))
	for _, a := range fakegpu.APIs() {
		names = append(names, string(a))
	}
	fs.StringVar(&api, plugin.FlagGPUAPI, api, "how the GPUs are published: "+strings.Join(names, ", ")+" (DRA needs $NODE_NAME and a client)")
	fs.StringVar(&f.CDIDir, plugin.FlagCDIDir, DefaultCDIDir, "directory of the CDI specs of the DRA plugin (the container runtime's CDI spec dir)")
	fs.StringVar(&f.RegistrarDir, plugin.FlagRegistrarDir, kubeletplugin.KubeletRegistryDir, "kubelet plugin registration directory (DRA)")
	fs.StringVar(&f.PluginDataDir, plugin.FlagPluginDataDir, filepath.Join(kubeletplugin.KubeletPluginsDir, fakegpu.DRADriver), "directory of the DRA plugin's socket, the same path on the node")
	fs.StringVar(&f.CliqueLabel, plugin.FlagCliqueLabel, "", "node label whose value is the GPUs' NVLink clique in the ResourceSlice (empty: the node)")
	fs.StringVar(&f.Kubeconfig, plugin.FlagKubeconfig, "", "kubeconfig of the DRA plugin's client (empty: in-cluster)")
	return func() (Flags, error) {
		var errs []error
		a, err := fakegpu.ParseAPI(api)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid --%s=%q: %w", plugin.FlagGPUAPI, api, err))
		}
		f.API = a
		for _, d := range []struct{ flag, value string }{{plugin.FlagCDIDir, f.CDIDir}, {plugin.FlagRegistrarDir, f.RegistrarDir}, {plugin.FlagPluginDataDir, f.PluginDataDir}} {
			if d.value == "" {
				errs = append(errs, fmt.Errorf("invalid --%s=\"\": must not be empty", d.flag))
			}
		}
		if f.CliqueLabel != "" {
			if msgs := content.IsLabelKey(f.CliqueLabel); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("invalid --%s=%q: %s", plugin.FlagCliqueLabel, f.CliqueLabel, strings.Join(msgs, "; ")))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return Flags{}, err
		}
		return f, nil
	}
}

// NodeClique reads node's label as its GPUs' clique ("" when the node lacks it, or label is ""),
// retrying a failed read with backoff until timeout: the plugin starts with its node, and an
// apiserver that is briefly away must not cost it its slice.
func NodeClique(ctx context.Context, cs kubernetes.Interface, node, label string, timeout time.Duration) (string, error) {
	if label == "" {
		return "", nil
	}
	var clique string
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return false, err // no retry helps: the RBAC is wrong
		}
		if err != nil {
			last = err
			return false, nil
		}
		clique = n.Labels[label]
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last: %v)", err, last)
		}
		return "", fmt.Errorf("draplugin: read label %s of node %s: %w", label, node, err)
	}
	return clique, nil
}
