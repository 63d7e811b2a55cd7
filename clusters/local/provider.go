// Package local is the docker-free cluster provider: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and the kwok controller run as child processes on 127.0.0.1, with PKI made in Go and
// kwok-simulated GPU nodes. It is real Kubernetes; only kubelets are simulated.
package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/clusters/local/pki"
	"github.com/gangbench/gangbench/internal/proc"
)

// ProviderName is how users select this provider.
const ProviderName = "local"

// Provider creates local clusters. The zero value is not usable; call New.
type Provider struct {
	stateDir string
	bins     k8sbin.Options
	log      *slog.Logger
	detached bool
}

var _ clusters.Provider = (*Provider)(nil)

// Option configures a Provider.
type Option func(*Provider)

// WithStateDir keeps cluster state under dir instead of DefaultStateDir.
func WithStateDir(dir string) Option { return func(p *Provider) { p.stateDir = dir } }

// WithBinaries says where binaries come from (cache dir, overrides, progress output).
func WithBinaries(o k8sbin.Options) Option { return func(p *Provider) { p.bins = o } }

// WithLogger sets where progress messages go; the default discards them.
func WithLogger(l *slog.Logger) Option { return func(p *Provider) { p.log = l } }

// WithDetachedOwner marks clusters created by this process as owned by a process that exists only to
// hold them (`gangbench cluster create`), so `cluster delete` from elsewhere may signal that owner.
func WithDetachedOwner() Option { return func(p *Provider) { p.detached = true } }

// New returns a local provider.
func New(opts ...Option) (*Provider, error) {
	p := &Provider{log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(p)
	}
	if p.stateDir == "" {
		d, err := DefaultStateDir()
		if err != nil {
			return nil, err
		}
		p.stateDir = d
	}
	return p, nil
}

// Name implements clusters.Provider.
func (p *Provider) Name() string { return ProviderName }

func (p *Provider) clusterDir(name string) string { return filepath.Join(p.stateDir, name) }

// Validate implements clusters.Provider.
func (p *Provider) Validate(spec clusters.Spec) error { return Validate(spec) }

// Capabilities implements clusters.Provider: every component is a child process (so all of them
// stop and start), every node is simulated by kwok and keeps its GPUs in its status.
func (p *Provider) Capabilities() clusters.Capabilities { return capabilities() }

func capabilities() clusters.Capabilities {
	return clusters.Capabilities{
		Provider: ProviderName, Creates: true,
		ComponentControl: clusters.AllComponents(), SimulatedNodes: true, GPUFaults: true,
		GPUAPIs:      clusters.GPUAPIs(),
		FeatureGates: clusters.AllComponents(), RuntimeConfig: true,
		NeedsHolder: true, ProcessAccounting: true, SchedulerCoverage: true,
	}
}

// EarlyKubeconfig implements clusters.EarlyKubeconfig: Create writes the admin kubeconfig before it
// starts the apiserver, so a progress display can watch nodes appear while the cluster is made.
func (p *Provider) EarlyKubeconfig(name string) string {
	return filepath.Join(p.clusterDir(name), "kubeconfig-admin")
}

