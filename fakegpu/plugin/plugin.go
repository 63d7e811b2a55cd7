// Package plugin is a Kubernetes device plugin (deviceplugin/v1beta1) that advertises the fake GPUs
// of a fakegpu.Inventory to a real kubelet. It is what gives kind nodes their nvidia.com/gpu: the
// kubelet counts the devices into the node's capacity and allocatable, hands them to containers
// through Allocate, and the scheduler (and so gang scheduling) sees them exactly as it would see real
// GPUs. No device is touched: Allocate only returns environment variables and annotations.
//
// Tests and operators can flip device health (SetHealth, an HTTP endpoint, a file) to exercise what a
// scheduler does when allocatable shrinks under a gang.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gangbench/gangbench/fakegpu"
)

const (
	// DefaultSocketName is the plugin's socket in the device plugin directory; the kubelet is told this
	// base name as the registration endpoint.
	DefaultSocketName = "gangbench-fakegpu.sock"
	// DefaultPollInterval is how often the plugin re-checks the kubelet socket, its own socket and the
	// health file even without a filesystem event. fsnotify makes reactions immediate; the ticker only
	// covers events it cannot deliver (an overflowed queue, a watch that could not be added).
	DefaultPollInterval = 5 * time.Second

	// maxSocketPath is the longest path a unix socket can be bound to on Linux (sun_path is 108 bytes
	// including the terminating NUL). Checked up front because bind's EINVAL does not say why.
	maxSocketPath = 107

	// registerTimeout bounds one Register call; the kubelet answers at once or not at all.
	registerTimeout = 10 * time.Second
	// registerBackoffMin and registerBackoffMax bound the wait between failed registrations. A
	// filesystem event (the kubelet socket appearing) cuts the wait short, so the maximum only matters
	// when events are lost.
	registerBackoffMin = 100 * time.Millisecond
	registerBackoffMax = 5 * time.Second
	// stopGrace bounds the graceful stop of the gRPC and HTTP servers on shutdown; a kubelet that keeps
	// a call open longer is cut off so that a SIGTERM'd pod exits within its grace period.
	stopGrace = 5 * time.Second
)

// Options configure a Plugin. Zero fields get the defaults documented on each.
type Options struct {
	// Inventory is the GPUs to advertise (WithDefaults is applied). Count must be at least 1.
	Inventory fakegpu.Inventory
	// NodeName is the node the plugin runs on; the device IDs derive from it (fakegpu DeviceIDs), so
	// they are stable across plugin restarts and distinct between nodes. Required.
	NodeName string
	// PluginDir is the kubelet's device plugin directory, where the plugin socket is created; default
	// pluginapi.DevicePluginPath.
	PluginDir string
	// KubeletSocket is the kubelet's registration socket; default PluginDir/kubelet.sock (which is
	// pluginapi.KubeletSocket for the default PluginDir). It must be in PluginDir: the kubelet resolves
	// the registered endpoint relative to its own socket's directory.
	KubeletSocket string
	// SocketName is the base name of the plugin socket in PluginDir; default DefaultSocketName.
	SocketName string
	// HealthAddr, if set, is the TCP address of the HTTP health API (see Handler), e.g. "0.0.0.0:9400"
	// in a pod or "127.0.0.1:0" in tests (HealthAddr on the Plugin reports the bound address).
	HealthAddr string
	// HealthFile, if set, is a file listing unhealthy device IDs, one per line (blank lines and lines
	// starting with # are ignored; unknown IDs are logged and ignored). It is re-read when it changes
	// and every PollInterval. A missing file means no device is unhealthy through it. Keep it out of
	// PluginDir: a starting kubelet may clear that directory.
	HealthFile string
	// PollInterval is how often sockets and the health file are re-checked besides filesystem events;
	// default DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives the plugin's logs; default discards them.
	Logger *slog.Logger
	// AllocationLog, if set, receives a record line (see AllocationPrefix) for every container
	// request of every granted Allocate call, so that a harness can prove from the outside that the
	// kubelet allocated the devices. The binary sends them to stdout, apart from the logs.
	AllocationLog io.Writer
}

