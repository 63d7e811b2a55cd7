// Package draplugin is a kubelet DRA plugin for the fake GPUs (driver fakegpu.DRADriver): the
// real-kubelet counterpart of the ResourceSlices gangbench publishes itself for simulated nodes
// (clusters/kwok). Built on k8s.io/dynamic-resource-allocation/kubeletplugin, it registers with the
// kubelet through a socket in plugins_registry, publishes its node's ResourceSlice (one pool named
// after the node, one device per GPU: fakegpu.Devices) and answers NodePrepareResources with CDI
// devices (see cdi.go), so a container that got fake GPUs through a ResourceClaim sees which.
// Nothing real is touched.
//
// Device health is the device plugin's (plugin.Health: the HTTP API and the health file). An
// unhealthy device is withdrawn from the slice, as a driver withdraws a device it finds unhealthy,
// so the scheduler no longer allocates it; it is published again once healthy. The kubelet is also
// told through the DRA health service, which puts it in the status of pods that hold it.
package draplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/plugin"
)

const (
	// healthResend is how often the DRA health service repeats its report although nothing changed:
	// the kubelet takes a device's health as unknown when it is not refreshed within 30 s.
	healthResend = 10 * time.Second
	// notifyMethod is the registration call in which the kubelet tells the plugin whether it took it
	// (registerapi.Registration_ServiceDesc; a test keeps the two equal).
	notifyMethod = "/pluginregistration.Registration/NotifyRegistrationStatus"
)

// Options configure a Plugin. Zero fields get the defaults documented on each.
type Options struct {
	// Inventory is each GPU of the node (WithDefaults is applied). Count must be at least 1.
	Inventory fakegpu.Inventory
	// NodeName is the node the plugin runs on: its pool's name, the slice's node, and what the
	// device uuids derive from (the same as the device plugin's IDs). Required.
	NodeName string
	// Clique is the NVLink clique of the node's GPUs in the slice (fakegpu.SliceOptions.Clique).
	Clique string
	// Client publishes the ResourceSlice and reads the claims to prepare. Required. It needs
	// resourceslices get/list/watch/create/update/patch/delete, resourceclaims get and nodes get.
	Client kubernetes.Interface
	// RegistrarDir is the kubelet's plugin registration directory; default
	// kubeletplugin.KubeletRegistryDir (/var/lib/kubelet/plugins_registry).
	RegistrarDir string
	// PluginDataDir is where the DRA socket is created; default
	// kubeletplugin.KubeletPluginsDir/<driver>. It must be the same path on the node.
	PluginDataDir string
	// CDIDir is where the CDI specs go; default DefaultCDIDir. The container runtime must read it.
	CDIDir string
	// Health is the devices' health when a device plugin in the same process owns it (and watches
	// its health file); nil makes the plugin keep its own over HealthFile.
	Health *plugin.Health
	// HealthFile lists unhealthy device IDs (the device plugin's format); only without Health.
	HealthFile string
	// PollInterval is how often the own health file is re-read besides filesystem events; default
	// plugin.DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives the plugin's logs (and the kubeletplugin helper's, through logr); default
	// discards them.
	Logger *slog.Logger
}

// Plugin is the DRA plugin of one node's fake GPUs. Create it with New and start it with Run.
type Plugin struct {
	opts      Options // with defaults applied
	inv       fakegpu.Inventory
	ids       []string       // device uuids (the device plugin's IDs) in index order
	byName    map[string]int // DRA device name → index
	health    *plugin.Health
	ownHealth bool // Run watches the health file
	log       *slog.Logger

	started atomic.Bool
	ready   chan struct{} // closed once the first slice was handed to the helper

	mu            sync.Mutex
	registered    bool
	registerErr   error
	registrations int
	// prepared are the claims prepared and not unprepared since this process started, by UID,
	// each with its devices' indices; a device is never prepared for two claims at once.
	prepared map[string][]int
	// published is the device names of the slice last handed to the helper.
	published []string
}