// Validate checks a spec before anything is started or built.
func Validate(spec clusters.Spec) error {
	var errs []error
	if spec.Name != "" {
		if err := validateName(spec.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := spec.ValidateShape(capabilities()); err != nil {
		errs = append(errs, err)
	}
	nodes := 0
	for i, g := range spec.Groups() {
		nodes += g.Count
		if g.GPUs == nil {
			errs = append(errs, fmt.Errorf("nodeGroups[%d]: nodes without GPUs: the local provider's simulated nodes all have GPUs", i))
		}
	}
	if nodes < 1 || nodes > 20000 {
		errs = append(errs, fmt.Errorf("nodes: %d is out of range (accepted: 1 to 20000)", nodes))
	}
	if len(spec.NodeGroups) == 0 {
		if err := spec.GPU.WithDefaults().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("gpu: %w", err))
		}
	}
	if spec.KubernetesVersion != "" {
		if err := k8sbin.ValidateKubeVersion(spec.KubernetesVersion); err != nil {
			errs = append(errs, err)
		} else if m := clusters.MinorOf(spec.KubernetesVersion); m < clusters.GangMinMinor {
			errs = append(errs, fmt.Errorf("kubernetes version %s: gang scheduling as gangbench speaks it starts with v1.%d (scheduling.k8s.io/v1alpha2; v1beta1 from v1.37)", spec.KubernetesVersion, clusters.GangMinMinor))
		}
	}
	for c := range spec.ExtraArgs {
		if _, err := clusters.ParseComponent(string(c)); err != nil {
			errs = append(errs, fmt.Errorf("extra args: %w", err))
		}
	}
	for c := range spec.ComponentFeatureGates {
		if _, err := clusters.ParseComponent(string(c)); err != nil {
			errs = append(errs, fmt.Errorf("feature gates: %w", err))
		}
	}
	return errors.Join(errs...)
}

func withDefaults(spec clusters.Spec) clusters.Spec {
	if spec.Name == "" {
		spec.Name = clusters.DefaultName
	}
	if spec.KubernetesVersion == "" {
		spec.KubernetesVersion = clusters.DefaultKubernetesVersion
	}
	if spec.ReadyTimeout == 0 {
		spec.ReadyTimeout = 3 * time.Minute
	}
	spec.GPU = spec.GPU.WithDefaults()
	if len(spec.NodeGroups) > 0 {
		// The handle and the state file carry one count and one inventory: all nodes, and the
		// first group's GPUs.
		spec.Nodes = 0
		for _, g := range spec.NodeGroups {
			spec.Nodes += g.Count
		}
		if g := spec.NodeGroups[0]; g.GPUs != nil {
			spec.GPU = g.GPUs.Inventory.WithDefaults()
		}
	}
	return spec
}

// binOptions combines the provider's binary options with the overrides a Spec carries.
func (p *Provider) binOptions(spec clusters.Spec) k8sbin.Options {
	o := p.bins
	if spec.KubeBinDir != "" {
		o.KubeBinDir = spec.KubeBinDir
	}
	if spec.SchedulerBinary != "" {
		o.SchedulerBinary = spec.SchedulerBinary
	}
	return o
}

// Create implements clusters.Provider. The cluster belongs to this process: its components die with
// it, and Cluster.Close tears it down.
func (p *Provider) Create(ctx context.Context, spec clusters.Spec) (*clusters.Cluster, error) {
	if err := Validate(spec); err != nil {
		return nil, fmt.Errorf("invalid cluster spec: %w", err)
	}
	spec = withDefaults(spec)
	start := time.Now()
	dir := p.clusterDir(spec.Name)
	if err := p.clearStale(ctx, spec.Name); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	// Mkdir (not MkdirAll) is the claim on the name: two processes creating the same cluster at once
	// cannot both succeed.
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("cluster %q is being created by another process (%s exists)", spec.Name, dir)
		}
		return nil, fmt.Errorf("cluster dir: %w", err)
	}
	r := &run{p: p, spec: spec, dir: dir, procs: map[clusters.Component]*process{}}
	cl, err := r.start(ctx)
	if err != nil {
		// Teardown must run even when ctx is already cancelled (Ctrl-C during start).
		_ = r.teardown(context.WithoutCancel(ctx))
		return nil, err
	}
	if p.detached {
		// Other processes (the suites of `gangbench e2e --keep-cluster`) inject faults through the
		// holder; see control.go. Without the socket the cluster still works, only without
		// component control from elsewhere, so that is a warning, not a failed create.
		srv, err := serveControl(controlSocket(dir), r)
		if err != nil {
			p.log.Warn("components of this cluster cannot be restarted from other processes", "err", err)
		}
		r.mu.Lock()
		r.ctl = srv
		r.mu.Unlock()
	}
	p.log.Info("cluster ready", "name", spec.Name, "nodes", spec.Nodes, "elapsed", time.Since(start).Round(time.Millisecond))
	return cl, nil
}