// Plugin serves one fake GPU inventory to the kubelet. Create it with New and start it with Run.
type Plugin struct {
	opts       Options // with defaults applied
	inv        fakegpu.Inventory
	ids        []string       // device IDs in index order
	index      map[string]int // device ID → index
	socketPath string
	log        *slog.Logger

	health *Health
	// noWatch makes the plugin rely on polling alone, as it does when fsnotify is unavailable; tests
	// set it to cover that path.
	noWatch bool
	// serving is the current gRPC server incarnation (set by Run's goroutine, read by the
	// registration goroutine).
	serving atomic.Pointer[server]
	// serverStarts counts incarnations, numbering them; tests use it because a re-created socket may
	// reuse the old inode, so file identity cannot tell.
	serverStarts atomic.Int32

	started atomic.Bool
	ready   chan struct{} // closed once the plugin socket (and HTTP API) serve
	done    chan struct{} // closed when Run shuts down; ends ListAndWatch streams

	// now is the clock of allocation records; tests fix it.
	now func() time.Time
	// allocMu guards allocs and the writes to Options.AllocationLog (apart from mu, so that a slow
	// log write never stalls the health API).
	allocMu sync.Mutex
	allocs  allocations

	mu            sync.Mutex
	healthAddr    string // bound HTTP address, set before ready is closed
	registered    bool
	registerErr   error
	registrations int
}

// New validates opts and returns a Plugin that is not serving yet.
func New(opts Options) (*Plugin, error) {
	opts.Inventory = opts.Inventory.WithDefaults()
	var errs []error
	if err := opts.Inventory.Validate(); err != nil {
		errs = append(errs, err)
	}
	if opts.Inventory.Count < 1 {
		errs = append(errs, fmt.Errorf("plugin: inventory count must be at least 1 for a device plugin, got %d", opts.Inventory.Count))
	}
	if opts.NodeName == "" {
		errs = append(errs, errors.New("plugin: NodeName is required: device IDs are derived from it"))
	}
	if opts.PluginDir == "" {
		opts.PluginDir = pluginapi.DevicePluginPath
	}
	if opts.SocketName == "" {
		opts.SocketName = DefaultSocketName
	}
	if opts.SocketName != filepath.Base(opts.SocketName) || opts.SocketName == "." || opts.SocketName == ".." {
		errs = append(errs, fmt.Errorf("plugin: SocketName %q must be a plain file name", opts.SocketName))
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("plugin: PollInterval must be positive, got %s", opts.PollInterval))
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(opts.PluginDir)
	if err != nil {
		return nil, fmt.Errorf("plugin: PluginDir %q: %w", opts.PluginDir, err)
	}
	opts.PluginDir = dir
	if opts.KubeletSocket == "" {
		opts.KubeletSocket = filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))
	}
	if opts.KubeletSocket, err = filepath.Abs(opts.KubeletSocket); err != nil {
		return nil, fmt.Errorf("plugin: KubeletSocket %q: %w", opts.KubeletSocket, err)
	}
	if filepath.Dir(opts.KubeletSocket) != dir {
		errs = append(errs, fmt.Errorf("plugin: KubeletSocket %q must be in PluginDir %q: the kubelet looks for the registered endpoint next to its own socket",
			opts.KubeletSocket, dir))
	}
	socketPath := filepath.Join(dir, opts.SocketName)
	for _, p := range []string{socketPath, opts.KubeletSocket} {
		if len(p) > maxSocketPath {
			errs = append(errs, fmt.Errorf("plugin: socket path %q is %d bytes, longer than the %d a unix socket allows", p, len(p), maxSocketPath))
		}
	}
	if opts.HealthFile != "" {
		if opts.HealthFile, err = filepath.Abs(opts.HealthFile); err != nil {
			return nil, fmt.Errorf("plugin: HealthFile: %w", err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	ids := opts.Inventory.DeviceIDs(opts.NodeName)
	index := make(map[string]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	log := opts.Logger.With("resource", opts.Inventory.ResourceName, "node", opts.NodeName)
	health, err := NewHealth(opts.NodeName, opts.Inventory, opts.HealthFile, log)
	if err != nil {
		return nil, err
	}
	return &Plugin{
		opts:       opts,
		inv:        opts.Inventory,
		ids:        ids,
		index:      index,
		socketPath: socketPath,
		log:        log,
		health:     health,
		now:        time.Now,
		ready:      make(chan struct{}),
		done:       make(chan struct{}),
	}, nil
}

// SocketPath is the plugin's unix socket.
func (p *Plugin) SocketPath() string { return p.socketPath }

// DeviceIDs returns the advertised device IDs in index order (a new slice).
func (p *Plugin) DeviceIDs() []string { return append([]string(nil), p.ids...) }

// Ready is closed once Run serves the plugin socket and the HTTP API (if configured), before the
// first registration attempt.
func (p *Plugin) Ready() <-chan struct{} { return p.ready }

// HealthAddr is the bound address of the HTTP health API, or "" before Ready or without HealthAddr.
func (p *Plugin) HealthAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healthAddr
}

// Registered reports whether the last registration with the kubelet succeeded and the kubelet
// socket has not disappeared since, and the last registration error otherwise.
func (p *Plugin) Registered() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.registered, p.registerErr
}

func (p *Plugin) setRegistered(ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.registered, p.registerErr = ok, err
	if ok {
		p.registrations++
	}
}

// pluginOptions are both registered and returned by GetDevicePluginOptions: the kubelet asks for
// preferred allocations (so gangs land in as few NVLink domains as possible) and skips PreStart.
func pluginOptions() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true, PreStartRequired: false}
}