// New validates opts and returns a Plugin that is not serving yet.
func New(opts Options) (*Plugin, error) {
	opts.Inventory = opts.Inventory.WithDefaults()
	var errs []error
	if err := opts.Inventory.Validate(); err != nil {
		errs = append(errs, err)
	}
	if opts.Inventory.Count < 1 {
		errs = append(errs, fmt.Errorf("draplugin: inventory count must be at least 1, got %d", opts.Inventory.Count))
	}
	if opts.NodeName == "" {
		errs = append(errs, errors.New("draplugin: NodeName is required: the pool and the device uuids derive from it"))
	}
	if opts.Client == nil {
		errs = append(errs, errors.New("draplugin: Client is required: the plugin publishes its ResourceSlice and reads claims"))
	}
	if opts.Health != nil && opts.HealthFile != "" {
		errs = append(errs, errors.New("draplugin: HealthFile is the shared Health's owner's to watch; give one or the other"))
	}
	if opts.RegistrarDir == "" {
		opts.RegistrarDir = kubeletplugin.KubeletRegistryDir
	}
	if opts.PluginDataDir == "" {
		opts.PluginDataDir = filepath.Join(kubeletplugin.KubeletPluginsDir, fakegpu.DRADriver)
	}
	if opts.CDIDir == "" {
		opts.CDIDir = DefaultCDIDir
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = plugin.DefaultPollInterval
	}
	if opts.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("draplugin: PollInterval must be positive, got %s", opts.PollInterval))
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := opts.Logger.With("driver", fakegpu.DRADriver, "node", opts.NodeName)
	p := &Plugin{
		opts:     opts,
		inv:      opts.Inventory,
		ids:      opts.Inventory.DeviceIDs(opts.NodeName),
		byName:   map[string]int{},
		health:   opts.Health,
		log:      log,
		ready:    make(chan struct{}),
		prepared: map[string][]int{},
	}
	for i := range p.ids {
		p.byName[fakegpu.DeviceName(i)] = i
	}
	if p.health == nil {
		h, err := plugin.NewHealth(opts.NodeName, opts.Inventory, opts.HealthFile, log)
		if err != nil {
			return nil, err
		}
		p.health, p.ownHealth = h, true
	} else if !slices.Equal(p.health.IDs(), p.ids) {
		return nil, fmt.Errorf("draplugin: the shared Health has devices %v, the inventory %v", p.health.IDs(), p.ids)
	}
	return p, nil
}

// Ready is closed once Run serves the kubelet sockets and handed the first slice to the helper.
func (p *Plugin) Ready() <-chan struct{} { return p.ready }

// Registered reports whether the kubelet took the plugin (its last NotifyRegistrationStatus said
// so), and the error it reported otherwise.
func (p *Plugin) Registered() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.registered && p.registerErr == nil {
		return false, errors.New("the kubelet has not confirmed the registration yet")
	}
	return p.registered, p.registerErr
}

// SetHealth marks device id (a uuid, as the device plugin's API names it) healthy or unhealthy
// through the API; Run republishes the slice.
func (p *Plugin) SetHealth(id string, healthy bool) error { return p.health.Set(id, healthy) }

// Status is the plugin as the HTTP health API reports it (plugin.NewHandler).
func (p *Plugin) Status() plugin.Status {
	p.mu.Lock()
	st := plugin.Status{
		Node: p.opts.NodeName, Driver: fakegpu.DRADriver, Product: p.inv.Product,
		Registered: p.registered, Registrations: p.registrations,
	}
	if p.registerErr != nil {
		st.RegisterError = p.registerErr.Error()
	}
	p.mu.Unlock()
	st.Devices = p.health.Devices()
	return st
}

// Published returns the names of the devices in the slice last handed to the helper (which
// writes it to the apiserver shortly after).
func (p *Plugin) Published() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.published)
}

// devices are the node's DRA devices without the unhealthy ones.
func (p *Plugin) devices(unhealthy []string) []resourcev1.Device {
	all := fakegpu.Devices(p.opts.NodeName, p.inv, fakegpu.SliceOptions{Clique: p.opts.Clique})
	return slices.DeleteFunc(all, func(d resourcev1.Device) bool {
		i, ok := p.byName[d.Name]
		return ok && slices.Contains(unhealthy, p.ids[i])
	})
}