// run is one cluster owned by this process.
type run struct {
	p        *Provider
	spec     clusters.Spec
	dir      string
	l        layout
	bins     *k8sbin.Set
	sp       *spawner
	mu       sync.Mutex // guards procs and the state file
	procs    map[clusters.Component]*process
	st       *state
	cl       *clusters.Cluster
	ctl      *controlServer // the control socket of a detached owner; nil otherwise
	once     sync.Once
	closeErr error
}

func (r *run) binary(c clusters.Component) string {
	switch c {
	case clusters.Etcd:
		return r.bins.Etcd
	case clusters.APIServer:
		return r.bins.APIServer
	case clusters.ControllerManager:
		return r.bins.ControllerManager
	case clusters.Scheduler:
		return r.bins.Scheduler
	case clusters.Kwok:
		return r.bins.Kwok
	}
	return ""
}

func (r *run) start(ctx context.Context) (*clusters.Cluster, error) {
	spec := r.spec
	bins, err := k8sbin.Ensure(ctx, spec.KubernetesVersion, r.p.binOptions(spec))
	if err != nil {
		return nil, fmt.Errorf("kubernetes binaries: %w", err)
	}
	r.bins = bins
	versions, err := r.probeVersions(ctx)
	if err != nil {
		return nil, err
	}
	// Gates, runtime-config and the gang API follow the control plane's minor version; a scheduler
	// of another minor would get gates it rejects and speak an API the apiserver does not serve.
	if sv, av := versions[clusters.Scheduler], versions[clusters.APIServer]; clusters.MinorOf(sv) != clusters.MinorOf(av) {
		return nil, fmt.Errorf("scheduler %s is %s but the control plane is %s: run it on a control plane of its minor version (--k8s-version v1.%d.x); the gang API and its feature gates differ between minor versions",
			r.binary(clusters.Scheduler), sv, av, clusters.MinorOf(sv))
	}
	pt, err := allocatePorts()
	if err != nil {
		return nil, err
	}
	r.l = layout{Dir: r.dir, PKIDir: filepath.Join(r.dir, "pki"), DataDir: filepath.Join(r.dir, "etcd-data"), Ports: pt}
	for _, d := range []string{r.l.PKIDir, r.l.DataDir, r.logDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	ids := identities()
	bundle, err := pki.Generate(r.l.PKIDir, pki.Options{ServingHosts: []string{"localhost", "127.0.0.1"}, Clients: map[string]pki.Identity{"admin": ids["admin"]}})
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	tokens, err := writeTokenFile(r.l.tokenFile(), ids)
	if err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", pt.APIServer)
	for user, tok := range tokens {
		if err := writeKubeconfig(r.l.kubeconfig(user), server, "gangbench-"+spec.Name, bundle.CA.CertFile, user, tok); err != nil {
			return nil, err
		}
	}
	if err := kwok.WriteConfig(r.l.kwokConfig(), kwok.Options{LeaseSeconds: spec.NodeLeaseSeconds, PodsStayPending: spec.PodsStayPending}); err != nil {
		return nil, err
	}

	r.sp = newSpawner()
	deadline := spec.ReadyTimeout
	for _, c := range []clusters.Component{clusters.Etcd, clusters.APIServer} {
		if err := r.startComponent(ctx, c, deadline); err != nil {
			return nil, err
		}
	}
	restCfg, err := restConfigFrom(r.l.kubeconfig("admin"))
	if err != nil {
		return nil, err
	}
	// Node creation and readiness watches are the harness's own load; the default 5 QPS would make a
	// 500-node cluster take minutes to create.
	fast := *restCfg
	fast.QPS, fast.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(&fast)
	if err != nil {
		return nil, err
	}
	if err := bindKwok(ctx, cs); err != nil {
		return nil, err
	}
	// The three clients of the apiserver start together; each is checked on its own endpoint.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, c := range []clusters.Component{clusters.ControllerManager, clusters.Scheduler, clusters.Kwok} {
		wg.Go(func() { errs[i] = r.startComponent(ctx, c, deadline) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := clusters.WaitDefaultServiceAccount(ctx, cs, corev1.NamespaceDefault, deadline); err != nil {
		return nil, err
	}
	// One numbering over all groups, so a one-group cluster keeps the names it always had.
	names := kwok.NodeNames("gpu-node", spec.Nodes)
	if spec.PublishesDRA() {
		if err := kwok.EnsureDeviceClass(ctx, cs); err != nil {
			return nil, err
		}
	}
	for _, g := range spec.Groups() {
		opts := spec.SimulatedNodeOptions(g)
		if err := kwok.CreateNodes(ctx, cs, names[:g.Count], g.GPUs.Inventory.WithDefaults(), opts, 32); err != nil {
			return nil, fmt.Errorf("create simulated nodes: %w", err)
		}
		names = names[g.Count:]
	}
	if err := kwok.WaitNodesReady(ctx, cs, "gangbench.dev/managed=true", spec.Nodes, deadline); err != nil {
		return nil, fmt.Errorf("%w\n--- last lines of kwok-controller log ---\n%s", err, proc.LogTail(r.procs[clusters.Kwok].logPath, 15))
	}
	// Ready is not yet schedulable: the not-ready taint the apiserver put on each new node goes only
	// when the node lifecycle controller re-evaluates it, which for a kwok node (lease heartbeats, no
	// status updates) can take minutes. A cluster handed out must schedule at once. (perf's quiet
	// profile turns the tainting admission plugin off, and this returns at once.)
	if err := kwok.WaitSchedulable(ctx, cs, "gangbench.dev/managed=true", spec.Nodes, deadline, 5*time.Second, func(format string, args ...any) {
		r.p.log.Info(fmt.Sprintf(format, args...))
	}); err != nil {
		return nil, err
	}

	r.st = &state{
		Name: spec.Name, Created: time.Now().UTC(), Owner: proc.RefOf(os.Getpid()), Ports: pt,
		Procs: map[string]proc.Ref{}, Versions: map[string]string{}, Binaries: map[string]string{},
		Nodes: spec.Nodes, GPU: spec.GPU, Kubeconfig: r.l.kubeconfig("admin"), Detached: r.p.detached,
	}
	for c, v := range versions {
		r.st.Versions[string(c)] = v
		r.st.Binaries[string(c)] = r.binary(c)
	}
	r.mu.Lock()
	for c, pr := range r.procs {
		r.st.Procs[string(c)] = proc.RefOf(pr.pid())
	}
	err = writeState(r.dir, r.st)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	cl, err := handleFromState(r.dir, r.st)
	if err != nil {
		return nil, err
	}
	cl.Control = r
	cl.Close = r.close
	r.cl = cl
	return cl, nil
}

func (r *run) logDir() string { return filepath.Join(r.dir, "logs") }

func (r *run) probeVersions(ctx context.Context) (map[clusters.Component]string, error) {
	out := map[clusters.Component]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, c := range clusters.AllComponents() {
		wg.Go(func() {
			v, err := k8sbin.ProbeVersion(ctx, r.binary(c))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c, err))
				return
			}
			out[c] = v
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// endpoint returns the health endpoint of a component.
func (r *run) health(c clusters.Component) clusters.Endpoint {
	l := r.l
	ca := l.pki("ca.crt")
	admin := clusters.Endpoint{CAFile: ca, CertFile: l.pki("admin.crt"), KeyFile: l.pki("admin.key")}
	switch c {
	case clusters.Etcd:
		return clusters.Endpoint{URL: fmt.Sprintf("http://127.0.0.1:%d/health", l.Ports.EtcdClient)}
	case clusters.APIServer:
		admin.URL = fmt.Sprintf("https://127.0.0.1:%d/readyz", l.Ports.APIServer)
	case clusters.ControllerManager:
		admin.URL = fmt.Sprintf("https://127.0.0.1:%d/healthz", l.Ports.KCM)
	case clusters.Scheduler:
		admin.URL = fmt.Sprintf("https://127.0.0.1:%d/healthz", l.Ports.Scheduler)
	case clusters.Kwok:
		return clusters.Endpoint{URL: fmt.Sprintf("http://127.0.0.1:%d/healthz", l.Ports.Kwok)}
	}
	return admin
}

// startComponent starts one component and waits until its health endpoint answers.
func (r *run) startComponent(ctx context.Context, c clusters.Component, timeout time.Duration) error {
	args, err := componentArgs(c, r.l, r.spec)
	if err != nil {
		return err
	}
	pr, err := startProcess(r.sp, string(c), r.binary(c), args, filepath.Join(r.logDir(), string(c)+".log"), os.Environ())
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.procs[c] = pr
	r.mu.Unlock()
	return waitReady(ctx, pr, timeout, healthCheck(r.health(c)))
}

// grace is how long a component gets between SIGTERM and SIGKILL.
const grace = 15 * time.Second

// teardown stops every component in the safe order and removes the cluster's state.
func (r *run) teardown(ctx context.Context) error {
	var errs []error
	r.mu.Lock()
	ctl := r.ctl
	r.mu.Unlock()
	// No restart may come in while the components go down.
	ctl.close()
	for _, c := range clusters.StopOrder() {
		r.mu.Lock()
		pr := r.procs[c]
		r.mu.Unlock()
		if err := pr.stop(syscall.SIGTERM, grace); err != nil {
			errs = append(errs, err)
		}
	}
	if r.sp != nil {
		r.sp.close()
	}
	if err := os.RemoveAll(r.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", r.dir, err))
	}
	_ = ctx
	return errors.Join(errs...)
}

func (r *run) close(ctx context.Context) error {
	r.once.Do(func() { r.closeErr = r.teardown(ctx) })
	return r.closeErr
}

// Stop implements clusters.ComponentControl.
func (r *run) Stop(ctx context.Context, c clusters.Component) error {
	return r.signal(c, syscall.SIGTERM)
}

// Kill implements clusters.ComponentControl (SIGKILL: no graceful shutdown, as a crash would).
func (r *run) Kill(ctx context.Context, c clusters.Component) error {
	return r.signal(c, syscall.SIGKILL)
}

func (r *run) signal(c clusters.Component, sig syscall.Signal) error {
	r.mu.Lock()
	pr := r.procs[c]
	r.mu.Unlock()
	if pr == nil {
		return fmt.Errorf("%s was never started", c)
	}
	// As on kind: stopping what is not running is the caller's mistake, and succeeding silently
	// hid one (a fault that stopped a component before it "killed" it).
	if !pr.running() {
		return fmt.Errorf("%s is not running", c)
	}
	return pr.stop(sig, grace)
}

// Start implements clusters.ComponentControl: same binary, same flags, same ports.
func (r *run) Start(ctx context.Context, c clusters.Component) error {
	r.mu.Lock()
	pr := r.procs[c]
	r.mu.Unlock()
	if pr.running() {
		return fmt.Errorf("%s is already running (pid %d)", c, pr.pid())
	}
	if c == clusters.Kwok {
		return r.startKwok(ctx)
	}
	if err := r.startComponent(ctx, c, r.spec.ReadyTimeout); err != nil {
		return err
	}
	return r.recordPID(c)
}

// startKwok starts the kwok controller again the way a kubelet comes back: the node Leases the
// stopped process held are released first (a new kwok process has a new identity and would otherwise
// wait for them to expire, then can lose the pods bound meanwhile; see clusters/kwok/leases.go), and
// Start returns once the new process holds them, as a restarted kubelet is back when it renews its
// lease. Pods, nodes and the scheduler are not touched.
func (r *run) startKwok(ctx context.Context) error {
	cs, err := r.fastClient()
	if err != nil {
		return err
	}
	start := time.Now()
	rel, err := kwok.ReleaseNodeLeases(ctx, cs)
	if err != nil {
		return err
	}
	if err := r.startComponent(ctx, clusters.Kwok, r.spec.ReadyTimeout); err != nil {
		return err
	}
	if err := r.recordPID(clusters.Kwok); err != nil {
		return err
	}
	if err := kwok.WaitNodeLeasesRetaken(ctx, cs, rel, max(r.spec.ReadyTimeout-time.Since(start), 10*time.Second)); err != nil {
		r.mu.Lock()
		logPath := r.procs[clusters.Kwok].logPath
		r.mu.Unlock()
		return fmt.Errorf("%w\n--- last lines of kwok-controller log ---\n%s", err, proc.LogTail(logPath, 15))
	}
	return nil
}

// fastClient is an admin client with the QPS the harness uses for its own bulk work (see start).
func (r *run) fastClient() (kubernetes.Interface, error) {
	cfg, err := restConfigFrom(r.l.kubeconfig("admin"))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return kubernetes.NewForConfig(cfg)
}

// recordPID writes a (re)started component's pid into the state file.
func (r *run) recordPID(c clusters.Component) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Procs[string(c)] = proc.RefOf(r.procs[c].pid())
	return writeState(r.dir, r.st)
}

// Restart implements clusters.ComponentControl.
func (r *run) Restart(ctx context.Context, c clusters.Component) error {
	if err := r.Stop(ctx, c); err != nil {
		return err
	}
	return r.Start(ctx, c)
}

// handleFromState builds a Cluster handle from recorded state, for this or another process.
func handleFromState(dir string, st *state) (*clusters.Cluster, error) {
	l := layout{Dir: dir, PKIDir: filepath.Join(dir, "pki"), Ports: st.Ports}
	cfg, err := restConfigFrom(st.Kubeconfig)
	if err != nil {
		return nil, err
	}
	admin := clusters.Endpoint{CAFile: l.pki("ca.crt"), CertFile: l.pki("admin.crt"), KeyFile: l.pki("admin.key")}
	api, sched := admin, admin
	api.URL = fmt.Sprintf("https://127.0.0.1:%d/metrics", st.Ports.APIServer)
	sched.URL = fmt.Sprintf("https://127.0.0.1:%d/metrics", st.Ports.Scheduler)
	versions := map[clusters.Component]string{}
	for k, v := range st.Versions {
		versions[clusters.Component(k)] = v
	}
	// Every node is simulated by kwok: GPU faults are written into the node status, as a kubelet
	// would after its device plugin reported unhealthy devices. Unlike Control this works from any
	// process: it needs only the apiserver.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clusters.Cluster{
		Name: st.Name, Provider: ProviderName, KubeconfigPath: st.Kubeconfig, RESTConfig: cfg,
		APIServerMetrics: api, SchedulerMetrics: sched, Versions: versions,
		LogDir: filepath.Join(dir, "logs"), Nodes: st.Nodes, GPU: st.GPU, SchedulerName: corev1.DefaultSchedulerName,
		GPUs:      &kwok.StatusGPUs{Client: cs, Resource: corev1.ResourceName(st.GPU.WithDefaults().ResourceName)},
		Processes: func(context.Context) (map[clusters.Component][]int, error) { return processes(dir) },
		Close:     func(context.Context) error { return nil },
	}, nil
}

// processes reads the components' pids from the state file, which a restart rewrites, so a
// component restarted by a fault is found under its new pid.
func processes(dir string) (map[clusters.Component][]int, error) {
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	out := map[clusters.Component][]int{}
	for name, ref := range st.Procs {
		if ref.Alive() {
			out[clusters.Component(name)] = []int{ref.PID}
		}
	}
	return out, nil
}

// Get implements clusters.Provider. A handle obtained from another process cannot restart components
// itself (they are not its children): Control asks the cluster's holder when a detached owner holds
// it (control.go), and is nil otherwise.
func (p *Provider) Get(ctx context.Context, name string) (*clusters.Cluster, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	dir := p.clusterDir(name)
	st, err := readState(dir)
	if err != nil {
		return nil, fmt.Errorf("local cluster %q: %w", name, err)
	}
	if !st.Procs[string(clusters.APIServer)].Alive() {
		return nil, fmt.Errorf("local cluster %q is stale (its processes are gone); run `gangbench cluster delete %s`", name, name)
	}
	cl, err := handleFromState(dir, st)
	if err != nil {
		return nil, err
	}
	if sock := controlSocket(dir); st.Detached && st.Owner.Alive() && st.Owner.PID != os.Getpid() {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			cl.Control = remoteControl{path: sock}
		}
	}
	return cl, nil
}

// List implements clusters.Provider.
func (p *Provider) List(ctx context.Context) ([]clusters.Info, error) {
	ents, err := os.ReadDir(p.stateDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []clusters.Info
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		st, err := readState(filepath.Join(p.stateDir, e.Name()))
		if err != nil {
			// A directory without state is a create in progress or one that crashed before it was
			// ready; show it so that `delete` can clean it.
			out = append(out, clusters.Info{Name: e.Name(), Provider: ProviderName, Status: "incomplete"})
			continue
		}
		status := "running"
		if !st.Procs[string(clusters.APIServer)].Alive() {
			status = "stale"
		}
		out = append(out, clusters.Info{Name: st.Name, Provider: ProviderName, Created: st.Created, Status: status, Nodes: st.Nodes})
	}
	slices.SortFunc(out, func(a, b clusters.Info) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// clearStale removes the state of a cluster whose processes are all gone, so its name can be reused.
// A live cluster of that name is an error.
func (p *Provider) clearStale(ctx context.Context, name string) error {
	dir := p.clusterDir(name)
	st, err := readState(dir)
	switch {
	case errors.Is(err, clusters.ErrNotFound):
		if _, statErr := os.Stat(dir); statErr == nil {
			// No state file: a create that died before it was ready, or one running right now. The
			// latter holds its owner pid in no file yet, so only a dir older than a create can take is
			// treated as debris.
			if info, _ := os.Stat(dir); info != nil && time.Since(info.ModTime()) > 30*time.Minute {
				return os.RemoveAll(dir)
			}
		}
		return nil
	case err != nil:
		return err
	}
	if st.anyAlive() {
		return fmt.Errorf("cluster %q already exists and is running (owner pid %d); delete it with `gangbench cluster delete %s` or choose another --name", name, st.Owner.PID, name)
	}
	p.log.Info("removing stale cluster state", "name", name, "dir", dir)
	return os.RemoveAll(dir)
}

// Delete implements clusters.Provider: it stops a cluster created by any process and removes its
// state. Processes are identified by pid and start time, so a reused pid is never signalled.
func (p *Provider) Delete(ctx context.Context, name string) error {
	if err := validateName(name); err != nil {
		return err
	}
	dir := p.clusterDir(name)
	st, err := readState(dir)
	if errors.Is(err, clusters.ErrNotFound) {
		if _, statErr := os.Stat(dir); statErr == nil {
			return os.RemoveAll(dir)
		}
		return fmt.Errorf("local cluster %q: %w", name, clusters.ErrNotFound)
	}
	if err != nil {
		return err
	}
	// A detached owner exists only to hold the cluster; asking it to stop lets it tear down in order.
	if st.Detached && st.Owner.PID != os.Getpid() && st.Owner.Alive() {
		// Its own failure to stop is not reported: the components it held are stopped below anyway.
		_ = st.Owner.Stop(ctx, syscall.SIGTERM, 90*time.Second)
	}
	var errs []error
	for _, c := range clusters.StopOrder() {
		ref, ok := st.Procs[string(c)]
		if !ok || !ref.Alive() {
			continue
		}
		if err := ref.Stop(ctx, syscall.SIGTERM, grace); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c, err))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	// The holder's own log (written by `gangbench cluster create`) sits beside the cluster dir.
	if err := os.Remove(filepath.Join(p.stateDir, name+".supervisor.log")); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