// Run serves the plugin socket, registers with the kubelet and keeps doing so across kubelet
// restarts until ctx is cancelled. It then stops the servers, removes its socket (unless another
// instance has replaced it) and returns nil. It returns an error only when it cannot serve. Run may be
// called once.
func (p *Plugin) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("plugin: Run called more than once")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The directory must exist to be watched; the kubelet normally created it already.
	if err := os.MkdirAll(p.opts.PluginDir, 0o750); err != nil {
		return fmt.Errorf("plugin: creating %s: %w", p.opts.PluginDir, err)
	}
	// Watch before creating the socket so no event after it is missed.
	watcher := p.newWatcher()
	if watcher != nil {
		defer func() { _ = watcher.Close() }()
	}

	serveErr := make(chan error, 2)
	srv, err := p.startServer(serveErr)
	if err != nil {
		return err
	}
	var httpSrv *http.Server
	if p.opts.HealthAddr != "" {
		if httpSrv, err = p.startHTTP(serveErr); err != nil {
			p.stopServer(srv, true)
			return err
		}
	}
	if p.opts.HealthFile != "" {
		p.health.ReloadFile()
	}

	kick := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() { p.registerLoop(ctx, kick) })

	close(p.ready)
	p.log.Info("serving device plugin", "socket", p.socketPath, "devices", len(p.ids), "healthAddr", p.HealthAddr())

	srv, err = p.loop(ctx, watcher, srv, serveErr, kick)

	// Shutdown order: stop registering, end ListAndWatch streams so GracefulStop can finish, then
	// stop the servers.
	cancel()
	wg.Wait()
	close(p.done)
	if httpSrv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), stopGrace)
		_ = httpSrv.Shutdown(sctx)
		scancel()
	}
	p.stopServer(srv, true)
	p.log.Info("device plugin stopped")
	return err
}

