package plugin

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gangbench/gangbench/fakegpu"
)

// Flag names, shared by the binary and the DaemonSet that passes them (fakegpu/deploy).
const (
	FlagCount            = "count"
	FlagResourceName     = "resource-name"
	FlagProduct          = "product"
	FlagMemoryMiB        = "memory-mib"
	FlagNVLinkDomainSize = "nvlink-domain-size"
	FlagNodeName         = "node-name"
	FlagPluginDir        = "plugin-dir"
	FlagKubeletSocket    = "kubelet-socket"
	FlagSocketName       = "socket-name"
	FlagHealthAddr       = "health-addr"
	FlagHealthFile       = "health-file"
	FlagPollInterval     = "poll-interval"

	// EnvNodeName is the default of --node-name; the DaemonSet sets it from spec.nodeName.
	EnvNodeName = "NODE_NAME"
)

// Flag names of the binary's DRA side (fakegpu/draplugin binds them). They are here, with the
// device plugin's, so that the DaemonSet renders them without importing the DRA plugin and its
// kubelet helper.
const (
	FlagGPUAPI        = "gpu-api"
	FlagCDIDir        = "cdi-dir"
	FlagRegistrarDir  = "registrar-dir"
	FlagPluginDataDir = "dra-plugin-dir"
	FlagCliqueLabel   = "clique-label"
	FlagKubeconfig    = "kubeconfig"
)

// BindFlags defines the plugin's flags on fs (getenv supplies $NODE_NAME) and returns a function
// to call after fs.Parse that turns them into Options. Its errors name the flag and the value, all
// of them at once. Logger is left for the caller.
//
// Product and memory default to empty and 0 so that fakegpu's defaults apply as a pair: naming
// another product must not silently keep an H100's memory.
func BindFlags(fs *flag.FlagSet, getenv func(string) string) func() (Options, error) {
	var (
		o   Options
		inv = &o.Inventory
	)
	fs.IntVar(&inv.Count, FlagCount, fakegpu.DefaultCount, fmt.Sprintf("number of fake GPUs to advertise (1..%d)", fakegpu.MaxCount))
	fs.StringVar(&inv.ResourceName, FlagResourceName, fakegpu.DefaultResourceName, "extended resource name to advertise")
	fs.StringVar(&inv.Product, FlagProduct, "", "GPU product reported to containers (empty: "+fakegpu.DefaultProduct+")")
	fs.IntVar(&inv.MemoryMiB, FlagMemoryMiB, 0, fmt.Sprintf("memory per GPU in MiB (0: %d with the default product, else unknown)", fakegpu.DefaultMemoryMiB))
	fs.IntVar(&inv.NVLinkDomainSize, FlagNVLinkDomainSize, 0, "GPUs per NVLink domain; must divide --count (0: all GPUs in one domain)")
	fs.StringVar(&o.NodeName, FlagNodeName, getenv(EnvNodeName), "node name the device IDs derive from (default $"+EnvNodeName+")")
	fs.StringVar(&o.PluginDir, FlagPluginDir, pluginapi.DevicePluginPath, "kubelet device plugin directory")
	fs.StringVar(&o.KubeletSocket, FlagKubeletSocket, "", "kubelet registration socket (empty: <plugin-dir>/kubelet.sock)")
	fs.StringVar(&o.SocketName, FlagSocketName, DefaultSocketName, "plugin socket file name in --plugin-dir")
	fs.StringVar(&o.HealthAddr, FlagHealthAddr, "", "address of the HTTP health API, e.g. 0.0.0.0:9400 in a pod (empty: off)")
	fs.StringVar(&o.HealthFile, FlagHealthFile, "", "file listing unhealthy device IDs, one per line (empty: off)")
	fs.DurationVar(&o.PollInterval, FlagPollInterval, DefaultPollInterval, "how often sockets and the health file are re-checked besides filesystem events")

	return func() (Options, error) {
		var errs []error
		bad := func(flagName string, value any, err error) {
			errs = append(errs, fmt.Errorf("invalid --%s=%v: %w", flagName, value, err))
		}
		// Each field is validated alone (with otherwise default values) so the error names the flag.
		countOK := inv.Count >= 1 && inv.Count <= fakegpu.MaxCount
		if !countOK {
			bad(FlagCount, inv.Count, fmt.Errorf("must be between 1 and %d", fakegpu.MaxCount))
		}
		if err := (fakegpu.Inventory{Count: 1, ResourceName: inv.ResourceName}).Validate(); err != nil || inv.ResourceName == "" {
			if err == nil {
				err = errors.New("must not be empty")
			}
			bad(FlagResourceName, fmt.Sprintf("%q", inv.ResourceName), err)
		}
		if err := (fakegpu.Inventory{Count: 1, Product: inv.Product}).Validate(); err != nil {
			bad(FlagProduct, fmt.Sprintf("%q", inv.Product), err)
		}
		if err := (fakegpu.Inventory{Count: 1, Product: "x", MemoryMiB: inv.MemoryMiB}).Validate(); err != nil {
			bad(FlagMemoryMiB, inv.MemoryMiB, err)
		}
		if countOK {
			if err := (fakegpu.Inventory{Count: inv.Count, NVLinkDomainSize: inv.NVLinkDomainSize}).Validate(); err != nil {
				bad(FlagNVLinkDomainSize, inv.NVLinkDomainSize, err)
			}
		}
		if o.NodeName == "" {
			bad(FlagNodeName, `""`, errors.New("required (or set $"+EnvNodeName+"): device IDs derive from the node name"))
		}
		if o.PluginDir == "" {
			bad(FlagPluginDir, `""`, errors.New("must not be empty"))
		} else if sock := filepath.Join(o.PluginDir, o.SocketName); len(sock) > maxSocketPath {
			bad(FlagPluginDir, o.PluginDir, fmt.Errorf("socket path %s would exceed the %d bytes a unix socket allows", sock, maxSocketPath))
		}
		if o.SocketName == "" || o.SocketName != filepath.Base(o.SocketName) {
			bad(FlagSocketName, fmt.Sprintf("%q", o.SocketName), errors.New("must be a plain file name"))
		}
		if o.KubeletSocket != "" && o.PluginDir != "" && filepath.Dir(filepath.Clean(o.KubeletSocket)) != filepath.Clean(o.PluginDir) {
			bad(FlagKubeletSocket, o.KubeletSocket, fmt.Errorf("must be in --%s (%s): the kubelet resolves the plugin endpoint next to its own socket", FlagPluginDir, o.PluginDir))
		}
		if o.PollInterval <= 0 {
			bad(FlagPollInterval, o.PollInterval, errors.New("must be positive"))
		}
		if err := errors.Join(errs...); err != nil {
			return Options{}, err
		}
		return o, nil
	}
}

