package draplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gangbench/gangbench/fakegpu"
)

// What a container that got fake GPUs through a ResourceClaim sees. The kubelet hands the runtime
// the CDI device IDs Prepare returns; containerd (CDI is on by default in 2.x) looks them up in the
// spec files under the CDI directory and applies their edits. Nothing real is mounted: the values
// only let a workload (or a test looking at the container) see which fake GPUs it got.
const (
	// CDIVendor and CDIClass make the CDI kind of every device the plugin defines.
	CDIVendor = "gangbench.dev"
	CDIClass  = "gpu"
	// CDIKind is "vendor/class", the prefix of every CDI device ID ("gangbench.dev/gpu=gpu-0").
	CDIKind = CDIVendor + "/" + CDIClass
	// DefaultCDIDir is where containerd looks for CDI specs besides /etc/cdi (its default
	// cdi_spec_dirs); the DaemonSet mounts it from the node.
	DefaultCDIDir = "/var/run/cdi"

	// EnvDevicePrefix names one variable per GPU a container got, FAKEGPU_DEVICE_<index>=<uuid>:
	// each GPU's CDI device sets its own, so a container with GPUs of several requests or claims
	// sees all of them.
	EnvDevicePrefix = "FAKEGPU_DEVICE_"
	// EnvVisibleDevices lists the uuids (comma-separated, in allocation order) of the GPUs of one
	// request of a claim, as NVIDIA_VISIBLE_DEVICES does for the device plugin. It is set by the
	// request's own CDI device, so a container using several requests sees the last one's list.
	EnvVisibleDevices = "FAKEGPU_VISIBLE_DEVICES"
	// EnvProduct is the GPU product.
	EnvProduct = "FAKEGPU_PRODUCT"
	// EnvNVLinkDomains lists the NVLink domains of the request's GPUs (comma-separated, ascending).
	EnvNVLinkDomains = "FAKEGPU_NVLINK_DOMAINS"

	// cdiFilePrefix starts the name of every spec file the plugin writes. The node's GPUs are in
	// <prefix>.json; each prepared request of a claim has <prefix>_<claim UID>_<request>.json.
	cdiFilePrefix = "gangbench.dev-gpu"
)

// GPUCDIDevice is the CDI device of the node's GPU with DRA device name name ("gpu-0").
func GPUCDIDevice(name string) string { return CDIKind + "=" + name }

// claimDeviceName is the CDI device name of one request of a claim: the claim UID makes it unique
// (the runtime may cache specs, and a reused name could hit a stale entry), the request tells the
// requests of one claim apart.
func claimDeviceName(claimUID, request string) string { return "claim-" + claimUID + "-" + request }

// nodeSpec is the CDI spec of the node's GPUs: one device per GPU, named as in the ResourceSlice.
func nodeSpec(node string, inv fakegpu.Inventory) (*cdispec.Spec, error) {
	ids := inv.DeviceIDs(node)
	spec := &cdispec.Spec{Kind: CDIKind}
	for i, id := range ids {
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name:           fakegpu.DeviceName(i),
			ContainerEdits: cdispec.ContainerEdits{Env: []string{EnvDevicePrefix + strconv.Itoa(i) + "=" + id}},
		})
	}
	return versioned(spec)
}

// claimSpec is the CDI spec of one request of a claim: one device whose edits describe the GPUs
// (by index, in allocation order) the request got.
func claimSpec(claimUID, request string, inv fakegpu.Inventory, ids []string, indices []int) (*cdispec.Spec, error) {
	uuids := make([]string, len(indices))
	domains := make([]int, len(indices))
	for n, i := range indices {
		uuids[n], domains[n] = ids[i], inv.DomainOf(i)
	}
	slices.Sort(domains)
	domains = slices.Compact(domains)
	ds := make([]string, len(domains))
	for n, d := range domains {
		ds[n] = strconv.Itoa(d)
	}
	spec := &cdispec.Spec{Kind: CDIKind, Devices: []cdispec.Device{{
		Name: claimDeviceName(claimUID, request),
		ContainerEdits: cdispec.ContainerEdits{Env: []string{
			EnvVisibleDevices + "=" + strings.Join(uuids, ","),
			EnvProduct + "=" + inv.Product,
			EnvNVLinkDomains + "=" + strings.Join(ds, ","),
		}},
	}}}
	return versioned(spec)
}

// versioned sets the lowest CDI version that has every feature spec uses, so the oldest runtime
// that can read it does.
func versioned(spec *cdispec.Spec) (*cdispec.Spec, error) {
	v, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("CDI spec version: %w", err)
	}
	spec.Version = v
	return spec, nil
}

func nodeSpecPath(dir string) string { return filepath.Join(dir, cdiFilePrefix+".json") }

func claimSpecPath(dir, claimUID, request string) string {
	return filepath.Join(dir, cdiFilePrefix+"_"+claimUID+"_"+request+".json")
}

// writeSpec writes spec to path unless the file already holds exactly that, so that keeping the
// node's spec on every Prepare costs a read. The file is replaced atomically (a temp file renamed
// over it): the runtime, which watches the directory, never reads half a spec.
func writeSpec(path string, spec *cdispec.Spec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("CDI spec %s: %w", path, err)
	}
	data = append(data, '\n')
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("CDI directory: %w", err)
	}
	// The temp name does not end in .json, so the runtime never loads it as a spec.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("CDI spec %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("CDI spec %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("CDI spec %s: %w", path, err)
	}
	return nil
}

// removeClaimSpecs removes every spec file of claimUID. It works from the file names alone, so it
// also cleans up after a plugin process that prepared the claim and is gone.
func removeClaimSpecs(dir, claimUID string) error {
	matches, err := filepath.Glob(filepath.Join(dir, cdiFilePrefix+"_"+claimUID+"_*.json"))
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