// loop reacts to filesystem events and ticks until ctx ends or a server fails. It returns the server
// currently running (it is replaced when its socket disappears).
func (p *Plugin) loop(ctx context.Context, watcher *fsnotify.Watcher, srv *server, serveErr chan error, kick chan struct{}) (*server, error) {
	kickRegister := func() {
		select {
		case kick <- struct{}{}:
		default: // a registration is already pending
		}
	}
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if watcher != nil {
		events, watchErrs = watcher.Events, watcher.Errors
	}
	ticker := time.NewTicker(p.opts.PollInterval)
	defer ticker.Stop()

	// ensureServing re-creates the plugin socket when it is gone or replaced: the kubelet deletes
	// every socket in its directory when it starts, and its new instance must be able to dial us.
	ensureServing := func() error {
		if p.intact(srv) {
			return nil
		}
		p.log.Info("plugin socket removed; re-creating it", "socket", p.socketPath)
		p.stopServer(srv, false)
		next, err := p.startServer(serveErr)
		if err != nil {
			return err
		}
		srv = next
		kickRegister()
		return nil
	}
	// checkKubelet asks for a registration whenever the kubelet socket exists; registerLoop skips it
	// when it already registered with that very socket. A vanished socket means the kubelet is gone.
	kubeletUp := true
	checkKubelet := func() {
		if _, err := os.Lstat(p.opts.KubeletSocket); err != nil {
			if kubeletUp {
				p.log.Info("kubelet socket absent; waiting for the kubelet", "socket", p.opts.KubeletSocket)
				p.setRegistered(false, fmt.Errorf("kubelet socket %s absent", p.opts.KubeletSocket))
			}
			kubeletUp = false
			return
		}
		kubeletUp = true
		kickRegister()
	}
	kickRegister()

	for {
		select {
		case <-ctx.Done():
			return srv, nil
		case err := <-serveErr:
			return srv, err
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			// Typically a queue overflow: the ticker catches up on what was missed.
			p.log.Warn("filesystem watch error; relying on polling", "err", err)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			switch filepath.Clean(ev.Name) {
			case p.opts.KubeletSocket:
				checkKubelet()
			case p.socketPath:
				if err := ensureServing(); err != nil {
					return srv, err
				}
			case p.opts.HealthFile:
				p.health.ReloadFile()
			}
		case <-ticker.C:
			if err := ensureServing(); err != nil {
				return srv, err
			}
			checkKubelet()
			if p.opts.HealthFile != "" {
				p.health.ReloadFile()
			}
		}
	}
}

// newWatcher watches the plugin directory and the health file's directory. Failing that it returns
// nil and the plugin relies on polling alone.
func (p *Plugin) newWatcher() *fsnotify.Watcher {
	if p.noWatch {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		p.log.Warn("cannot watch the filesystem; polling instead", "err", err, "interval", p.opts.PollInterval)
		return nil
	}
	dirs := []string{p.opts.PluginDir}
	if p.opts.HealthFile != "" && filepath.Dir(p.opts.HealthFile) != p.opts.PluginDir {
		dirs = append(dirs, filepath.Dir(p.opts.HealthFile))
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			p.log.Warn("cannot watch directory; polling it instead", "dir", d, "err", err, "interval", p.opts.PollInterval)
		}
	}
	return w
}

// server is one incarnation of the gRPC server on the plugin socket.
type server struct {
	grpc *grpc.Server
	info os.FileInfo // identity of the socket file it listens on
	gen  int32       // incarnation number
}

// intact reports whether the plugin socket is still the file s listens on.
func (p *Plugin) intact(s *server) bool {
	fi, err := os.Lstat(p.socketPath)
	return err == nil && os.SameFile(fi, s.info)
}

// startServer (re)creates the plugin socket and serves the device plugin API on it. A failing Serve
// is reported on serveErr.
func (p *Plugin) startServer(serveErr chan<- error) (*server, error) {
	if err := os.MkdirAll(p.opts.PluginDir, 0o750); err != nil {
		return nil, fmt.Errorf("plugin: creating %s: %w", p.opts.PluginDir, err)
	}
	// A socket left by a previous instance would make bind fail.
	if err := os.Remove(p.socketPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("plugin: removing stale socket: %w", err)
	}
	ln, err := net.Listen("unix", p.socketPath)
	if err != nil {
		return nil, fmt.Errorf("plugin: listening on %s: %w", p.socketPath, err)
	}
	// Closing must not unlink the path: by then it may belong to a successor (a new instance during
	// a rolling update, or our own re-created socket). stopServer removes it only if it is still ours.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	info, err := os.Lstat(p.socketPath)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("plugin: socket %s vanished after listening: %w", p.socketPath, err)
	}
	// WaitForHandlers: Stop returns only once every handler has, so no ListAndWatch outlives Run.
	g := grpc.NewServer(grpc.WaitForHandlers(true))
	pluginapi.RegisterDevicePluginServer(g, &service{p: p})
	srv := &server{grpc: g, info: info, gen: p.serverStarts.Add(1)}
	p.serving.Store(srv)
	go func() {
		// Serve returns nil after Stop; ErrServerStopped only if Stop won the race with Serve.
		if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			select {
			case serveErr <- fmt.Errorf("plugin: serving %s: %w", p.socketPath, err):
			default:
			}
		}
	}()
	return srv, nil
}