// Run writes the node's CDI spec, starts the kubelet plugin helper (the registration and DRA
// sockets), publishes the slice and republishes it whenever device health changes, until ctx ends
// or the helper fails. It then stops the helper, which removes its sockets (the slice stays: the
// kubelet removes a driver's slices once it is gone for good). It returns nil after ctx ends. Run may
// be called once.
func (p *Plugin) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("draplugin: Run called more than once")
	}
	for _, d := range []string{p.opts.RegistrarDir, p.opts.PluginDataDir} {
		// The kubelet creates both; creating them here only matters where no kubelet made them.
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("draplugin: %w", err)
		}
	}
	if err := p.writeNodeSpec(); err != nil {
		return fmt.Errorf("draplugin: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The helper logs through klog; its logger comes from the context. Its gRPC call logs are at
	// V(6), which slog below debug drops.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(p.log.Handler()))
	fatal := make(chan error, 1)
	d := &driver{p: p, fatal: fatal}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(fakegpu.DRADriver),
		kubeletplugin.NodeName(p.opts.NodeName),
		kubeletplugin.KubeClient(p.opts.Client),
		kubeletplugin.RegistrarDirectoryPath(p.opts.RegistrarDir),
		kubeletplugin.PluginDataDirectoryPath(p.opts.PluginDataDir),
		kubeletplugin.GRPCInterceptor(p.watchRegistration),
	)
	if err != nil {
		return fmt.Errorf("draplugin: start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred later, so run first)
	defer cancel()
	if p.ownHealth {
		wg.Go(func() { p.health.WatchFile(ctx, p.opts.PollInterval) })
	}
	p.log.Info("serving DRA plugin", "registrar", p.opts.RegistrarDir, "pluginDir", p.opts.PluginDataDir, "cdiDir", p.opts.CDIDir, "devices", len(p.ids))

	first := true
	for {
		unhealthy, changed := p.health.Unhealthy()
		devs := p.devices(unhealthy)
		err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
			p.opts.NodeName: {Slices: []resourceslice.Slice{{Devices: devs}}},
		}})
		if err != nil {
			return fmt.Errorf("draplugin: publish the ResourceSlice: %w", err)
		}
		names := make([]string, len(devs))
		for i, d := range devs {
			names[i] = d.Name
		}
		p.mu.Lock()
		p.published = names
		p.mu.Unlock()
		if first {
			close(p.ready)
			first = false
		} else {
			p.log.Info("republishing the ResourceSlice", "devices", names, "withdrawn", unhealthy)
		}
		select {
		case <-ctx.Done():
			p.log.Info("DRA plugin stopped")
			return nil
		case err := <-fatal:
			return fmt.Errorf("draplugin: %w", err)
		case <-changed:
		}
	}
}

// watchRegistration records what the kubelet says in NotifyRegistrationStatus, the only sign the
// helper gives that registration completed (its RegistrationStatus is not safe to read concurrently).
// It is a gRPC interceptor, so it sees every call of both sockets and passes them all on.
func (p *Plugin) watchRegistration(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if st, ok := req.(*registerapi.RegistrationStatus); ok && info.FullMethod == notifyMethod {
		p.mu.Lock()
		p.registered = st.PluginRegistered
		p.registerErr = nil
		if st.PluginRegistered {
			p.registrations++
		} else {
			p.registerErr = fmt.Errorf("the kubelet refused the plugin: %s", st.Error)
		}
		p.mu.Unlock()
		if st.PluginRegistered {
			p.log.Info("registered with kubelet", "registrar", p.opts.RegistrarDir)
		} else {
			p.log.Warn("kubelet refused the registration", "err", st.Error)
		}
	}
	return handler(ctx, req)
}

func (p *Plugin) writeNodeSpec() error {
	spec, err := nodeSpec(p.opts.NodeName, p.inv)
	if err != nil {
		return err
	}
	return writeSpec(nodeSpecPath(p.opts.CDIDir), spec)
}