// Args renders o's inventory and the given extra settings as the flags BindFlags parses, in a fixed
// order. It is how the DaemonSet's container args are made, so the two cannot drift apart. Fields
// left at their zero value are omitted (the binary's default applies).
func Args(inv fakegpu.Inventory, healthAddr string) []string {
	args := []string{fmt.Sprintf("--%s=%d", FlagCount, inv.Count)}
	if inv.ResourceName != "" {
		args = append(args, fmt.Sprintf("--%s=%s", FlagResourceName, inv.ResourceName))
	}
	if inv.Product != "" {
		args = append(args, fmt.Sprintf("--%s=%s", FlagProduct, inv.Product))
	}
	if inv.MemoryMiB != 0 {
		args = append(args, fmt.Sprintf("--%s=%d", FlagMemoryMiB, inv.MemoryMiB))
	}
	if inv.NVLinkDomainSize != 0 {
		args = append(args, fmt.Sprintf("--%s=%d", FlagNVLinkDomainSize, inv.NVLinkDomainSize))
	}
	if healthAddr != "" {
		args = append(args, fmt.Sprintf("--%s=%s", FlagHealthAddr, healthAddr))
	}
	return args
}

// DRAArgs renders the DRA flags the DaemonSet passes, in a fixed order: none for the device plugin
// API alone (the binary's default), so that DaemonSet stays as it was.
func DRAArgs(api fakegpu.API, cliqueLabel string) []string {
	if !api.DRA() {
		return nil
	}
	args := []string{fmt.Sprintf("--%s=%s", FlagGPUAPI, api)}
	if cliqueLabel != "" {
		args = append(args, fmt.Sprintf("--%s=%s", FlagCliqueLabel, cliqueLabel))
	}
	return args
}