// stopServer stops s. On the final stop it waits (bounded) for calls in flight and removes the
// socket if it is still the one s created.
func (p *Plugin) stopServer(s *server, final bool) {
	if !final {
		s.grpc.Stop()
		return
	}
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(stopGrace)
	select {
	case <-stopped:
		t.Stop()
	case <-t.C:
		s.grpc.Stop()
		<-stopped
	}
	if p.intact(s) {
		if err := os.Remove(p.socketPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.log.Warn("cannot remove plugin socket", "socket", p.socketPath, "err", err)
		}
	}
}

// startHTTP serves Handler on HealthAddr.
func (p *Plugin) startHTTP(serveErr chan<- error) (*http.Server, error) {
	ln, err := net.Listen("tcp", p.opts.HealthAddr)
	if err != nil {
		return nil, fmt.Errorf("plugin: health API on %s: %w", p.opts.HealthAddr, err)
	}
	p.mu.Lock()
	p.healthAddr = ln.Addr().String()
	p.mu.Unlock()
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case serveErr <- fmt.Errorf("plugin: health API: %w", err):
			default:
			}
		}
	}()
	return srv, nil
}

// registration identifies what a registration was made for: one kubelet (its socket file, by
// identity and modification time, which a restarted kubelet's new socket cannot share) and one
// incarnation of our server. A registration is redone only when either changes, because every
// registration makes the kubelet drop and re-dial the plugin, briefly marking its devices unhealthy.
type registration struct {
	kubelet os.FileInfo
	server  int32
}

func (r registration) same(o registration) bool {
	return r.kubelet != nil && o.kubelet != nil && r.server == o.server &&
		os.SameFile(r.kubelet, o.kubelet) && r.kubelet.ModTime().Equal(o.kubelet.ModTime())
}

// registerLoop registers with the kubelet whenever kicked and the kubelet or our server changed
// since the last successful registration, retrying with backoff until it succeeds. A new kick during
// the backoff retries at once: it means the kubelet socket (re)appeared.
func (p *Plugin) registerLoop(ctx context.Context, kick <-chan struct{}) {
	var last registration
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		backoff := registerBackoffMin
		for attempt := 1; ; attempt++ {
			srv := p.serving.Load()
			if !p.intact(srv) {
				// Our socket is gone (a starting kubelet clears the directory): registering now would
				// send the kubelet to a dead endpoint. Run's loop re-creates it and kicks again.
				break
			}
			cur := registration{server: srv.gen}
			fi, err := os.Lstat(p.opts.KubeletSocket)
			if err == nil {
				if cur.kubelet = fi; cur.same(last) {
					break // already registered with this kubelet
				}
				err = p.register(ctx)
			} else {
				err = fmt.Errorf("kubelet socket: %w", err)
			}
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				last = cur
				p.setRegistered(true, nil)
				p.log.Info("registered with kubelet", "kubeletSocket", p.opts.KubeletSocket, "endpoint", p.opts.SocketName, "attempt", attempt)
				break
			}
			p.setRegistered(false, err)
			level := slog.LevelDebug
			if attempt == 1 || attempt%20 == 0 { // a kubelet that stays away is worth a warning, not one per retry
				level = slog.LevelWarn
			}
			p.log.Log(ctx, level, "registration with kubelet failed; retrying", "err", err, "attempt", attempt, "retryIn", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-kick:
				t.Stop()
				backoff = registerBackoffMin
				continue
			case <-t.C:
			}
			backoff = min(2*backoff, registerBackoffMax)
		}
	}
}

// register makes one Register call to the kubelet.
func (p *Plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.opts.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dialing kubelet at %s: %w", p.opts.KubeletSocket, err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.opts.SocketName,
		ResourceName: p.inv.ResourceName,
		Options:      pluginOptions(),
	})
	if err != nil {
		return fmt.Errorf("registering %s with kubelet at %s: %w", p.inv.ResourceName, p.opts.KubeletSocket, err)
	}
	return nil
}
